"""Gradients of the math family against float64 central finite differences, on GL;
second order for the twice-differentiable ones.

Tolerances as in test_basic_gradients.py (first order rtol 1e-3 / atol 1e-4, second
order 10x). Inputs stay inside each op's domain and away from its kinks (elu, selu and
leaky_relu at 0, relu6 at 0 and 6, clip_by_value at its bounds), where a finite
difference would straddle two slopes."""
import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients
from tests.ops.test_math import UNARY as MATH_ROWS

rng = np.random.default_rng(7)


def uniform(low, high):
    return lambda shape: rng.uniform(low, high, shape).astype(np.float32)


def away_from_zero(low=0.2, high=2.0):
    return lambda shape: (rng.uniform(low, high, shape)
                          * rng.choice([-1, 1], shape)).astype(np.float32)


def in_intervals(intervals):
    """Inputs drawn uniformly from one of the intervals, chosen at random per element."""
    def draw(shape):
        lows, highs = np.array(intervals, np.float64).T
        k = rng.integers(0, len(intervals), shape)
        return rng.uniform(lows[k], highs[k]).astype(np.float32)
    return draw


UNARY = {
    # op: (inputs, second order); the math ops' rows hold their gradient inputs with
    # the rest of their test data (tests/ops/test_math.py UNARY)
    **{op: (in_intervals(row[3]), True) for op, row in MATH_ROWS.items()},
    "relu6": (lambda s: np.float32(rng.choice([-1.5, 0.7, 2.3, 5.1, 7.0, 9.5], s)), False),
    "leaky_relu": (away_from_zero(), False),
}


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_math_gradient(op, gl):
    data, second = UNARY[op]
    fn = getattr(ff, op)
    check_gradients(lambda x: fn(x), {"x": data((2, 3))}, second_order=second)


def test_leaky_relu_gradient_uses_alpha(gl):
    check_gradients(lambda x: ff.leaky_relu(x, alpha=0.35), {"x": away_from_zero()((7,))})


def test_step_has_zero_gradient(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4,), name="x")
        (dx,) = ff.gradients(ff.sum(ff.step(x, alpha=0.5) * x), [x])
    xb = np.float32([-1.5, -0.2, 0.3, 2.0])
    with ff.Session(g) as sess:
        got = sess.run(dx, {x: xb})
    # d/dx (step(x) * x) = step(x): the step itself contributes nothing
    np.testing.assert_array_equal(got, np.where(xb > 0, 1.0, 0.5))


def test_predicates_pass_no_gradient(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3,), name="x")
        flags = ff.cast(ff.is_finite(x), "float32") + ff.cast(ff.is_nan(x), "float32") \
            + ff.cast(ff.is_inf(x), "float32")
        assert ff.gradients(ff.sum(flags), [x]) == [None]
        (dx,) = ff.gradients(ff.sum(flags), [x], unconnected="zero")
    with ff.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(dx, {x: np.float32([1, 2, 3])}), [0, 0, 0])


BINARY = {
    # op: (a inputs, b inputs, second order)
    "atan2": (away_from_zero(0.3, 2.0), away_from_zero(0.3, 2.0), True),
    "squared_difference": (uniform(-2, 2), uniform(-2, 2), True),
    "prelu": (away_from_zero(), uniform(0.05, 0.5), False),
}


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 3), (3,)), ((3, 1), (1, 4))])
def test_binary_math_gradient_undoes_broadcasting(op, shapes, gl):
    da, db, second = BINARY[op]
    fn = getattr(ff, op)
    check_gradients(lambda a, b: fn(a, b), {"a": da(shapes[0]), "b": db(shapes[1])},
                    second_order=second and shapes[0] == shapes[1])


def test_prelu_gradient_second_order(gl):
    """prelu is piecewise bilinear: its second derivative (d/dx d/dalpha) is not zero."""
    check_gradients(lambda x, a: ff.prelu(x, a),
                    {"x": away_from_zero()((2, 3)), "alpha": uniform(0.05, 0.5)((2, 3))},
                    second_order=True)


def test_clip_by_value_gradient_goes_to_the_bound_taken(gl):
    """Tensor bounds broadcast against t; values inside, below and above them."""
    t = np.float32([[-3.0, -0.5, 0.4, 2.5], [1.7, -1.6, 0.1, -0.3], [0.9, 4.0, -2.2, 1.2]])
    lo = np.float32([-1.0, -1.0, -0.2, 0.0])
    hi = np.float32([[1.5], [1.0], [0.5]])
    check_gradients(lambda x, a, b: ff.clip_by_value(x, a, b),
                    {"t": t, "lo": lo, "hi": hi})


def test_clip_by_value_gradient_with_scalar_bounds(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5,), name="x")
        (dx,) = ff.gradients(ff.sum(ff.clip_by_value(x, -1.0, 1.0) * 3.0), [x])
    xb = np.float32([-2.0, -1.0, 0.3, 1.0, 1.5])
    with ff.Session(g) as sess:
        got = sess.run(dx, {x: xb})
    # the bounds themselves pass (TensorFlow's min <= t <= max)
    np.testing.assert_array_equal(got, [0.0, 3.0, 3.0, 3.0, 0.0])


def test_rsqrt_second_order(gl):
    """rsqrt's rule goes through pow(y, 3): checked again here with the brief's data."""
    check_gradients(lambda x: ff.rsqrt(x),
                    {"x": uniform(0.5, 2.0)((2, 3))}, second_order=True)
