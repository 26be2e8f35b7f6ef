"""The launch loop binds only what changed (runtime/gl_plan.py BoundState): whatever else
binds GL state between or around runs (other plans and sessions, uploads, readbacks,
new linked shaders, observed runs) must never leave a kernel reading or writing the wrong
texture. Every result is compared with the numpy reference executor."""
import numpy as np
import pytest

import fragflow as ff

UNFUSED = ["fold_constants", "cse", "simplify", "verify"]


def _reference(graph, fetches, feeds=None, variables=None):
    sess = ff.Session(graph, backend="numpy", passes=[])
    for var, value in (variables or {}).items():
        sess.set(var, value)
    return sess.run(fetches, feeds or {})


def test_chain_of_one_shader_reads_each_previous_output(gl):
    """Same shader launched many times in a row: only the input texture changes."""
    x0 = np.linspace(-3, 3, 37).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        y = ff.Variable(x0, name="x")
        for _ in range(9):
            y = ff.tanh(y * 1.5)
    sess = ff.Session(g)
    fn = sess.compile([y], passes=UNFUSED)
    want = _reference(g, y)
    for _ in range(3):
        np.testing.assert_allclose(fn()[0], want, rtol=1e-5, atol=1e-6)


def test_interleaved_sessions_plans_and_uploads(gl):
    """Two sessions, several plans of different sizes and shaders, feeds uploaded and
    variables set between runs, in an interleaved order."""
    rng = np.random.default_rng(0)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5, 7), name="x")
        w = ff.Variable(rng.standard_normal((7, 3)).astype(np.float32), name="w")
        v = ff.Variable(rng.standard_normal(11).astype(np.float32), name="v")
        dense = ff.relu(x @ w)
        small = ff.exp(v) - v
        both = ff.sum(dense) + ff.sum(small)
    a, b = ff.Session(g), ff.Session(g)
    fns = {"dense": a.compile([dense], feeds=[x]), "small": a.compile([small]),
           "both": b.compile([both, dense], feeds=[x]),
           "small_unfused": b.compile([small], passes=UNFUSED)}
    state = {s: {"w": s.get(w), "v": s.get(v)} for s in (a, b)}
    for step in range(6):
        xb = rng.standard_normal((5, 7)).astype(np.float32)
        sess = a if step % 2 else b
        state[sess]["v"] = rng.standard_normal(11).astype(np.float32)
        sess.set(v, state[sess]["v"])                     # an upload between runs
        for name in (["dense", "small"] if sess is a else ["both", "small_unfused"]):
            fn = fns[name]
            got = fn(xb) if name in ("dense", "both") else fn()
            fetches = {"dense": [dense], "small": [small], "both": [both, dense],
                       "small_unfused": [small]}[name]
            want = _reference(g, fetches, {x: xb}, {w: state[sess]["w"], v: state[sess]["v"]})
            for got_one, want_one in zip(got, want):
                np.testing.assert_allclose(got_one, want_one, rtol=1e-5, atol=1e-5)


def test_new_shaders_and_observed_runs_between_runs(gl):
    """A shader linked between two runs (glUseProgram), a profiled run (readbacks after
    every kernel) and a closed session's deleted textures do not confuse the next run."""
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((6, 9)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.Variable(x0, name="x")
        y = ff.softplus(x) * 2.0 - ff.abs(x)
    sess = ff.Session(g)
    fn = sess.compile([y], passes=UNFUSED)
    want = _reference(g, y)
    np.testing.assert_allclose(fn()[0], want, rtol=1e-5, atol=1e-6)
    for scale in (0.25, 3.5):                  # new shaders, textures made and freed
        h = ff.Graph()
        with h.as_default():
            z = ff.sin(ff.constant(x0)) * scale
        with ff.Session(h) as other:
            np.testing.assert_allclose(other.run(z), np.sin(x0) * scale, rtol=1e-5,
                                       atol=1e-6)
        np.testing.assert_allclose(fn()[0], want, rtol=1e-5, atol=1e-6)
    sess.profile(y, runs=2)
    np.testing.assert_allclose(fn()[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("passes", [None, UNFUSED])
def test_training_steps_interleaved_with_inference(gl, passes):
    """Assigns swap textures at the end of a run; an inference plan run in between reads
    the current variables."""
    rng = np.random.default_rng(2)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((8, 4), name="x")
        w = ff.Variable(rng.standard_normal((4, 2)).astype(np.float32), name="w")
        pred = ff.tanh(x @ w)
        loss = ff.mean(ff.square(pred))
        step = ff.optim.SGD(0.3).minimize(loss)
    gl_sess, np_sess = ff.Session(g, passes=passes), ff.Session(g, backend="numpy")
    train = gl_sess.compile([loss, step], feeds=[x])
    infer = gl_sess.compile([pred], feeds=[x])
    for _ in range(5):
        xb = rng.standard_normal((8, 4)).astype(np.float32)
        np.testing.assert_allclose(infer(xb)[0], np_sess.run(pred, {x: xb}), rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(train(xb)[0], np_sess.run([loss, step], {x: xb})[0],
                                   rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gl_sess.get(w), np_sess.get(w), rtol=1e-5, atol=1e-6)
