"""assign hands the variable the texture its new value was computed into (no copy
kernel) where that is safe, and copies where it is not (the value is a variable, a feed,
a constant, or taken by another assign). Every case runs several steps on GL and on the
numpy reference executor and compares variables and fetches."""
import numpy as np
import pytest

import fragflow as ff


def _steps(graph, fetches, steps=4, feeds=lambda i: {}):
    """Run fetches `steps` times on GL and numpy; return both sessions (for .get)."""
    gl, ref = ff.Session(graph), ff.Session(graph, backend="numpy", passes=[])
    for i in range(steps):
        got, want = gl.run(fetches, feeds(i)), ref.run(fetches, feeds(i))
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6, err_msg=f"step {i}")
    return gl, ref


def _same_variables(graph, gl, ref):
    for node in graph.nodes:
        if node.op == "variable":
            np.testing.assert_allclose(gl.get(node.outputs[0]), ref.get(node.outputs[0]),
                                       rtol=1e-5, atol=1e-6, err_msg=node.name)


def test_assign_of_a_computed_value_runs_no_copy_kernel(gl):
    g = ff.Graph()
    with g.as_default():
        v = ff.Variable(np.arange(10, dtype=np.float32), name="v")
        op = v.assign(v * 0.5 + 1.0)
    fn = ff.Session(g).compile([op])
    assert len(fn.kernels) == 1, [k.op for k in fn.kernels]


def test_variables_right_after_many_steps(gl):
    rng = np.random.default_rng(0)
    g = ff.Graph()
    with g.as_default():
        a = ff.Variable(rng.standard_normal(13).astype(np.float32), name="a")
        b = ff.Variable(rng.standard_normal((3, 5)).astype(np.float32), name="b")
        step = ff.optim.group(a.assign(ff.tanh(a) * 1.1 + 0.1),
                              b.assign(b * 0.9 + ff.reduce_mean(a)))
    gl_sess, ref = _steps(g, [step], steps=25)
    _same_variables(g, gl_sess, ref)


def test_fetched_and_assigned_value(gl):
    g = ff.Graph()
    with g.as_default():
        v = ff.Variable(np.linspace(-2, 2, 9).astype(np.float32), name="v")
        new = ff.exp(v) - 1.0
        op = v.assign(new)
    gl_sess, ref = _steps(g, [op, new, v], steps=3)   # v: its value before the update
    _same_variables(g, gl_sess, ref)


def test_same_value_assigned_to_two_variables(gl):
    g = ff.Graph()
    with g.as_default():
        a = ff.Variable(np.ones(7, np.float32), name="a")
        b = ff.Variable(np.zeros(7, np.float32), name="b")
        new = a * 2.0 + b
        step = ff.optim.group(a.assign(new), b.assign(new))
    gl_sess, ref = _steps(g, [step], steps=5)
    _same_variables(g, gl_sess, ref)


def test_assigned_value_also_used_later_in_the_run(gl):
    g = ff.Graph()
    with g.as_default():
        a = ff.Variable(np.linspace(0, 1, 6).astype(np.float32), name="a")
        b = ff.Variable(np.zeros((2, 3), np.float32), name="b")
        new_a = ff.sqrt(a + 1.0)
        later = ff.reshape(new_a, (2, 3)) * 3.0 - b
        step = ff.optim.group(a.assign(new_a), b.assign(later))
    gl_sess, ref = _steps(g, [step, later], steps=4)
    _same_variables(g, gl_sess, ref)


def test_assign_of_a_reshaped_value(gl):
    g = ff.Graph()
    with g.as_default():
        a = ff.Variable(np.arange(12, dtype=np.float32), name="a")
        m = ff.Variable(np.zeros((3, 4), np.float32), name="m")
        step = ff.optim.group(m.assign(ff.reshape(a * 2.0, (3, 4))), a.assign(a + 1.0))
    gl_sess, ref = _steps(g, [step], steps=3)
    _same_variables(g, gl_sess, ref)


@pytest.mark.parametrize("source", ["variable", "feed", "constant", "reshaped variable"])
def test_assign_of_values_that_keep_their_texture(gl, source):
    """These are copied: handing their texture over would change the source."""
    g = ff.Graph()
    with g.as_default():
        a = ff.Variable(np.arange(6, dtype=np.float32), name="a")
        b = ff.Variable(np.zeros(6, np.float32), name="b")
        c = ff.Variable(np.ones(6, np.float32), name="c")
        x = ff.placeholder((6,), name="x")
        value = {"variable": a, "feed": x, "constant": ff.constant(np.full(6, 4, np.float32)),
                 "reshaped variable": ff.reshape(ff.reshape(a, (2, 3)), (6,))}[source]
        step = ff.optim.group(b.assign(value), c.assign(c + b))
    gl_sess, ref = _steps(g, [step, a, b], steps=4,
                          feeds=lambda i: {x: np.full(6, i, np.float32)})
    _same_variables(g, gl_sess, ref)


def test_two_plans_assigning_one_variable_alternately(gl):
    g = ff.Graph()
    with g.as_default():
        v = ff.Variable(np.linspace(1, 2, 5).astype(np.float32), name="v")
        double, shift = v.assign(v * 2.0), v.assign(v - 0.5)
    gl_sess, ref = ff.Session(g), ff.Session(g, backend="numpy", passes=[])
    for i in range(6):
        op = double if i % 3 else shift
        np.testing.assert_allclose(gl_sess.run(op), ref.run(op), rtol=1e-6)
        np.testing.assert_allclose(gl_sess.get(v), ref.get(v), rtol=1e-6)


def test_sgd_training_equal_to_numpy_after_many_steps(gl):
    rng = np.random.default_rng(3)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((16, 5), name="x")
        y = ff.placeholder((16, 2), name="y")
        w = ff.Variable(rng.standard_normal((5, 2)).astype(np.float32) * 0.3, name="w")
        b = ff.Variable(np.zeros(2, np.float32), name="b")
        loss = ff.reduce_mean(ff.square(ff.tanh(x @ w + b) - y))
        step = ff.optim.Momentum(0.2, 0.9).minimize(loss)
    xs = rng.standard_normal((20, 16, 5)).astype(np.float32)
    ys = rng.standard_normal((20, 16, 2)).astype(np.float32) * 0.5
    gl_sess, ref = _steps(g, [loss, step], steps=20,
                          feeds=lambda i: {x: xs[i], y: ys[i]})
    _same_variables(g, gl_sess, ref)
