"""Models exported by torch.onnx.export, imported and run on GL against onnxruntime
(and torch), the layout transposes gone, and fine-tuned."""
import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")

import fragflow as ff
from tests.onnx.helpers import assert_close, ort_run

pytestmark = pytest.mark.usefixtures("gl")


def _load(torch_models, name):
    path = torch_models / f"{name}.onnx"
    x = np.load(torch_models / f"{name}.input.npy")
    return path, x, ff.onnx.load(str(path))


SMALL = ["mlp", "cnn", "mobile_block", "resnet_stem", "squeezenet"]
TORCHVISION = ["resnet18", "mobilenet_v2", "squeezenet1_1"]     # torch_models.TORCHVISION


@pytest.mark.parametrize("name", SMALL + TORCHVISION)
def test_imported_model_matches_onnxruntime_and_torch(torch_models, name):
    path, x, model = _load(torch_models, name)
    assert model.inputs[0].shape[0] is None            # the dynamic batch axis
    out = ff.Session(model.graph).run(model.outputs, {"input": x})[0]
    assert_close(out, ort_run(str(path), {"input": x})[0])
    assert_close(out, np.load(torch_models / f"{name}.torch.npy"))


@pytest.mark.parametrize("name", ["cnn", "mobile_block", "resnet_stem", "squeezenet"]
                         + TORCHVISION)
def test_no_transpose_kernel_between_convolutions(torch_models, name):
    _, x, model = _load(torch_models, name)
    fn = ff.Session(model.graph).compile(model.outputs, feeds=model.inputs)
    fn(x)                                        # kernels depend on the batch size
    ops = [k.op for k in fn.kernels]
    convs = [i for i, op in enumerate(ops) if "conv" in op]
    assert len(convs) >= 3, ops
    between = ops[convs[0]:convs[-1]]
    assert "transpose" not in between, ops
    assert any("cancelled transposes" in line for line in fn.fusion_report)


@pytest.mark.parametrize("name", TORCHVISION)
def test_torchvision_model_runs_with_only_the_input_transpose(torch_models, name):
    # the global average pool leaves a 1x1 map: Flatten needs no transpose either
    _, x, model = _load(torch_models, name)
    fn = ff.Session(model.graph).compile(model.outputs, feeds=model.inputs)
    fn(x)
    assert [k.op for k in fn.kernels].count("transpose") <= 1, [k.op for k in fn.kernels]


def test_feeds_by_onnx_name_and_by_placeholder_agree(torch_models):
    _, x, model = _load(torch_models, "mlp")
    sess = ff.Session(model.graph)
    by_name = sess.run(model.outputs[0], {"input": x})
    by_tensor = sess.run(model.outputs_by_onnx_name["logits"],
                         {model.inputs_by_onnx_name["input"]: x})
    np.testing.assert_array_equal(by_name, by_tensor)


def test_fine_tuning_an_imported_cnn_lowers_the_loss_as_numpy_does(torch_models):
    _, x, model = _load(torch_models, "mobile_block")
    with model.graph.as_default():
        labels = ff.placeholder((None,), "int32", name="labels")
        loss = ff.reduce_mean(ff.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=model.outputs[0]))
        step = ff.optim.SGD(0.05).minimize(loss)
    y = np.arange(len(x), dtype=np.int32) % 6
    losses = {}
    for backend in ("gl", "numpy"):
        sess = ff.Session(model.graph, backend=backend)
        losses[backend] = [float(sess.run([loss, step], {"input": x, labels: y})[0])
                           for _ in range(4)]
    assert losses["gl"][-1] < losses["gl"][0]
    np.testing.assert_allclose(losses["gl"], losses["numpy"], rtol=1e-4)


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_one_sgd_step_of_an_imported_model_equals_torchs(torch_models, name):
    # (the cnn's batch norm follows a pool, so its gamma and beta stay parameters; the
    # exporter folds a batch norm that follows a conv into the conv's weights)
    _, x, model = _load(torch_models, name)
    with model.graph.as_default():
        labels = ff.placeholder((None,), "int32", name="labels")
        loss = ff.reduce_mean(ff.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=model.outputs[0]))
        step = ff.optim.SGD(0.1).minimize(loss)
    y = (np.arange(len(x)) % model.outputs[0].shape[1]).astype(np.int32)
    sess = ff.Session(model.graph)
    before = sess.run([loss, step], {"input": x, labels: y})[0]
    after = sess.run(loss, {"input": x, labels: y})
    np.testing.assert_allclose([before, after], np.load(torch_models / f"{name}.sgd.npy"),
                               rtol=1e-4)


def test_imported_weights_are_variables_that_save_and_restore(torch_models, tmp_path):
    _, x, model = _load(torch_models, "cnn")
    assert model.variables and all(isinstance(v, ff.Variable)
                                   for v in model.variables.values())
    sess = ff.Session(model.graph)
    before = sess.run(model.outputs[0], {"input": x})
    sess.save(str(tmp_path / "w.npz"))
    weight = next(iter(model.variables.values()))
    sess.set(weight, np.zeros(weight.shape, np.float32))
    assert not np.allclose(sess.run(model.outputs[0], {"input": x}), before)
    sess.restore(str(tmp_path / "w.npz"))
    np.testing.assert_array_equal(sess.run(model.outputs[0], {"input": x}), before)


def test_inference_import_folds_batch_norm_into_the_convolution(torch_models):
    path, x, _ = _load(torch_models, "cnn")
    model = ff.onnx.load(str(path), trainable=False)
    fn = ff.Session(model.graph).compile(model.outputs, feeds=model.inputs)
    assert_close(fn(x)[0], ort_run(str(path), {"input": x})[0])
    assert not model.variables
