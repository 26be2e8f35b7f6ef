"""fragflow.distributed's pieces that need no Ray: importing it, the error without Ray,
how a global batch is split, the progress line, and the models an inference actor opens."""
import sys

import numpy as np
import pytest

import fragflow as ff
from fragflow.distributed import RayNotInstalledError, StepStats, predict
from fragflow.distributed.training import _split


def test_without_ray_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)          # import ray -> ImportError
    with pytest.raises(RayNotInstalledError, match=r"pip install 'fragflow\[ray\]'") as err:
        predict(None, None)
    assert isinstance(err.value, ff.FragflowError)


@pytest.mark.parametrize("size, workers, want", [
    (10, 2, [5, 5]), (9, 2, [4, 5]), (7, 3, [2, 3, 2]), (1, 2, [0, 1]), (0, 2, [0, 0])])
def test_a_global_batch_splits_into_contiguous_slices(size, workers, want):
    x = np.arange(size * 2, dtype=np.float32).reshape(size, 2)
    y = np.arange(size, dtype=np.int32)
    shards = _split((x, y), workers)
    assert [len(s[0]) for s in shards] == want
    np.testing.assert_array_equal(np.concatenate([s[0] for s in shards]), x)
    np.testing.assert_array_equal(np.concatenate([s[1] for s in shards]), y)


def test_a_batch_of_unequal_arrays_is_refused():
    with pytest.raises(ff.FeedError, match="differ in length"):
        _split((np.zeros((4, 2)), np.zeros(3)), 2)


def test_the_progress_line_gives_examples_per_second_per_worker_and_in_total():
    stats = StepStats(step=3, loss=0.5, examples=[32, 32], seconds=0.1, compute=[0.05, 0.06],
                      apply=0.01, allreduce=0.002, transfer=0.028)
    line = stats.line(10)
    assert line.startswith("step 3/10  loss 0.50000  640 ex/s (w0 320, w1 320)")
    assert "compute 60.0 ms" in line and "allreduce 2.0 ms" in line


# -- what an inference actor opens (run here, in-process: no Ray needed) ------------------
def _graph():
    rng = np.random.default_rng(0)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 4), "float32", name="x")
        w = ff.Variable(rng.standard_normal((4, 3)).astype(np.float32), name="w")
        y = ff.relu(x @ w)
    return g, x, y, w


def test_a_graph_model_from_a_session_carries_its_current_weights(gl):
    from fragflow.distributed import GraphModel
    g, x, y, w = _graph()
    xs = np.random.default_rng(1).standard_normal((9, 4)).astype(np.float32)
    with ff.Session(g) as sess:
        sess.set(w, sess.get(w) * -2.0)
        want = sess.run(y, {x: xs})
        model = GraphModel.from_session(sess, [x], [y])
    assert model.input_names == ["x"] and len(model.output_names) == 1
    session, fn = model.open()
    with session:
        np.testing.assert_allclose(fn(xs)[0], want, rtol=0, atol=1e-6)


def test_an_onnx_model_opens_as_a_session(gl):
    pytest.importorskip("onnx", reason="the onnx extra is missing")
    from onnx import TensorProto, helper, numpy_helper

    from fragflow.distributed import OnnxModel
    w = np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["input", "w"], ["h"]),
         helper.make_node("Relu", ["h"], ["out"])],
        "tiny", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [None, 3])],
        [numpy_helper.from_array(w, "w")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model = OnnxModel(proto.SerializeToString())
    assert model.input_names == ["input"] and model.output_names == ["out"]
    xs = np.random.default_rng(3).standard_normal((5, 4)).astype(np.float32)
    session, fn = model.open()
    with session:
        np.testing.assert_allclose(fn(xs)[0], np.maximum(xs @ w, 0), rtol=1e-5, atol=1e-6)
