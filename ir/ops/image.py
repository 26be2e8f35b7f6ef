"""Image resizing with TensorFlow 1's exact coordinate rules (NHWC).

resize_bilinear(images) {size, align_corners, half_pixel_centers} and
resize_nearest_neighbor(images) {same attrs}, as tf.compat.v1.image.resize_bilinear /
resize_nearest_neighbor; and their gradients as ops of their own,
resize_bilinear_grad(dy, images) / resize_nearest_neighbor_grad(dy, images) (TF's
ResizeBilinearGrad / ResizeNearestNeighborGrad: `images` gives the shape only).

Per spatial axis, with in/out the input and output sizes, in float32 as TF computes:
    scale = (in - 1) / (out - 1)  if align_corners and out > 1,  else  in / out
bilinear:  src(o) = (o + 0.5) * scale - 0.5  with half_pixel_centers, else o * scale;
           lower = max(floor(src), 0), upper = min(ceil(src), in - 1),
           lerp = src - floor(src);  out = top + (bottom - top) * y_lerp, where
           top/bottom = left + (right - left) * x_lerp.
nearest:   src(o) = (o + 0.5) * scale  with half_pixel_centers, else o * scale;
           index = min(round(src) if align_corners else floor(src), in - 1),
           then max(index, 0) with half_pixel_centers (round: half away from zero).
align_corners and half_pixel_centers cannot both be true (TensorFlow's rule).

Instead of size, a resize may give scale = (sh, sw), whole-number factors: the output
is (height * sh, width * sw), known when the input's are and inferred again when a feed
fixes them (Keras's UpSampling2D on an image of any size); the coordinates are then
those of the size it implies.
"""
from __future__ import annotations

import numpy as np

from ..errors import AttrError, DTypeError, ShapeError
from ..types import TensorType, format_shape
from .common import apply
from .registry import OpDef, register

RESIZE_ATTRS = {"size": None, "scale": None, "align_corners": False,
                "half_pixel_centers": False}


# -- the coordinate rules (shared by the references and the GL lowering) -------------
def resize_scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    """TensorFlow's CalculateResizeScale, in float32."""
    if align_corners and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


def bilinear_taps(in_size, out_size, align_corners, half_pixel_centers):
    """Per output coordinate: (lower index, upper index, lerp weight as float32)."""
    scale = resize_scale(in_size, out_size, align_corners)
    o = np.arange(out_size, dtype=np.float32)
    src = (o + np.float32(0.5)) * scale - np.float32(0.5) if half_pixel_centers \
        else o * scale
    floor = np.floor(src)
    lower = np.maximum(floor.astype(np.int64), 0)
    upper = np.minimum(np.ceil(src).astype(np.int64), in_size - 1)
    return lower, upper, (src - floor).astype(np.float32)


def nearest_indices(in_size, out_size, align_corners, half_pixel_centers):
    """Per output coordinate: the input index it copies."""
    scale = resize_scale(in_size, out_size, align_corners)
    o = np.arange(out_size, dtype=np.float32)
    src = (o + np.float32(0.5)) * scale if half_pixel_centers else o * scale
    picked = np.floor(src).astype(np.int64)
    if align_corners:                   # roundf: half away from zero (src >= 0 here)
        picked += (src - np.floor(src) >= np.float32(0.5))
    index = np.minimum(picked, in_size - 1)
    return np.maximum(index, 0) if half_pixel_centers else index


# -- type rules ---------------------------------------------------------------------
def _check_flags(attrs):
    if attrs["align_corners"] and attrs["half_pixel_centers"]:
        raise AttrError("align_corners and half_pixel_centers cannot both be True "
                        "(TensorFlow's rule: half_pixel_centers needs align_corners=False)")


def _check_attrs(attrs):
    _check_flags(attrs)
    if (attrs["size"] is None) == (attrs["scale"] is None):
        raise AttrError("give size (new_height, new_width) or scale (whole-number factors), "
                        f"not {'both' if attrs['size'] is not None else 'neither'}")
    key = "size" if attrs["size"] is not None else "scale"
    pair = attrs[key]
    what = "(new_height, new_width)" if key == "size" else "(height factor, width factor)"
    if not isinstance(pair, tuple) or len(pair) != 2 or \
            not all(isinstance(d, int) and not isinstance(d, bool) for d in pair):
        raise AttrError(f"{key} must be two ints {what}, got {pair!r}")
    if pair[0] <= 0 or pair[1] <= 0:
        raise AttrError(f"{key} must be positive, got {pair}")


def output_size(in_size, attrs) -> tuple:
    """The (height, width) a resize outputs for an input of in_size = (height, width):
    its size, or the input's times its scale (None where the input's is unknown)."""
    if attrs["size"] is not None:
        return attrs["size"]
    return tuple(None if d is None else d * f for d, f in zip(in_size, attrs["scale"]))


def _check_images(t, what="images"):
    if t.rank != 4:
        raise ShapeError(f"{what} must be 4-D [batch, height, width, channels], "
                         f"got {format_shape(t.shape)}")
    if any(d == 0 for d in t.shape[1:3]):
        raise ShapeError(f"{what} have an empty spatial dimension: {format_shape(t.shape)}")


def _resize_type(out_dtype=None):
    def infer(types, attrs):
        (t,) = types
        _check_attrs(attrs)
        _check_images(t)
        if t.dtype not in ("float32", "int32"):
            raise DTypeError(f"does not accept {t.dtype} images (accepts float32, int32)")
        h, w = output_size(t.shape[1:3], attrs)
        return TensorType((t.shape[0], h, w, t.shape[3]), out_dtype or t.dtype)
    return infer


def _grad_type(types, attrs):
    dy, x = types
    _check_flags(attrs)
    _check_images(dy, "gradients")
    _check_images(x, "original images")
    if dy.dtype != "float32":
        raise DTypeError(f"gradients must be float32, got {dy.dtype}")
    for axis, what in ((0, "batch"), (3, "channels")):
        if dy.shape[axis] is not None and x.shape[axis] is not None and \
                dy.shape[axis] != x.shape[axis]:
            raise ShapeError(f"gradients have {dy.shape[axis]} {what} but the original "
                             f"images have {x.shape[axis]}")
    return TensorType(x.shape, "float32")


# -- references -----------------------------------------------------------------------
def _bilinear_ref(arrays, attrs):
    (x,) = arrays
    x = x if x.dtype.kind == "f" else x.astype(np.float32)
    (h, w), ac, hp = output_size(x.shape[1:3], attrs), attrs["align_corners"], \
        attrs["half_pixel_centers"]
    top, bottom, ly = bilinear_taps(x.shape[1], h, ac, hp)
    left, right, lx = bilinear_taps(x.shape[2], w, ac, hp)
    ly = ly.astype(x.dtype)[None, :, None, None]
    lx = lx.astype(x.dtype)[None, None, :, None]
    rows_t, rows_b = x[:, top], x[:, bottom]
    t = rows_t[:, :, left] + (rows_t[:, :, right] - rows_t[:, :, left]) * lx
    b = rows_b[:, :, left] + (rows_b[:, :, right] - rows_b[:, :, left]) * lx
    return t + (b - t) * ly


def _nearest_ref(arrays, attrs):
    (x,) = arrays
    (h, w), ac, hp = output_size(x.shape[1:3], attrs), attrs["align_corners"], \
        attrs["half_pixel_centers"]
    ys = nearest_indices(x.shape[1], h, ac, hp)
    xs = nearest_indices(x.shape[2], w, ac, hp)
    return x[:, ys][:, :, xs]


def _bilinear_grad_ref(arrays, attrs):
    """TF's ResizeBilinearGrad: scatter each dy pixel onto its four taps."""
    dy, x = arrays
    ac, hp = attrs["align_corners"], attrs["half_pixel_centers"]
    out = np.zeros(x.shape, dy.dtype)
    top, bottom, ly = bilinear_taps(x.shape[1], dy.shape[1], ac, hp)
    left, right, lx = bilinear_taps(x.shape[2], dy.shape[2], ac, hp)
    ly, lx = ly.astype(dy.dtype), lx.astype(dy.dtype)
    one = dy.dtype.type(1)
    for ys, wy in ((top, one - ly), (bottom, ly)):
        for xs, wx in ((left, one - lx), (right, lx)):
            contrib = dy * wy[None, :, None, None] * wx[None, None, :, None]
            np.add.at(out, (slice(None), ys[:, None], xs[None, :]), contrib)
    return out


def _nearest_grad_ref(arrays, attrs):
    dy, x = arrays
    ac, hp = attrs["align_corners"], attrs["half_pixel_centers"]
    out = np.zeros(x.shape, dy.dtype)
    ys = nearest_indices(x.shape[1], dy.shape[1], ac, hp)
    xs = nearest_indices(x.shape[2], dy.shape[2], ac, hp)
    np.add.at(out, (slice(None), ys[:, None], xs[None, :]), dy)
    return out


register(OpDef("resize_bilinear", "image", _resize_type("float32"), _bilinear_ref,
               attrs=dict(RESIZE_ATTRS), num_inputs=1,
               tf="tf.compat.v1.image.resize_bilinear"))
register(OpDef("resize_nearest_neighbor", "image", _resize_type(), _nearest_ref,
               attrs=dict(RESIZE_ATTRS), num_inputs=1,
               tf="tf.compat.v1.image.resize_nearest_neighbor"))
register(OpDef("resize_bilinear_grad", "image", _grad_type, _bilinear_grad_ref,
               attrs={"align_corners": False, "half_pixel_centers": False}, num_inputs=2,
               tf="ResizeBilinearGrad"))
register(OpDef("resize_nearest_neighbor_grad", "image", _grad_type, _nearest_grad_ref,
               attrs={"align_corners": False, "half_pixel_centers": False}, num_inputs=2,
               tf="ResizeNearestNeighborGrad"))


# -- builders -----------------------------------------------------------------------------
def _size_attr(size):
    try:
        values = tuple(size)
    except TypeError:
        return size                     # reported by type inference, with the node
    return tuple(int(d) if isinstance(d, (int, np.integer)) and not isinstance(d, bool)
                 else d for d in values)


def resize(op: str, images, size, align_corners=False, half_pixel_centers=False, name=None,
           scale=None):
    """resize_bilinear or resize_nearest_neighbor, to size or (size None) by scale."""
    return apply(op, [images], {"size": None if size is None else _size_attr(size),
                                "scale": None if scale is None else _size_attr(scale),
                                "align_corners": bool(align_corners),
                                "half_pixel_centers": bool(half_pixel_centers)}, name)


def resize_grad(op: str, dy, images, align_corners=False, half_pixel_centers=False,
                name=None):
    """resize_bilinear_grad or resize_nearest_neighbor_grad: d(images) from dy."""
    return apply(op, [dy, images], {"align_corners": bool(align_corners),
                                    "half_pixel_centers": bool(half_pixel_centers)}, name)
