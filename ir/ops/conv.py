"""The conv op family: convolutions, pooling and morphological dilation over NHWC
(NDHWC) images, with the ops their gradients are built from.

Every op here slides a window over the spatial axes of an image (x: [N, *spatial, C];
filters HWIO / DHWIO; depthwise filters [H, W, C, M]). The window's geometry (window
size, strides, dilations, padding) is the same everywhere, TensorFlow's: spatial_arg,
padding_arg and window_1d state it. The ops: conv2d, conv3d, depthwise_conv2d and their
_backprop_input / _backprop_filter; dilation2d and its two; max_pool, min_pool,
avg_pool, max_pool3d, avg_pool3d with their _grad (and _grad_grad for max and min). The
docstring of each numpy reference (_conv_ref, _backprop_input_ref, ..., _dilation_ref)
says what it computes; _window_arg says which element a pool or dilation picks.

input_size / filter_size are the spatial sizes only: the batch and channel counts come
from the operands, so a batch of unknown size stays unknown until feed time.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import AttrError, DTypeError, ShapeError
from ..types import TensorType, format_shape
from .common import apply
from .registry import REQUIRED, OpDef, register


# -- window geometry ----------------------------------------------------------------
def spatial_arg(value, d: int, what: str) -> tuple:
    """strides / dilations / ksize: an int, d ints (one per spatial axis), or
    TensorFlow's full-rank form, d + 2 ints such as [1, s, s, 1] (the batch and channel
    entries must be 1)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        out = (int(value),) * d
    else:
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__") or any(
                isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in value):
            raise AttrError(f"{what} must be an int or a sequence of ints, got {value!r}")
        value = tuple(value)
        if len(value) == d + 2:
            if value[0] != 1 or value[-1] != 1:
                raise AttrError(f"{what} {list(value)}: the batch and channel entries "
                                f"must be 1")
            value = value[1:-1]
        if len(value) == 1 and d > 1:
            value = value * d
        if len(value) != d:
            raise AttrError(f"{what} {list(value)} must be an int, {d} ints or "
                            f"{d + 2} ints (TensorFlow's full-rank form)")
        out = tuple(int(v) for v in value)
    if any(v < 1 for v in out):
        raise AttrError(f"{what} must be positive, got {list(out)}")
    return out


def padding_arg(padding, d: int):
    """'SAME', 'VALID' (no padding), or explicit (before, after) pairs, one per spatial
    axis or TensorFlow's full-rank form [[0, 0], [t, b], [l, r], [0, 0]]."""
    if isinstance(padding, str):
        if padding not in ("SAME", "VALID"):
            raise AttrError(f"padding {padding!r} is not one of 'SAME', 'VALID' or a list "
                            f"of (before, after) pairs")
        return padding
    try:
        pairs = tuple(tuple(int(p) for p in pair) for pair in padding)
    except (TypeError, ValueError):
        raise AttrError(f"padding {padding!r} is not one of 'SAME', 'VALID' or a list of "
                        f"(before, after) pairs") from None
    if len(pairs) == d + 2:
        if pairs[0] != (0, 0) or pairs[-1] != (0, 0):
            raise AttrError(f"explicit padding {list(pairs)}: the batch and channel axes "
                            f"cannot be padded")
        pairs = pairs[1:-1]
    if len(pairs) != d or any(len(p) != 2 for p in pairs):
        raise AttrError(f"explicit padding needs {d} (before, after) pairs (or {d + 2} in "
                        f"TensorFlow's full-rank form), got {list(pairs)}")
    if any(p < 0 for pair in pairs for p in pair):
        raise AttrError(f"explicit padding cannot be negative, got {list(pairs)}")
    return pairs


def window_1d(size, k, s, dil, pad):
    """(pad_before, pad_after, out) along one axis; size may be None (unknown). SAME:
    out = ceil(in / stride), with pad_total = max((out - 1) * stride + (k - 1) * dilation
    + 1 - in, 0) and pad_before = pad_total // 2."""
    k_eff = (k - 1) * dil + 1
    if size is None:
        if pad == "VALID":
            return 0, 0, None
        if pad == "SAME":
            return None, None, None
        return pad[0], pad[1], None
    if pad == "SAME":
        out = -(-size // s)
        total = max((out - 1) * s + k_eff - size, 0)
        return total // 2, total - total // 2, out
    before, after = (0, 0) if pad == "VALID" else pad
    span = size + before + after - k_eff
    if span < 0:
        raise ShapeError(f"the window ({k_eff} with dilation) is larger than the "
                         f"{'padded ' if pad != 'VALID' else ''}input ({size + before + after})"
                         f"; use padding='SAME' or a smaller window")
    return before, after, span // s + 1


@dataclass(frozen=True)
class Window:
    """The geometry of a window op over d spatial axes (all tuples of d ints)."""
    in_size: tuple
    ksize: tuple
    strides: tuple
    dilations: tuple
    pads: tuple          # ((before, after), ...)
    out_size: tuple

    @property
    def d(self) -> int:
        return len(self.ksize)


def window(in_size, ksize, strides, dilations, padding) -> Window:
    if any(k is not None and k < 1 for k in ksize):
        # a 0-wide window would make an output larger than the input, all zeros
        raise ShapeError(f"the window (filter or ksize) {format_shape(ksize)} has an empty "
                         f"dimension; each must be at least 1")
    dims = [window_1d(n, k, s, r, padding if isinstance(padding, str) else padding[i])
            for i, (n, k, s, r) in enumerate(zip(in_size, ksize, strides, dilations))]
    return Window(tuple(in_size), tuple(ksize), tuple(strides), tuple(dilations),
                  tuple((b, a) for b, a, _ in dims), tuple(o for _, _, o in dims))


# -- op kinds ------------------------------------------------------------------------
# name -> (kind, spatial rank); kind decides inputs, attrs, inference and reference.
SPATIAL = {}


def _check_float(types, what=("input",)):
    for t, name in zip(types, what):
        if t.dtype != "float32":
            raise DTypeError(f"{name} is {t.dtype}; only float32 is accepted (cast first)")


def _check_rank(t, rank, what, layout):
    if t.rank != rank:
        raise ShapeError(f"{what} must have rank {rank} ({layout}), got shape "
                         f"{format_shape(t.shape)}")


def _image_layout(d):
    return "NHWC" if d == 2 else "NDHWC"


def _filter_layout(d):
    return "HWIO" if d == 2 else "DHWIO"


def _same(a, b):
    return a is None or b is None or a == b


def conv_attrs(attrs, d):
    return (spatial_arg(attrs["strides"], d, "strides"),
            spatial_arg(attrs["dilations"], d, "dilations"),
            padding_arg(attrs["padding"], d))


def conv_window(x_shape, w_shape, attrs, d) -> Window:
    strides, dilations, padding = conv_attrs(attrs, d)
    if any(s > 1 for s in strides) and any(r > 1 for r in dilations):
        raise AttrError(f"strides {list(strides)} and dilations {list(dilations)} cannot "
                        f"both exceed 1 (TensorFlow's rule)")
    return window(x_shape[1:-1], w_shape[:d], strides, dilations, padding)


def _conv_type(op, d, depthwise):
    def infer(types, attrs):
        x, w = types
        if attrs.get("padding_taps", "multiply") not in PADDING_TAPS:
            raise AttrError(f"padding_taps {attrs['padding_taps']!r} is not one of "
                            f"{list(PADDING_TAPS)}")
        _check_float(types, ("the input", "the filter"))
        _check_rank(x, d + 2, "the input", _image_layout(d))
        _check_rank(w, d + 2, "the filter",
                    "H, W, in_channels, multiplier" if depthwise else _filter_layout(d))
        if not _same(x.shape[-1], w.shape[d]):
            raise ShapeError(f"filter has {w.shape[d]} input channels but the input has "
                             f"{x.shape[-1]}")
        win = conv_window(x.shape, w.shape, attrs, d)
        if depthwise:
            c, m = w.shape[d], w.shape[d + 1]
            out_c = None if c is None or m is None else c * m
        else:
            out_c = w.shape[-1]
        return TensorType((x.shape[0],) + win.out_size + (out_c,), "float32")
    return infer


def _backprop_input_type(op, d, depthwise):
    def infer(types, attrs):
        dy, w = types
        _check_float(types, ("dy", "the filter"))
        _check_rank(dy, d + 2, "dy", _image_layout(d))
        _check_rank(w, d + 2, "the filter", _filter_layout(d))
        in_size = spatial_arg(attrs["input_size"], d, "input_size")
        win = conv_window((None,) + in_size + (None,), w.shape, attrs, d)
        out_c = w.shape[-1]
        if depthwise:
            out_c = None if None in w.shape[d:] else w.shape[d] * w.shape[d + 1]
        if not _same(dy.shape[-1], out_c):
            raise ShapeError(f"dy has {dy.shape[-1]} channels but the filter makes {out_c}")
        for got, want in zip(dy.shape[1:-1], win.out_size):
            if not _same(got, want):
                raise ShapeError(f"dy has spatial size {format_shape(dy.shape[1:-1])}, but "
                                 f"a window over input size {format_shape(in_size)} gives "
                                 f"{format_shape(win.out_size)}")
        return TensorType((dy.shape[0],) + tuple(in_size) + (w.shape[d],), "float32")
    return infer


def _backprop_filter_type(op, d, depthwise):
    def infer(types, attrs):
        x, dy = types
        _check_float(types, ("the input", "dy"))
        _check_rank(x, d + 2, "the input", _image_layout(d))
        _check_rank(dy, d + 2, "dy", _image_layout(d))
        ksize = spatial_arg(attrs["filter_size"], d, "filter_size")
        win = conv_window(x.shape, ksize, attrs, d)
        for got, want in zip(dy.shape[1:-1], win.out_size):
            if not _same(got, want):
                raise ShapeError(f"dy has spatial size {format_shape(dy.shape[1:-1])}, but "
                                 f"the window gives {format_shape(win.out_size)}")
        if not _same(x.shape[0], dy.shape[0]):
            raise ShapeError(f"x has batch {x.shape[0]} but dy has {dy.shape[0]}")
        c, co = x.shape[-1], dy.shape[-1]
        if depthwise:
            if c is not None and co is not None and co % c:
                raise ShapeError(f"dy has {co} channels, not a multiple of the input's {c}")
            m = None if c is None or co is None else co // c
            return TensorType(ksize + (c, m), "float32")
        return TensorType(ksize + (c, co), "float32")
    return infer


# -- pools and dilation2d ----------------------------------------------------------
def pool_window(x_shape, attrs, d) -> Window:
    ksize = spatial_arg(attrs["ksize"], d, "ksize")
    strides = spatial_arg(attrs["strides"], d, "strides")
    padding = padding_arg(attrs["padding"], d)
    if not isinstance(padding, str) and any(b >= k or a >= k for (b, a), k
                                            in zip(padding, ksize)):
        raise AttrError(f"explicit padding {list(padding)} must be smaller than the window "
                        f"{list(ksize)}: a window of padding alone has no value")
    return window(x_shape[1:-1], ksize, strides, (1,) * d, padding)


def _pool_type(op, d):
    def infer(types, attrs):
        x = types[0]
        _check_float(types[:1])
        _check_rank(x, d + 2, "the input", _image_layout(d))
        win = pool_window(x.shape, attrs, d)
        return TensorType((x.shape[0],) + win.out_size + (x.shape[-1],), "float32")
    return infer


def _pool_grad_type(op, d):
    """max_pool_grad(x, y, dy) -> x's type; max_pool_grad_grad(x, y, g) -> y's type."""
    grad_grad = op.endswith("_grad_grad")

    def infer(types, attrs):
        x, y, g = types
        _check_float(types, ("x", "y", "the gradient"))
        for t, name in zip(types, ("x", "y", "the gradient")):
            _check_rank(t, d + 2, name, _image_layout(d))
        y_type = _pool_type(op, d)([x], attrs)
        for t, name in ((y, "y"), (g, "the gradient") if grad_grad else (g, "dy")):
            want = x.shape if name == "the gradient" else y_type.shape
            if not all(_same(a, b) for a, b in zip(t.shape, want)):
                raise ShapeError(f"{name} has shape {format_shape(t.shape)}, expected "
                                 f"{format_shape(want)}")
        return y_type if grad_grad else TensorType(x.shape, "float32")
    return infer


def _avg_pool_grad_type(op, d):
    def infer(types, attrs):
        (dy,) = types
        _check_float(types, ("dy",))
        _check_rank(dy, d + 2, "dy", _image_layout(d))
        in_size = spatial_arg(attrs["input_size"], d, "input_size")
        win = pool_window((None,) + in_size + (None,), attrs, d)
        if not all(_same(a, b) for a, b in zip(dy.shape[1:-1], win.out_size)):
            raise ShapeError(f"dy has spatial size {format_shape(dy.shape[1:-1])}, but "
                             f"pooling input size {format_shape(in_size)} gives "
                             f"{format_shape(win.out_size)}")
        return TensorType((dy.shape[0],) + in_size + (dy.shape[-1],), "float32")
    return infer


def dilation_window(x_shape, w_shape, attrs) -> Window:
    strides = spatial_arg(attrs["strides"], 2, "strides")
    dilations = spatial_arg(attrs["dilations"], 2, "dilations")
    padding = padding_arg(attrs["padding"], 2)
    if not isinstance(padding, str):
        raise AttrError("dilation2d takes padding 'SAME' or 'VALID' (TensorFlow's)")
    return window(x_shape[1:-1], w_shape[:2], strides, dilations, padding)


def _dilation_type(op):
    def infer(types, attrs):
        x, w = types[:2]
        _check_float(types, ("the input", "the filter", "dy"))
        _check_rank(x, 4, "the input", "NHWC")
        _check_rank(w, 3, "the filter", "H, W, C")
        if not _same(x.shape[-1], w.shape[-1]):
            raise ShapeError(f"filter has {w.shape[-1]} channels but the input has "
                             f"{x.shape[-1]}")
        win = dilation_window(x.shape, w.shape, attrs)
        y = TensorType((x.shape[0],) + win.out_size + (x.shape[-1],), "float32")
        if op == "dilation2d":
            return y
        dy = types[2]
        if not all(_same(a, b) for a, b in zip(dy.shape, y.shape)) or dy.rank != 4:
            raise ShapeError(f"dy has shape {format_shape(dy.shape)}, expected "
                             f"{format_shape(y.shape)}")
        return TensorType(x.shape if op == "dilation2d_backprop_input" else w.shape,
                          "float32")
    return infer


# -- numpy references (independent of the kernels: strided views of a padded copy) ----
def _padded(x, win, value=0.0):
    pads = [(0, 0)] + [tuple(p) for p in win.pads] + [(0, 0)]
    return np.pad(x, pads, constant_values=value)


def _tap(xp, win, k):
    """x_padded[:, o * s + k * dil, :] for every output position o (a strided view)."""
    index = [slice(None)]
    for kk, s, r, o in zip(k, win.strides, win.dilations, win.out_size):
        start = kk * r
        index.append(slice(start, start + (o - 1) * s + 1, s))
    index.append(slice(None))
    return xp[tuple(index)]


def _crop(xp, win):
    index = [slice(None)]
    for (b, _), n in zip(win.pads, win.in_size):
        index.append(slice(b, b + n))
    index.append(slice(None))
    return np.ascontiguousarray(xp[tuple(index)])


def _taps(win):
    return list(np.ndindex(*win.ksize))


def _dot(a, b):
    """a [..., K] times b [K, M] -> [..., M], as one 2-D matmul. Not np.tensordot /
    np.dot: for one row and K == 1 they call BLAS axpy, which returns at once when the
    row's value is 0, so 0 * NaN (a padded zero times a NaN weight) came out 0."""
    rows = int(np.prod(a.shape[:-1], dtype=np.int64))
    return (a.reshape(rows, a.shape[-1]) @ b).reshape(a.shape[:-1] + b.shape[-1:])


def _conv_ref(d, depthwise):
    """conv2d, conv3d (x, w): the sum over the window and the input channels;
    depthwise_conv2d (x, w): out[..., c * M + m] = sum_k x[.., c] * w[k, c, m]."""
    def ref(arrays, attrs):
        x, w = arrays
        win = conv_window(x.shape, w.shape, attrs, d)
        xp = _padded(x, win)
        n, c = x.shape[0], x.shape[-1]
        m = w.shape[-1]
        out = np.zeros((n,) + win.out_size + ((c * m,) if depthwise else (m,)), x.dtype)
        # padding_taps "skip" (conv2d, as passes/conv_lowering.py writes an input
        # gradient): a tap on padding adds nothing, not 0 * w
        skip = attrs.get("padding_taps") == "skip"
        if skip:
            inside = _padded(np.ones(x.shape[:-1] + (1,), bool), win, False)
        for k in _taps(win):
            patch = _tap(xp, win, k)
            if depthwise:
                term = (patch[..., :, None] * w[k]).reshape(out.shape)
            else:
                term = _dot(patch, w[k])
            if skip:
                term = np.where(_tap(inside, win, k), term, np.float32(0))
            out += term
        return out
    return ref


def _backprop_input_ref(d, depthwise):
    """conv2d_backprop_input (dy, w) {input_size}: the input gradient, a transposed conv
    (conv3d's and depthwise_conv2d's the same)."""
    def ref(arrays, attrs):
        dy, w = arrays
        in_size = tuple(attrs["input_size"])
        x_shape = (dy.shape[0],) + in_size + (w.shape[d],)
        win = conv_window(x_shape, w.shape, attrs, d)
        dxp = _padded(np.zeros(x_shape, dy.dtype), win)
        c, m = w.shape[d], w.shape[d + 1]
        for k in _taps(win):
            if depthwise:
                g = dy.reshape(dy.shape[:-1] + (c, m))
                contrib = np.sum(g * w[k], axis=-1)
            else:
                contrib = _dot(dy, w[k].T)
            _tap(dxp, win, k)[...] += contrib
        return _crop(dxp, win)
    return ref


def _backprop_filter_ref(d, depthwise):
    """conv2d_backprop_filter (x, dy) {filter_size}: the filter gradient, x correlated
    with dy (conv3d's and depthwise_conv2d's the same)."""
    def ref(arrays, attrs):
        x, dy = arrays
        ksize = tuple(attrs["filter_size"])
        win = conv_window(x.shape, ksize, attrs, d)
        xp = _padded(x, win)
        c = x.shape[-1]
        m = dy.shape[-1] // c if depthwise else dy.shape[-1]
        dw = np.zeros(ksize + (c, m), x.dtype)
        axes = tuple(range(d + 1))
        for k in _taps(win):
            patch = _tap(xp, win, k)
            if depthwise:
                g = dy.reshape(dy.shape[:-1] + (c, m))
                dw[k] = np.sum(patch[..., None] * g, axis=axes)
            else:
                rows = int(np.prod(patch.shape[:-1], dtype=np.int64))
                dw[k] = _dot(patch.reshape(rows, c).T, dy.reshape(rows, m))
        return dw
    return ref


def _windows(x, win, extra=None):
    """(values, valid): every tap's view stacked on axis 0, and whether it is real."""
    xp = _padded(x, win)
    mask = _padded(np.ones(x.shape[:1] + x.shape[1:-1] + (1,), bool), win, False)
    vals, valid = [], []
    for k in _taps(win):
        v = _tap(xp, win, k)
        if extra is not None:
            v = v + extra[k]
        vals.append(v)
        valid.append(np.broadcast_to(_tap(mask, win, k), v.shape))
    return np.stack(vals), np.stack(valid)


def _window_arg(vals, valid, largest=True):
    """Per output: the tap of the extremum, the argmax of the pools and dilation2d:
    padding is never chosen; NaN counts as the largest (smallest, for min_pool) and the
    first NaN wins; otherwise the first extremum wins."""
    sign = 1 if largest else -1
    fill = -np.inf if largest else np.inf
    v = np.where(valid, vals, fill)
    best = np.max(v, axis=0) if largest else np.min(v, axis=0)   # NaN propagates
    hit = valid & np.where(np.isnan(best), np.isnan(vals), sign * vals == sign * best)
    return np.argmax(hit, axis=0), best


def _pool_ref(op, d):
    """max_pool, min_pool, avg_pool (4-D), max_pool3d, avg_pool3d (5-D): padding never
    counts (avg divides by the number of real elements, as TensorFlow does)."""
    def ref(arrays, attrs):
        (x,) = arrays
        win = pool_window(x.shape, attrs, d)
        vals, valid = _windows(x, win)
        if op.startswith("avg"):
            total = np.sum(np.where(valid, vals, 0), axis=0)
            return (total / np.sum(valid, axis=0)).astype(x.dtype)
        return _window_arg(vals, valid, largest=not op.startswith("min"))[1]
    return ref


def _scatter_taps(shape, win, per_tap, dtype):
    """Sum over taps k of per_tap(k) (output-shaped) added at the inputs tap k reads."""
    xp = _padded(np.zeros(shape, dtype), win)
    for t, k in enumerate(_taps(win)):
        _tap(xp, win, k)[...] += per_tap(t, k)
    return _crop(xp, win)


def _pool_grad_ref(op, d):
    """max_pool_grad (x, y, dy): dy routed to each window's argmax (the first one on
    ties); max_pool_grad_grad (x, y, g): g gathered at each window's argmax
    (TensorFlow's MaxPoolGradGrad); min_pool_grad(_grad), max_pool3d_grad(_grad)
    likewise."""
    largest = not op.startswith("min")

    def ref(arrays, attrs):
        x, _, g = arrays
        win = pool_window(x.shape, attrs, d)
        vals, valid = _windows(x, win)
        arg, _ = _window_arg(vals, valid, largest)
        if op.endswith("_grad_grad"):     # g has x's shape: gather it at the argmax
            gvals, _ = _windows(g, win)
            return np.take_along_axis(gvals, arg[None], axis=0)[0]
        return _scatter_taps(x.shape, win, lambda t, k: np.where(arg == t, g, 0), x.dtype)
    return ref


def _avg_pool_grad_ref(d):
    """avg_pool_grad (dy) {input_size}, avg_pool3d_grad: dy spread evenly over each
    window."""
    def ref(arrays, attrs):
        (dy,) = arrays
        in_size = tuple(attrs["input_size"])
        shape = (dy.shape[0],) + in_size + (dy.shape[-1],)
        win = pool_window(shape, attrs, d)
        _, valid = _windows(np.zeros(shape, dy.dtype), win)
        share = dy / np.sum(valid, axis=0)
        return _scatter_taps(shape, win, lambda t, k: share, dy.dtype)
    return ref


def _dilation_ref(op):
    """dilation2d (x, w): out[..., c] = max over the window of x[.., c] + w[k, c]
    (padding never wins), with dilation2d_backprop_input / _filter (dy routed to the
    argmax)."""
    def ref(arrays, attrs):
        x, w = arrays[:2]
        win = dilation_window(x.shape, w.shape, attrs)
        vals, valid = _windows(x, win, extra=w)
        arg, best = _window_arg(vals, valid)
        if op == "dilation2d":
            return best
        dy = arrays[2]
        if op == "dilation2d_backprop_input":
            return _scatter_taps(x.shape, win, lambda t, k: np.where(arg == t, dy, 0),
                                 x.dtype)
        dw = np.zeros(w.shape, x.dtype)
        for t, k in enumerate(_taps(win)):
            dw[k] = np.sum(np.where(arg == t, dy, 0), axis=(0, 1, 2))
        return dw
    return ref


# -- registration ---------------------------------------------------------------------
CONV_ATTRS = {"strides": 1, "padding": "VALID", "dilations": 1}
POOL_ATTRS = {"ksize": REQUIRED, "strides": REQUIRED, "padding": "VALID"}


# TensorFlow's name for each op of the family (its raw op name for the helper ops)
TF_NAMES = {
    "conv2d": "tf.nn.conv2d",
    "conv2d_backprop_input": "Conv2DBackpropInput (tf.nn.conv2d_transpose)",
    "conv2d_backprop_filter": "Conv2DBackpropFilter",
    "conv3d": "tf.nn.conv3d",
    "conv3d_backprop_input": "Conv3DBackpropInputV2 (tf.nn.conv3d_transpose)",
    "conv3d_backprop_filter": "Conv3DBackpropFilterV2",
    "depthwise_conv2d": "tf.nn.depthwise_conv2d",
    "depthwise_conv2d_backprop_input": "DepthwiseConv2dNativeBackpropInput",
    "depthwise_conv2d_backprop_filter": "DepthwiseConv2dNativeBackpropFilter",
    "max_pool": "tf.nn.max_pool2d",
    "min_pool": "tf.js minPool",
    "avg_pool": "tf.nn.avg_pool2d",
    "max_pool3d": "tf.nn.max_pool3d",
    "avg_pool3d": "tf.nn.avg_pool3d",
    "avg_pool_grad": "AvgPoolGrad",
    "avg_pool3d_grad": "AvgPool3DGrad",
    "max_pool_grad": "MaxPoolGrad",
    "max_pool_grad_grad": "MaxPoolGradGrad",
    "min_pool_grad": "—",
    "min_pool_grad_grad": "—",
    "max_pool3d_grad": "MaxPool3DGrad",
    "max_pool3d_grad_grad": "MaxPool3DGradGrad",
    "dilation2d": "tf.nn.dilation2d",
    "dilation2d_backprop_input": "Dilation2DBackpropInput",
    "dilation2d_backprop_filter": "Dilation2DBackpropFilter",
}


def _register(name, kind, d, infer, reference, attrs, num_inputs, depthwise=False,
              hidden=()):
    SPATIAL[name] = (kind, d, depthwise)
    register(OpDef(name, "conv", infer, reference, attrs=attrs, num_inputs=num_inputs,
                   tf=TF_NAMES[name], hidden_attrs=hidden))


# conv2d's padding_taps: "multiply" (padding is zeros: a tap there adds 0 * w, NaN for a
# NaN or inf weight, TensorFlow's), or "skip" (adds nothing): passes/conv_lowering.py
# writes conv2d_backprop_input as a conv2d whose padding taps stand for products that
# do not exist
PADDING_TAPS = ("multiply", "skip")


for _base, _d, _dw in (("conv2d", 2, False), ("conv3d", 3, False),
                       ("depthwise_conv2d", 2, True)):
    _register(_base, "conv", _d, _conv_type(_base, _d, _dw), _conv_ref(_d, _dw),
              dict(CONV_ATTRS, padding_taps="multiply") if _base == "conv2d" else
              dict(CONV_ATTRS), 2, _dw, hidden=("padding_taps",) if _base == "conv2d" else ())
    _register(f"{_base}_backprop_input", "backprop_input", _d,
              _backprop_input_type(_base, _d, _dw), _backprop_input_ref(_d, _dw),
              {**CONV_ATTRS, "input_size": REQUIRED}, 2, _dw)
    _register(f"{_base}_backprop_filter", "backprop_filter", _d,
              _backprop_filter_type(_base, _d, _dw), _backprop_filter_ref(_d, _dw),
              {**CONV_ATTRS, "filter_size": REQUIRED}, 2, _dw)

for _name, _d in (("max_pool", 2), ("min_pool", 2), ("avg_pool", 2), ("max_pool3d", 3),
                  ("avg_pool3d", 3)):
    _register(_name, "pool", _d, _pool_type(_name, _d), _pool_ref(_name, _d),
              dict(POOL_ATTRS), 1)
    if _name.startswith("avg"):
        _register(f"{_name}_grad", "avg_pool_grad", _d, _avg_pool_grad_type(_name, _d),
                  _avg_pool_grad_ref(_d), {**POOL_ATTRS, "input_size": REQUIRED}, 1)
    else:
        for _suffix in ("_grad", "_grad_grad"):
            _register(_name + _suffix, "pool" + _suffix, _d,
                      _pool_grad_type(_name + _suffix, _d),
                      _pool_grad_ref(_name + _suffix, _d), dict(POOL_ATTRS), 3)

_register("dilation2d", "dilation", 2, _dilation_type("dilation2d"),
          _dilation_ref("dilation2d"), dict(CONV_ATTRS), 2)
for _name in ("dilation2d_backprop_input", "dilation2d_backprop_filter"):
    _register(_name, "dilation_grad", 2, _dilation_type(_name), _dilation_ref(_name),
              dict(CONV_ATTRS), 3)


def base_op(name: str) -> str:
    """The forward op a pool or conv helper op belongs to (for pooling kinds etc.)."""
    for suffix in ("_backprop_input", "_backprop_filter", "_grad_grad", "_grad"):
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


# -- builders ---------------------------------------------------------------------------
def _tuple(v):
    """Attrs as given, lists frozen to tuples (inference validates them, so errors
    name the node and the user's line)."""
    if isinstance(v, str) or isinstance(v, (int, np.integer)):
        return v if isinstance(v, str) else int(v)
    return tuple(_tuple(e) for e in v)


def conv_node_attrs(strides, padding, dilations):
    """A conv node's strides / padding / dilations attrs, as tuples (ff.fused's convs
    build theirs the same way)."""
    return {"strides": _tuple(strides), "padding": _tuple(padding),
            "dilations": _tuple(dilations)}


def conv(op, x, w, strides=1, padding="VALID", dilations=1, name=None):
    """conv2d, conv3d, depthwise_conv2d or dilation2d of x by w."""
    return apply(op, [x, w], conv_node_attrs(strides, padding, dilations), name)


def conv_backprop_input(op, dy, w, input_size, strides=1, padding="VALID", dilations=1,
                        name=None):
    """op is the forward conv ('conv2d', ...); input_size the input's spatial size."""
    return apply(f"{op}_backprop_input", [dy, w],
                 {**conv_node_attrs(strides, padding, dilations),
                  "input_size": _tuple(input_size)}, name)


def conv_backprop_filter(op, x, dy, filter_size, strides=1, padding="VALID", dilations=1,
                         name=None):
    return apply(f"{op}_backprop_filter", [x, dy],
                 {**conv_node_attrs(strides, padding, dilations),
                  "filter_size": _tuple(filter_size)}, name)


def dilation_backprop(which, x, w, dy, strides=1, padding="VALID", dilations=1, name=None):
    return apply(f"dilation2d_backprop_{which}", [x, w, dy],
                 conv_node_attrs(strides, padding, dilations), name)


def pool(op, x, ksize, strides, padding="VALID", name=None):
    return apply(op, [x], {"ksize": _tuple(ksize), "strides": _tuple(strides),
                           "padding": _tuple(padding)}, name)


def pool_grad(op, x, y, g, ksize, strides, padding="VALID", name=None):
    """op: 'max_pool_grad', 'max_pool_grad_grad', 'min_pool_grad', ..."""
    return apply(op, [x, y, g], {"ksize": _tuple(ksize), "strides": _tuple(strides),
                                 "padding": _tuple(padding)}, name)


def avg_pool_grad(op, dy, input_size, ksize, strides, padding="VALID", name=None):
    """op: 'avg_pool_grad' or 'avg_pool3d_grad'."""
    return apply(op, [dy], {"ksize": _tuple(ksize), "strides": _tuple(strides),
                            "padding": _tuple(padding), "input_size": _tuple(input_size)},
                 name)
