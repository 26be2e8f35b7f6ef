"""The image family, NHWC: TensorFlow 1's resize ops (tf.compat.v1.image.resize_bilinear
/ resize_nearest_neighbor, kernels of their own in ir/ops/image.py) and crop_and_resize
(built from gathers and elementwise arithmetic: its numpy reference and gradients are
those of its parts)."""
from __future__ import annotations

import numpy as np

from ..ir.errors import AttrError, ShapeError
from ..ir.ops import image as _image
from . import ops_math as _math, ops_structure as _structure
from .operands import as_tensor, operands, static_shape
from .ops_graph import constant, name_scope
from .tensor import wrap

# crop_and_resize is ff.image.crop_and_resize only (as tf.image.crop_and_resize), not flat in ff
__all__ = ["resize_bilinear", "resize_nearest_neighbor"]


def resize_bilinear(images, size=None, align_corners=False, half_pixel_centers=False,
                    name=None, *, scale=None):
    """Resize images [batch, height, width, channels] to size = (new_height, new_width)
    by bilinear interpolation, with TensorFlow 1's coordinates (the output is float32;
    int32 images are converted).

    scale = (in - 1) / (out - 1) with align_corners (and out > 1), else in / out; an
    output pixel o samples the input at o * scale, or at (o + 0.5) * scale - 0.5 with
    half_pixel_centers (clamped to the image). align_corners and half_pixel_centers
    cannot both be True. `size` is a pair of Python ints (not a tensor); or, without
    size, `scale` gives whole-number factors (sh, sw) and the output is (height * sh,
    width * sw), following the fed images' size where the graph leaves it unknown.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.resize_bilinear(np.array([0., 1.], np.float32).reshape(1, 1, 2, 1), (1, 4))
    >>> ff.Session(g, backend="numpy").run(y).ravel().tolist()
    [0.0, 0.5, 1.0, 1.0]
    """
    return wrap(_image.resize("resize_bilinear", operands(images)[0], size, align_corners,
                               half_pixel_centers, name=name, scale=scale))


def resize_nearest_neighbor(images, size=None, align_corners=False, half_pixel_centers=False,
                            name=None, *, scale=None):
    """Resize images [batch, height, width, channels] (float32 or int32) to size =
    (new_height, new_width) by copying the nearest pixel, with TensorFlow 1's rules:
    index = floor(o * scale), round(o * scale) with align_corners, or
    floor((o + 0.5) * scale) with half_pixel_centers, clamped to the image (scale as
    in resize_bilinear; `scale` instead of size as there).

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.resize_nearest_neighbor(np.arange(2, dtype=np.int32).reshape(1, 1, 2, 1),
    ...                                    (1, 4))
    >>> ff.Session(g, backend="numpy").run(y).ravel().tolist()
    [0, 0, 1, 1]
    """
    return wrap(_image.resize("resize_nearest_neighbor", operands(images)[0], size,
                               align_corners, half_pixel_centers, name=name, scale=scale))


def crop_and_resize(image, boxes, box_indices, crop_size, method="bilinear",
                    extrapolation_value=0.0, name=None):
    """Crops of image [batch, height, width, channels] resized to crop_size, as
    tf.image.crop_and_resize: boxes [n, 4] hold normalised (y1, x1, y2, x2) (y2 < y1
    flips), box_indices [n] int32 the image of each box; the result is
    [n, crop_height, crop_width, channels] float32. Samples outside the image get
    extrapolation_value. method "bilinear" or "nearest". Gradients flow to image and
    boxes (bilinear). n, height, width and channels must be static."""
    method = str(method).lower()
    if method not in ("bilinear", "nearest"):
        raise AttrError(f"crop_and_resize: method must be 'bilinear' or 'nearest', got "
                        f"{method!r}")
    with name_scope(name or "crop_and_resize"):
        img = _math.cast(as_tensor(image), "float32")
        bx, idx = as_tensor(boxes), as_tensor(box_indices, np.int32)
        _, h, w, c = static_shape(img, "crop_and_resize")
        n = static_shape(bx, "crop_and_resize")[0]
        if tuple(bx.shape) != (n, 4) or tuple(idx.shape) != (n,):
            raise ShapeError(f"crop_and_resize: boxes must be [n, 4] and box_indices [n], "
                             f"got {list(bx.shape)} and {list(idx.shape)}")
        ch, cw = (int(s) for s in crop_size)
        y1, x1, y2, x2 = (bx[:, i] for i in range(4))
        in_y = _sample_coords(y1, y2, h, ch)               # [n, ch]
        in_x = _sample_coords(x1, x2, w, cw)               # [n, cw]
        inside = _math.logical_and(
            _structure.expand_dims(_inside(in_y, h), 2),
            _structure.expand_dims(_inside(in_x, w), 1))          # [n, ch, cw]
        if method == "nearest":
            out = _gather(img, idx, _math.round(in_y), _math.round(in_x), n, ch, cw, h, w)
        else:
            top, left = _math.floor(in_y), _math.floor(in_x)
            bottom, right = _math.ceil(in_y), _math.ceil(in_x)
            y_lerp = _structure.reshape(in_y - top, [n, ch, 1, 1])
            x_lerp = _structure.reshape(in_x - left, [n, 1, cw, 1])
            tl = _gather(img, idx, top, left, n, ch, cw, h, w)
            tr = _gather(img, idx, top, right, n, ch, cw, h, w)
            bl = _gather(img, idx, bottom, left, n, ch, cw, h, w)
            br = _gather(img, idx, bottom, right, n, ch, cw, h, w)
            upper = tl + (tr - tl) * x_lerp
            lower = bl + (br - bl) * x_lerp
            out = upper + (lower - upper) * y_lerp
        return _math.where(_structure.expand_dims(inside, -1), out, float(extrapolation_value))


def _sample_coords(lo, hi, size, count):
    """TensorFlow's sample positions of a box side: [n, count], in pixels."""
    if count > 1:
        with lo.graph.as_default():
            steps = constant(np.arange(count, dtype=np.float32).reshape(1, count))
        scale = (hi - lo) * ((size - 1) / (count - 1))
        return _structure.expand_dims(lo * (size - 1), 1) + steps * _structure.expand_dims(scale, 1)
    return _structure.expand_dims(0.5 * (lo + hi) * (size - 1), 1)


def _inside(coords, size):
    return _math.logical_and(_math.greater_equal(coords, 0.0),
                             _math.less_equal(coords, float(size - 1)))


def _gather(img, idx, ys, xs, n, ch, cw, h, w):
    """img[idx[b], ys[b, i], xs[b, j]] for every (b, i, j): [n, ch, cw, channels]; the
    coordinates are clamped into the image (samples outside are masked later)."""
    yi = _math.cast(_math.clip_by_value(ys, 0.0, float(h - 1)), "int32")
    xi = _math.cast(_math.clip_by_value(xs, 0.0, float(w - 1)), "int32")
    shape = [n, ch, cw]
    b = _structure.broadcast_to(_structure.reshape(idx, [n, 1, 1]), shape)
    y = _structure.broadcast_to(_structure.reshape(yi, [n, ch, 1]), shape)
    x = _structure.broadcast_to(_structure.reshape(xi, [n, 1, cw]), shape)
    return _structure.gather_nd(img, _structure.stack([b, y, x], axis=-1))
