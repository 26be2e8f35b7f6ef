"""The numpy backend's observed runs (debug mode, profile) wrap a failing reference in a
FragflowError naming the node, as a plain run does — never a raw numpy error."""
import numpy as np
import pytest

import fragflow as ff


def _broken_reference(x, scale):
    return x @ np.ones((3, 3), np.float32) * scale      # (2, 5) @ (3, 3): numpy raises


broken = ff.gpgpu_program(
    name="broken_ref", inputs=["x"], output=lambda x: (x.shape, x.dtype),
    uniforms={"scale": "float"}, reference=_broken_reference,
    glsl="""
        setOutput(scale * getXAtOutCoords());
    """)


def _graph():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 5), name="x")
        with ff.name_scope("model"):
            y = broken(ff.exp(x), scale=2.0)
    return g, x, y


@pytest.mark.parametrize("debug", [False, True])
def test_a_failing_reference_is_named_in_plain_and_debug_runs(debug):
    g, x, y = _graph()
    with ff.Session(g, backend="numpy", passes=[], debug=debug) as sess:
        with pytest.raises(ff.FragflowError) as err:
            sess.run(y, {x: np.ones((2, 5), np.float32)})
    message = str(err.value)
    assert "model/" in message and "ValueError" in message, message
    assert isinstance(err.value.__cause__, ValueError)


def test_a_failing_reference_is_named_in_a_profile():
    g, x, y = _graph()
    with ff.Session(g, backend="numpy", passes=[]) as sess, pytest.raises(ff.FragflowError) as err:
        sess.profile([y], {x: np.ones((2, 5), np.float32)}, runs=1)
    assert "model/" in str(err.value) and "ValueError" in str(err.value)


def test_observed_and_plain_runs_agree():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 4), name="x")
        v = ff.Variable(np.zeros((3, 4), np.float32), name="v")
        y = ff.reduce_sum(ff.relu(x - 0.5) * 2.0 + v, axis=1)
        step = v.assign_add(x)
    data = np.random.default_rng(3).standard_normal((3, 4)).astype(np.float32)
    results = []
    for debug in (False, True):
        with ff.Session(g, backend="numpy", passes=[], debug=debug) as sess:
            first = sess.run(y, {x: data})
            sess.run(step, {x: data})
            results.append((first, sess.run(y, {x: data})))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    expected = (np.maximum(data - 0.5, 0) * 2.0).sum(axis=1)
    np.testing.assert_allclose(results[0][0], expected, rtol=1e-6)
    np.testing.assert_allclose(results[0][1], expected + data.sum(axis=1),
                               rtol=1e-6)
