"""Reductions (sum, mean, max, min, prod) and argmax/argmin on GL against the numpy
reference executor, whose semantics ir/ops/reduce.py documents (wrapping int sums,
truncating int mean, identities for empty reductions, NaN propagation).

Each test builds one graph holding many fetches: every kernel is a shader that llvmpipe
compiles (~100 ms), so the file groups them.
"""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, run_both

REDUCTIONS = {"sum": ff.sum, "mean": ff.mean, "max": ff.max, "min": ff.min,
              "prod": ff.prod}
I32_MIN, I32_MAX = -2 ** 31, 2 ** 31 - 1

# Reductions are held to 1e-4 relative. Sums and means are also allowed 1e-4 of the
# sum of |x| (their condition number): cancellation can make the result tiny.
RTOL = 1e-4


def reduce_scale(op, x, axis, keepdims):
    """The atol scale of a reduction: sum(|x|) (mean(|x|) for mean), None otherwise."""
    if op not in ("sum", "mean") or x.dtype != np.float32:
        return None
    fn = np.sum if op == "sum" else np.mean
    with np.errstate(invalid="ignore"):
        return fn(np.abs(x.astype(np.float64)), axis=axis, keepdims=keepdims)


def check_all(graph, fetches, feed_dict, scales=None):
    """Run fetches ({label: tensor}) on GL and numpy; compare each."""
    out, ref = run_both(graph, fetches, feed_dict)
    for label in fetches:
        assert_matches(out[label], ref[label], rtol=RTOL,
                       scale=None if scales is None else scales.get(label), what=label)
    return out, ref


AXES = [None, 0, -2, (0, 2), (-1, 1)]


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_reductions_over_axes_and_keepdims(gl, dtype):
    rng = np.random.default_rng(1)
    shape = (3, 5, 7)                      # nothing a multiple of 4
    if dtype == "float32":
        data = rng.uniform(-2, 2, shape).astype(np.float32)
    else:
        data = rng.integers(-9, 10, shape).astype(np.int32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(shape, dtype, name="x")
        fetches, scales = {}, {}
        for op, fn in REDUCTIONS.items():
            for axis in AXES:
                for keep in (False, True):
                    label = f"{op}(axis={axis}, keepdims={keep})"
                    fetches[label] = fn(x, axis=axis, keepdims=keep)
                    scales[label] = reduce_scale(op, data, axis, keep)
    out, ref = check_all(g, fetches, {x: data}, scales)
    # The reference itself is numpy's: guard against both being wrong the same way.
    np.testing.assert_allclose(out["max(axis=(0, 2), keepdims=True)"],
                               data.max(axis=(0, 2), keepdims=True))
    assert out["sum(axis=None, keepdims=True)"].shape == (1, 1, 1)
    assert out["min(axis=(-1, 1), keepdims=False)"].shape == (3,)
    assert out["mean(axis=-2, keepdims=False)"].shape == (3, 7)


def test_int32_sum_wraps_and_mean_truncates(gl):
    rng = np.random.default_rng(2)
    big = rng.integers(I32_MIN, I32_MAX, (4, 9), dtype=np.int64).astype(np.int32)
    big[0, :] = I32_MAX                    # a row whose sum overflows upwards
    big[1, :] = I32_MIN                    # and downwards
    small = rng.integers(-50, 50, (6, 7)).astype(np.int32)
    small[0] = [-7, -1, -1, 0, 0, 0, 0]    # mean -9/7: truncates to -1 (floor is -2)
    small[1] = [7, 1, 1, 0, 0, 0, 0]
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(big.shape, "int32", name="x")
        y = ff.placeholder(small.shape, "int32", name="y")
        fetches = {"sum1": ff.sum(x, 1), "sum0": ff.sum(x, 0), "sum": ff.sum(x),
                   "mean1": ff.mean(x, 1), "mean": ff.mean(x), "prod1": ff.prod(x, 1),
                   "max": ff.max(x, 1), "min": ff.min(x, 0),
                   "small_mean1": ff.mean(y, 1), "small_mean0": ff.mean(y, 0)}
    out, _ = check_all(g, fetches, {x: big, y: small})
    with np.errstate(over="ignore"):
        assert out["sum1"][0] == np.int32(np.sum(big[0], dtype=np.int32))
    assert out["small_mean1"][0] == -1 and out["small_mean1"][1] == 1


def test_nan_and_infinities(gl):
    rng = np.random.default_rng(3)
    data = rng.uniform(-3, 3, (6, 9)).astype(np.float32)
    data[0, 3] = np.nan                    # NaN among finite values
    data[1, 2] = np.inf
    data[2, 5] = -np.inf
    data[3, 0], data[3, 8] = np.inf, -np.inf          # inf - inf: NaN for sums
    data[4, 4], data[4, 6] = np.nan, np.inf
    data[5, 0] = np.nan                    # NaN first: max/min must not drop it
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, "float32", name="x")
        fetches = {f"{op}(axis={axis})": fn(x, axis=axis)
                   for op, fn in REDUCTIONS.items() for axis in (None, 0, 1)}
    out, _ = check_all(g, fetches, {x: data})
    assert np.isnan(out["max(axis=1)"][[0, 4, 5]]).all()
    assert np.isnan(out["min(axis=1)"][[0, 4, 5]]).all()
    assert out["max(axis=1)"][1] == np.inf and out["min(axis=1)"][2] == -np.inf
    assert np.isnan(out["sum(axis=1)"][3])


def test_empty_reductions_give_the_identity(gl):
    g = ff.Graph()
    with g.as_default():
        xf = ff.placeholder((3, 0, 5), "float32", name="xf")
        xi = ff.placeholder((3, 0, 5), "int32", name="xi")
        fetches = {}
        for op, fn in REDUCTIONS.items():
            for name, x in (("f", xf), ("i", xi)):
                fetches[f"{op}_{name}(axis=1)"] = fn(x, axis=1)
                fetches[f"{op}_{name}(axis=None)"] = fn(x)
                fetches[f"{op}_{name}(axis=(0, 1), keep)"] = fn(x, axis=(0, 1), keepdims=True)
                fetches[f"{op}_{name}(axis=2)"] = fn(x, axis=2)       # empty output
    feeds = {xf: np.zeros((3, 0, 5), np.float32), xi: np.zeros((3, 0, 5), np.int32)}
    out, _ = check_all(g, fetches, feeds)
    assert (out["sum_f(axis=1)"] == 0).all() and (out["prod_i(axis=1)"] == 1).all()
    assert (out["max_f(axis=None)"] == -np.inf) and (out["min_i(axis=1)"] == I32_MAX).all()
    assert (out["max_i(axis=1)"] == I32_MIN).all() and (out["mean_i(axis=1)"] == 0).all()
    assert np.isnan(out["mean_f(axis=1)"]).all() and np.isnan(out["mean_f(axis=None)"])
    assert out["sum_f(axis=2)"].shape == (3, 0)


def test_long_axes_hold_1e_4(gl):
    """~100k elements per output: Kahan summation against numpy's pairwise sum, and every
    element actually visited (max/argmax of a value placed at the very end)."""
    rng = np.random.default_rng(4)
    n = 100_003
    tenths = np.full(n, 0.1, np.float32)   # a plain float32 running sum is 1.4e-4 off here
    noisy = (rng.standard_normal((3, n)) + 3.0).astype(np.float32)
    cancel = rng.standard_normal((2, n)).astype(np.float32)          # sum ~ sqrt(n)
    ends = rng.uniform(-1, 1, (5, n)).astype(np.float32)
    ends[:, -1] = 7.0                       # the extremum is the last element
    ints = rng.integers(-1000, 1000, (4, n)).astype(np.int32)
    g = ff.Graph()
    with g.as_default():
        t = ff.placeholder(tenths.shape, "float32", name="t")
        x = ff.placeholder(noisy.shape, "float32", name="x")
        c = ff.placeholder(cancel.shape, "float32", name="c")
        e = ff.placeholder(ends.shape, "float32", name="e")
        k = ff.placeholder(ints.shape, "int32", name="k")
        fetches = {"sum(tenths)": ff.sum(t), "mean(tenths)": ff.mean(t),
                   "sum(noisy, 1)": ff.sum(x, 1), "mean(noisy)": ff.mean(x),
                   "sum(noisy^T, 0)": ff.sum(ff.transpose(x), 0),
                   "sum(cancel, -1)": ff.sum(c, -1), "max(ends, 1)": ff.max(e, 1),
                   "argmax(ends, 1)": ff.argmax(e, 1), "min(-ends, 1)": ff.min(-e, 1),
                   "sum(ints, 1)": ff.sum(k, 1), "max(ints)": ff.max(k)}
    scales = {"sum(cancel, -1)": np.abs(cancel.astype(np.float64)).sum(-1)}
    out, ref = check_all(g, fetches, {t: tenths, x: noisy, c: cancel, e: ends, k: ints},
                         scales)
    exact = tenths.astype(np.float64).sum()
    assert abs(out["sum(tenths)"] - exact) <= 1e-5 * exact     # Kahan is not undone
    assert (out["argmax(ends, 1)"] == n - 1).all()
    np.testing.assert_allclose(out["sum(noisy, 1)"], noisy.astype(np.float64).sum(1),
                               rtol=1e-5)


def test_argmax_argmin(gl):
    rng = np.random.default_rng(5)
    data = rng.integers(-3, 4, (5, 6, 7)).astype(np.float32)        # many ties
    ties = np.array([[1, 3, 3, 0, 3], [2, 2, 2, 2, 2], [-1, -5, 4, -5, 4]], np.float32)
    nans = np.array([[np.nan, 1, np.nan, 9], [1, np.nan, 5, np.nan], [np.inf, np.inf, 1, 2],
                     [-np.inf, 0, -np.inf, np.nan], [2, 3, 3, np.nan]], np.float32)
    ints = rng.integers(I32_MIN, I32_MAX, (4, 9), dtype=np.int64).astype(np.int32)
    ints[0, 2] = ints[0, 6] = I32_MAX
    ints[1, 1] = ints[1, 5] = I32_MIN
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, "float32", name="x")
        xi = ff.placeholder(data.shape, "int32", name="xi")
        t = ff.placeholder(ties.shape, "float32", name="t")
        n = ff.placeholder(nans.shape, "float32", name="n")
        k = ff.placeholder(ints.shape, "int32", name="k")
        fetches = {}
        for fname, fn in (("argmax", ff.argmax), ("argmin", ff.argmin)):
            for axis in (0, -1, -3):
                fetches[f"{fname}(x, {axis})"] = fn(x, axis)
            fetches[f"{fname}(xi, -2)"] = fn(xi, -2)
            fetches[f"{fname}(ties, 1)"] = fn(t, 1)
            fetches[f"{fname}(ties, 0)"] = fn(t, 0)
            fetches[f"{fname}(nans, 1)"] = fn(n, 1)
            fetches[f"{fname}(nans, 0)"] = fn(n, 0)
            fetches[f"{fname}(ints, 1)"] = fn(k, 1)
        fetches["argmax(x[:, ::-1], 1)"] = ff.argmax(x[:, ::-1], 1)
    out, _ = check_all(g, fetches, {x: data, xi: data.astype(np.int32), t: ties, n: nans,
                                    k: ints})
    assert out["argmax(x, -1)"].dtype == np.int32 and out["argmax(x, -1)"].shape == (5, 6)
    np.testing.assert_array_equal(out["argmax(ties, 1)"], [1, 0, 2])     # first on ties
    np.testing.assert_array_equal(out["argmin(ties, 1)"], [3, 0, 1])
    np.testing.assert_array_equal(out["argmax(nans, 1)"], [0, 1, 0, 3, 3])  # NaN wins
    np.testing.assert_array_equal(out["argmin(nans, 1)"], [0, 1, 2, 3, 3])
    assert out["argmax(ints, 1)"][0] == 2 and out["argmin(ints, 1)"][1] == 1


def test_build_time_errors(gl):
    g = ff.Graph()
    with g.as_default():
        b = ff.placeholder((2, 3), "bool", name="b")
        x = ff.placeholder((2, 0), "float32", name="x")
        with pytest.raises(ff.DTypeError, match=r"sum .*test_reduce\.py:\d+"):
            ff.sum(b)
        assert ff.argmax(b, 0).dtype == "int32"     # bools count as 0 / 1, as TF (issue 15)
        with pytest.raises(ff.ShapeError, match="empty axis"):
            ff.argmax(x, 1)
        with pytest.raises(ff.ShapeError):
            ff.max(x, axis=2)
        with pytest.raises(ff.ShapeError):
            ff.argmin(x, axis=(0, 1))
