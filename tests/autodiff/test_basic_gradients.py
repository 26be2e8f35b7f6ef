"""Gradients of the basic ops (elementwise arithmetic, where, cast, reductions, matmul,
reshape/transpose/slice) against float64 central finite differences, on GL;
second order for the twice-differentiable ones.

Tolerances: first order rtol 1e-3 / atol 1e-4 (float32 GL against float64 differences
with eps 1e-4), second order 10x that. Inputs avoid the kinks (relu and abs at 0, ties
in max/min) where a finite difference straddles two slopes."""
import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients

rng = np.random.default_rng(42)


def away_from_zero(shape, low=0.2, high=2.0):
    return (rng.uniform(low, high, shape) * rng.choice([-1, 1], shape)).astype(np.float32)


def positive(shape, low=0.5, high=2.0):
    return rng.uniform(low, high, shape).astype(np.float32)


def normal(shape):
    return rng.standard_normal(shape).astype(np.float32)


UNARY = {
    "neg": (ff.neg, normal), "abs": (ff.abs, away_from_zero), "square": (ff.square, normal),
    "relu": (ff.relu, away_from_zero), "exp": (ff.exp, normal), "log": (ff.log, positive),
    "sqrt": (ff.sqrt, positive), "rsqrt": (ff.rsqrt, positive),
    "reciprocal": (ff.reciprocal, away_from_zero), "sin": (ff.sin, normal),
    "cos": (ff.cos, normal), "tanh": (ff.tanh, normal), "sigmoid": (ff.sigmoid, normal),
    "identity": (ff.identity, normal),
}
FIRST_ORDER_ONLY = {"relu", "abs"}      # their second derivative is 0 almost everywhere


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_gradient(op, gl):
    fn, data = UNARY[op]
    check_gradients(lambda x: fn(x), {"x": data((2, 3))},
                    second_order=op not in FIRST_ORDER_ONLY)


@pytest.mark.parametrize("op", ["sign", "floor", "ceil", "round"])
def test_piecewise_constant_ops_have_zero_gradient(op, gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5,), name="x")
        (dx,) = ff.gradients(ff.sum(getattr(ff, op)(x) * x), [x])
    xb = np.array([-1.3, -0.2, 0.4, 1.6, 2.2], np.float32)
    with ff.Session(g) as sess:
        got = sess.run(dx, {x: xb})
    np.testing.assert_allclose(got, getattr(np, {"round": "round"}.get(op, op))(xb)
                               if op != "sign" else np.sign(xb), rtol=1e-6)


BINARY = {
    "add": (ff.add, normal, normal), "sub": (ff.sub, normal, normal),
    "mul": (ff.mul, normal, normal), "div": (ff.div, normal, away_from_zero),
    "pow": (ff.pow, positive, normal),
    "maximum": (ff.maximum, normal, lambda s: normal(s) + 3.0),
    "minimum": (ff.minimum, normal, lambda s: normal(s) + 3.0),
    "mod": (ff.mod, lambda s: positive(s, 0.1, 0.9), lambda s: positive(s, 1.2, 2.0)),
}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 3), (3,)), ((3, 1), (1, 4))])
def test_binary_gradient_undoes_broadcasting(op, shapes, gl):
    fn, da, db = BINARY[op]
    check_gradients(lambda a, b: fn(a, b), {"a": da(shapes[0]), "b": db(shapes[1])},
                    second_order=op in ("mul", "div", "pow") and shapes[0] == shapes[1])


def test_where_gradient_routes_to_the_chosen_side(gl):
    cond = np.array([[True, False, True], [False, False, True]])
    check_gradients(lambda a, b: ff.where(ff.constant(cond), a, b),
                    {"a": normal((2, 3)), "b": normal((3,))})


def test_cast_between_floats_passes_the_gradient(gl):
    check_gradients(lambda x: ff.cast(x, "float32") * 2.0, {"x": normal((4,))})


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("axis, keepdims", [(None, False), (1, False), ((0, 2), True),
                                            (-1, True)])
def test_reduction_gradient(op, axis, keepdims, gl):
    data = normal((2, 3, 4)) if op != "prod" else away_from_zero((2, 3, 4), 0.5, 1.5)
    check_gradients(lambda x: getattr(ff, op)(x, axis=axis, keepdims=keepdims),
                    {"x": data}, second_order=op in ("sum", "mean", "prod"))


def test_max_splits_the_gradient_among_ties_like_tensorflow(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 3), name="x")
        (dx,) = ff.gradients(ff.max(x, axis=1), [x])
    with ff.Session(g) as sess:
        got = sess.run(dx, {x: np.array([[1, 5, 5], [2, 0, 1]], np.float32)})
    np.testing.assert_array_equal(got, [[0, 0.5, 0.5], [1, 0, 0]])


def test_prod_gradient_is_exact_with_zeros(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 3), name="x")
        (dx,) = ff.gradients(ff.prod(x, axis=1), [x])
    xb = np.array([[2, 0, 3], [0, 0, 4], [1, 2, 3]], np.float32)
    with ff.Session(g) as sess:
        got = sess.run(dx, {x: xb})
    np.testing.assert_array_equal(got, [[0, 6, 0], [0, 0, 0], [6, 3, 2]])


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_matmul_gradient_all_transposes(ta, tb, gl):
    a = normal((3, 2) if ta else (2, 3))
    b = normal((4, 3) if tb else (3, 4))
    check_gradients(lambda x, y: ff.matmul(x, y, transpose_a=ta, transpose_b=tb),
                    {"a": a, "b": b}, second_order=True)


def test_batched_matmul_gradient_sums_broadcast_batches(gl):
    check_gradients(lambda x, y: x @ y, {"a": normal((2, 2, 3)), "b": normal((3, 2))})


def test_shape_op_gradients(gl):
    check_gradients(lambda x: ff.transpose(ff.reshape(x, (3, 2, 2)), (2, 0, 1)) * 1.5,
                    {"x": normal((2, 6))}, second_order=True)
    check_gradients(lambda x: ff.squeeze(ff.expand_dims(x, 0)) * x,
                    {"x": normal((2, 3))})


def test_strided_slice_gradient_scatters_back(gl):
    check_gradients(lambda x: x[1:, ::-2, None] * 3.0, {"x": normal((3, 5))},
                    second_order=True)
    check_gradients(lambda x: x[-1, 2:4] * x[0, :2], {"x": normal((2, 5))})
