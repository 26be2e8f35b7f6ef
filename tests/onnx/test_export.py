"""ff.onnx.export: fragflow graphs written as ONNX run in onnxruntime with fragflow's
results, and come back through ff.onnx.load unchanged."""
import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")

import fragflow as ff
from tests.onnx.helpers import assert_close, ort_run

pytestmark = pytest.mark.usefixtures("gl")
rng = np.random.default_rng(3)


def randn(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def _mlp():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 12), name="x")
        w1, b1 = ff.Variable(randn(12, 16) * 0.3, name="w1"), ff.Variable(randn(16), name="b1")
        w2 = ff.Variable(randn(16, 4) * 0.3, name="w2")
        h = ff.tanh(x @ w1 + b1)
        y = ff.softmax(ff.matmul(ff.leaky_relu(h, 0.1), w2) * 2.0 - 1.0)
    return g, x, y


def _cnn():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 9, 9, 3), name="image")
        k1 = ff.Variable(randn(3, 3, 3, 6) * 0.3, name="k1")
        dw = ff.Variable(randn(3, 3, 6, 2) * 0.3, name="dw")
        h = ff.relu6(ff.conv2d(x, k1, strides=2, padding="SAME") + 0.1)
        h = ff.depthwise_conv2d(h, dw, padding=[(1, 1), (0, 1)])
        h = ff.max_pool(h, ksize=2, strides=1, padding="VALID")
        h = ff.avg_pool(h, ksize=3, strides=2, padding="SAME")
        flat = ff.reshape(h, (2, -1))
        y = ff.reduce_mean(ff.square(flat[:, 1:7]), axis=1, keepdims=True)
        z = ff.concat([ff.transpose(flat), ff.transpose(flat)], axis=1)
    return g, x, [y, z]


@pytest.mark.parametrize("build", [_mlp, _cnn])
def test_exported_graph_runs_in_onnxruntime_with_fragflows_results(build, tmp_path):
    g, x, fetches = build()
    fetches = fetches if isinstance(fetches, list) else [fetches]
    feed = randn(*[d or 3 for d in x.shape])
    expected = ff.Session(g).run(fetches, {x: feed})
    path = tmp_path / "model.onnx"
    ff.onnx.export(fetches, [x], str(path))
    got = ort_run(str(path), {x.name: feed})
    for a, b in zip(got, expected):
        assert_close(a, b)


def test_round_trip_through_import_gives_the_same_results():
    g, x, fetches = _cnn()
    feed = randn(*x.shape)
    expected = ff.Session(g, backend="numpy", passes=[]).run(fetches, {x: feed})
    model = ff.onnx.load(ff.onnx.export(fetches, [x]))
    got = ff.Session(model.graph).run(model.outputs, {x.name: feed})
    for a, b in zip(got, expected):
        assert_close(a, b)


def test_export_writes_trained_values_from_the_session():
    g, x, y = _mlp()
    feed = randn(5, 12)
    sess = ff.Session(g)
    w1 = next(n for n in g.nodes if n.name == "w1").outputs[0]
    sess.set(w1, np.ones((12, 16), np.float32) * 0.01)
    model = ff.onnx.export(y, [x], session=sess)
    assert_close(ort_run(model, {"x": feed})[0], sess.run(y, {x: feed}))


def test_an_op_without_onnx_counterpart_raises_naming_it():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4,), name="x")
        y = ff.cumsum(x, exclusive=True) + ff.random_uniform((4,), seed=1)
    with pytest.raises(ff.onnx.OnnxExportError, match="random_uniform '.*random_uniform"):
        ff.onnx.export(y, [x])


def test_a_needed_placeholder_missing_from_feeds_raises():
    g = ff.Graph()
    with g.as_default():
        x, z = ff.placeholder((4,), name="x"), ff.placeholder((4,), name="z")
        y = x + z
    with pytest.raises(ff.onnx.OnnxExportError, match="placeholder 'z'"):
        ff.onnx.export(y, [x])


def test_more_ops_round_trip_through_onnxruntime():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 5, 6, 4), name="x")
        v = ff.placeholder((2, 3, 4, 5, 2), name="v")
        k = ff.constant(randn(2, 2, 3, 2, 3) * 0.3)
        idx = ff.placeholder((3,), "int32", name="idx")
        outs = [
            ff.resize_bilinear(x, (7, 9)),
            ff.resize_bilinear(x, (3, 4), align_corners=True),
            ff.resize_nearest_neighbor(x, (10, 12)),
            ff.local_response_normalization(x, depth_radius=1, bias=1.0, alpha=0.1,
                                            beta=0.75),
            ff.reverse(x, [1, 3]),
            ff.conv3d(v, k, strides=(1, 2, 1), padding="SAME"),
            ff.max_pool3d(v, ksize=2, strides=1, padding="VALID"),
            ff.one_hot(idx, 5, axis=0),
            ff.gather_nd(ff.reshape(x, (10, 6, 4)), ff.constant(np.array([[1, 2], [9, 0]]))),
            x * ff.ones_like(x) + ff.range(0, 4, dtype="float32"),
        ]
    feeds = {x: randn(2, 5, 6, 4), v: randn(2, 3, 4, 5, 2),
             idx: np.array([0, 4, 2], np.int32)}
    expected = ff.Session(g).run(outs, feeds)
    got = ort_run(ff.onnx.export(outs, [x, v, idx]), {p.name: a for p, a in feeds.items()})
    for a, b in zip(got, expected):
        assert_close(a, b)


def test_sparse_softmax_cross_entropy_exports_with_nan_for_bad_labels():
    """The fused loss op exports as LogSoftmax + GatherElements + Where, NaN where a
    label is out of range as on fragflow (and a -inf logit of another class harmless)."""
    g = ff.Graph()
    with g.as_default():
        z = ff.placeholder((5, 7), name="z")
        y = ff.placeholder((5,), "int32", name="y")
        loss = ff.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z)
    logits = randn(5, 7)
    logits[1, 0] = -np.inf
    labels = np.array([3, 2, 7, -1, 6], np.int32)
    expected = ff.Session(g, backend="numpy", passes=[]).run(loss, {z: logits, y: labels})
    (got,) = ort_run(ff.onnx.export(loss, [z, y]), {"z": logits, "y": labels})
    assert np.isnan(got[2:4]).all() and np.isfinite(got[[0, 1, 4]]).all()
    assert_close(got, expected)
