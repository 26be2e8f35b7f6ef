"""Helpers of the ONNX tests: onnxruntime as the reference, and the tolerance."""
import numpy as np


def ort_run(model, feeds: dict) -> list:
    """onnxruntime's outputs for a ModelProto, bytes or path."""
    import onnxruntime as ort
    source = model.SerializeToString() if hasattr(model, "SerializeToString") else model
    session = ort.InferenceSession(source if isinstance(source, bytes) else str(source),
                                   providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def assert_close(actual, expected, rtol=1e-4):
    """Within rtol of the largest magnitude of expected (NaNs where expected has them)."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    if expected.dtype == np.bool_ or np.issubdtype(expected.dtype, np.integer):
        np.testing.assert_array_equal(actual, expected.astype(actual.dtype))
        return
    scale = max(float(np.nanmax(np.abs(expected))) if expected.size else 0.0, 1e-6)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=rtol * scale, equal_nan=True)


def run_imported(path, feeds, backend, trainable=True) -> list:
    """An .onnx file's outputs through ff.onnx.load on `backend` ("gl" or "numpy"),
    feeds by ONNX input name."""
    import fragflow as ff
    model = ff.onnx.load(str(path), trainable=trainable)
    fn = ff.Session(model.graph, backend=backend).compile(model.outputs, feeds=model.inputs)
    return fn(*[feeds[name] for name in model.inputs_by_onnx_name])


def assert_outputs(got, want, rtol=1e-4):
    """Every output within rtol of its largest magnitude (assert_close), as many as want."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_close(g, w, rtol=rtol)


def export_seeded(tmp_path_factory, name, build, wrap=None, **export_args) -> tuple:
    """(the .onnx path, the torch inputs): build() -> (module, {input name: tensor})
    under torch.manual_seed(34), the module in eval mode (wrapped by wrap(module, input
    names) where given: an output selector), exported by torch.onnx.export with
    export_args into a fresh folder, its inputs named."""
    import torch
    torch.manual_seed(34)
    module, inputs = build()
    module = module.eval()
    if wrap is not None:
        module = wrap(module, list(inputs))
    path = tmp_path_factory.mktemp(name) / f"{name}.onnx"
    torch.onnx.export(module, tuple(inputs.values()), str(path), input_names=list(inputs),
                      **export_args)
    return path, inputs


def ort_reference(path, inputs: dict) -> tuple:
    """(feeds as numpy, onnxruntime's outputs) of an exported file for torch inputs,
    each output checked not to have vanished (all below 1e-3 would pass any comparison)."""
    feeds = {k: v.numpy() for k, v in inputs.items()}
    want = ort_run(str(path), feeds)
    assert all(float(np.abs(w).max()) > 1e-3 for w in want), \
        [float(np.abs(w).max()) for w in want]
    return feeds, want
