"""pad_channels (passes/pad_channels.py; knob conv.pad_channels, on in the webgl profile):
a conv2d of an image with C % 4 != 0 channels reads it padded to a multiple of 4, the
filter given zero rows; and the pad's kernel for a pad of the last axis alone
(codegen/structure.py pad_rows). On GL against the numpy executor on the graph as built:
C = 3, 6, 7 and 11; strides, dilation, SAME and VALID, batches, fused bias and
activation, NaN and inf in the image and the filter, a variable filter, an image read by
two convolutions; and the convolutions left as they are (C = 1, 2 and 5, too few
multiply-adds, the knob off)."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, check_both, gl_kernels, normal, run_both

WEBGL = ff.Tuning.named("webgl").from_env("conv.pad_channels_min_macs=0")
OFF = WEBGL.from_env("conv.pad_channels=false")


def _kernels(g, fetches, feeds, tuning=WEBGL):
    return gl_kernels(g, fetches, feeds, tuning)


def _check(g, fetches, feeds, tuning=WEBGL):
    return check_both(g, fetches, feeds, tuning)[1]


def _conv_graph(x_shape, w, b=None, variable=False, **kwargs):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x_shape, name="x")
        f = ff.Variable(w, name="w") if variable else ff.constant(w)
        y = ff.conv2d(xp, f, **kwargs)
        if b is not None:
            y = ff.relu(y + ff.constant(b))
    return g, xp, y


@pytest.mark.parametrize("x_shape, k, cout, kwargs", [
    ((1, 17, 19, 3), 5, 24, dict(strides=2, padding="SAME")),        # BlazeFace's stem
    ((2, 9, 7, 3), 3, 16, dict(strides=2, padding="VALID")),         # a batch
    ((1, 10, 10, 3), 3, 6, dict(dilations=2, padding="SAME")),       # COUT % 4 != 0
    ((1, 8, 9, 6), 3, 8, dict(padding="SAME")),                      # 6 -> 8
    ((1, 7, 7, 7), 1, 12, dict(padding="VALID")),                    # 7 -> 8, 1x1
    ((1, 6, 5, 11), 3, 5, dict(strides=(1, 2), padding="SAME")),     # 11 -> 12
])
def test_padded_conv_matches_numpy(gl, x_shape, k, cout, kwargs):
    rng = np.random.default_rng(sum(x_shape) + cout)
    w = normal(rng, k, k, x_shape[-1], cout) * 0.3
    b = normal(rng, cout)
    g, xp, y = _conv_graph(x_shape, w, b, **kwargs)
    x = normal(rng, *x_shape)
    _check(g, {"y": y}, {xp: x})
    names = [kn.name for kn in _kernels(g, [y], {xp: x})]
    assert any("channels" in n for n in names), names


def test_nan_and_inf_stay_in_their_pixels(gl):
    rng = np.random.default_rng(3)
    x = normal(rng, 1, 9, 9, 3)
    x[0, 2, 3, 1], x[0, 6, 6, 2], x[0, 0, 8, 0] = np.nan, np.inf, -np.inf
    w = normal(rng, 3, 3, 3, 8)
    w[1, 2, 0, 5] = np.nan
    w[0, 0, 2, 1] = np.inf
    g, xp, y = _conv_graph(x.shape, w, padding="SAME")
    ref = _check(g, {"y": y}, {xp: x})
    assert np.isnan(ref["y"]).any() and np.isfinite(ref["y"]).any()


def test_zero_and_negative_images(gl):
    rng = np.random.default_rng(4)
    x = -np.abs(normal(rng, 1, 8, 8, 3))
    x[0, :4] = 0.0
    w = normal(rng, 3, 3, 3, 4)
    g, xp, y = _conv_graph(x.shape, w, normal(rng, 4), strides=2, padding="SAME")
    _check(g, {"y": y}, {xp: x})


def test_variable_filter_is_padded_by_a_kernel(gl):
    rng = np.random.default_rng(5)
    w = normal(rng, 3, 3, 3, 8)
    g, xp, y = _conv_graph((1, 8, 8, 3), w, variable=True, padding="SAME")
    x = normal(rng, 1, 8, 8, 3)
    with g.as_default():
        init = ff.global_variables_initializer()
    with ff.Session(g, tuning=WEBGL) as sess:
        sess.run(init)
        out = sess.run(y, {xp: x})
        names = [k.name for k in sess.compile([y], feeds={xp: x}).kernels]
    assert_matches(out, _reference_conv(x, w), rtol=1e-5, atol=1e-5)
    assert sum("channels" in n for n in names) == 2, names      # the image's and filter's


def _reference_conv(x, w):
    """SAME, stride 1, float64: an independent reference for the variable-filter case."""
    kh, kw = w.shape[:2]
    ph, pw = (kh - 1) // 2, (kw - 1) // 2
    xp = np.pad(x.astype(np.float64), ((0, 0), (ph, kh - 1 - ph), (pw, kw - 1 - pw), (0, 0)))
    n, h, wd, _ = x.shape
    out = np.zeros((n, h, wd, w.shape[3]))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nhwc,co->nhwo", xp[:, i:i + h, j:j + wd], w[i, j])
    return out.astype(np.float32)


def test_image_read_by_two_convs_is_padded_once(gl):
    rng = np.random.default_rng(6)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((1, 8, 8, 3), name="x")
        y1 = ff.conv2d(xp, ff.constant(normal(rng, 3, 3, 3, 8)), padding="SAME")
        y2 = ff.conv2d(xp, ff.constant(normal(rng, 1, 1, 3, 4)), padding="VALID")
    x = normal(rng, 1, 8, 8, 3)
    _check(g, {"y1": y1, "y2": y2}, {xp: x})
    names = [k.name for k in _kernels(g, [y1, y2], {xp: x})]
    assert sum("channels" in n for n in names) == 1, names


@pytest.mark.parametrize("c", [1, 2, 5])
def test_channels_padding_would_add_too_many_are_left(gl, c):
    rng = np.random.default_rng(c)
    g, xp, y = _conv_graph((1, 8, 8, c), normal(rng, 3, 3, c, 8), padding="SAME")
    x = normal(rng, 1, 8, 8, c)
    _check(g, {"y": y}, {xp: x})
    assert not any("channels" in k.name for k in _kernels(g, [y], {xp: x}))


def test_small_convs_and_the_knob_off_are_left(gl):
    rng = np.random.default_rng(8)
    g, xp, y = _conv_graph((1, 8, 8, 3), normal(rng, 3, 3, 3, 8), padding="SAME")
    x = normal(rng, 1, 8, 8, 3)
    small = ff.Tuning.named("webgl")          # 8 * 8 * 9 * 3 * 8 < 2^20 multiply-adds
    for tuning in (OFF, small):
        assert not any("channels" in k.name for k in _kernels(g, [y], {xp: x}, tuning))
    _check(g, {"y": y}, {xp: x}, tuning=OFF)


# -- pad_rows: a pad of the last axis alone to rows of whole texels --------------------------
@pytest.mark.parametrize("shape, pad", [
    ((5, 7, 3), (0, 1)),            # an image's channels, 3 -> 4
    ((4, 6), (2, 0)),               # before only: negative starts
    ((3, 5), (1, 2)),               # both sides, 5 -> 8
    ((2, 9), (3, 4)),               # 9 -> 16, a row of 4 texels
    ((7, 4), (4, 0)),               # already whole texels, moved by one
    ((1, 2), (5, 1)),               # more padding than data
])
def test_pad_rows_matches_numpy(gl, shape, pad):
    rng = np.random.default_rng(len(shape) + sum(pad))
    x = normal(rng, *shape)
    x.flat[0], x.flat[-1] = np.nan, -np.inf
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(shape, name="x")
        y = ff.pad(xp, [(0, 0)] * (len(shape) - 1) + [pad], constant_values=-2.5)
    out, ref = run_both(g, {"y": y}, {xp: x})
    expected = np.pad(x, [(0, 0)] * (len(shape) - 1) + [pad], constant_values=-2.5)
    assert_matches(ref["y"], expected, rtol=0, atol=0)
    assert_matches(out["y"], expected, rtol=0, atol=0)
