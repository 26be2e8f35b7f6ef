"""conv.pointwise: a 1x1, stride-1, unpadded conv2d read as the matmul it is (output
pixel p reads the image's elements p * C on, no window positions or padding tests) in
the direct and blocked kernels (codegen/conv.py _pointwise), against a float64 einsum:
C and COUT not multiples of 4, channel loops unrolled (conv.pointwise_inline_steps)
and looped, batches, NaN and inf in the image and the filter; 1x1 convolutions with a
stride or padding keep the window path; the webgl profile turns it on."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches

POINTWISE = ff.Tuning().with_({"conv.pointwise": True, "conv.pointwise_inline_steps": 8,
                               "matmul.blocked_min_macs": 1, "conv.direct_max_depth": 64,
                               "conv.packed_min_input": 1 << 30})
MARK = "(pointwise"


def _reference(x, w, b=None):
    y = np.einsum("nhwc,co->nhwo", x.astype(np.float64), w[0, 0].astype(np.float64))
    if b is not None:
        y = np.clip(y + b.astype(np.float64), 0.0, 6.0)
    return y.astype(np.float32)


def _inputs(x_shape, cout, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal((1, 1, x_shape[-1], cout)).astype(np.float32)
    x[-1, 0, 0, 0] = np.nan                     # that pixel's every output
    x[0, -1, -1, -1] = np.inf                   # +-inf, NaN where a weight is 0
    w[0, 0, -1, 0] = 0.0
    w[0, 0, 0, -1] = np.inf                     # one output channel: inf or NaN
    x[0, 1, 0, :] = 0.0                         # 0 * inf = NaN there
    return x, w


def _run(x, w, tuning, strategy, stride=1, padding="VALID"):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y = ff.conv2d(xp, ff.constant(w), strides=stride, padding=padding)
    with ff.Session(g, tuning=tuning.with_(prefer=(strategy,))) as sess:
        kernels = [k for k in sess.compile([y], feeds=[xp]).kernels if k.op == "conv2d"]
        got = sess.run(y, {xp: x})
    assert [k.strategy for k in kernels] == [strategy], [k.strategy for k in kernels]
    return got, kernels[0]


# (image, COUT, strategies): C % 4 != 0 and COUT % 4 != 0 take only the blocked kernel
# (the direct one wants whole output texels, and its pointwise path whole input texels)
CASES = [
    ((2, 5, 7, 6), 10, ["conv.blocked"]),
    ((2, 3, 5, 16), 8, ["conv.direct", "conv.blocked"]),        # 4 steps: unrolled
    ((1, 9, 11, 24), 36, ["conv.direct", "conv.blocked"]),      # 6 steps: unrolled
    ((1, 4, 5, 40), 12, ["conv.direct", "conv.blocked"]),       # 10 steps: a loop
    ((3, 2, 3, 3), 5, ["conv.blocked"]),                        # 3 scalar steps
    ((1, 3, 3, 11), 4, ["conv.direct", "conv.blocked"]),        # direct: window path
]


@pytest.mark.parametrize("x_shape, cout, strategies", CASES,
                         ids=[f"{s}->{c}" for s, c, _ in CASES])
def test_pointwise_conv_matches_float64(gl, x_shape, cout, strategies):
    x, w = _inputs(x_shape, cout, seed=sum(x_shape) + cout)
    ref = _reference(x, w)
    assert np.isnan(ref).any() and np.isinf(ref).any() and np.isfinite(ref).any()
    with np.errstate(invalid="ignore"):
        scale = np.abs(x[..., None] * w[0, 0]).sum(axis=-2)   # sums of |products|
    scale = np.where(np.isfinite(scale), scale, 0.0)
    for strategy in strategies:
        got, kernel = _run(x, w, POINTWISE, strategy)
        takes = strategy == "conv.blocked" or x_shape[-1] % 4 == 0
        assert (MARK in kernel.source) == takes, strategy
        assert_matches(got, ref, rtol=1e-5, scale=scale + 1e-6, what=strategy)


def test_the_blocked_kernel_unrolls_short_channel_loops_only(gl):
    x, w = _inputs((1, 4, 5, 40), 12, seed=3)
    for steps, looped in ((8, True), (10, False)):
        tuning = POINTWISE.with_({"conv.pointwise_inline_steps": steps})
        _, kernel = _run(x, w, tuning, "conv.blocked")
        assert ("for (; ci < C;" in kernel.source) == looped, steps


@pytest.mark.parametrize("stride, padding", [(2, "VALID"), (1, ((1, 0), (0, 1)))])
def test_strided_or_padded_1x1_convs_keep_the_window_path(gl, stride, padding):
    x, w = _inputs((2, 5, 6, 8), 8, seed=5)
    for strategy in ("conv.direct", "conv.blocked"):
        got, kernel = _run(x, w, POINTWISE, strategy, stride, padding)
        assert MARK not in kernel.source
        g = ff.Graph()
        with g.as_default():
            xp = ff.placeholder(x.shape, name="x")
            y = ff.conv2d(xp, ff.constant(w), strides=stride, padding=padding)
        ref = ff.Session(g, backend="numpy", passes=[]).run(y, {xp: x})
        assert_matches(got, ref, rtol=1e-4, atol=1e-4)


def test_a_fused_pointwise_conv_read_by_a_depthwise_conv(gl):
    """The expand conv of MobileNet-v2 (bias + relu6 fused, read only by a depthwise
    conv: stitch-free, the epilogue in the blocked kernel), batch 2, on the webgl
    profile."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 6, 7, 16)).astype(np.float32)
    w = rng.standard_normal((1, 1, 16, 20)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    d = rng.standard_normal((3, 3, 20, 1)).astype(np.float32)
    x[1, 2, 3, 4] = np.nan
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        h = ff.relu6(ff.conv2d(xp, ff.constant(w)) + ff.constant(b))
        y = ff.depthwise_conv2d(h, ff.constant(d), strides=1, padding="SAME")
        mid = h
    tuning = ff.Tuning.named("webgl").with_({"matmul.blocked_min_macs": 1})
    with ff.Session(g, tuning=tuning) as sess:
        kernels = sess.compile([y], feeds=[xp]).kernels
        got = sess.run(y, {xp: x})
    conv = [k for k in kernels if k.op == "fused_conv2d"]
    assert [k.strategy for k in conv] == ["conv.blocked"] and MARK in conv[0].source
    assert "fused_conv2d_stitch" not in [k.op for k in kernels], [k.op for k in kernels]
    ref = ff.Session(g, backend="numpy", passes=[]).run([y, mid], {xp: x})
    np.testing.assert_allclose(ref[1], _reference(x, w, b), rtol=1e-5, atol=1e-5)
    assert np.isnan(ref[0]).any() and not np.isnan(ref[0]).all()
    assert_matches(got, ref[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("packed", [True, False])
def test_a_big_pointwise_conv_runs_blocked_without_pointwise_packed(gl, packed):
    """conv.pointwise_packed off: a 1x1 conv2d past packed_min_input runs blocked,
    reading its image in place, not as im2col + the packed matmul; a 3x3 one still
    takes the packed path."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 6, 5, 12)).astype(np.float32)
    w1 = rng.standard_normal((1, 1, 12, 8)).astype(np.float32)
    w3 = rng.standard_normal((3, 3, 12, 8)).astype(np.float32)
    x[0, 2, 2, 5] = np.inf
    tuning = POINTWISE.with_({"conv.packed_min_input": 1, "matmul.packed_min_macs": 1,
                              "conv.direct_max_macs": 1,
                              "conv.pointwise_packed": packed})
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y1 = ff.conv2d(xp, ff.constant(w1))
        y3 = ff.conv2d(xp, ff.constant(w3), padding="SAME")
    with ff.Session(g, tuning=tuning) as sess:
        kernels = sess.compile([y1, y3], feeds=[xp]).kernels
        got = sess.run([y1, y3], {xp: x})
    strategies = [k.strategy for k in kernels if k.op == "conv2d"]
    assert strategies == ["conv.packed" if packed else "conv.blocked", "conv.packed"], \
        strategies
    ref = ff.Session(g, backend="numpy", passes=[]).run([y1, y3], {xp: x})
    assert_matches(got[0], _reference(x, w1), rtol=1e-5, atol=1e-4)
    assert_matches(got[1], ref[1], rtol=1e-4, atol=1e-4)


def test_the_webgl_profile_reads_1x1_convs_as_matmuls():
    webgl, llvmpipe = ff.Tuning.named("webgl").conv, ff.Tuning.named("llvmpipe").conv
    assert webgl.pointwise and webgl.pointwise_inline_steps == 2
    assert not webgl.pointwise_packed
    assert not llvmpipe.pointwise and llvmpipe.pointwise_packed
