"""NaN and inf at padded taps: padding is zeros, and 0 * NaN = 0 * inf = NaN, so a
non-finite weight makes every output of its channel NaN, the image border included
(the numpy reference and TensorFlow). The kernels multiplied nothing at a padding tap
(skipped it) and gave finite values at the border. Each conv path (codegen/conv.py,
codegen/depthwise.py: direct conv2d with texel, scalar and window-row reads, literal
weights, the generic conv.glsl.j2 loops, blocked conv2d and depthwise, direct depthwise,
conv2d_backprop_filter generic and blocked with a non-finite dy, conv3d) on GL against
the numpy reference executor: SAME padding on odd sizes (padding on every side),
stride 2, batch 2, NaN at the filter's first tap and inf at its last."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, run_both


def _filter(rng, shape):
    """A random filter with NaN at its first tap and inf at its last (other channels)."""
    w = rng.standard_normal(shape).astype(np.float32)
    first = (0,) * (len(shape) - 2)
    last = tuple(k - 1 for k in shape[:-2])
    w[first + (0, 0)] = np.nan
    w[last + (shape[-2] - 1, shape[-1] - 1)] = np.inf
    return w


GENERIC = ff.Tuning().with_({"conv.direct_max_taps": 0, "conv.depthwise_direct_max_taps": 0,
                            "conv.blocked_depthwise_taps": 0})
BLOCKED = ff.Tuning().with_({"matmul.blocked_min_macs": 1, "conv.direct_max_macs": 0,
                            "conv.depthwise_direct_max_taps": 0})
TUNINGS = {"direct": None, "generic": GENERIC, "blocked": BLOCKED}


def _check(build, arrays, marker=None, ops=None, tuning=None):
    """GL against numpy for build(*placeholders); the reference must have NaN at the
    border next to finite values (what skipping the padding got wrong)."""
    g = ff.Graph()
    with g.as_default():
        feeds = {ff.placeholder(a.shape, name=f"in{i}"): a for i, a in enumerate(arrays)}
        y = build(*feeds)
    with ff.Session(g, tuning=tuning) as sess:
        kernels = sess.compile([y], feeds=list(feeds)).kernels
    if marker is not None:
        assert any(marker in k.source for k in kernels), [k.op for k in kernels]
    if ops is not None:
        assert [k.op for k in kernels] == ops, [k.op for k in kernels]
    out, ref = run_both(g, {"y": y}, feeds, tuning=tuning)
    assert np.isnan(ref["y"]).any() and np.isfinite(ref["y"]).any()
    finite = np.abs(ref["y"][np.isfinite(ref["y"])])
    assert_matches(out["y"], ref["y"], rtol=1e-5, atol=1e-5 * (1 + finite.max(initial=0)))
    return kernels


def _conv_case(rng, x_shape, w_shape):
    return rng.standard_normal(x_shape).astype(np.float32), _filter(rng, w_shape)


@pytest.mark.parametrize("x_shape, w_shape", [
    ((2, 7, 9, 8), (3, 3, 8, 8)),        # C % 4 == 0: texel reads, inline
    ((2, 7, 7, 40), (3, 1, 40, 4)),      # texel reads, looped (C / 4 > 8)
    ((2, 7, 9, 3), (3, 3, 3, 8)),        # window-row reads (C % 4 != 0)
    ((2, 9, 7, 6), (3, 3, 6, 4)),        # scalar channel reads, inline
    ((2, 7, 5, 11), (3, 3, 11, 4)),      # scalar channel reads, looped
])
@pytest.mark.parametrize("strides", [1, 2])
def test_direct_conv2d(gl, x_shape, w_shape, strides):
    rng = np.random.default_rng(sum(x_shape) + strides)
    x, w = _conv_case(rng, x_shape, w_shape)
    _check(lambda xp, wp: ff.conv2d(xp, wp, strides=strides, padding="SAME"), [x, w],
           marker="direct conv:", ops=["conv2d"])


def test_direct_conv2d_literal_weights(gl):
    """A constant filter written into the source as literals (MobileNet's stem path)."""
    rng = np.random.default_rng(3)
    x, w = _conv_case(rng, (2, 9, 9, 3), (3, 3, 3, 8))
    _check(lambda xp: ff.conv2d(xp, ff.constant(w), strides=2, padding="SAME"), [x],
           marker="uintBitsToFloat(0x7fc00000u)")


@pytest.mark.parametrize("x_shape, w_shape", [
    ((2, 7, 9, 8), (3, 3, 8, 8)),        # vec4 with texel input
    ((2, 7, 9, 3), (3, 3, 3, 8)),        # vec4 with scalar input
    ((2, 7, 6, 3), (3, 3, 3, 5)),        # scalar lanes (COUT % 4 != 0)
])
def test_generic_conv2d(gl, x_shape, w_shape):
    rng = np.random.default_rng(sum(x_shape))
    x, w = _conv_case(rng, x_shape, w_shape)
    _check(lambda xp, wp: ff.conv2d(xp, wp, strides=2, padding="SAME"), [x, w],
           ops=["conv2d"], tuning=ff.Tuning().with_({"conv.direct_max_taps": 0}))


@pytest.mark.parametrize("x_shape, w_shape", [
    ((2, 7, 9, 8), (3, 3, 8, 8)),        # channels in fours
    ((2, 9, 7, 3), (3, 3, 3, 5)),        # neither
])
def test_blocked_conv2d(gl, x_shape, w_shape):
    rng = np.random.default_rng(sum(x_shape) + 1)
    x, w = _conv_case(rng, x_shape, w_shape)
    _check(lambda xp, wp: ff.conv2d(xp, wp, strides=2, padding="SAME"), [x, w],
           ops=["conv2d", "conv2d_stitch"],
           tuning=ff.Tuning().with_({"matmul.blocked_min_macs": 1, "conv.direct_max_macs": 0}))


@pytest.mark.parametrize("x_shape, w_shape, path", [
    ((2, 7, 9, 8), (3, 3, 8, 1), "direct"),     # multiplier 1, C % 4 == 0
    ((2, 7, 7, 3), (3, 3, 3, 4), "direct"),     # multiplier 4
    ((2, 7, 9, 8), (3, 3, 8, 1), "generic"),
    ((2, 7, 7, 3), (3, 3, 3, 4), "generic"),
    ((2, 7, 6, 2), (3, 3, 2, 3), "generic"),    # scalar lanes
    ((2, 7, 9, 8), (3, 3, 8, 1), "blocked"),
])
@pytest.mark.parametrize("strides", [1, 2])
def test_depthwise_conv2d(gl, x_shape, w_shape, path, strides):
    tuning = {"direct": None, "blocked": ff.Tuning().with_({"matmul.blocked_min_macs": 1}),
              "generic": ff.Tuning().with_({"conv.depthwise_direct_max_taps": 0,
                                            "conv.blocked_depthwise_taps": 0})}[path]
    rng = np.random.default_rng(sum(x_shape) + strides)
    x, w = _conv_case(rng, x_shape, w_shape)
    kernels = _check(
        lambda xp, wp: ff.depthwise_conv2d(xp, wp, strides=strides, padding="SAME"),
        [x, w], marker="direct depthwise:" if path == "direct" else None, tuning=tuning)
    assert (len(kernels) == 2) == (path == "blocked"), [k.op for k in kernels]


@pytest.mark.parametrize("x_shape, dy_channels, blocked", [
    ((2, 7, 9, 8), 8, False),       # vec4 (dy a texel at a time)
    ((2, 7, 9, 3), 5, False),       # scalar lanes
    ((2, 7, 9, 8), 8, True),
    ((2, 7, 9, 3), 5, True),
])
def test_conv2d_backprop_filter_with_non_finite_dy(gl, x_shape, dy_channels, blocked):
    """dw[tap] sums x (0 in the padding) times dy: NaN / inf in dy at a border output
    makes the taps whose window there reaches into the padding NaN."""
    tuning = ff.Tuning().with_({"matmul.blocked_min_macs": 1}) if blocked else None
    rng = np.random.default_rng(sum(x_shape) + dy_channels)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((3, 3, x_shape[-1], dy_channels)).astype(np.float32)
    out_shape = (x_shape[0], 4, 5, dy_channels)         # SAME, stride 2
    dy = rng.standard_normal(out_shape).astype(np.float32)
    dy[0, 0, 0, 0] = np.nan
    dy[1, -1, -1, -1] = np.inf

    def build(xp, wp, dyp):
        y = ff.conv2d(xp, wp, strides=2, padding="SAME")
        return ff.gradients([y], [wp], grad_ys=[dyp])[0]
    kernels = _check(build, [x, w, dy], tuning=tuning)
    ops = [k.op for k in kernels]
    assert ops[0] == "conv2d_backprop_filter" and (len(ops) == 2) == blocked, ops


def test_conv3d(gl):
    rng = np.random.default_rng(5)
    x, w = _conv_case(rng, (2, 5, 7, 5, 4), (3, 3, 3, 4, 4))
    _check(lambda xp, wp: ff.conv3d(xp, wp, strides=2, padding="SAME"), [x, w],
           ops=["conv3d"])


@pytest.mark.parametrize("path", ["direct", "generic", "blocked"])
@pytest.mark.parametrize("x_shape", [(2, 1, 1, 8), (2, 1, 6, 8), (2, 5, 1, 3)])
@pytest.mark.parametrize("depthwise_conv", [False, True])
def test_taps_that_only_land_on_padding(gl, path, x_shape, depthwise_conv):
    """A 1-pixel image side: the taps off its row or column read padding for every
    output, a constant the compiler sees (Mesa folds 0 * w to 0 unless the 0 is hidden
    from it). NaN at such a tap of one channel, inf at another."""
    c = x_shape[-1]        # (a depthwise C % 4 != 0 runs the generic kernel whatever path)
    rng = np.random.default_rng(sum(x_shape) + len(path))
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((3, 3, c, 1 if depthwise_conv else 8)).astype(np.float32)
    w[0, 0, 0, 0] = np.nan               # row 0 (or column 0): padding only
    w[(2, 2, c - 1, w.shape[-1] - 1)] = np.inf
    op = ff.depthwise_conv2d if depthwise_conv else ff.conv2d
    _check(lambda xp, wp: op(xp, wp, padding="SAME"), [x, w], tuning=TUNINGS[path])


@pytest.mark.parametrize("x_shape", [(2, 1, 1, 8), (2, 1, 6, 3)])
@pytest.mark.parametrize("blocked", [False, True])
def test_filter_gradient_taps_that_only_land_on_padding(gl, x_shape, blocked):
    tuning = ff.Tuning().with_({"matmul.blocked_min_macs": 1}) if blocked else None
    rng = np.random.default_rng(sum(x_shape) + blocked)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((3, 3, x_shape[-1], 8)).astype(np.float32)
    dy = rng.standard_normal(x_shape[:3] + (8,)).astype(np.float32)
    dy[0, 0, 0, 1] = np.nan
    dy[1, -1, -1, 6] = np.inf

    def build(xp, wp, dyp):
        return ff.gradients([ff.conv2d(xp, wp, padding="SAME")], [wp], grad_ys=[dyp])[0]
    _check(build, [x, w, dy], tuning=tuning)


@pytest.mark.parametrize("path", ["direct", "generic", "blocked"])
@pytest.mark.parametrize("x_shape, w_shape, padding", [
    ((2, 7, 9, 8), (3, 3, 8, 8), "SAME"),            # C, COUT % 4 == 0
    ((2, 6, 5, 3), (3, 3, 3, 8), "SAME"),            # dx's C % 4 != 0
    ((2, 7, 6, 8), (3, 3, 8, 3), "VALID"),           # dy's channels 3: scalar reads
    ((1, 1, 5, 4), (3, 3, 4, 4), "SAME"),            # 1-pixel side
])
def test_input_gradient_as_a_conv_skips_its_padding(gl, path, x_shape, w_shape, padding):
    """passes/conv_lowering.py runs a stride-1 input gradient as a conv2d of dy with the
    filter turned, padding_taps "skip": its padding taps stand for products that do not
    exist, so a NaN weight reaches only the positions its products land on
    (conv2d_backprop_input's reference: the numpy executor on the graph as built)."""
    tuning = {"direct": None, "generic": ff.Tuning().with_({"conv.direct_max_taps": 0}),
              "blocked": ff.Tuning().with_({"matmul.blocked_min_macs": 1,
                                            "conv.direct_max_macs": 0})}[path]
    rng = np.random.default_rng(sum(x_shape) + len(path))
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    w[0, 0, 1, 2] = np.nan
    w[2, 1, 0, 0] = np.inf
    g = ff.Graph()
    with g.as_default():
        xp, wp = ff.placeholder(x.shape, name="x"), ff.placeholder(w.shape, name="w")
        y = ff.conv2d(xp, wp, padding=padding)
        up = ff.placeholder(tuple(y.shape), name="up")
        (dx,) = ff.gradients([y], [xp], grad_ys=[up])
    feeds = {xp: x, wp: w, up: rng.standard_normal(tuple(y.shape)).astype(np.float32)}
    want = ff.Session(g, backend="numpy", passes=["verify"]).run(dx, feeds)
    with ff.Session(g, tuning=tuning) as sess:
        fn = sess.compile([dx], feeds=list(feeds))
        assert "conv2d" in [k.op for k in fn.kernels]       # lowered
        got = sess.run(dx, feeds)
    # (the 1-row image: the NaN and inf taps never land, so no NaN at all)
    assert np.isnan(want).any() == (x_shape[1] > 1) and np.isfinite(want).any()
    finite = np.abs(want[np.isfinite(want)])
    assert_matches(got, want, rtol=1e-5, atol=1e-5 * (1 + finite.max(initial=0)))


def test_padding_taps_must_be_known():
    g = ff.Graph()
    with g.as_default():
        x, w = ff.placeholder((1, 4, 4, 4)), ff.placeholder((3, 3, 4, 4))
        with pytest.raises(ff.FragflowError, match="padding_taps"):
            g.add_node("conv2d", [x.value, w.value], {"padding_taps": "drop"})
