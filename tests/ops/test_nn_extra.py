"""ff.gelu, ff.hard_swish, ff.layer_normalization, ff.instance_normalization
(frontend/ops_nn_extra.py): GL and the numpy executor against float64 formulas written
here (math.erf, explicit means), on data with negatives, zeros, NaN, infinities, sizes
that are not multiples of 4, 1-element axes and a large size; gradients (first and
second order) against finite differences; the activations fuse into one kernel."""
from __future__ import annotations

import math

import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients
from tests.reference import assert_matches, fed_placeholders

RNG = np.random.default_rng(14)
EDGES = np.float32([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 3.0, -3.0, 2.999, -3.001, 1e-20,
                    -1e-20, 6.0, -6.0, 30.0, -30.0, 1e4, -1e4, np.nan])


def _run_both(build, *arrays):
    """{"numpy": the numpy executor on the graph as built, "gl": GL with every pass} of
    build(*placeholders) fed with arrays (constants would be folded by the reference)."""
    g = ff.Graph()
    with g.as_default():
        feeds, feed = fed_placeholders(arrays)
        out = build(*feeds)
    return {"numpy": ff.Session(g, backend="numpy", passes=[]).run(out, feed),
            "gl": ff.Session(g).run(out, feed)}


def _check(build, want, *arrays, rtol=1e-5, atol=1e-6):
    for backend, got in _run_both(build, *arrays).items():
        wants = want if isinstance(want, (list, tuple)) else [want]
        gots = got if isinstance(got, (list, tuple)) else [got]
        for g_, w_ in zip(gots, wants):
            assert_matches(g_, np.asarray(w_, np.float32), rtol=rtol, atol=atol,
                           what=backend)


def _edge_input(size=1001):
    """The edge values, then random normals (scaled by 3): size elements, not a
    multiple of 4."""
    return np.concatenate([EDGES, (RNG.normal(size=size - EDGES.size) * 3)]).astype(
        np.float32)


_erf = np.vectorize(math.erf)


def gelu_erf64(x):
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def gelu_tanh64(x):
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def hard_swish64(x):
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        return np.where(x <= -3, 0.0, np.where(x >= 3, x, x * (x + 3) / 6))


# -- activations ---------------------------------------------------------------------------
@pytest.mark.parametrize("approximate, formula", [(False, gelu_erf64), (True, gelu_tanh64)])
def test_gelu_matches_the_float64_formula(gl, approximate, formula):
    x = _edge_input()
    _check(lambda t: ff.gelu(t, approximate=approximate), formula(x), x)
    x3 = RNG.normal(size=(3, 1, 7)).astype(np.float32)          # a 1-element axis
    _check(lambda t: ff.gelu(t, approximate=approximate), formula(x3), x3)


def test_hard_swish_matches_the_float64_formula(gl):
    x = np.concatenate([_edge_input(), np.float32([-np.inf, np.inf])])
    _check(ff.hard_swish, hard_swish64(x), x)


def test_hard_swish_of_minus_infinity_is_zero_and_nan_stays_nan(gl):
    out = _run_both(ff.hard_swish, np.float32([-np.inf, np.nan, np.inf]))
    for got in out.values():
        assert got[0] == 0 and np.isnan(got[1]) and got[2] == np.inf


@pytest.mark.parametrize("build", [lambda t: ff.gelu(t), lambda t: ff.gelu(t, True),
                                   ff.hard_swish], ids=["gelu", "gelu_tanh", "hard_swish"])
def test_activation_is_one_fused_kernel(gl, build):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 37), "float32", name="x")
        y = build(x)
    fn = ff.Session(g).compile([y], feeds=[x])
    xb = RNG.normal(size=(5, 37)).astype(np.float32) * 4
    got = fn(xb)[0]
    assert len(fn.kernels) == 1, [k.op for k in fn.kernels]
    assert_matches(got, ff.Session(g, backend="numpy", passes=[]).run(y, {x: xb}), rtol=1e-5)


@pytest.mark.parametrize("build, lo, hi", [
    (lambda t: ff.gelu(t), -4.0, 4.0),
    (lambda t: ff.gelu(t, approximate=True), -4.0, 4.0),
    (ff.hard_swish, -2.9, 2.9)],                  # away from the kinks at -3 and 3
    ids=["gelu", "gelu_tanh", "hard_swish"])
def test_activation_gradients_match_finite_differences(gl, build, lo, hi):
    x = RNG.uniform(lo, hi, (3, 5)).astype(np.float32)
    check_gradients(build, {"x": x}, second_order=True)


def test_hard_swish_gradient_is_zero_below_minus_three_and_one_above_three(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.constant(np.float32([-10.0, -4.0, 4.0, 10.0]))
        (dx,) = ff.gradients(ff.sum(ff.hard_swish(x)), [x])
    for backend in ("numpy", "gl"):
        np.testing.assert_array_equal(ff.Session(g, backend=backend).run(dx),
                                      [0.0, 0.0, 1.0, 1.0])


# -- normalizations --------------------------------------------------------------------------
def normalize64(x, axes, epsilon, scale=None, offset=None):
    x = x.astype(np.float64)
    count = np.prod([x.shape[a] for a in axes])
    mean = x.sum(axis=axes, keepdims=True) / count
    var = ((x - mean) ** 2).sum(axis=axes, keepdims=True) / count
    inv_std = 1.0 / np.sqrt(var + epsilon)
    y = (x - mean) * inv_std
    if scale is not None:
        y = y * scale
    if offset is not None:
        y = y + offset
    return y, mean, inv_std


@pytest.mark.parametrize("shape, axis", [((2, 5, 7), -1), ((2, 5, 7), (1, 2)),
                                         ((3, 4099), 1), ((4, 1), -1), ((6, 3, 2), 0)])
def test_layer_normalization_matches_the_float64_formula(gl, shape, axis):
    x = RNG.normal(size=shape).astype(np.float32) * 3 - 1
    axes = tuple(a % len(shape) for a in ((axis,) if isinstance(axis, int) else axis))
    norm_shape = [shape[a] for a in axes]
    scale = RNG.normal(size=norm_shape).astype(np.float32)
    offset = RNG.normal(size=norm_shape).astype(np.float32)
    if axes == (0,):                              # scale/offset broadcast over axis 0
        scale, offset = scale.reshape(-1, 1, 1), offset.reshape(-1, 1, 1)
    want = normalize64(x, axes, 1e-5, scale, offset)
    _check(lambda t, s, o: ff.layer_normalization(t, s, o, axis=axis, epsilon=1e-5,
                                                  return_statistics=True),
           want, x, scale, offset, rtol=1e-4, atol=2e-5)


def test_layer_normalization_is_two_pass_on_a_large_offset(gl):
    # 1000 + noise of 1e-2: E[x^2] - E[x]^2 would lose every digit in float32
    x = (1000.0 + RNG.normal(size=(3, 67)) * 1e-2).astype(np.float32)
    want, _, _ = normalize64(x, (1,), 0.0)
    _check(lambda t: ff.layer_normalization(t, epsilon=0.0), want, x, rtol=2e-2, atol=2e-2)


def test_layer_normalization_edge_rows(gl):
    # a constant row gives offset (0 / sqrt(epsilon)); NaN stays in its own row; zeros
    x = np.float32([[5.0, 5.0, 5.0, 5.0, 5.0], [1.0, np.nan, 2.0, 3.0, -1.0],
                    [0.0, 0.0, 0.0, 0.0, 1e-3], [-1e4, 1e4, 0.0, -0.0, 7.0]])
    want, _, _ = normalize64(x, (1,), 1e-5, None, 0.5)
    _check(lambda t: ff.layer_normalization(t, offset=0.5), want, x, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape, data_format", [((2, 5, 6, 3), "NHWC"), ((2, 3, 5, 6), "NCHW"),
                                                ((3, 9, 5), "NHWC"), ((2, 4, 3, 1, 2), "NCHW"),
                                                ((2, 1, 1, 5), "NHWC")])
def test_instance_normalization_matches_the_float64_formula(gl, shape, data_format):
    x = RNG.normal(size=shape).astype(np.float32) * 2 + 1
    x.flat[3] = 0.0
    rank = len(shape)
    channels = shape[-1] if data_format == "NHWC" else shape[1]
    axes = tuple(range(1, rank - 1)) if data_format == "NHWC" else tuple(range(2, rank))
    scale = RNG.normal(size=channels).astype(np.float32)
    offset = RNG.normal(size=channels).astype(np.float32)
    bshape = [channels] if data_format == "NHWC" else [channels] + [1] * (rank - 2)
    want, _, _ = normalize64(x, axes, 1e-5, scale.reshape(bshape), offset.reshape(bshape))
    _check(lambda t, s, o: ff.instance_normalization(t, s, o, data_format=data_format),
           want, x, scale, offset, rtol=1e-4, atol=2e-5)


def test_normalization_gradients_match_finite_differences(gl):
    x = RNG.normal(size=(3, 6)).astype(np.float32)
    s, o = RNG.normal(size=6).astype(np.float32), RNG.normal(size=6).astype(np.float32)
    check_gradients(lambda t, a, b: ff.layer_normalization(t, a, b, epsilon=1e-3),
                    {"x": x, "scale": s, "offset": o}, second_order=True)
    x4 = RNG.normal(size=(2, 3, 4, 2)).astype(np.float32)
    s2, o2 = RNG.normal(size=2).astype(np.float32), RNG.normal(size=2).astype(np.float32)
    check_gradients(lambda t, a, b: ff.instance_normalization(t, a, b, epsilon=1e-3),
                    {"x": x4, "scale": s2, "offset": o2})
    x5 = RNG.normal(size=(2, 2, 3, 4)).astype(np.float32)
    check_gradients(lambda t: ff.instance_normalization(t, data_format="NCHW"), {"x": x5})


# -- errors ------------------------------------------------------------------------------
def test_bad_arguments_raise_clear_errors():
    g = ff.Graph()
    with g.as_default():
        xi = ff.constant(np.int32([1, 2]))
        xf = ff.constant(np.float32([[1.0, 2.0]]))
        with pytest.raises(ff.AttrError, match="gelu needs a float32 input, got int32"):
            ff.gelu(xi)
        with pytest.raises(ff.AttrError, match="approximate must be True or False"):
            ff.gelu(xf, approximate="tanh")
        with pytest.raises(ff.AttrError, match="hard_swish needs a float32"):
            ff.hard_swish(xi)
        with pytest.raises(ff.AttrError, match="axis 2 is out of range for a rank-2"):
            ff.layer_normalization(xf, axis=2)
        with pytest.raises(ff.AttrError, match="must be distinct"):
            ff.layer_normalization(xf, axis=(1, -1))
        with pytest.raises(ff.AttrError, match="epsilon must be a number >= 0"):
            ff.layer_normalization(xf, epsilon=-1.0)
        with pytest.raises(ff.ShapeError, match="rank >= 3"):
            ff.instance_normalization(xf)
        with pytest.raises(ff.AttrError, match="data_format must be"):
            ff.instance_normalization(xf, data_format="NCW")
        with pytest.raises(ff.ShapeError, match=r"\(C,\) vectors"):
            ff.instance_normalization(ff.constant(np.zeros((1, 2, 2, 3), np.float32)),
                                      scale=np.ones((1, 3), np.float32))
