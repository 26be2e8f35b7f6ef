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
