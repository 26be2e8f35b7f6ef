"""Found by review: what users hit when they use a Session the way TensorFlow allows."""
import gc

import numpy as np
import pytest

import fragflow as ff
from fragflow.frontend.session import MAX_PLANS
from tests.reference import assert_matches


def in_use(gl):
    stats = gl.pool.stats()
    return stats["live"] - stats["free"]


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_feeding_a_variable_that_is_assigned_in_the_same_run(backend, request):
    if backend == "gl":
        request.getfixturevalue("gl")
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(np.ones(3, np.float32), name="w")
        a = w.assign(w + 1.0)
    with ff.Session(g, backend=backend) as sess:
        new, seen = sess.run([a, w], {w: np.full(3, 10.0, np.float32)})
        assert_matches(new, np.full(3, 11.0, np.float32))
        assert_matches(seen, np.full(3, 10.0, np.float32))
        assert_matches(sess.get(w), np.full(3, 11.0, np.float32))


def test_a_plan_that_fails_to_build_keeps_no_texture(gl):
    bad = ff.gpgpu_program("bad_leak", ["x"], lambda x: (x.shape, x.dtype),
                           "setOutput(getXAtOutCoords() + nope);")
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 4), name="x")
        y = bad(ff.relu(x) * 2.0)
    before = in_use(gl)
    with ff.Session(g) as sess:
        for _ in range(3):
            with pytest.raises(ff.ShaderCompileError):
                sess.run(y, {x: np.ones((100, 4), np.float32)})
        assert sess.memory()["textures"] == 0
    assert in_use(gl) == before


def test_plans_for_many_feed_shapes_are_bounded(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 8), name="x")
        y = ff.sum(ff.relu(x * 2.0), axis=1)
    with ff.Session(g) as sess:
        for n in range(1, MAX_PLANS + 10):
            out = sess.run(y, {x: np.ones((n, 8), np.float32)})
            assert_matches(out, np.full(n, 16.0, np.float32))
        assert len(sess._plans) == MAX_PLANS
        held = sess.memory()["textures"]
        sess.run(y, {x: np.ones((3, 8), np.float32)})       # evicted earlier: rebuilt
        assert sess.memory()["textures"] <= held + 3


def test_a_dropped_session_gives_its_textures_back(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((16, 16), name="x")
        w = ff.Variable(np.eye(16, dtype=np.float32), name="w")
        y = ff.relu(x @ w) + 1.0
    before = in_use(gl)
    for _ in range(5):
        sess = ff.Session(g)
        sess.run(y, {x: np.ones((16, 16), np.float32)})
        del sess
        gc.collect()
    assert in_use(gl) == before


def test_nested_fetch_structures_come_back_nested():
    from collections import namedtuple
    Pair = namedtuple("Pair", "first second")
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2,), name="x")
        a, b = x * 2.0, x + 1.0
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        out = sess.run({"a": a, "more": (b, [a, {"b": b}]), "pair": Pair(a, b)},
                       {x: np.array([1.0, 2.0], np.float32)})
    assert_matches(out["more"][1][1]["b"], np.array([2.0, 3.0], np.float32))
    assert isinstance(out["more"], tuple) and isinstance(out["pair"], Pair)
    assert_matches(out["pair"].first, np.array([2.0, 4.0], np.float32))


def test_save_and_restore_take_the_same_path(tmp_path):
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(np.arange(3, dtype=np.float32), name="w")
        step = w.assign(w * 3.0)
    path = str(tmp_path / "checkpoint")          # no .npz: numpy adds it when saving
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        sess.run(step)
        sess.save(path)
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        sess.restore(path)
        assert_matches(sess.get(w), np.array([0.0, 3.0, 6.0], np.float32))


def test_program_inputs_are_names_not_tensors():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2,), name="x")
        with pytest.raises(ff.AttrError, match="inputs are the names the GLSL uses"):
            ff.gpgpu_program("p", [x], lambda x: (x.shape, x.dtype), "setOutput(1.0);")


def test_grad_ys_of_the_wrong_shape_is_named_as_such():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 4), name="x")
        w = ff.Variable(np.ones((4, 3), np.float32), name="w")
        with pytest.raises(ff.GradientError, match=r"grad_ys\[0\] has shape \(5,\) but "
                                                   r"ys\[0\] \('matmul'\) has shape \(\?, 3\)"):
            ff.gradients(x @ w, [w], grad_ys=[ff.constant(np.ones(5, np.float32))])


def test_small_integer_powers_are_exact_on_gl(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((12,), name="x")
        fetches = [x ** 2, x ** -1, x ** 0.5, x ** -0.5, x ** 3]
    xb = np.arange(-5, 7, dtype=np.float32)
    with ff.Session(g) as sess:
        got = sess.run(fetches, {x: xb})
    with np.errstate(all="ignore"):
        want = [xb ** 2, np.float32(1) / xb, np.sqrt(xb), np.float32(1) / np.sqrt(xb)]
    for a, e in zip(got[:4], want):
        assert_matches(a, e.astype(np.float32), rtol=0, atol=0)
    assert_matches(got[4], xb ** 3, rtol=1e-6)


def test_mixing_tensors_of_two_graphs_says_where_even_when_they_share_a_name():
    import os
    here = os.path.basename(__file__)
    first, second = ff.Graph(), ff.Graph()
    with first.as_default():
        a = ff.placeholder((2,), name="a")
    with second.as_default():
        b = ff.placeholder((2,), name="b")
    with pytest.raises(ff.GraphError) as err:
        a + b   # noqa: B018
    message = str(err.value)
    assert "another graph of the same name" in message and here in message
    with pytest.raises(ff.GraphError, match="another graph of the same name"):
        ff.relu(a) + b    # noqa: B018
