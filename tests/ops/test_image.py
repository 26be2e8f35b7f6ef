"""resize_bilinear and resize_nearest_neighbor (and their gradient ops) on GL against
the numpy reference executor, and both against an independent loop implementation of
TensorFlow 1's kernels (resize_bilinear_op.cc / resize_nearest_neighbor_op.cc), written
pixel by pixel in float32 below.

Cases: up- and downscaling, non-integer scales, 1-pixel inputs and outputs, all three
valid (align_corners, half_pixel_centers) combinations; int32 images for both ops.
One graph per test holds every case (each kernel costs ~100-300 ms of llvmpipe JIT)."""
import math

import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, run_both

f32 = np.float32
FLAGS = [(False, False), (True, False), (False, True)]
# (input height, width) -> (output height, width)
SIZES = [((4, 5), (7, 9)),        # up, non-integer scales
         ((7, 9), (3, 4)),        # down, non-integer
         ((3, 3), (6, 9)),        # integer upscales
         ((1, 1), (3, 2)),        # 1-pixel input
         ((5, 6), (1, 1)),        # 1-pixel output
         ((6, 2), (6, 2))]        # identity size


# -- the independent oracle: TF's loops, one pixel at a time ---------------------------
def tf_scale(n_in, n_out, align_corners):
    if align_corners and n_out > 1:
        return f32(n_in - 1) / f32(n_out - 1)
    return f32(n_in) / f32(n_out)


def tf_bilinear(images, size, align_corners, half_pixel_centers):
    batch, h, w, ch = images.shape
    oh, ow = size
    sy, sx = tf_scale(h, oh, align_corners), tf_scale(w, ow, align_corners)
    img = images.astype(f32)
    out = np.zeros((batch, oh, ow, ch), f32)

    def interp(o, scale, n):
        src = (f32(o) + f32(0.5)) * scale - f32(0.5) if half_pixel_centers else f32(o) * scale
        lo = max(int(math.floor(src)), 0)
        hi = min(int(math.ceil(src)), n - 1)
        return lo, hi, f32(src - f32(math.floor(src)))

    for y in range(oh):
        top, bottom, ly = interp(y, sy, h)
        for x in range(ow):
            left, right, lx = interp(x, sx, w)
            for b in range(batch):
                t = img[b, top, left] + (img[b, top, right] - img[b, top, left]) * lx
                bo = img[b, bottom, left] + (img[b, bottom, right] - img[b, bottom, left]) * lx
                out[b, y, x] = t + (bo - t) * ly
    return out


def tf_nearest_index(o, scale, n, align_corners, half_pixel_centers):
    src = (f32(o) + f32(0.5)) * scale if half_pixel_centers else f32(o) * scale
    # roundf rounds half away from zero (src >= 0, and src + 0.5 is exact in float64);
    # Python's round() would round half to even
    k = int(math.floor(float(src) + 0.5)) if align_corners else int(math.floor(src))
    k = min(k, n - 1)
    return max(k, 0) if half_pixel_centers else k


def tf_nearest(images, size, align_corners, half_pixel_centers):
    batch, h, w, ch = images.shape
    oh, ow = size
    sy, sx = tf_scale(h, oh, align_corners), tf_scale(w, ow, align_corners)
    out = np.zeros((batch, oh, ow, ch), images.dtype)
    for y in range(oh):
        iy = tf_nearest_index(y, sy, h, align_corners, half_pixel_centers)
        for x in range(ow):
            ix = tf_nearest_index(x, sx, w, align_corners, half_pixel_centers)
            out[:, y, x] = images[:, iy, ix]
    return out


def case_name(hw, size, ac, hp):
    return f"{hw}->{size} ac={ac} hp={hp}"


def images_of(hw, dtype, seed, channels=3, batch=2):
    rng = np.random.default_rng(seed)
    shape = (batch, *hw, channels)
    if dtype == "int32":
        return rng.integers(-1000, 1000, shape).astype(np.int32)
    return rng.standard_normal(shape).astype(np.float32)


# -- forward -------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_resize_matches_tf_formulas(gl, dtype):
    g = ff.Graph()
    feeds, fetches, expected = {}, {}, {}
    with g.as_default():
        for n, (hw, size) in enumerate(SIZES):
            value = images_of(hw, dtype, seed=n)
            x = ff.placeholder(value.shape, dtype, name=f"x{n}")
            feeds[x] = value
            for ac, hp in FLAGS:
                key = case_name(hw, size, ac, hp)
                fetches["bilinear " + key] = ff.resize_bilinear(x, size, ac, hp)
                expected["bilinear " + key] = tf_bilinear(value, size, ac, hp)
                fetches["nearest " + key] = ff.resize_nearest_neighbor(x, size, ac, hp)
                expected["nearest " + key] = tf_nearest(value, size, ac, hp)
    out, ref = run_both(g, fetches, feeds)
    for label in fetches:
        scale = np.max(np.abs(expected[label])) + 1
        rtol = 0 if label.startswith("nearest") else 1e-5
        for got, what in ((out[label], "gl"), (ref[label], "reference")):
            assert_matches(got, expected[label], rtol=rtol,
                           atol=None if rtol == 0 else 1e-6 * scale, what=f"{what} {label}")


def test_nearest_rounding_boundaries(gl):
    """align_corners rounds half away from zero: 2 -> 5 pixels samples 0, .25, .5, .75, 1
    of the way, and .5 picks the far pixel."""
    value = np.arange(2, dtype=np.float32).reshape(1, 1, 2, 1)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(value.shape, name="x")
        y = ff.resize_nearest_neighbor(x, (1, 5), align_corners=True)
    out, ref = run_both(g, y, {x: value})
    np.testing.assert_array_equal(out.ravel(), [0, 0, 1, 1, 1])
    np.testing.assert_array_equal(ref.ravel(), [0, 0, 1, 1, 1])


def test_bilinear_propagates_nan_and_inf_as_tf(gl):
    value = np.random.default_rng(3).standard_normal((1, 4, 4, 2)).astype(np.float32)
    value[0, 1, 2, 0] = np.nan
    value[0, 3, 0, 1] = np.inf
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(value.shape, name="x")
        y = ff.resize_bilinear(x, (7, 6), half_pixel_centers=True)
    out, ref = run_both(g, y, {x: value})
    with np.errstate(invalid="ignore"):
        want = tf_bilinear(value, (7, 6), False, True)
    assert_matches(out, want, rtol=1e-5, atol=1e-5, what="gl")
    assert_matches(ref, want, rtol=1e-5, atol=1e-5, what="reference")


def test_none_batch_resolves_at_feed_time(gl):
    value = images_of((3, 5), "float32", seed=9, batch=3)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 3, 5, 3), name="x")
        y = ff.resize_bilinear(x, (4, 4), align_corners=True)
    assert y.shape == (None, 4, 4, 3)
    out, _ = run_both(g, y, {x: value})
    assert_matches(out, tf_bilinear(value, (4, 4), True, False), rtol=1e-5, atol=1e-5)


def test_a_resize_by_scale_follows_the_fed_size(gl):
    """scale (sh, sw) instead of size: the height and width unknown when built, each fed
    size resized to (h * sh, w * sw) as TF's loops resize to that size; nearest with
    half-pixel centres is the repeat np.repeat makes (1-pixel and odd sides)."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, None, None, 3), name="x")
        fetches = {(kind, ac, hp): fn(x, scale=(3, 2), align_corners=ac,
                                      half_pixel_centers=hp)
                   for kind, fn in (("bilinear", ff.resize_bilinear),
                                    ("nearest", ff.resize_nearest_neighbor))
                   for ac, hp in FLAGS}
    assert {t.shape for t in fetches.values()} == {(None, None, None, 3)}
    for n, hw in enumerate([(1, 1), (5, 7), (2, 13)]):
        value = images_of(hw, "float32", seed=20 + n)
        out, ref = run_both(g, fetches, {x: value})
        size = (hw[0] * 3, hw[1] * 2)
        for (kind, ac, hp), got in out.items():
            want = (tf_bilinear if kind == "bilinear" else tf_nearest)(value, size, ac, hp)
            rtol = 0 if kind == "nearest" else 1e-5
            for result, what in ((got, "gl"), (ref[kind, ac, hp], "reference")):
                assert_matches(result, want, rtol=rtol, atol=None if rtol == 0 else 1e-5,
                               what=f"{what} {kind} {hw} ac={ac} hp={hp}")
        np.testing.assert_array_equal(out["nearest", False, True],
                                      value.repeat(3, axis=1).repeat(2, axis=2))


# -- the gradient ops, as ops: GL gather against the reference's scatter -----------------
def tf_bilinear_grad(dy, shape, align_corners, half_pixel_centers):
    """TF's ResizeBilinearGrad loop: every dy pixel adds to its four taps."""
    batch, h, w, _ = shape
    _, oh, ow, _ = dy.shape
    sy, sx = tf_scale(h, oh, align_corners), tf_scale(w, ow, align_corners)
    out = np.zeros(shape, np.float64)

    def taps(o, scale, n):
        src = (f32(o) + f32(0.5)) * scale - f32(0.5) if half_pixel_centers else f32(o) * scale
        lerp = float(f32(src - f32(math.floor(src))))
        return max(int(math.floor(src)), 0), min(int(math.ceil(src)), n - 1), lerp

    for y in range(oh):
        top, bottom, ly = taps(y, sy, h)
        for x in range(ow):
            left, right, lx = taps(x, sx, w)
            d = dy[:, y, x].astype(np.float64)
            out[:, top, left] += d * (1 - ly) * (1 - lx)
            out[:, top, right] += d * (1 - ly) * lx
            out[:, bottom, left] += d * ly * (1 - lx)
            out[:, bottom, right] += d * ly * lx
    return out


def tf_nearest_grad(dy, shape, align_corners, half_pixel_centers):
    batch, h, w, _ = shape
    _, oh, ow, _ = dy.shape
    sy, sx = tf_scale(h, oh, align_corners), tf_scale(w, ow, align_corners)
    out = np.zeros(shape, np.float64)
    for y in range(oh):
        iy = tf_nearest_index(y, sy, h, align_corners, half_pixel_centers)
        for x in range(ow):
            ix = tf_nearest_index(x, sx, w, align_corners, half_pixel_centers)
            out[:, iy, ix] += dy[:, y, x]
    return out


GRAD_SIZES = SIZES + [((2, 3), (17, 19)),     # windows of many dy pixels per input pixel
                      ((1, 2), (40, 3))]      # scale 0 with align_corners: every row


def test_gradient_ops_match_tf_scatter(gl):
    g = ff.Graph()
    feeds, fetches, expected, scales = {}, {}, {}, {}
    with g.as_default():
        for n, (hw, size) in enumerate(GRAD_SIZES):
            value = images_of(hw, "float32", seed=20 + n)
            dy_value = images_of(size, "float32", seed=40 + n)
            x = ff.placeholder(value.shape, name=f"x{n}")
            dy = ff.placeholder(dy_value.shape, name=f"dy{n}")
            feeds.update({x: value, dy: dy_value})
            for ac, hp in FLAGS:
                key = case_name(hw, size, ac, hp)
                for kind, oracle in (("bilinear", tf_bilinear_grad),
                                     ("nearest", tf_nearest_grad)):
                    op = "resize_bilinear" if kind == "bilinear" else "resize_nearest_neighbor"
                    y = getattr(ff, op)(x, size, ac, hp)
                    (dx,) = ff.gradients(y, [x], grad_ys=[dy])
                    fetches[f"{kind} {key}"] = dx
                    expected[f"{kind} {key}"] = oracle(dy_value, value.shape, ac, hp)
                    scales[f"{kind} {key}"] = oracle(np.abs(dy_value), value.shape, ac, hp)
    out, ref = run_both(g, fetches, feeds)
    for label in fetches:
        want = expected[label].astype(np.float32)
        scale = scales[label].astype(np.float32) + 1e-3
        assert_matches(out[label], want, rtol=1e-5, scale=scale * 10, what=f"gl {label}")
        assert_matches(ref[label], want, rtol=1e-5, scale=scale * 10, what=f"ref {label}")


def test_gradient_kernel_is_a_gather(gl):
    """The GL gradient kernel reads dy only (the images give a shape)."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 3, 4, 2), name="x")
        y = ff.resize_bilinear(x, (5, 7))
        (dx,) = ff.gradients(ff.sum(y), [x])
    with ff.Session(g) as sess:
        fn = sess.compile([dx], feeds=[x])
    grad_kernels = [k for k in fn.kernels if k.op == "resize_bilinear_grad"]
    assert len(grad_kernels) == 1 and len(grad_kernels[0].inputs) == 1


def test_gradients_are_the_gradient_ops():
    """resize_bilinear_grad / resize_nearest_neighbor_grad nodes (TF's ResizeBilinearGrad
    and ResizeNearestNeighborGrad), with the forward's flags."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 3, 4, 2), name="x")
        for op in ("resize_bilinear", "resize_nearest_neighbor"):
            (dx,) = ff.gradients(ff.sum(getattr(ff, op)(x, (5, 7), half_pixel_centers=True)), [x])
            assert dx.op.op == op + "_grad"
            assert dx.op.attrs["half_pixel_centers"] and not dx.op.attrs["align_corners"]


# -- errors ---------------------------------------------------------------------------
def test_build_time_errors():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 4, 4, 3), name="x")
        with pytest.raises(ff.AttrError, match=r"resize_bilinear .*cannot both be True"):
            ff.resize_bilinear(x, (2, 2), align_corners=True, half_pixel_centers=True)
        with pytest.raises(ff.AttrError, match="cannot both be True"):
            ff.resize_nearest_neighbor(x, (2, 2), align_corners=True,
                                       half_pixel_centers=True)
        with pytest.raises(ff.AttrError, match="positive"):
            ff.resize_bilinear(x, (0, 2))
        with pytest.raises(ff.AttrError, match="two ints"):
            ff.resize_bilinear(x, (2, 2, 2))
        with pytest.raises(ff.AttrError, match="two ints"):
            ff.resize_bilinear(x, 4)
        with pytest.raises(ff.ShapeError, match="4-D"):
            ff.resize_bilinear(ff.placeholder((4, 4, 3)), (2, 2))
        with pytest.raises(ff.DTypeError, match="bool"):
            ff.resize_nearest_neighbor(ff.placeholder((1, 2, 2, 1), "bool"), (3, 3))
        with pytest.raises(ff.AttrError, match="give size .* or scale .*not both"):
            ff.resize_bilinear(x, (2, 2), scale=(2, 2))
        with pytest.raises(ff.AttrError, match="not neither"):
            ff.resize_nearest_neighbor(x)
        with pytest.raises(ff.AttrError, match=r"scale must be positive, got \(0, 2\)"):
            ff.resize_nearest_neighbor(x, scale=(0, 2))
        with pytest.raises(ff.AttrError, match="scale must be two ints"):
            ff.resize_bilinear(x, scale=(1.5, 2))
