"""The gradient API: what it returns, where gradient nodes live, and its errors."""
import os

import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.ops.registry import _REGISTRY, OpDef, register

HERE = os.path.basename(__file__)


def run(fetches, feeds=None, graph=None):
    with ff.Session(graph or ff.get_default_graph(), backend="numpy", passes=[]) as sess:
        return sess.run(fetches, feeds)


def test_several_paths_to_one_tensor_are_summed():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3,), name="x")
        (dx,) = ff.gradients(ff.sum(x * x + x * 3.0 + ff.exp(x)), [x])
    xb = np.array([0.5, -1.0, 2.0], np.float32)
    np.testing.assert_allclose(run(dx, {x: xb}, g), 2 * xb + 3 + np.exp(xb), rtol=1e-6)
    assert any(n.op == "add_n" for n in g.nodes)


def test_an_x_that_depends_on_another_x_passes_its_gradient_on():
    """gradients(loss, [h, x]) with h = f(x): x's gradient is the total one, through h
    and around it, as tf.gradients gives; h's is the one at h."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3,), name="x")
        h = ff.tanh(x)
        loss = ff.sum(ff.square(h) + x * h)
        dh, dx = ff.gradients(loss, [h, x])
        (dx_alone,) = ff.gradients(loss, [x])
    xb = np.array([0.1, -0.5, 2.0], np.float32)
    got_h, got_x, want_x = run([dh, dx, dx_alone], {x: xb}, g)
    x64 = xb.astype(np.float64)
    t = np.tanh(x64)
    np.testing.assert_allclose(got_h, 2 * t + x64, rtol=1e-6)
    np.testing.assert_allclose(got_x, (2 * t + x64) * (1 - t * t) + t, rtol=1e-5)
    np.testing.assert_array_equal(got_x, want_x)


def test_value_and_gradients_and_vjp():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 2), name="x")
        y = ff.sum(ff.square(x))
        value, (dx,) = ff.value_and_gradients(y, [x])
        z = x * 3.0
        (vjp_x,) = ff.vjp([z], [x], [ff.constant(np.array([[1, 2], [3, 4]], np.float32))])
    xb = np.array([[1, 2], [3, 4]], np.float32)
    out = run([value, dx, vjp_x], {x: xb}, g)
    assert out[0] == 30.0
    np.testing.assert_array_equal(out[1], 2 * xb)
    np.testing.assert_array_equal(out[2], 3 * np.array([[1, 2], [3, 4]]))


def test_unconnected_gives_none_or_zeros():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2,), name="x")
        other = ff.placeholder((3,), name="other")
        y = ff.sum(x * 2.0)
        none = ff.gradients(y, [other])
        (zeros,) = ff.gradients(y, [other], unconnected="zero")
    assert none == [None]
    np.testing.assert_array_equal(run(zeros, {other: np.ones(3, np.float32)}, g), np.zeros(3))


def test_stop_gradient_blocks_the_path():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2,), name="x")
        y = ff.sum(x * ff.stop_gradient(x * 5.0))
        (dx,) = ff.gradients(y, [x])
        (sx,) = ff.gradients(ff.sum(x * x), [x], stop_gradients=[x])
    xb = np.array([1.0, -2.0], np.float32)
    np.testing.assert_allclose(run(dx, {x: xb}, g), 5 * xb)
    np.testing.assert_allclose(run(sx, {x: xb}, g), 2 * xb)   # x itself is a stop


def test_gradient_nodes_live_under_gradients_scope_with_the_forward_line():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2,), name="x")
        with ff.name_scope("layer"):
            y = ff.sin(x)                          # the line gradient nodes point at
        line = y.op.source
        ff.gradients(ff.sum(y), [x])
    cos = next(n for n in g.nodes if n.op == "cos")
    assert cos.scope == "gradients/layer" and cos.name.startswith("gradients/layer/")
    assert cos.source == line and HERE in line
    assert "# gradients/layer/cos" in ff.dump(g)


def test_gradient_with_respect_to_int_is_an_error_of_its_own():
    g = ff.Graph()
    with g.as_default():
        i = ff.placeholder((2,), "int32", name="i")
        y = ff.sum(ff.cast(i, "float32"))
        with pytest.raises(ff.GradientError, match="'i': it is int32"):
            ff.gradients(y, [i])


def test_int_inputs_receive_no_gradient():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3,), name="x")
        i = ff.placeholder((3,), "int32", name="i")
        (dx,) = ff.gradients(ff.sum(x * ff.cast(i, "float32")), [x])
    out = run(dx, {x: np.ones(3, np.float32), i: np.array([1, 2, 3], np.int32)}, g)
    np.testing.assert_array_equal(out, [1, 2, 3])


@pytest.fixture
def op_without_rule():
    register(OpDef("test_opaque", "elementwise", lambda types, attrs: types[0],
                   lambda arrays, attrs: arrays[0], num_inputs=1))
    yield "test_opaque"
    del _REGISTRY["test_opaque"]


def test_op_without_rule_names_op_node_scope_line_and_fetch(op_without_rule):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2,), name="x")
        with ff.name_scope("block"):
            opaque = g.add_node(op_without_rule, [x.value]).outputs[0]
        y = ff.sum(ff.Tensor(opaque) * 2.0, name="loss")
        with pytest.raises(ff.GradientError) as err:
            ff.gradients(y, [x])
    message = str(err.value)
    assert "test_opaque 'block/test_opaque'" in message and "scope 'block'" in message
    assert HERE in message and "'loss'" in message


def test_custom_gradient_replaces_the_ops_gradient():
    @ff.custom_gradient
    def clipped_square(x):
        def grad(dy):
            return [ff.minimum(dy * 2.0 * x, 1.0)]
        return ff.square(x), grad

    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3,), name="x")
        y = clipped_square(x)
        (dx,) = ff.gradients(ff.sum(y), [x])
        (ddx,) = ff.gradients(ff.sum(dx), [x])      # grad_fn is built from ops: order 2
    xb = np.array([0.1, 0.4, 2.0], np.float32)
    out_y, out_dx, out_ddx = run([y, dx, ddx], {x: xb}, g)
    np.testing.assert_allclose(out_y, xb ** 2, rtol=1e-6)
    np.testing.assert_allclose(out_dx, np.minimum(2 * xb, 1.0), rtol=1e-6)
    np.testing.assert_allclose(out_ddx, np.where(2 * xb < 1, 2.0, 0.0), rtol=1e-6)


def test_custom_gradient_of_a_loaded_graph_says_the_function_is_missing():
    @ff.custom_gradient
    def f(x):
        return x * 2.0, lambda dy: [dy * 2.0]

    g = ff.Graph()
    with g.as_default():
        f(ff.placeholder((2,), name="x"))
    loaded = ff.load_graph(ff.dump(g, format="json"))
    out = loaded.node("f").outputs[0]
    with pytest.raises(ff.GradientError, match="not in this graph"):
        ff.gradients(ff.sum(ff.Tensor(out)), [ff.Tensor(loaded.value("x"))])


def test_gradients_run_on_gl_like_on_numpy(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 3), name="x")
        w = ff.Variable(np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2), name="w")
        loss = ff.mean(ff.sigmoid(x @ w) ** 2)
        dw, dx = ff.gradients(loss, [w, x])
    xb = np.random.default_rng(3).standard_normal((5, 3)).astype(np.float32)
    with ff.Session(g) as gl_sess, ff.Session(g, backend="numpy", passes=[]) as np_sess:
        got = gl_sess.run([dw, dx], {x: xb})
        want = np_sess.run([dw, dx], {x: xb})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)


def test_mean_over_an_axis_known_at_feed_time(gl):
    """mean's gradient over a None axis divides by the count of elements, which a NaN
    elsewhere does not touch (it was sum(x * 0 + 1): one NaN made every share NaN), and
    which a compile that knows the shape folds into a constant: no kernel counts."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 3), name="x")
        (dx,) = ff.gradients(ff.mean(ff.square(x)), [x])
    xb = np.arange(-6, 6, dtype=np.float32).reshape(4, 3)
    xb[1, 2] = np.nan
    want = 2 * xb / 12
    np.testing.assert_allclose(run(dx, {x: xb}, g), want, rtol=1e-6)
    with ff.Session(g) as sess:
        fn = sess.compile([dx], feeds=[x])
        np.testing.assert_allclose(fn(xb)[0], want, rtol=1e-6)
        assert [k.op for k in fn.kernels] != [] and \
            not any(k.op in ("sum", "mean") for k in fn.kernels), [k.op for k in fn.kernels]
