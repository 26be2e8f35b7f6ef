"""TensorFlow's max_pool_with_argmax and crop_and_resize, built from fragflow's ops
(slices, stacks, gathers and elementwise arithmetic; no kernel of their own). Their
numpy reference is the references of those ops, their gradients follow from theirs.

>>> import fragflow as ff, numpy as np
>>> g = ff.Graph()
>>> with g.as_default():
...     x = ff.constant(np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1))
...     values, argmax = ff.nn.max_pool_with_argmax(x, 2, 2, "VALID")
>>> ff.Session(g, backend="numpy").run(argmax).ravel().tolist()
[5, 7, 13, 15]
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import AttrError, DTypeError, ShapeError
from . import ops as _ops, ops_conv as _conv, ops_math as _math, ops_structure as _structure
from .ops_composite import _static, _tensor

__all__ = ["max_pool_with_argmax", "crop_and_resize"]


def _pair(value, what):
    """An int, a pair, or TensorFlow's [1, a, b, 1] -> (a, b)."""
    v = [int(value)] * 2 if isinstance(value, (int, np.integer)) else [int(a) for a in value]
    if len(v) == 4:
        if v[0] != 1 or v[3] != 1:
            raise AttrError(f"max_pool_with_argmax: {what} {list(value)} must be 1 on the "
                            f"batch and channel axes")
        v = v[1:3]
    if len(v) != 2 or min(v) < 1:
        raise AttrError(f"max_pool_with_argmax: bad {what} {value!r}")
    return v


def max_pool_with_argmax(input, ksize, strides, padding, Targmax="int32",  # noqa: A002,N803
                         include_batch_index=False, name=None):
    """(max_pool's output, argmax) as tf.nn.max_pool_with_argmax on NHWC float32
    input: argmax holds each maximum's flat index ((y * width + x) * channels + c, plus
    b * height * width * channels with include_batch_index), int32; the first maximum
    in row-major window order on ties, as TensorFlow's CPU kernel. The values have
    max_pool's gradient; argmax has none. Builds one strided slice per window offset
    (kh * kw of them), so keep windows small."""
    if Targmax not in ("int32", "int64", np.int32, np.int64):
        raise DTypeError(f"max_pool_with_argmax: Targmax {Targmax!r} is not int32")
    with _ops.name_scope(name or "max_pool_with_argmax"):
        x = _tensor(input)
        if x.ndim != 4 or x.dtype != "float32":
            raise ShapeError(f"max_pool_with_argmax needs a float32 NHWC input, got {x!r}")
        kh, kw = _pair(ksize, "ksize")
        sh, sw = _pair(strides, "strides")
        n, h, w, c = x.shape
        if None in (h, w, c) or (include_batch_index and n is None):
            raise ShapeError(f"max_pool_with_argmax needs static height, width and channels "
                             f"(and batch with include_batch_index), got {list(x.shape)}")
        padding = str(padding).upper()
        if padding == "SAME":
            oh, ow = -(-h // sh), -(-w // sw)
            pad_h = max((oh - 1) * sh + kh - h, 0)
            pad_w = max((ow - 1) * sw + kw - w, 0)
        elif padding == "VALID":
            oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
            pad_h = pad_w = 0
        else:
            raise AttrError(f"max_pool_with_argmax: padding must be SAME or VALID, got "
                            f"{padding!r}")
        if oh < 1 or ow < 1:
            raise ShapeError(f"max_pool_with_argmax: a {kh}x{kw} window does not fit "
                             f"{h}x{w}")
        top, left = pad_h // 2, pad_w // 2
        values = _conv.max_pool(x, [kh, kw], [sh, sw], padding)
        padded = _structure.pad(x, [[0, 0], [top, pad_h - top], [left, pad_w - left], [0, 0]],
                                constant_values=-np.inf) if pad_h or pad_w else x
        windows = [padded[:, dy:dy + sh * (oh - 1) + 1:sh, dx:dx + sw * (ow - 1) + 1:sw, :]
                   for dy in range(kh) for dx in range(kw)]
        offset = _ops.argmax(_structure.stack(windows, axis=-1), axis=-1)   # [n, oh, ow, c]
        with x.graph.as_default():
            base_y = _ops.constant((np.arange(oh, dtype=np.int32) * sh - top)
                                   .reshape(1, oh, 1, 1))
            base_x = _ops.constant((np.arange(ow, dtype=np.int32) * sw - left)
                                   .reshape(1, 1, ow, 1))
            channel = _ops.constant(np.arange(c, dtype=np.int32).reshape(1, 1, 1, c))
        y = base_y + _ops.floor_div(offset, kw)
        xx = base_x + _ops.mod(offset, kw)
        flat = (y * w + xx) * c + channel
        if include_batch_index:
            with x.graph.as_default():
                batch = _ops.constant(np.arange(n, dtype=np.int32).reshape(n, 1, 1, 1))
            flat = flat + batch * (h * w * c)
        return values, _ops.identity(flat, name="argmax")


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
    with _ops.name_scope(name or "crop_and_resize"):
        img = _ops.cast(_tensor(image), "float32")
        bx, idx = _tensor(boxes), _tensor(box_indices, np.int32)
        _, h, w, c = _static(img, "crop_and_resize")
        n = _static(bx, "crop_and_resize")[0]
        if tuple(bx.shape) != (n, 4) or tuple(idx.shape) != (n,):
            raise ShapeError(f"crop_and_resize: boxes must be [n, 4] and box_indices [n], "
                             f"got {list(bx.shape)} and {list(idx.shape)}")
        ch, cw = (int(s) for s in crop_size)
        y1, x1, y2, x2 = (bx[:, i] for i in range(4))
        in_y = _sample_coords(y1, y2, h, ch)               # [n, ch]
        in_x = _sample_coords(x1, x2, w, cw)               # [n, cw]
        inside = _ops.logical_and(
            _ops.expand_dims(_inside(in_y, h), 2),
            _ops.expand_dims(_inside(in_x, w), 1))          # [n, ch, cw]
        if method == "nearest":
            out = _gather(img, idx, _ops.round(in_y), _ops.round(in_x), n, ch, cw, h, w)
        else:
            top, left = _ops.floor(in_y), _ops.floor(in_x)
            bottom, right = _ops.ceil(in_y), _ops.ceil(in_x)
            y_lerp = _ops.reshape(in_y - top, [n, ch, 1, 1])
            x_lerp = _ops.reshape(in_x - left, [n, 1, cw, 1])
            tl = _gather(img, idx, top, left, n, ch, cw, h, w)
            tr = _gather(img, idx, top, right, n, ch, cw, h, w)
            bl = _gather(img, idx, bottom, left, n, ch, cw, h, w)
            br = _gather(img, idx, bottom, right, n, ch, cw, h, w)
            upper = tl + (tr - tl) * x_lerp
            lower = bl + (br - bl) * x_lerp
            out = upper + (lower - upper) * y_lerp
        return _ops.where(_ops.expand_dims(inside, -1), out, float(extrapolation_value))


def _sample_coords(lo, hi, size, count):
    """TensorFlow's sample positions of a box side: [n, count], in pixels."""
    if count > 1:
        with lo.graph.as_default():
            steps = _ops.constant(np.arange(count, dtype=np.float32).reshape(1, count))
        scale = (hi - lo) * ((size - 1) / (count - 1))
        return _ops.expand_dims(lo * (size - 1), 1) + steps * _ops.expand_dims(scale, 1)
    return _ops.expand_dims(0.5 * (lo + hi) * (size - 1), 1)


def _inside(coords, size):
    return _ops.logical_and(_ops.greater_equal(coords, 0.0),
                            _ops.less_equal(coords, float(size - 1)))


def _gather(img, idx, ys, xs, n, ch, cw, h, w):
    """img[idx[b], ys[b, i], xs[b, j]] for every (b, i, j): [n, ch, cw, channels]; the
    coordinates are clamped into the image (samples outside are masked later)."""
    yi = _ops.cast(_math.clip_by_value(ys, 0.0, float(h - 1)), "int32")
    xi = _ops.cast(_math.clip_by_value(xs, 0.0, float(w - 1)), "int32")
    shape = [n, ch, cw]
    b = _structure.broadcast_to(_ops.reshape(idx, [n, 1, 1]), shape)
    y = _structure.broadcast_to(_ops.reshape(yi, [n, ch, 1]), shape)
    x = _structure.broadcast_to(_ops.reshape(xi, [n, 1, cw]), shape)
    return _structure.gather_nd(img, _structure.stack([b, y, x], axis=-1))
