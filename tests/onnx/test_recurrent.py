"""ONNX RNN, GRU and LSTM unrolled (frontend/onnx/recurrent.py), on GL against
onnxruntime: directions, layouts, initial states, biases, peepholes, clip,
linear_before_reset, other activations, shorter sequence_lens; and the gradient of an
imported LSTM against finite differences."""
import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")

import fragflow as ff
from tests.gradcheck import numeric_gradient
from tests.onnx.test_import_more import check_ref
from tests.onnx.test_import_ops import check, make_model, node

pytestmark = pytest.mark.usefixtures("gl")
rng = np.random.default_rng(11)
SEQ, BATCH, FEATURES, HIDDEN = 4, 3, 5, 6


def _weights(kind, dirs, peepholes=False):
    g = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    w = {"W": rng.normal(0, 0.5, (dirs, g * HIDDEN, FEATURES)).astype(np.float32),
         "R": rng.normal(0, 0.5, (dirs, g * HIDDEN, HIDDEN)).astype(np.float32),
         "B": rng.normal(0, 0.5, (dirs, 2 * g * HIDDEN)).astype(np.float32),
         "h0": rng.normal(0, 0.5, (dirs, BATCH, HIDDEN)).astype(np.float32)}
    if kind == "LSTM":
        w["c0"] = rng.normal(0, 0.5, (dirs, BATCH, HIDDEN)).astype(np.float32)
        if peepholes:
            w["P"] = rng.normal(0, 0.5, (dirs, 3 * HIDDEN)).astype(np.float32)
    return w


def _run(kind, direction="forward", layout=0, peepholes=False, lens=None, reference=False,
         **attrs):
    dirs = 2 if direction == "bidirectional" else 1
    w = _weights(kind, dirs, peepholes)
    names = ["x", "W", "R", "B", "lens" if lens is not None else "", "h0"]
    outputs = ["y", "yh"]
    if kind == "LSTM":
        names += ["c0", "P" if peepholes else ""]
        outputs.append("yc")
    if lens is not None:
        w["lens"] = np.array(lens, np.int32)
    x = rng.normal(size=(SEQ, BATCH, FEATURES)).astype(np.float32)
    if layout:
        x = x.transpose(1, 0, 2).copy()
        for k in ("h0", "c0"):
            if k in w:
                w[k] = w[k].transpose(1, 0, 2).copy()
    nodes = [node(kind, names, outputs, hidden_size=HIDDEN, direction=direction,
                  layout=layout, **attrs)]
    if reference:
        check_ref(nodes, {"x": x}, outputs, w, opset=14)
    else:
        check(nodes, {"x": x}, outputs=outputs, initializers=w, opset=14)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["reverse", "bidirectional"])   # (bidirectional:
                                                                     # forward and reverse)
def test_directions(kind, direction):
    _run(kind, direction)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_batch_first_layout(kind):
    # onnxruntime's CPU kernels refuse layout=1: onnx's reference evaluator instead
    _run(kind, "bidirectional", layout=1, reference=True)


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])     # (onnxruntime's RNN kernel differs
def test_shorter_sequence_lens_freeze_the_state(kind):  # even on full-length entries)
    _run(kind, lens=[4, 2, 1])


def test_lstm_with_peepholes_and_clip():
    _run("LSTM", peepholes=True, clip=0.7)


def test_gru_linear_before_reset():
    _run("GRU", "bidirectional", linear_before_reset=1)


def test_other_activations():
    _run("GRU", activations=["HardSigmoid", "LeakyRelu"], activation_alpha=[0.3, 0.1],
         activation_beta=[0.4])
    _run("RNN", "bidirectional", activations=["Relu", "Softsign"])


def test_unknown_activation_names_it():
    w = _weights("RNN", 1)
    model = make_model([node("RNN", ["x", "W", "R"], ["y"], hidden_size=HIDDEN,
                             activations=["Swirl"])],
                       {"x": np.zeros((SEQ, BATCH, FEATURES), np.float32)}, ["y"],
                       {"W": w["W"], "R": w["R"]}, opset=14)
    with pytest.raises(ff.onnx.OnnxImportError, match="RNN node.*'Swirl' is not supported"):
        ff.onnx.load(model)


def test_lstm_gradients_match_finite_differences():
    w = _weights("LSTM", 1)
    x = rng.normal(size=(2, 1, FEATURES)).astype(np.float32)
    model = make_model([node("LSTM", ["x", "W", "R", "B"], ["y"], hidden_size=HIDDEN)],
                       {"x": x}, ["y"], {k: w[k] for k in ("W", "R", "B")}, opset=14)
    imported = ff.onnx.load(model)
    xp, = imported.inputs
    with imported.graph.as_default():
        loss = ff.reduce_sum(imported.outputs[0] * ff.constant(
            rng.uniform(0.5, 1.5, imported.outputs[0].shape).astype(np.float32)))
        dx, = ff.gradients(loss, [xp])
    got = ff.Session(imported.graph).run(dx, {xp: x})
    np.testing.assert_allclose(got, numeric_gradient(imported.graph, loss, xp, {xp: x}),
                               rtol=1e-3, atol=1e-4)
