"""Filter taps that only ever land on padding: a 1-pixel image dimension with SAME
padding (or a stride that steps over every image row a tap could reach) leaves some taps
of a 3x3 filter reading padding for every output. Padding is zeros, and 0 * NaN =
0 * inf = NaN (TensorFlow, and the formula below), so a NaN or inf weight at such a tap
makes its channel's outputs NaN. After 149bfe2 the conv kernels multiplied a padding
tap by 0, but Mesa folded a constant 0 * w to 0 where a tap never lands on the image:
the direct conv2d and depthwise kernels gave finite values here (fixed: the padding's
0 is one the compiler cannot see). Compared with an independent float64 formula
(explicit zero padding, every tap multiplied); the numpy reference's own edge, where
np.tensordot's BLAS axpy skipped a zero multiplier for one output pixel and one channel,
is the last test."""
import numpy as np
import pytest

import fragflow as ff


def _conv_formula(x, w, stride, depthwise):
    """SAME conv2d / depthwise (multiplier 1) in float64, every tap multiplied."""
    n, h, wd, c = x.shape
    kh, kw = w.shape[:2]
    out_h, out_w = -(-h // stride), -(-wd // stride)
    pad_h = max((out_h - 1) * stride + kh - h, 0)
    pad_w = max((out_w - 1) * stride + kw - wd, 0)
    xp = np.pad(x.astype(np.float64), [(0, 0), (pad_h // 2, pad_h - pad_h // 2),
                                       (pad_w // 2, pad_w - pad_w // 2), (0, 0)])
    cout = c if depthwise else w.shape[-1]
    out = np.zeros((n, out_h, out_w, cout))
    with np.errstate(invalid="ignore"):
        for i in range(out_h):
            for j in range(out_w):
                for ky in range(kh):
                    for kx in range(kw):
                        pix = xp[:, i * stride + ky, j * stride + kx, :]      # (n, c)
                        if depthwise:
                            out[:, i, j, :] += pix * w[ky, kx, :, 0]
                        else:
                            out[:, i, j, :] += (pix[:, :, None] * w[ky, kx]).sum(axis=1)
    return out.astype(np.float32)


@pytest.mark.parametrize("x_shape, w_shape, stride, depthwise, tap", [
    ((1, 1, 1, 8), (3, 3, 8, 16), 1, False, (0, 1, 0, 5)),     # 1x1 image: direct conv2d
    ((1, 1, 5, 3), (3, 3, 3, 8), 1, False, (0, 1, 2, 1)),      # 1-row image, window rows
    ((2, 1, 1, 4), (3, 3, 4, 1), 1, True, (0, 1, 2, 0)),       # depthwise, batch 2
    ((1, 5, 1, 8), (3, 3, 8, 4), 1, False, (1, 0, 0, 3)),      # 1-column image
])
def test_nan_weight_at_a_padding_only_tap(gl, x_shape, w_shape, stride, depthwise, tap):
    rng = np.random.default_rng(sum(x_shape))
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    w[tap] = np.nan
    g = ff.Graph()
    with g.as_default():
        xp, wp = ff.placeholder(x_shape, name="x"), ff.placeholder(w_shape, name="w")
        conv = ff.depthwise_conv2d if depthwise else ff.conv2d
        y = conv(xp, wp, strides=stride, padding="SAME")
    want = _conv_formula(x, w, stride, depthwise)
    assert np.isnan(want).any() and np.isfinite(want).any()
    got = ff.Session(g).run(y, {xp: x, wp: w})
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)


def test_numpy_reference_multiplies_padding_by_nan_for_one_pixel():
    """The numpy reference (the tests' oracle) on the same edge: a 1x1 image with one
    channel, where numpy's tensordot / np.dot took BLAS axpy, which skips a zero
    multiplier, so 0 * NaN came out 0. conv2d, and both of its gradients (input: one
    output channel and a zero dy; filter: one input channel and a NaN dy)."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 1, 1, 1), name="x")
        w = ff.placeholder((3, 3, 1, 4), name="w")
        up = ff.placeholder((1, 1, 1, 4), name="up")
        dw, = ff.gradients(ff.reduce_sum(ff.conv2d(x, w, padding="SAME") * up), [w])
        x4 = ff.placeholder((1, 1, 1, 4), name="x4")
        w1 = ff.placeholder((3, 3, 4, 1), name="w1")
        up1 = ff.placeholder((1, 1, 1, 1), name="up1")
        y = ff.conv2d(x, w, padding="SAME")
        dx, = ff.gradients(ff.reduce_sum(ff.conv2d(x4, w1, padding="SAME") * up1), [x4])
    w_nan = np.ones((3, 3, 1, 4), np.float32)
    w_nan[0, 0, 0, 1] = np.nan                     # a padding-only tap of channel 1
    w1_nan = np.ones((3, 3, 4, 1), np.float32)
    w1_nan[1, 1, 2, 0] = np.nan                    # the centre tap, input channel 2
    up_nan = np.float32([1, np.nan, 2, 3]).reshape(1, 1, 1, 4)
    feeds = {x: np.full((1, 1, 1, 1), 0.5, np.float32), w: w_nan, up: up_nan,
             x4: np.ones((1, 1, 1, 4), np.float32), w1: w1_nan,
             up1: np.zeros((1, 1, 1, 1), np.float32)}
    got_y, got_dx, got_dw = ff.Session(g, backend="numpy", passes=[]).run([y, dx, dw], feeds)
    # y: the centre tap 0.5 * 1, the rest 0 * w: NaN in channel 1 only
    np.testing.assert_array_equal(got_y.ravel(), np.float32([0.5, np.nan, 0.5, 0.5]))
    # dx = dy * w at the centre tap (dy = 0): 0, NaN where w is
    np.testing.assert_array_equal(got_dx.ravel(), np.float32([0, 0, np.nan, 0]))
    # dw[k, 0, m] = x_padded at tap k * dy[m]: NaN in column 1 at every tap
    want_dw = np.zeros((3, 3, 1, 4), np.float32)
    want_dw[1, 1, 0] = 0.5 * up_nan.ravel()
    want_dw[..., 1] = np.nan
    np.testing.assert_array_equal(got_dw, want_dw)
