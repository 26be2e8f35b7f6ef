"""User-facing functions of the conv op family, with TensorFlow's names and arguments
(tf.nn.conv2d, tf.nn.max_pool2d, ...). Images are NHWC (NDHWC in 3-D), filters HWIO
(DHWIO). strides / ksize / dilations: an int, one int per spatial axis, or TensorFlow's
full-rank form [1, s, s, 1]. padding: "SAME", "VALID" or explicit (before, after) pairs.
See ir/ops/conv.py for the exact semantics."""
from __future__ import annotations

import numpy as np

from ..ir.errors import AttrError, DTypeError, ShapeError
from ..ir.ops import conv as _conv, shape as _shape
from . import ops_math as _math, ops_structure as _structure
from .operands import as_tensor, graph_operands
from .ops_graph import constant, name_scope
from .tensor import wrap

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _padding(padding):
    """"SAME" / "VALID" in any case (as TensorFlow and Keras accept them); explicit
    (before, after) pairs as they are."""
    if isinstance(padding, str) and padding.upper() in ("SAME", "VALID"):
        return padding.upper()
    return padding                      # anything else: the op's error quotes it as given


def _check_format(data_format, allowed):
    if data_format not in allowed:
        raise AttrError(f"data_format {data_format!r} is not supported; fragflow uses "
                        f"{allowed[0]} (transpose first)")


@_export
def conv2d(input, filters, strides=1, padding="VALID", data_format="NHWC", dilations=1,
           name=None):
    """2-D convolution (cross-correlation, as in TensorFlow) of an NHWC image by an HWIO
    filter.

    >>> import fragflow as ff, numpy as np
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     x = ff.placeholder((1, 5, 5, 3))
    ...     w = ff.constant(np.ones((3, 3, 3, 8), np.float32))
    ...     ff.conv2d(x, w, strides=2, padding="SAME").shape
    (1, 3, 3, 8)
    """
    _check_format(data_format, ("NHWC",))
    x, w = graph_operands(input, filters)
    return wrap(_conv.conv("conv2d", x, w, strides, _padding(padding), dilations, name=name))


@_export
def conv3d(input, filters, strides=1, padding="VALID", data_format="NDHWC", dilations=1,
           name=None):
    """3-D convolution of an NDHWC volume by a DHWIO filter."""
    _check_format(data_format, ("NDHWC",))
    x, w = graph_operands(input, filters)
    return wrap(_conv.conv("conv3d", x, w, strides, _padding(padding), dilations, name=name))


def _one_d(value, what):
    """conv1d's stride/dilation (an int, [s] or [1, s, 1]) as conv2d's (1, s)."""
    if isinstance(value, int):
        return (1, value)
    value = tuple(value)
    if len(value) == 3:
        value = value[1:2] if value[0] == 1 and value[2] == 1 else value
    if len(value) != 1:
        raise AttrError(f"conv1d {what} {list(value)} must be an int, [s] or [1, s, 1]")
    return (1, value[0])


@_export
def conv1d(input, filters, stride=1, padding="VALID", data_format="NWC", dilations=1,
           name=None):
    """1-D convolution of an NWC signal by a WIO filter: a composite, as in TensorFlow,
    which runs it as a conv2d of height 1 (expand_dims, conv2d, squeeze).

    >>> import fragflow as ff, numpy as np
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     x = ff.placeholder((2, 10, 3))
    ...     ff.conv1d(x, np.ones((3, 3, 4), np.float32), stride=2, padding="SAME").shape
    (2, 5, 4)
    """
    _check_format(data_format, ("NWC",))
    x, w = graph_operands(input, filters)
    if x.type.rank != 3 or w.type.rank != 3:
        raise ShapeError(f"conv1d needs an NWC input and a WIO filter (rank 3), got "
                         f"{x.type} and {w.type}")
    padding = _padding(padding)
    if not isinstance(padding, str):
        pairs = [tuple(p) for p in padding]
        pairs = pairs[1:2] if len(pairs) == 3 else pairs
        padding = [(0, 0)] + pairs
    x4 = _shape.expand_dims(x, 1)
    w4 = _shape.expand_dims(w, 0)
    y = _conv.conv("conv2d", x4, w4, _one_d(stride, "stride"), padding,
                   _one_d(dilations, "dilations"), name=name)
    return wrap(_shape.squeeze(y, 1))


def _conv_transpose(kind, layout, input, filters, output_shape, strides, padding,
                    data_format, dilations, name):
    """conv2d_transpose / conv3d_transpose: conv_backprop_input of `kind` ("conv2d" or
    "conv3d"), whose output_shape is written in `layout` ("NHWC" or "NDHWC")."""
    _check_format(data_format, (layout,))
    x, w = graph_operands(input, filters)
    output_shape = tuple(int(d) for d in output_shape)
    if len(output_shape) != len(layout):
        raise ShapeError(f"{kind}_transpose's output_shape must be [{', '.join(layout)}], "
                         f"got {list(output_shape)}")
    y = _conv.conv_backprop_input(kind, x, w, output_shape[1:-1], strides,
                                  _padding(padding), dilations, name=name)
    if any(d is not None and d != o for o, d in zip(output_shape, y.shape)):
        raise ShapeError(f"{kind}_transpose: output_shape {list(output_shape)} does not "
                         f"match the result's shape {y.type} (batch and channels come from "
                         f"the input and the filter)")
    return wrap(y)


@_export
def conv2d_transpose(input, filters, output_shape, strides=1, padding="SAME",
                     data_format="NHWC", dilations=1, name=None):
    """The transpose (gradient) of conv2d: maps conv2d's output shape back to its input
    shape `output_shape` ([N, H, W, C]). filters is [H, W, output_channels,
    input_channels], the filter of the conv2d being transposed (TensorFlow's)."""
    return _conv_transpose("conv2d", "NHWC", input, filters, output_shape, strides,
                           padding, data_format, dilations, name)


@_export
def conv3d_transpose(input, filters, output_shape, strides=1, padding="SAME",
                     data_format="NDHWC", dilations=1, name=None):
    """The transpose (gradient) of conv3d: maps conv3d's output shape back to its input
    shape `output_shape` ([N, D, H, W, C]). filters is [D, H, W, output_channels,
    input_channels], the filter of the conv3d being transposed (TensorFlow's)."""
    return _conv_transpose("conv3d", "NDHWC", input, filters, output_shape, strides,
                           padding, data_format, dilations, name)


@_export
def depthwise_conv2d(input, filter, strides=1, padding="VALID", data_format="NHWC",
                     dilations=1, name=None):
    """Depthwise 2-D convolution: filter [H, W, C, M] convolves each input channel c
    with its own M filters; output channel c * M + m."""
    _check_format(data_format, ("NHWC",))
    x, w = graph_operands(input, filter)
    return wrap(_conv.conv("depthwise_conv2d", x, w, strides, _padding(padding), dilations,
                            name=name))


@_export
def separable_conv2d(input, depthwise_filter, pointwise_filter, strides=1, padding="VALID",
                     data_format="NHWC", dilations=1, name=None):
    """A depthwise conv2d followed by a 1x1 conv2d (pointwise_filter [1, 1, C * M, O]):
    a composite, as TensorFlow runs it (and its gradient is the two ops' gradients)."""
    _check_format(data_format, ("NHWC",))
    x, dw, pw = graph_operands(input, depthwise_filter, pointwise_filter)
    hidden = _conv.conv("depthwise_conv2d", x, dw, strides, _padding(padding), dilations)
    return wrap(_conv.conv("conv2d", hidden, pw, 1, "VALID", 1, name=name))


@_export
def dilation2d(input, filters, strides, padding, data_format="NHWC", dilations=1,
               name=None):
    """Greyscale morphological dilation (TensorFlow's): out[n, y, x, c] = max over the
    window of input[n, y*s + i*r - pad, x*s + j*r - pad, c] + filters[i, j, c].
    Padding positions never win. filters is [H, W, C]."""
    _check_format(data_format, ("NHWC",))
    x, w = graph_operands(input, filters)
    return wrap(_conv.conv("dilation2d", x, w, strides, _padding(padding), dilations,
                            name=name))


def _pool(op, layout, doc):
    def fn(input, ksize, strides, padding="VALID", data_format=layout, name=None):
        _check_format(data_format, (layout,))
        return wrap(_conv.pool(op, graph_operands(input)[0], ksize, strides, _padding(padding),
                                name=name))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return _export(fn)


max_pool = _pool("max_pool", "NHWC", """Max over each window of an NHWC image; padding
    never wins, NaN propagates.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     ff.max_pool(ff.placeholder((1, 7, 7, 2)), ksize=3, strides=2, padding="SAME").shape
    (1, 4, 4, 2)
    """)
min_pool = _pool("min_pool", "NHWC", "Min over each window (TensorFlow.js's minPool).")
avg_pool = _pool("avg_pool", "NHWC", """Mean over each window, dividing by the number of
    real (non-padding) elements, as TensorFlow does.""")
max_pool3d = _pool("max_pool3d", "NDHWC", "Max over each window of an NDHWC volume.")
avg_pool3d = _pool("avg_pool3d", "NDHWC", "Mean over each window of an NDHWC volume.")
max_pool2d, avg_pool2d = max_pool, avg_pool          # TensorFlow 2's names
__all__ += ["max_pool2d", "avg_pool2d"]


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


# ff.nn.max_pool_with_argmax only (as tf.nn.max_pool_with_argmax), not flat in ff
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
    with name_scope(name or "max_pool_with_argmax"):
        x = as_tensor(input)
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
        values = max_pool(x, [kh, kw], [sh, sw], padding)
        padded = _structure.pad(x, [[0, 0], [top, pad_h - top], [left, pad_w - left], [0, 0]],
                                constant_values=-np.inf) if pad_h or pad_w else x
        windows = [padded[:, dy:dy + sh * (oh - 1) + 1:sh, dx:dx + sw * (ow - 1) + 1:sw, :]
                   for dy in range(kh) for dx in range(kw)]
        offset = _math.argmax(_structure.stack(windows, axis=-1), axis=-1)   # [n, oh, ow, c]
        with x.graph.as_default():
            base_y = constant((np.arange(oh, dtype=np.int32) * sh - top)
                                   .reshape(1, oh, 1, 1))
            base_x = constant((np.arange(ow, dtype=np.int32) * sw - left)
                                   .reshape(1, 1, ow, 1))
            channel = constant(np.arange(c, dtype=np.int32).reshape(1, 1, 1, c))
        y = base_y + _math.floor_div(offset, kw)
        xx = base_x + _math.mod(offset, kw)
        flat = (y * w + xx) * c + channel
        if include_batch_index:
            with x.graph.as_default():
                batch = constant(np.arange(n, dtype=np.int32).reshape(n, 1, 1, 1))
            flat = flat + batch * (h * w * c)
        return values, _math.identity(flat, name="argmax")
