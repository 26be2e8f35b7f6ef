"""Elementwise records (ir/ops/elementwise/, ir/ops/common.py): gradient rules and
limits written for the mutants that `make mutation` found alive
(tests/mutation/run.py). Gradients at hand values on the numpy executor running the
graph as built: pow's gradient in the exponent is 0 where the base is not positive
(TensorFlow's convention), prelu's pieces on both sides of 0 and between -1 and 1,
where's gradient to the branch it took; int32 constants up to 2^31 - 1; a range
longer than 2^31 - 1 elements is refused; linspace ends at stop exactly."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import reference_session


def _gradients(build, *arrays):
    g = ff.Graph()
    with g.as_default():
        holders = [ff.placeholder(a.shape, name=f"in{i}") for i, a in enumerate(arrays)]
        y = build(*holders)
        grads = ff.gradients(ff.reduce_sum(y * ff.constant(np.float32(3.0))), holders)
    with reference_session(g) as sess:
        return sess.run(grads, dict(zip(holders, arrays)))


def test_pow_gradient_in_the_exponent_is_zero_where_the_base_is_not_positive():
    a = np.array([-2.0, 0.0, 2.0, 0.5], np.float32)
    b = np.array([2.0, 3.0, 3.0, 2.0], np.float32)
    da, db = _gradients(ff.pow, a, b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(db, 3 * np.where(a64 > 0, np.log(np.abs(a64) + (a64 == 0))
                                                * a64 ** b64, 0.0), rtol=1e-6)
    assert db[0] == 0.0 and db[1] == 0.0
    np.testing.assert_allclose(da, 3 * b64 * a64 ** (b64 - 1), rtol=1e-6)


def test_prelu_gradients_on_each_side_of_zero():
    x = np.array([-2.0, -0.5, 0.5, 2.0, 0.0], np.float32)
    alpha = np.array([0.25], np.float32)
    dx, dalpha = _gradients(ff.prelu, x, alpha)
    np.testing.assert_array_equal(dx, 3 * np.array([0.25, 0.25, 1.0, 1.0, 0.25], np.float32))
    # d/dalpha = x where x <= 0, summed over the broadcast: 3 * (-2 - 0.5 + 0)
    np.testing.assert_allclose(dalpha, [3 * -2.5], rtol=1e-6)


def test_where_gradient_goes_to_the_branch_taken():
    cond = np.array([True, False, True, False])
    a = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    b = np.array([5.0, 6.0, 7.0, 8.0], np.float32)
    da, db = _gradients(lambda x, y: ff.where(ff.constant(cond), x, y), a, b)
    np.testing.assert_array_equal(da, [3.0, 0.0, 3.0, 0.0])
    np.testing.assert_array_equal(db, [0.0, 3.0, 0.0, 3.0])


def test_int32_constants_reach_int32s_limits():
    g = ff.Graph()
    with g.as_default():
        c = ff.constant(np.array([2 ** 31 - 1, -2 ** 31], np.int64))
        assert c.dtype == "int32"
        with pytest.raises(ff.DTypeError, match="outside int32's range"):
            ff.constant(np.array([2 ** 31], np.int64))
    with reference_session(g) as sess:
        np.testing.assert_array_equal(sess.run(c), [2 ** 31 - 1, -2 ** 31])


def test_a_range_past_two_to_the_31_elements_is_refused():
    g = ff.Graph()
    with g.as_default():
        assert ff.range(0, 2 ** 31 - 1).shape.as_list() == [2 ** 31 - 1]
        with pytest.raises(ff.ShapeError, match="too long"):
            ff.range(0, 2 ** 31)



def test_linspace_ends_exactly_at_stop():
    # start + 11 * step in float64 is 2.2e-16 here, not 0: the last value is stop itself
    g = ff.Graph()
    with g.as_default():
        y = ff.linspace(-10 / 7, 0.0, 12)
    with reference_session(g) as sess:
        out = sess.run(y)
    assert out[-1] == 0.0 and out[0] == np.float32(-10 / 7)
    np.testing.assert_allclose(out, np.linspace(np.float32(-10 / 7), 0.0, 12), atol=1e-7)
