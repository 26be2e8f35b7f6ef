"""conv_as_matmul (passes/conv_as_matmul.py; knob conv.whole_window_matmul): a conv2d
whose one window is its whole image runs as a matmul. On GL against the numpy executor
on the graph as built (and a float64 formula): a plain conv2d, fused ones with a bias,
an activation, PReLU's alpha and a per-image operand, batches, NaN and inf, channels
and outputs not a multiple of 4; and the convolutions left as they are (padding, more
than one window, a 1x1 image, the knob off)."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import check_both, gl_kernels, normal

TUNING = ff.Tuning.named("webgl")
OFF = TUNING.from_env("conv.whole_window_matmul=false")


def _strategies(g, fetches, feeds, tuning=TUNING):
    return [k.strategy for k in gl_kernels(g, fetches, feeds, tuning)]


def _check(g, fetches, feeds, tuning=TUNING):
    return check_both(g, fetches, feeds, tuning)[0]


@pytest.mark.parametrize("x_shape, cout", [
    ((1, 2, 2, 128), 213),            # iris' head
    ((1, 3, 3, 32), 30),              # facemesh's, fewer outputs
    ((3, 2, 3, 5), 7),                # a batch, C and COUT not multiples of 4
])
def test_whole_window_conv_is_a_matmul(gl, x_shape, cout):
    rng = np.random.default_rng(sum(x_shape) + cout)
    w = normal(rng, *x_shape[1:], cout) * 0.2
    b = normal(rng, cout)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x_shape, name="x")
        y = ff.relu(ff.conv2d(xp, ff.constant(w), padding="VALID") + ff.constant(b))
    x = normal(rng, *x_shape)
    x.flat[0], x.flat[-1] = np.nan, np.inf
    out = _check(g, {"y": y}, {xp: x})
    formula = np.einsum("nhwc,hwco->no", x.astype(np.float64), w)[:, None, None] + b
    finite = np.isfinite(formula)
    assert np.allclose(out["y"][finite], np.maximum(formula, 0)[finite], rtol=1e-4,
                       atol=1e-4)
    strategies = _strategies(g, [y], {xp: x})
    assert any(s.startswith("matmul.") for s in strategies), strategies
    assert not any(s.startswith("conv.") for s in strategies), strategies


def test_fused_conv_keeps_its_epilogue_operands(gl):
    """An importer's fused conv (bias, PReLU's alpha per channel) and a per-image
    operand of the output's shape [N, 1, 1, COUT] after it."""
    rng = np.random.default_rng(11)
    w = normal(rng, 3, 3, 8, 10) * 0.2
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((2, 3, 3, 8), name="x")
        r = ff.placeholder((2, 1, 1, 10), name="r")
        y = ff.fused.conv2d(xp, ff.constant(w), padding="VALID",
                            bias=ff.constant(normal(rng, 10)), activation="prelu",
                            alpha=ff.constant(normal(rng, 10) * 0.1))
        z = ff.tanh(y + r)
    feeds = {xp: normal(rng, 2, 3, 3, 8), r: normal(rng, 2, 1, 1, 10)}
    _check(g, {"y": y, "z": z}, feeds)
    strategies = _strategies(g, [y, z], feeds)
    assert not any(s.startswith("conv.") for s in strategies), strategies


@pytest.mark.parametrize("x_shape, k, kwargs", [
    ((1, 4, 4, 8), 4, dict(padding="SAME")),        # padded: 4x4 windows
    ((1, 4, 4, 8), 3, dict(padding="VALID")),       # 2x2 windows
    ((1, 4, 4, 8), 2, dict(strides=2, padding="VALID")),
    ((2, 1, 1, 12), 1, dict(padding="VALID")),      # a 1x1 image: pointwise already
])
def test_convs_of_several_windows_or_one_pixel_stay_convs(gl, x_shape, k, kwargs):
    rng = np.random.default_rng(k)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x_shape, name="x")
        y = ff.conv2d(xp, ff.constant(normal(rng, k, k, x_shape[-1], 6)), **kwargs)
    x = normal(rng, *x_shape)
    _check(g, {"y": y}, {xp: x})
    assert any(s.startswith("conv.") for s in _strategies(g, [y], {xp: x}))


def test_the_knob_off_keeps_the_conv(gl):
    rng = np.random.default_rng(12)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((1, 2, 2, 16), name="x")
        y = ff.conv2d(xp, ff.constant(normal(rng, 2, 2, 16, 9)), padding="VALID")
    x = normal(rng, 1, 2, 2, 16)
    _check(g, {"y": y}, {xp: x}, tuning=OFF)
    assert any(s.startswith("conv.") for s in _strategies(g, [y], {xp: x}, OFF))
