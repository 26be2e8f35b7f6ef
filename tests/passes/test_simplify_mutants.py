"""passes/simplify.py, written for the mutants that `make mutation` found alive
(tests/mutation/run.py): constant folding leaves a result
past FOLD_LIMIT elements computed (zeros_like(x) + 1 of 2^16 + 1 elements still
reads x), folding the one at the limit; pow by a constant rewritten as square,
reciprocal, sqrt or rsqrt for those exponents only; two transposes merged into their
composition. On the numpy executor with the default passes against the graph as
built (passes=[]) and float64 formulas."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.passes import simplify
from fragflow.runtime.driver import optimize
from tests.reference import reference_session


def _folded(size):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((size,), name="x")
        y = ff.zeros_like(x) + 1.0
    compiled = optimize(g, [y.value], {x.value: x.value.type}).graph
    with reference_session(g) as ref:
        np.testing.assert_array_equal(ref.run(y, {x: np.zeros(size, np.float32)}),
                                      np.ones(size, np.float32))
    return {n.op for n in compiled.nodes}


def test_constant_folding_stops_past_fold_limit():
    assert simplify.FOLD_LIMIT == 1 << 16
    assert _folded(simplify.FOLD_LIMIT) == {"constant"}              # ones, folded
    assert "placeholder" in _folded(simplify.FOLD_LIMIT + 1)         # computed on GL


def _after_the_passes(build, value):
    """build(x) on the numpy executor with the default passes and as built."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(value.shape, name="x")
        y = build(x)
    with ff.Session(g, backend="numpy") as sess, reference_session(g) as ref:
        return sess.run(y, {x: value}), ref.run(y, {x: value})


@pytest.mark.parametrize("exponent", [2.0, -1.0, 0.5, -0.5, 1.5, 3.0, -2.0, 1.0])
def test_pow_by_a_constant_after_the_rewrites(exponent):
    value = np.array([0.25, 1.0, 2.0, 9.0], np.float32)
    actual, expected = _after_the_passes(lambda x: ff.pow(x, exponent), value)
    np.testing.assert_allclose(actual, expected, rtol=1e-6)
    np.testing.assert_allclose(actual, value.astype(np.float64) ** exponent, rtol=1e-6)


def test_two_transposes_merge_into_their_composition():
    # a cube: the composition keeps the shape but is not the identity
    value = np.arange(27, dtype=np.float32).reshape(3, 3, 3)
    actual, expected = _after_the_passes(
        lambda x: ff.transpose(ff.transpose(x, (1, 2, 0)), (1, 2, 0)), value)
    np.testing.assert_array_equal(actual, expected)
    np.testing.assert_array_equal(actual, value.transpose(2, 0, 1))


def test_a_constant_base_to_a_fed_power_is_not_rewritten():
    value = np.array(3.0, np.float32)          # 0.5 ** 3: the base is in POWERS, not x
    actual, expected = _after_the_passes(lambda x: ff.pow(0.5, x), value)
    assert actual == expected == np.float32(0.125)
