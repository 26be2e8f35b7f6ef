"""The math family on GL: against the numpy reference executor (edge values: NaN, +-inf,
signed zeros, the singular points) and, for the precision claims, against float64
numpy formulas written here, independently of the ops' references.

Each unary op runs once on one tensor that holds a wide sweep of its domain and the
edge values, so the file compiles one shader per op. MEASURED is the worst relative
error seen on llvmpipe over 200,000-point sweeps of the same ranges (the tests allow
2x). All are under 5e-7: the kernels reduce exp's argument themselves (ff_exp), as
llvmpipe's exp loses up to 4e-6 at |x| ~ 88.
"""
import math
import os

import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, run_both

THIS_FILE = os.path.basename(__file__)
NAN, INF = np.nan, np.inf
TINY = 1.2e-38              # below this GLSL may flush (subnormals are out of scope)
SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946

FLOAT_EDGES = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -3.0, 10.0, 1e-30,
               -1e-30, 1.5e-38, 1e30, -1e30, 3.4e38, -3.4e38]

MEASURED = {
    "acos": 1.4e-7, "asin": 2.7e-7, "atan": 2.0e-7, "acosh": 3.5e-7, "asinh": 3.1e-7,
    "atanh": 3.0e-7, "sinh": 4.3e-7, "cosh": 3.1e-7, "tan": 2.2e-7, "erf": 1.9e-7,
    "expm1": 4.8e-7, "log1p": 2.8e-7, "softplus": 4.1e-7, "elu": 3.0e-7, "selu": 3.0e-7,
    "atan2": 1.8e-7, "softsign": 1.2e-7,
}


def rng_for(*key):
    return np.random.default_rng([ord(c) for c in repr(key)])


def log_uniform(rng, lo, hi, n, signed=True):
    """Magnitudes 10**lo .. 10**hi, both signs when signed."""
    m = 10.0 ** rng.uniform(lo, hi, n)
    return m * rng.choice([-1.0, 1.0], n) if signed else m


def _erf64(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


# Finite-difference gradient inputs: intervals away from kinks and singular points
# (tests/autodiff/test_math_gradients.py checks every op with them, second order too).
AWAY_FROM_0 = [(-2.0, -0.2), (0.2, 2.0)]

# op: (float64 formula, sweep(rng) -> values, extra edge values, gradient input
# intervals). One row holds all of an op's test data. The sweeps cover the
# places where naive formulas lose digits: next to 0 (expm1, log1p, sinh, asinh, atanh,
# erf), next to 1 (acosh, acos, atanh), next to tan's poles, large |x|.
UNARY = {
    "acos": (np.arccos, lambda r: np.concatenate([
        r.uniform(-1, 1, 4000), log_uniform(r, -30, 0, 2000),
        1 - log_uniform(r, -7.3, -0.3, 1000, False), log_uniform(r, -7.3, -0.3, 1000, False) - 1]),
        [1.0, -1.0, 0.99999994, -0.99999994, 1.0000001, -1.5], [(-0.8, 0.8)]),
    "asin": (np.arcsin, lambda r: np.concatenate([
        r.uniform(-1, 1, 4000), log_uniform(r, -30, 0, 2000),
        1 - log_uniform(r, -7.3, -0.3, 1000, False)]),
        [0.99999994, 1.0000001, 0.5, -0.5], [(-0.8, 0.8)]),
    "atan": (np.arctan, lambda r: np.concatenate([
        r.uniform(-10, 10, 4000), log_uniform(r, -30, 30, 4000)]),
        [0.41421357, 2.4142137, 1e-20], [(-3, 3)]),
    "acosh": (np.arccosh, lambda r: np.concatenate([
        1 + log_uniform(r, -7, 1, 4000, False), log_uniform(r, 0, 38, 4000, False)]),
        [1.0, 1.0000001, 0.99999994, 4096.0, 4097.0, 3e38], [(1.2, 4.0)]),
    "asinh": (np.arcsinh, lambda r: np.concatenate([
        r.uniform(-10, 10, 4000), log_uniform(r, -30, 38, 4000)]),
        [4096.0, -4097.0, 1e-20], [(-3, 3)]),
    "atanh": (np.arctanh, lambda r: np.concatenate([
        r.uniform(-1, 1, 4000), log_uniform(r, -30, 0, 2000),
        1 - log_uniform(r, -7.3, -0.3, 2000, False)]),
        [0.99999994, -0.99999994, 1.0000001, 0.25, -0.25], [(-0.8, 0.8)]),
    "sinh": (np.sinh, lambda r: np.concatenate([
        r.uniform(-89, 89, 4000), log_uniform(r, -30, 1.95, 4000)]),
        [9.0, -9.0, 88.0, 89.4, -89.4, 90.0, 0.5, 1e-20], [(-3, 3)]),
    "cosh": (np.cosh, lambda r: np.concatenate([
        r.uniform(-89, 89, 4000), log_uniform(r, -30, 1.95, 4000)]),
        [9.0, -9.0, 88.0, 89.4, -89.4, 90.0, 1e-20], [(-3, 3)]),
    # accurate for |x| < 8192 (Cody-Waite reduction); next to the poles as well
    "tan": (np.tan, lambda r: np.concatenate([
        r.uniform(-10, 10, 3000), r.uniform(-8000, 8000, 3000), log_uniform(r, -30, 3.9, 2000),
        np.pi / 2 + r.uniform(-1e-3, 1e-3, 1000), 3 * np.pi / 2 + r.uniform(-1e-4, 1e-4, 1000)]),
        [1.5707964, -1.5707964, 4.712389, 0.7853982, 8191.0, -8000.0], [(-1.2, 1.2)]),
    "erf": (_erf64, lambda r: np.concatenate([
        r.uniform(-5, 5, 4000), log_uniform(r, -30, 1, 4000)]),
        [0.99999994, 1.0, 1.0000001, 3.9999998, 4.0, -4.0, 1e-20], [(-2, 2)]),
    "expm1": (np.expm1, lambda r: np.concatenate([
        r.uniform(-20, 88, 4000), log_uniform(r, -30, 1.9, 4000)]),
        [0.49999997, 0.5, -0.5, 88.7, 89.0, -104.0, 1e-20], [(-3, 3)]),
    "log1p": (np.log1p, lambda r: np.concatenate([
        r.uniform(-1, 10, 3000), log_uniform(r, -30, 38, 3000, False),
        -log_uniform(r, -30, -1e-7, 2000, False)]),
        [-1.0, -0.99999994, -1.5, 0.25, -0.25, 0.24999999, 1e-20], [(-0.7, 3)]),
    # below x = -87.3 the result is subnormal (flushed to 0, out of scope)
    "softplus": (lambda x: np.logaddexp(0, x), lambda r: np.concatenate([
        r.uniform(-80, 80, 4000), log_uniform(r, -30, 1.9, 2000), log_uniform(r, 2, 38, 2000)]),
        [88.0, -86.0, 1e-20, -100.0], [(-4, 4)]),
    "elu": (lambda x: np.where(x < 0, np.expm1(x), x), lambda r: np.concatenate([
        r.uniform(-20, 20, 4000), log_uniform(r, -30, 38, 4000)]), [-1e-20, -100.0], AWAY_FROM_0),
    "selu": (lambda x: SELU_SCALE * np.where(x > 0, x, SELU_ALPHA * np.expm1(x)),
             lambda r: np.concatenate([r.uniform(-20, 20, 4000), log_uniform(r, -30, 37, 4000)]),
             [-1e-20, -100.0], AWAY_FROM_0),
    # 1 + |x| rounds above 2**24; the division by 1 + |x| ~ 3.4e38 must not flush
    "softsign": (lambda x: x / (1 + np.abs(x)), lambda r: np.concatenate([
        r.uniform(-10, 10, 4000), log_uniform(r, -30, 38, 4000)]),
        [16777215.0, -16777217.0, 1e-20, 3e38, -3e38], [(-5, -0.2), (0.2, 5)]),
}


def _worst_relative(got, want64):
    """The worst |got - want| / |want| where the float32 truth is a normal number."""
    with np.errstate(over="ignore"):
        want32 = want64.astype(np.float32)
    ok = np.isfinite(want32) & (np.abs(want32) >= TINY)
    got64 = got.astype(np.float64)
    rel = np.abs(got64[ok] - want64[ok]) / np.abs(want64[ok])
    i = int(np.argmax(rel))
    return rel[i], i, ok


@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_math_matches_reference_and_float64(gl, op):
    formula, sweep, extra, _ = UNARY[op]
    rng = rng_for("math", op)
    edges = np.float32(FLOAT_EDGES)
    if op == "tan":     # float32 tan of |x| >= 8192 is noise: its ulp is > 2 pi / 8000
        edges = edges[~(np.abs(edges) >= 8192)]
    values = np.concatenate([sweep(rng), edges, extra]).astype(np.float32)
    values = values[~((np.abs(values) < TINY) & (values != 0))]     # no subnormals
    values = rng.permutation(values)[: 4 * (values.size // 4) - 1]    # a partial texel
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(values.shape, name="x")
        y = getattr(ff, op)(x)
    assert y.dtype == "float32" and y.shape == values.shape
    out, ref = run_both(g, {op: y}, {x: values})
    assert_matches(out[op], ref[op], rtol=1e-5, what=op)
    # the precision claim: relative error with no absolute slack, against float64
    with np.errstate(all="ignore"):
        want = formula(values.astype(np.float64))
    worst, i, ok = _worst_relative(out[op], want)
    bound = min(2 * MEASURED[op], 1e-5)
    assert worst <= bound, (f"{op}: relative error {worst:.3g} at x={values[ok][i]!r} "
                            f"(got {out[op][ok][i]!r}, want {want[ok][i]!r})")
    # NaN and infinities where float64 says so
    with np.errstate(over="ignore"):
        want32 = want.astype(np.float32)
    special = ~np.isfinite(want32)
    np.testing.assert_array_equal(out[op][special], want32[special])


def test_expm1_and_log1p_keep_full_precision_next_to_zero(gl):
    """Where exp(x) - 1 and log(1 + x) would lose every digit."""
    x_val = np.float32([1e-7, -1e-7, 3e-10, -3e-10, 1e-20, 2.5e-4, -2.5e-4, 0.3, -0.3])
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(x_val.shape, name="x")
        ys = {"expm1": ff.expm1(x), "log1p": ff.log1p(x), "asinh": ff.asinh(x),
              "atanh": ff.atanh(x), "sinh": ff.sinh(x), "erf": ff.erf(x), "tan": ff.tan(x),
              "asin": ff.asin(x), "atan": ff.atan(x), "elu": ff.elu(-ff.abs(x))}
    with ff.Session(g) as sess:
        out = sess.run(ys, {x: x_val})
    x64 = x_val.astype(np.float64)
    want = {"expm1": np.expm1(x64), "log1p": np.log1p(x64), "asinh": np.arcsinh(x64),
            "atanh": np.arctanh(x64), "sinh": np.sinh(x64), "erf": _erf64(x64),
            "tan": np.tan(x64), "asin": np.arcsin(x64), "atan": np.arctan(x64),
            "elu": np.expm1(-np.abs(x64))}
    for op, w in want.items():
        np.testing.assert_allclose(out[op], w, rtol=1e-6, atol=0, err_msg=op)


def test_predicates_are_bool_and_exact(gl):
    x_val = np.float32(FLOAT_EDGES + [7.0, -0.25])
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(x_val.shape, name="x")
        ys = {"is_nan": ff.is_nan(x), "is_inf": ff.is_inf(x), "is_finite": ff.is_finite(x)}
    assert all(y.dtype == "bool" for y in ys.values())
    out, ref = run_both(g, ys, {x: x_val})
    np.testing.assert_array_equal(out["is_nan"], np.isnan(x_val))
    np.testing.assert_array_equal(out["is_inf"], np.isinf(x_val))
    np.testing.assert_array_equal(out["is_finite"], np.isfinite(x_val))
    for k in ys:
        assert_matches(out[k], ref[k], what=k)


def test_activations_follow_their_definitions(gl):
    """relu6, leaky_relu (TensorFlow's default alpha 0.2 and another), step (alpha 0 and
    another) against numpy formulas; NaN stays NaN in all of them."""
    rng = rng_for("activations")
    x_val = np.concatenate([np.float32(FLOAT_EDGES + [6.0, 5.999, 6.001, -1e-3]),
                            rng.uniform(-10, 10, 201).astype(np.float32)])
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(x_val.shape, name="x")
        ys = {"relu6": ff.relu6(x), "leaky_default": ff.leaky_relu(x),
              "leaky_0.01": ff.leaky_relu(x, alpha=0.01), "step": ff.step(x),
              "step_-2": ff.step(x, alpha=-2.0)}
    out, ref = run_both(g, ys, {x: x_val})
    with np.errstate(invalid="ignore"):
        nan = np.isnan(x_val)
        want = {"relu6": np.where(nan, NAN, np.minimum(np.maximum(x_val, 0), 6)),
                "leaky_default": np.where(x_val > 0, x_val, np.float32(0.2) * x_val),
                "leaky_0.01": np.where(x_val > 0, x_val, np.float32(0.01) * x_val),
                "step": np.where(nan, NAN, np.where(x_val > 0, 1.0, 0.0)),
                "step_-2": np.where(nan, NAN, np.where(x_val > 0, 1.0, -2.0))}
    for k in ys:
        assert_matches(out[k], ref[k], what=k)
        assert_matches(out[k], want[k].astype(np.float32), what=k + " vs formula")


def test_int32_relu6_squared_difference_and_clip_are_exact(gl):
    rng = rng_for("int32")
    i_val = np.concatenate([np.int32([-2 ** 31, 2 ** 31 - 1, 0, 6, 7, -1, 5, 46341]),
                            rng.integers(-20, 20, 93).astype(np.int32)])
    j_val = rng.integers(-5, 5, i_val.size).astype(np.int32)
    g = ff.Graph()
    with g.as_default():
        i = ff.placeholder(i_val.shape, "int32", name="i")
        j = ff.placeholder(j_val.shape, "int32", name="j")
        ys = {"relu6": ff.relu6(i), "squared_difference": ff.squared_difference(i, j),
              "clip": ff.clip_by_value(i, -3, j + 4), "clip_scalars": ff.clip_by_value(i, 0, 9)}
    assert all(y.dtype == "int32" for y in ys.values())
    out, ref = run_both(g, ys, {i: i_val, j: j_val})
    i64, j64 = i_val.astype(np.int64), j_val.astype(np.int64)
    want = {"relu6": np.clip(i64, 0, 6),
            "squared_difference": ((i64 - j64) ** 2 + 2 ** 31) % 2 ** 32 - 2 ** 31,  # wraps
            "clip": np.maximum(np.minimum(i64, j64 + 4), -3),
            "clip_scalars": np.clip(i64, 0, 9)}
    for k in ys:
        assert_matches(out[k], ref[k], what=k)
        np.testing.assert_array_equal(out[k], want[k].astype(np.int32), err_msg=k)


def test_atan2_special_cases_and_quadrants(gl):
    """Every pair of edge values (C's special cases: signed zeros, infinities), then
    random points in all four quadrants."""
    rng = rng_for("atan2")
    edges = np.float32([NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 2.5, -1e-3])
    y_e, x_e = np.repeat(edges, edges.size), np.tile(edges, edges.size)
    y_r, x_r = log_uniform(rng, -20, 20, 3000), log_uniform(rng, -20, 20, 3000)
    y_val = np.concatenate([y_e, y_r]).astype(np.float32)
    x_val = np.concatenate([x_e, x_r]).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        y = ff.placeholder(y_val.shape, name="y")
        x = ff.placeholder(x_val.shape, name="x")
        a = ff.atan2(y, x)
    out, ref = run_both(g, {"atan2": a}, {y: y_val, x: x_val})
    assert_matches(out["atan2"], ref["atan2"], what="atan2")
    want = np.arctan2(y_val.astype(np.float64), x_val.astype(np.float64))
    # the special cases (a NaN, infinite or zero operand) exactly, signed zeros included
    special = ~np.isfinite(y_val) | ~np.isfinite(x_val) | (y_val == 0) | (x_val == 0)
    assert special.sum() == 81 - 16       # pairs with a NaN, inf or zero in them
    np.testing.assert_array_equal(out["atan2"][special], want[special].astype(np.float32))
    np.testing.assert_array_equal(np.signbit(out["atan2"][special]), np.signbit(want[special]))
    worst, _, _ = _worst_relative(out["atan2"][~special], want[~special])
    assert worst <= 2 * MEASURED["atan2"]


def test_binary_math_broadcasts(gl):
    """squared_difference and prelu (alpha per channel, as Keras' PReLU) broadcast."""
    rng = rng_for("binary")
    x_val = rng.uniform(-5, 5, (4, 5, 3)).astype(np.float32)
    x_val.flat[:6] = [NAN, INF, -INF, 0.0, -0.0, 1e30]
    a_val = np.float32([0.25, -0.5, NAN])
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(x_val.shape, name="x")
        a = ff.placeholder(a_val.shape, name="alpha")
        ys = {"prelu": ff.prelu(x, a), "squared_difference": ff.squared_difference(x, a),
              "sqdiff_scalar": ff.squared_difference(2.0, x)}
    assert ys["prelu"].shape == (4, 5, 3)
    out, ref = run_both(g, ys, {x: x_val, a: a_val})
    with np.errstate(invalid="ignore", over="ignore"):
        want = {"prelu": np.where(x_val > 0, x_val, a_val * x_val),
                "squared_difference": np.square(x_val - a_val),
                "sqdiff_scalar": np.square(np.float32(2) - x_val)}
    for k in ys:
        assert_matches(out[k], ref[k], what=k)
        assert_matches(out[k], want[k].astype(np.float32), what=k + " vs formula")


def test_clip_by_value_bounds_broadcast_and_propagate_nan(gl):
    rng = rng_for("clip")
    t_val = rng.uniform(-4, 4, (3, 7)).astype(np.float32)
    t_val[0, :5] = [NAN, INF, -INF, -0.0, 2.0]
    lo_val = np.float32([-1, -2, 0, NAN, 1, -3, 3])     # NaN bound: NaN, as TensorFlow
    hi_val = np.float32([[1], [0.5], [-1]])             # row 2: max < min gives min
    g = ff.Graph()
    with g.as_default():
        t = ff.placeholder(t_val.shape, name="t")
        lo = ff.placeholder(lo_val.shape, name="lo")
        hi = ff.placeholder(hi_val.shape, name="hi")
        ys = {"tensors": ff.clip_by_value(t, lo, hi),
              "scalars": ff.clip_by_value(t, -1.5, 2.5),
              "mixed": ff.clip_by_value(t, lo, 10.0)}
    assert ys["tensors"].shape == (3, 7) and ys["tensors"].dtype == "float32"
    out, ref = run_both(g, ys, {t: t_val, lo: lo_val, hi: hi_val})
    with np.errstate(invalid="ignore"):
        want = {"tensors": np.maximum(np.minimum(t_val, hi_val), lo_val),
                "scalars": np.maximum(np.minimum(t_val, 2.5), -1.5),
                "mixed": np.maximum(np.minimum(t_val, 10.0), lo_val)}
    for k in ys:
        assert_matches(out[k], ref[k], what=k)
        assert_matches(out[k], want[k].astype(np.float32), what=k + " vs formula")


@pytest.mark.parametrize("args, kwargs, want", [
    ((5,), {}, np.arange(5)),
    ((3, 18, 4), {}, np.arange(3, 18, 4)),                 # 18 - 3 not a multiple of 4
    ((10, -7, -3), {}, np.arange(10, -7, -3)),
    ((4, 4), {}, np.arange(4, 4)),                         # empty
    ((-100000, 2 ** 31 - 10, 65536), {}, np.arange(-100000, 2 ** 31 - 10, 65536)),
    ((0.5, 3.0, 0.25), {}, np.arange(0.5, 3.0, 0.25)),
    ((-1.5, 2.0, 0.3), {}, -1.5 + np.arange(12) * 0.3),    # float32 for a float argument
    ((2, 9), {"dtype": "float32"}, np.arange(2.0, 9.0)),
    ((1000.0, -1000.0, -0.7), {}, 1000.0 - np.arange(2858) * 0.7),
])
def test_range_matches_numpy(gl, args, kwargs, want):
    g = ff.Graph()
    with g.as_default():
        r = ff.range(*args, **kwargs)
    float_result = "dtype" in kwargs or any(isinstance(a, float) for a in args)
    assert r.dtype == ("float32" if float_result else "int32")
    assert r.shape == (want.size,)
    out, ref = run_both(g, {"r": r})
    if float_result:
        # start + i * delta rounds twice: within float32's ulps of |start| + |i delta|,
        # and float32's delta is off by up to i ulps of it
        terms = abs(args[0]) + np.abs(want - args[0])
        assert_matches(out["r"], ref["r"], rtol=1e-6, scale=terms * 2, what="range")
        assert_matches(out["r"], want.astype(np.float32), rtol=1e-6, scale=terms * 2,
                       what="range vs numpy")
    else:
        assert_matches(out["r"], ref["r"], what="range")
        np.testing.assert_array_equal(out["r"], want.astype(np.int32))


@pytest.mark.parametrize("start, stop, num", [(0.0, 1.0, 5), (-3.0, 7.0, 11), (10.0, -2.5, 7),
                                               (2.0, 5.0, 1), (1.0, 2.0, 2), (-1.0, 1.0, 1001)])
def test_linspace_includes_stop(gl, start, stop, num):
    g = ff.Graph()
    with g.as_default():
        v = ff.linspace(start, stop, num)
    assert v.shape == (num,) and v.dtype == "float32"
    out, ref = run_both(g, {"v": v})
    want = np.linspace(start, stop, num)
    terms = abs(start) + np.abs(want - start)
    assert_matches(out["v"], ref["v"], rtol=1e-6, scale=terms * 2, what="linspace")
    assert_matches(out["v"], want.astype(np.float32), rtol=1e-6, scale=terms * 2,
                   what="linspace vs numpy")
    assert out["v"][0] == np.float32(start)
    if num > 1:
        assert out["v"][-1] == np.float32(stop)      # stop exactly, as TensorFlow


# -- errors ---------------------------------------------------------------------------------
def _build(fn):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3,), name="x")
        i = ff.placeholder((3,), "int32", name="i")
        b = ff.placeholder((3,), "bool", name="b")
        return fn(x, i, b)


@pytest.mark.parametrize("build, error, match", [
    (lambda x, i, b: ff.erf(i), ff.DTypeError, r"erf 'erf'.*does not accept int32"),
    (lambda x, i, b: ff.is_nan(i), ff.DTypeError, r"is_nan .*does not accept int32"),
    (lambda x, i, b: ff.atan2(i, i), ff.DTypeError, r"atan2 .*does not accept int32"),
    (lambda x, i, b: ff.relu6(b), ff.DTypeError, r"relu6 .*does not accept bool"),
    (lambda x, i, b: ff.leaky_relu(x, alpha="big"), ff.AttrError, r"alpha must be a Python number"),
    (lambda x, i, b: ff.step(x, alpha=None), ff.AttrError, r"step .*alpha must be"),
    (lambda x, i, b: ff.prelu(x, ff.ones((4,))), ff.ShapeError, r"cannot be broadcast"),
    (lambda x, i, b: ff.clip_by_value(x, ff.zeros((2, 3)), 1.0), ff.ShapeError,
     r"clip_by_value .*must broadcast to t's shape \(3,\)"),
    (lambda x, i, b: ff.clip_by_value(b, b, b), ff.DTypeError,
     r"clip_by_value .*does not accept bool"),
    (lambda x, i, b: ff.range(0, 5, 0), ff.AttrError, r"range .*delta must not be 0"),
    (lambda x, i, b: ff.range(5, 0, 1), ff.AttrError, r"must be <= limit"),
    (lambda x, i, b: ff.range(0, 5, -1), ff.AttrError, r"must be >= limit"),
    (lambda x, i, b: ff.range(0, 5.5, dtype="int32"), ff.AttrError, r"int32 range needs integer"),
    (lambda x, i, b: ff.range(x, 5), ff.AttrError, r"start must be a Python number"),
    (lambda x, i, b: ff.range(0, 5, dtype="bool"), ff.DTypeError, r"float32 or int32"),
    (lambda x, i, b: ff.linspace(0.0, 1.0, 0), ff.AttrError, r"linspace .*num must be a positive"),
    (lambda x, i, b: ff.linspace(0.0, 1.0, 2.5), ff.AttrError, r"num must be a positive integer"),
])
def test_bad_inputs_raise_clear_errors_at_the_users_line(build, error, match):
    with pytest.raises(error, match=match) as info:
        _build(build)
    assert THIS_FILE in str(info.value)
