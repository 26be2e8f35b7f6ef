"""The direct conv2d kernel (codegen/conv.py direct_kernel, templates/conv_direct.glsl.j2:
one fragment per output texel of 4 output channels, taps unrolled, the fused epilogue in
the same kernel, no stitch) on GL against the numpy reference executor: C not a multiple
of 4 (scalar channel reads) and multiples of 4 (texel reads, unrolled and looped), 1x1
images, batches, strides, dilations, SAME / VALID / explicit padding, NaN in the image,
each fused activation; which kernel each size takes; gradients against finite
differences (stride-1 input gradients run as convolutions, passes/conv_lowering.py)."""
import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients
from tests.reference import assert_matches, compiled_kernels, normal, run_both

KNOBS = ff.Tuning().conv


def is_direct(kernel):
    return "direct conv:" in kernel.source


@pytest.mark.parametrize("x_shape, w_shape, kwargs", [
    ((1, 96, 96, 3), (3, 3, 3, 8), dict(strides=2, padding="SAME")),     # MobileNet's stem
    ((1, 48, 48, 8), (1, 1, 8, 16), dict()),                              # its pointwise
    ((2, 7, 9, 5), (3, 3, 5, 4), dict(padding="SAME")),                   # C % 4, batch
    ((1, 1, 1, 6), (3, 3, 6, 8), dict(padding="SAME")),                   # one pixel
    ((3, 1, 1, 12), (1, 1, 12, 4), dict()),                               # 1x1 images
    ((1, 6, 5, 64), (1, 1, 64, 12), dict()),                              # looped C texels
    ((1, 5, 6, 11), (1, 1, 11, 4), dict()),                               # looped scalar C
    ((1, 11, 8, 4), (5, 5, 4, 8), dict(dilations=2, padding="SAME")),     # dilated 5x5
    ((1, 9, 8, 2), (7, 7, 2, 4), dict(padding=((3, 2), (1, 4)))),         # explicit pads
    ((1, 13, 10, 8), (3, 2, 8, 4), dict(strides=(2, 3), padding="VALID")),
])
def test_direct_conv_matches_numpy(gl, x_shape, w_shape, kwargs):
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    x, w = normal(rng, *x_shape), normal(rng, *w_shape)
    x[-1, x_shape[1] // 2, 0, 0] = np.nan    # spreads through its windows
    if x_shape[1] * x_shape[2] > 1:
        x[0, 0, 0, :] = 0.0
    build = lambda xp, wp: ff.conv2d(xp, wp, **kwargs)    # noqa: E731
    ks = compiled_kernels(build, [x.shape, w.shape])
    assert [k.op for k in ks] == ["conv2d"] and is_direct(ks[0])
    g = ff.Graph()
    with g.as_default():
        xp, wp = ff.placeholder(x.shape, name="x"), ff.placeholder(w.shape, name="w")
        y = build(xp, wp)
    out, ref = run_both(g, {"y": y}, {xp: x, wp: w})
    assert np.isnan(ref["y"]).any()
    if x_shape[0] > 1 or x_shape[1] * x_shape[2] > 1:
        assert not np.isnan(ref["y"]).all()
    finite = np.abs(ref["y"][np.isfinite(ref["y"])])
    assert_matches(out["y"], ref["y"], rtol=1e-5, atol=1e-5 * (1 + finite.max(initial=0)))


# (gelu is not fused into a convolution: its input is read twice)
@pytest.mark.parametrize("activation", ["relu", "relu6", "leaky_relu", "sigmoid", "tanh",
                                        "elu", "selu", "softplus"])
def test_fused_bias_and_activation_in_one_kernel(gl, activation):
    rng = np.random.default_rng(7)
    x, w, b = normal(rng, 2, 6, 7, 8) * 3, normal(rng, 1, 1, 8, 12), normal(rng, 12)
    x[1, 2, 3, 5] = np.nan

    def build(xp):
        return getattr(ff, activation)(ff.conv2d(xp, ff.constant(w)) + ff.constant(b))
    ks = compiled_kernels(build, [x.shape])
    assert [k.op for k in ks] == ["fused_conv2d"] and is_direct(ks[0])
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y = build(xp)
    out, ref = run_both(g, {"y": y}, {xp: x})
    assert np.isnan(ref["y"]).any() and not np.isnan(ref["y"]).all()
    assert_matches(out["y"], ref["y"], rtol=1e-5, atol=1e-5)


def test_which_convolutions_run_direct(gl):
    rng = np.random.default_rng(4)

    def conv_kernels(x_shape, w_shape):
        w = normal(rng, *w_shape)
        return compiled_kernels(lambda xp: ff.conv2d(xp, ff.constant(w), padding="SAME"), [x_shape])
    # short sums (taps x C <= direct_max_depth) run direct even past the blocked size
    assert 3 * 3 * 3 <= KNOBS.direct_max_depth
    assert is_direct(conv_kernels((1, 64, 64, 3), (3, 3, 3, 8))[0])
    # long sums of a big product: blocked + stitch
    big = conv_kernels((1, 12, 12, 64), (1, 1, 64, 64))
    assert [k.op for k in big] == ["conv2d", "conv2d_stitch"]
    # small products run direct whatever their depth
    assert is_direct(conv_kernels((1, 2, 2, 128), (1, 1, 128, 128))[0])
    # output channels not in fours: conv.glsl.j2's lanes
    assert not is_direct(conv_kernels((1, 6, 6, 4), (3, 3, 4, 6))[0])
    # a window of channel loops (4x4 taps of 16 texel steps: a one-pixel image through
    # UpscalerJS's 4x4 conv of 64 channels): the generic kernel, not a loop per tap
    assert not is_direct(conv_kernels((1, 1, 1, 64), (4, 4, 64, 64))[0])


def test_a_one_pixel_image_through_a_deep_window(gl):
    # its direct kernel (a loop per tap) took 70 s to compile on llvmpipe (5x5: >10 min)
    rng = np.random.default_rng(11)
    x, w = normal(rng, 1, 1, 1, 64), normal(rng, 5, 5, 64, 64)
    x[0, 0, 0, :3] = [0.0, -30.0, 1e-30]
    ks = compiled_kernels(lambda xp, wp: ff.conv2d(xp, wp, padding="SAME"), [x.shape, w.shape])
    assert [k.strategy for k in ks] == ["conv.generic"], [k.strategy for k in ks]
    g = ff.Graph()
    with g.as_default():
        xp, wp = ff.placeholder(x.shape, name="x"), ff.placeholder(w.shape, name="w")
        y = ff.nn.relu(ff.conv2d(xp, wp, padding="SAME"))
    out, ref = run_both(g, {"y": y}, {xp: x, wp: w})
    assert 0 < (ref["y"] > 0).sum() < ref["y"].size    # some clipped, some not
    assert_matches(out["y"], ref["y"], rtol=1e-5, atol=1e-5 * np.abs(ref["y"]).max())


def test_gradients_through_the_direct_kernel(gl):
    rng = np.random.default_rng(5)
    check_gradients(lambda x, w: ff.conv2d(x, w, padding="SAME") ** 2,
                    {"x": rng.standard_normal((2, 5, 6, 4)),
                     "w": rng.standard_normal((3, 3, 4, 4))})
    check_gradients(lambda x, w: ff.tanh(ff.conv2d(x, w, strides=2, padding="VALID")),
                    {"x": rng.standard_normal((1, 7, 6, 3)),
                     "w": rng.standard_normal((3, 3, 3, 8))})


@pytest.mark.parametrize("x_shape, w_shape, kwargs", [
    ((1, 17, 19, 3), (3, 3, 3, 8), dict(strides=2, padding="SAME")),     # the stem's
    ((2, 6, 7, 3), (3, 3, 3, 16), dict(padding="SAME")),                 # 4 texels, batch
    ((1, 5, 6, 2), (2, 3, 2, 12), dict(padding="VALID")),                # C = 2
    ((1, 5, 5, 3), (3, 3, 3, 20), dict(padding="SAME")),                 # 5: fetched
])
def test_constant_filters_written_into_the_source(gl, x_shape, w_shape, kwargs):
    """A constant filter with at most literal_max_c4 output channel texels is written
    into the window-row kernel as literals of its exact bits (NaN, inf, -0, a
    denormal kept). NaN and inf weights only without padding: the direct kernel skips
    taps in the padding, where the reference multiplies them by zero (NaN)."""
    rng = np.random.default_rng(sum(w_shape))
    x, w = normal(rng, *x_shape), normal(rng, *w_shape)
    w[0, 1, 1, 3], w[1, 0, 0, 0] = -0.0, 1.0e-40
    if kwargs["padding"] == "VALID":
        w[0, 0, 0, 1], w[1, 1, 0, 2] = np.nan, np.inf
    else:
        x[0, 2, 2, 0] = np.nan
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y = ff.relu6(ff.conv2d(xp, ff.constant(w), **kwargs) + 0.5)
    with ff.Session(g) as sess:
        (kernel,) = sess.compile([y], feeds=[xp]).kernels
    literal = w_shape[-1] // 4 <= KNOBS.literal_max_c4
    main = kernel.source.split("void main()")[1]
    assert is_direct(kernel) and ("vec4(uintBitsToFloat(0x" in main) == literal
    assert (f"tx_{kernel.inputs[1].sampler}(" in main) != literal       # weight fetches
    out, ref = run_both(g, {"y": y}, {xp: x})
    assert np.isnan(ref["y"]).any() and not np.isnan(ref["y"]).all()
    assert_matches(out["y"], ref["y"], rtol=1e-5, atol=1e-5)


def test_a_literal_zero_weight_times_inf_is_nan(gl):
    """conv.literal_weights writes a constant filter into the source; a zero weight is
    an opaque 0 (Mesa folds x * 0.0 to 0), so inf or NaN at its tap gives NaN there,
    as TensorFlow and the reference do."""
    rng = np.random.default_rng(9)
    x, w = normal(rng, 1, 5, 5, 3), normal(rng, 3, 3, 3, 4)
    w[1, 1, 2, 0] = 0.0
    w[0, 0, 0, 1] = -0.0
    x[0, 1, 1, 2] = np.inf                   # the centre tap of pixel (1, 1) on w[1, 1]
    x[0, 0, 4, 0] = np.nan
    build = lambda xp: ff.conv2d(xp, ff.constant(w), padding="SAME")    # noqa: E731
    ks = compiled_kernels(build, [x.shape])
    assert is_direct(ks[0]) and "vec4(pad0, " in ks[0].source and ", -pad0" in ks[0].source
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y = build(xp)
    out, ref = run_both(g, {"y": y}, {xp: x})
    assert np.isnan(ref["y"][0, 1, 1, 0]) and np.isfinite(ref["y"]).any()
    assert_matches(out["y"], ref["y"], rtol=1e-5, atol=1e-5)
