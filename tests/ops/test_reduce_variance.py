"""variance (ff.reduce_variance, tf.math.reduce_variance), the reduction added as a record
(ir/ops/reduce.py: its mean as the shift, then the sum of squared deviations), on GL
against float64 numpy and the numpy reference executor: every kind of pass (rows,
4-aligned columns into render targets, other strides, several reduced runs), trees of
small windows, sizes not a multiple of 4, 1-element and empty axes, keepdims, NaN,
infinities, negatives, zeros; its gradient against finite differences, second order
too; int32 refused."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.errors import DTypeError
from tests.gradcheck import check_gradients
from tests.ops.test_reduce_tree import SHRUNK
from tests.reference import assert_matches, run_both

inf, nan = np.inf, np.nan


def var64(x, axis, keepdims=False):
    """Population variance in float64: mean((x - mean(x))^2), NaN for NaN, inf or none."""
    wide = x.astype(np.float64)
    axes = tuple(range(x.ndim)) if axis is None else \
        (axis,) if isinstance(axis, int) else tuple(axis)
    if any(x.shape[a] == 0 for a in axes):
        shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape)) if keepdims \
            else tuple(d for a, d in enumerate(x.shape) if a not in axes)
        return np.full(shape, nan, np.float32)
    with np.errstate(invalid="ignore"):
        mean = wide.mean(axis=axes, keepdims=True)
        out = ((wide - mean) ** 2).mean(axis=axes, keepdims=keepdims)
    return out.astype(np.float32)


def check(cases, tuning=None):
    """cases: {label: (data, axis, keepdims)}; GL against float64 and the executor."""
    g = ff.Graph()
    with g.as_default():
        feeds, fetches = {}, {}
        for label, (data, axis, keep) in cases.items():
            x = ff.placeholder(data.shape, name=label.replace(" ", "_"))
            feeds[x] = data
            fetches[label] = ff.reduce_variance(x, axis=axis, keepdims=keep)
    out, ref = run_both(g, fetches, feeds, tuning=tuning)
    for label, (data, axis, keep) in cases.items():
        want = var64(data, axis, keep)
        scale = 0.0
        if data.size:
            with np.errstate(invalid="ignore"):
                scale = np.nan_to_num(np.square(data.astype(np.float64)).mean(
                    axis=axis, keepdims=keep))
        assert_matches(out[label], want, rtol=1e-4, atol=1e-5 * (1 + scale),
                       what=f"{label} (float64)")
        assert_matches(out[label], ref[label], rtol=1e-4, atol=1e-5 * (1 + scale),
                       what=f"{label} (executor)")
    return out


def test_variance_over_every_kind_of_pass(gl):
    rng = np.random.default_rng(40)
    rows = rng.uniform(-3, 3, (3, 4097)).astype(np.float32)        # rows, unaligned
    cols4 = (rng.standard_normal((5003, 12)) + 5).astype(np.float32)   # columns, offset
    cols3 = rng.uniform(-2, 2, (2, 999, 3)).astype(np.float32)     # other stride
    mixed = rng.uniform(-2, 2, (7, 5, 30)).astype(np.float32)       # two reduced runs
    check({"rows": (rows, 1, False), "rows all": (rows, None, False),
           "cols4": (cols4, 0, True), "cols3": (cols3, 1, False),
           "mixed": (mixed, (0, 2), True), "mixed last": (mixed, -1, False)})


def test_variance_in_trees_of_small_windows(gl):
    """The tuning's windows of 4-8 elements: 37 elements take trees of passes (texel
    passes along rows, render targets down columns)."""
    rng = np.random.default_rng(41)
    data = rng.standard_normal((6, 37)).astype(np.float32)
    aligned = rng.standard_normal((37, 32)).astype(np.float32)
    flat = rng.uniform(-1, 1, 256).astype(np.float32)
    check({"rows": (data, 1, False), "cols": (data, 0, True), "all": (data, None, False),
           "aligned cols": (aligned, 0, False), "flat": (flat, 0, False)}, tuning=SHRUNK)


def test_nan_infinities_negatives_zeros_and_edges(gl):
    data = np.random.default_rng(42).uniform(-5, 5, (7, 13)).astype(np.float32)
    data[0, 4] = nan                      # NaN: NaN
    data[1, 0] = inf                      # an infinite element: NaN (inf - inf)
    data[2, 3], data[2, 9] = inf, -inf
    data[3, :] = 0.0                      # zeros: 0
    data[4, :] = -2.5                     # a constant row: 0
    data[5, :] = -np.arange(13)           # negatives
    ones = np.float32([[1.5], [-2.0], [nan]])
    empty = np.zeros((3, 0), np.float32)
    out = check({"rows": (data, 1, False), "cols": (data, 0, True), "all": (data, None, True),
                 "one element": (ones, 1, False), "empty": (empty, 1, True)})
    rows = out["rows"]
    assert np.isnan(rows[:3]).all() and rows[3] == 0 and abs(rows[4]) < 1e-6
    np.testing.assert_allclose(rows[5], np.var(np.arange(13.0)), rtol=1e-5)
    assert out["one element"][0] == 0 and np.isnan(out["one element"][2])
    assert out["empty"].shape == (3, 1) and np.isnan(out["empty"]).all()


def test_int32_is_refused():
    g = ff.Graph()
    with g.as_default(), pytest.raises(DTypeError, match="float32"):
        ff.reduce_variance(ff.placeholder((3, 4), "int32"), axis=1)


def test_variance_is_one_node():
    g = ff.Graph()
    with g.as_default():
        y = ff.math.reduce_variance(ff.placeholder((4, 5), name="x"), axis=0)
    assert y.value.node.op == "variance"


def test_variance_gradients_match_finite_differences(gl):
    rng = np.random.default_rng(43)
    x = rng.standard_normal((5, 7)).astype(np.float32)
    check_gradients(lambda t: ff.reduce_variance(t, axis=1), {"x": x})
    check_gradients(lambda t: ff.reduce_variance(t, axis=(0, 1), keepdims=True) * t,
                    {"x": x}, second_order=True)
    check_gradients(lambda t: ff.reduce_variance(t * t, axis=0), {"x": x}, tuning=SHRUNK)
