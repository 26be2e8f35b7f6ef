"""Keras's convolution and pooling layers in 1, 2 and 3 dimensions: ConvND (with
dilation, groups and "valid" / "same" padding, "causal" in 1-D), ConvNDTranspose
(output_padding), DepthwiseConvND and SeparableConvND (1-D and 2-D), and the 1-D and
3-D pooling layers with their global forms (the 2-D ones are in layers.py).

Inputs are channels_last, kernels Keras's: (*kernel_size, in_channels / groups,
filters) for a convolution, (*kernel_size, filters, in_channels) for a transposed one,
(*kernel_size, in_channels, depth_multiplier) for a depthwise one. The 1-D layers run
as their 2-D ops on a (N, 1, L, C) view.

>>> import fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     x = ff.placeholder((None, 9, 3))
...     y = ff.keras.layers.Conv1D(4, 3, padding="causal", dilation_rate=2)(x)
...     z = ff.keras.layers.Conv2DTranspose(2, 3, strides=2, padding="same")(
...         ff.placeholder((None, 5, 5, 3)))
>>> y.shape, z.shape
((None, 9, 4), (None, 10, 10, 2))
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import AttrError, ShapeError
from ..ir.ops import conv as _conv
from . import ops as _ops
from .layers import Layer, _activate, _activation_name, export, keras_mask
from .tensor import wrap

__all__ = ["Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose",
           "Conv3DTranspose", "DepthwiseConv1D", "DepthwiseConv2D", "SeparableConv1D",
           "SeparableConv2D", "MaxPooling1D", "AveragePooling1D", "MaxPooling3D",
           "AveragePooling3D", "GlobalAveragePooling1D", "GlobalMaxPooling1D",
           "GlobalAveragePooling3D", "GlobalMaxPooling3D", "MaxPool1D", "AvgPool1D",
           "MaxPool3D", "AvgPool3D", "GlobalAvgPool1D", "GlobalMaxPool1D",
           "GlobalAvgPool3D", "GlobalMaxPool3D", "Convolution1D", "Convolution2D",
           "Convolution3D", "Convolution2DTranspose"]


def ntuple(value, n, what, least=1) -> tuple:
    """An int or n ints as a tuple of n ints >= least (Keras's kernel_size, strides,
    ...)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (int(value),) * n
    try:
        value = tuple(int(v) for v in value)
    except (TypeError, ValueError):
        raise AttrError(f"{what} must be an int or {n} ints, got {value!r}") from None
    if len(value) != n:
        raise AttrError(f"{what} must be an int or {n} ints, got {value!r}")
    if min(value) < least:
        raise AttrError(f"{what} must be {'positive' if least == 1 else '>= 0'}, got "
                        f"{list(value)}")
    return value


def _padding_mode(layer, padding, allowed=("valid", "same")) -> str:
    if not isinstance(padding, str) or padding.lower() not in allowed:
        raise AttrError(f"{type(layer).__name__}: padding must be one of "
                        f"{', '.join(allowed)}, got {padding!r}")
    return padding.lower()


_LAYOUT = {1: "an NWC sequence", 2: "an NHWC image", 3: "an NDHWC volume"}


def _check_input(layer, shape, rank):
    if len(shape) != rank + 2:
        raise ShapeError(f"{type(layer).__name__} '{layer.name}' needs {_LAYOUT[rank]} "
                         f"(rank {rank + 2}), got shape {list(shape)}")
    if shape[-1] is None:
        raise ShapeError(f"{type(layer).__name__} '{layer.name}': the channels must be "
                         f"known to make the weights, got {list(shape)}")


def _as_2d(x):
    """(N, L, C) -> (N, 1, L, C)."""
    return _ops.expand_dims(x, 1)


def _from_2d(y):
    return _ops.squeeze(y, [1])


def conv_nd(x, kernel, strides, padding, dilations, op="conv"):
    """A convolution of rank len(strides) (1, 2 or 3), "valid" / "same" / "causal",
    op "conv" or "depthwise"."""
    rank = len(strides)
    if padding == "causal":             # pad the start: each output sees the past only
        x = _ops.pad(x, [[0, 0], [(kernel.shape[0] - 1) * dilations[0], 0], [0, 0]])
        padding = "valid"
    if rank == 1:
        k2 = _ops.expand_dims(kernel, 0)
        return _from_2d(conv_nd(_as_2d(x), k2, (1,) + strides, padding,
                                (1,) + dilations, op))
    name = {"conv": "conv2d" if rank == 2 else "conv3d", "depthwise": "depthwise_conv2d"}
    return getattr(_ops, name[op])(x, kernel, strides=strides, padding=padding.upper(),
                                   dilations=dilations)


class _Conv(Layer):
    """What every convolution layer keeps: its rank, kernel_size, strides, padding,
    dilation_rate, activation and bias."""
    rank = 2
    paddings = ("valid", "same")
    channels_first_ok = True

    def __init__(self, kernel_size, strides=1, padding="valid", data_format=None,
                 dilation_rate=1, activation=None, use_bias=True,
                 bias_initializer="zeros", **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        n = self.rank
        self.kernel_size = ntuple(kernel_size, n, "kernel_size")
        self.strides = ntuple(strides, n, "strides")
        self.padding = _padding_mode(self, padding, self.paddings)
        self.dilation_rate = ntuple(dilation_rate, n, "dilation_rate")
        if max(self.strides) > 1 and max(self.dilation_rate) > 1:
            raise AttrError(f"{type(self).__name__}: strides > 1 with dilation_rate > 1 "
                            f"is not supported (nor by Keras)")
        self.activation = _activation_name(activation)
        self.use_bias = bool(use_bias)
        self.bias_initializer = bias_initializer

    def _finish(self, y):
        if self.bias is not None:
            y = y + self.bias
        return _activate(y, self.activation)


class _ConvND(_Conv):
    """Keras's ConvND: kernel (*kernel_size, in_channels / groups, filters), bias
    (filters,). groups splits the channels into that many independent convolutions."""
    paddings = ("valid", "same")

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None,
                 dilation_rate=1, groups=1, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(kernel_size, strides, padding, data_format, dilation_rate,
                         activation, use_bias, bias_initializer, **kwargs)
        self.filters, self.groups = int(filters), int(groups)
        if self.filters <= 0 or self.groups <= 0 or self.filters % self.groups:
            raise AttrError(f"{type(self).__name__}: filters ({filters}) must be a "
                            f"positive multiple of groups ({groups})")
        self.kernel_initializer = kernel_initializer

    def build(self, input_shape):
        _check_input(self, input_shape, self.rank)
        channels = input_shape[-1]
        if channels % self.groups:
            raise ShapeError(f"{type(self).__name__} '{self.name}': {channels} input "
                             f"channels do not split into {self.groups} groups")
        self.kernel = self.add_weight(
            "kernel", self.kernel_size + (channels // self.groups, self.filters),
            self.kernel_initializer)
        self.bias = self.add_weight("bias", (self.filters,), self.bias_initializer) \
            if self.use_bias else None

    def call(self, x, training=False):
        def conv(inp, kernel):
            return conv_nd(inp, kernel, self.strides, self.padding, self.dilation_rate)
        if self.groups == 1:
            return self._finish(conv(x, self.kernel))
        n_in, n_out = x.shape[-1] // self.groups, self.filters // self.groups
        if n_in == 1 and self.rank <= 2:
            # one input channel per group (ConvNeXt's 7x7 Conv2D(groups=C)): a depthwise
            # convolution, whose output channel c * M + m is group c's filter m, as the
            # kernel's last axis orders them
            kernel = _ops.reshape(self.kernel, self.kernel_size + (self.groups, n_out))
            return self._finish(conv_nd(x, kernel, self.strides, self.padding,
                                        self.dilation_rate, "depthwise"))
        parts = [conv(x[..., g * n_in:(g + 1) * n_in],
                      self.kernel[..., g * n_out:(g + 1) * n_out])
                 for g in range(self.groups)]
        return self._finish(_ops.concat(parts, axis=-1))


class Conv1D(_ConvND):
    """1-D convolution of (batch, steps, channels); padding "valid", "same" or
    "causal" (left-padded: output t sees inputs up to t)."""
    rank, paddings = 1, ("valid", "same", "causal")


class Conv2D(_ConvND):
    """2-D convolution of an NHWC image: kernel (kh, kw, in_channels / groups,
    filters), bias (filters,), then activation."""
    rank = 2


class Conv3D(_ConvND):
    """3-D convolution of an NDHWC volume: kernel (kd, kh, kw, in / groups, filters)."""
    rank = 3


def _transposed_length(size, k, s, d, padding, output_padding):
    """(Keras's output length, its offset into the full "valid" transposed output of
    length (size - 1) * s + k): Keras's padding (its JAX rule, which its other backends
    follow) pads the dilated input by (left, right) with left = k - 1 for "valid"."""
    k = (k - 1) * d + 1
    if padding == "valid":
        left = k - 1
        pad_len = 2 * (k - 1) + (max(k, s) - k if output_padding is None else output_padding)
    else:
        pad_len = s + k - 2 if output_padding is None else k + k % 2 - 2 + output_padding
        left = min(pad_len // 2 + pad_len % 2, k - 1)
    return (size - 1) * s + 2 + pad_len - k, (k - 1) - left


class _ConvNDTranspose(_Conv):
    """Keras's ConvNDTranspose: the transpose (input gradient) of ConvND, kernel
    (*kernel_size, filters, in_channels), bias (filters,). The output size is Keras's
    (deconv_output_length): size * stride for "same", (size - 1) * stride +
    max(kernel, stride) for "valid", output_padding more on the right when given."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid",
                 output_padding=None, data_format=None, dilation_rate=1, activation=None,
                 use_bias=True, kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 **kwargs):
        super().__init__(kernel_size, strides, padding, data_format, dilation_rate,
                         activation, use_bias, bias_initializer, **kwargs)
        self.filters = int(filters)
        self.output_padding = None if output_padding is None else \
            ntuple(output_padding, self.rank, "output_padding", least=0)
        if self.output_padding is not None and \
                any(p >= s for p, s in zip(self.output_padding, self.strides)):
            raise AttrError(f"{type(self).__name__}: output_padding "
                            f"{list(self.output_padding)} must be less than the strides "
                            f"{list(self.strides)}")
        self.kernel_initializer = kernel_initializer

    def build(self, input_shape):
        _check_input(self, input_shape, self.rank)
        if any(d is None for d in input_shape[1:-1]):
            raise ShapeError(f"{type(self).__name__} '{self.name}' needs known spatial "
                             f"sizes, got {list(input_shape)}")
        self.kernel = self.add_weight(
            "kernel", self.kernel_size + (self.filters, input_shape[-1]),
            self.kernel_initializer)
        self.bias = self.add_weight("bias", (self.filters,), self.bias_initializer) \
            if self.use_bias else None

    def call(self, x, training=False):
        rank, spatial = self.rank, tuple(x.shape[1:-1])
        op_pad = self.output_padding or (None,) * rank
        full = tuple((n - 1) * s + (k - 1) * d + 1 for n, k, s, d in
                     zip(spatial, self.kernel_size, self.strides, self.dilation_rate))
        x2, kernel = x, self.kernel
        strides, dilations = self.strides, self.dilation_rate
        if rank == 1:
            x2, kernel = _as_2d(x), _ops.expand_dims(kernel, 0)
            full, strides, dilations = (1,) + full, (1,) + strides, (1,) + dilations
        op = "conv3d" if rank == 3 else "conv2d"
        y = wrap(_conv.conv_backprop_input(op, x2.value, kernel.value, full, strides,
                                           "VALID", dilations))
        y = _from_2d(y) if rank == 1 else y
        # Keras's size and offset: crop the full output, or pad its end with zeros
        slices, pads = [slice(None)], [[0, 0]]
        for n, k, s, d, p, f in zip(spatial, self.kernel_size, self.strides,
                                    self.dilation_rate, op_pad, full[-rank:]):
            length, start = _transposed_length(n, k, s, d, self.padding, p)
            stop = min(start + length, f)
            slices.append(slice(start, stop))
            pads.append([0, start + length - stop])
        y = y[tuple(slices)]
        if any(p[1] for p in pads):
            y = _ops.pad(y, pads + [[0, 0]])
        return self._finish(y)


class Conv1DTranspose(_ConvNDTranspose):
    """The transpose of Conv1D: (batch, steps, channels) -> (batch, longer, filters)."""
    rank = 1


class Conv2DTranspose(_ConvNDTranspose):
    """The transpose of Conv2D (a learned upsampling): NHWC -> NHWC."""
    rank = 2


class Conv3DTranspose(_ConvNDTranspose):
    """The transpose of Conv3D: NDHWC -> NDHWC."""
    rank = 3


class _DepthwiseConvND(_Conv):
    """Keras's DepthwiseConvND: depthwise_kernel (*kernel_size, in_channels,
    depth_multiplier), bias (in_channels * depth_multiplier,); output channel
    c * depth_multiplier + m."""

    def __init__(self, kernel_size, strides=1, padding="valid", depth_multiplier=1,
                 data_format=None, dilation_rate=1, activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform", bias_initializer="zeros",
                 **kwargs):
        super().__init__(kernel_size, strides, padding, data_format, dilation_rate,
                         activation, use_bias, bias_initializer, **kwargs)
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = depthwise_initializer

    def build(self, input_shape):
        _check_input(self, input_shape, self.rank)
        channels = input_shape[-1]
        # Keras 3 names it "kernel" (Keras 2: depthwise_kernel)
        self.depthwise_kernel = self.kernel = self.add_weight(
            "kernel", self.kernel_size + (channels, self.depth_multiplier),
            self.depthwise_initializer)
        self.bias = self.add_weight("bias", (channels * self.depth_multiplier,),
                                    self.bias_initializer) if self.use_bias else None

    def call(self, x, training=False):
        return self._finish(conv_nd(x, self.depthwise_kernel, self.strides, self.padding,
                                    self.dilation_rate, "depthwise"))


class DepthwiseConv1D(_DepthwiseConvND):
    """Depthwise 1-D convolution of (batch, steps, channels)."""
    rank = 1


class DepthwiseConv2D(_DepthwiseConvND):
    """Depthwise 2-D convolution of an NHWC image."""
    rank = 2


class _SeparableConvND(_Conv):
    """Keras's SeparableConvND: a depthwise convolution (depthwise_kernel, no bias),
    then a pointwise one (pointwise_kernel (*ones, in * depth_multiplier, filters))
    with the bias and activation."""

    def __init__(self, filters, kernel_size, strides=1, padding="valid", data_format=None,
                 dilation_rate=1, depth_multiplier=1, activation=None, use_bias=True,
                 depthwise_initializer="glorot_uniform",
                 pointwise_initializer="glorot_uniform", bias_initializer="zeros",
                 **kwargs):
        super().__init__(kernel_size, strides, padding, data_format, dilation_rate,
                         activation, use_bias, bias_initializer, **kwargs)
        self.filters = int(filters)
        self.depth_multiplier = int(depth_multiplier)
        self.depthwise_initializer = depthwise_initializer
        self.pointwise_initializer = pointwise_initializer

    def build(self, input_shape):
        _check_input(self, input_shape, self.rank)
        channels = input_shape[-1]
        self.depthwise_kernel = self.add_weight(
            "depthwise_kernel", self.kernel_size + (channels, self.depth_multiplier),
            self.depthwise_initializer)
        self.pointwise_kernel = self.add_weight(
            "pointwise_kernel", (1,) * self.rank + (channels * self.depth_multiplier,
                                                    self.filters),
            self.pointwise_initializer)
        self.bias = self.add_weight("bias", (self.filters,), self.bias_initializer) \
            if self.use_bias else None

    def call(self, x, training=False):
        hidden = conv_nd(x, self.depthwise_kernel, self.strides, self.padding,
                         self.dilation_rate, "depthwise")
        ones = (1,) * self.rank
        return self._finish(conv_nd(hidden, self.pointwise_kernel, ones, "valid", ones))


class SeparableConv1D(_SeparableConvND):
    """Separable 1-D convolution: depthwise, then pointwise."""
    rank = 1


class SeparableConv2D(_SeparableConvND):
    """Separable 2-D convolution: depthwise, then pointwise (tf.nn.separable_conv2d)."""
    rank = 2


# -- pooling -------------------------------------------------------------------------
class _PoolND(Layer):
    rank, op = 1, "max"
    channels_first_ok = True

    def __init__(self, pool_size=2, strides=None, padding="valid", data_format=None,
                 **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.pool_size = ntuple(pool_size, self.rank, "pool_size")
        self.strides = self.pool_size if strides is None else \
            ntuple(strides, self.rank, "strides")
        self.padding = _padding_mode(self, padding)

    def build(self, input_shape):
        if len(input_shape) != self.rank + 2:
            raise ShapeError(f"{type(self).__name__} '{self.name}' needs an input of rank "
                             f"{self.rank + 2}, got shape {list(input_shape)}")

    def call(self, x, training=False):
        pad = self.padding.upper()
        if self.rank == 1:
            fn = _ops.max_pool if self.op == "max" else _ops.avg_pool
            return _from_2d(fn(_as_2d(x), ksize=(1,) + self.pool_size,
                               strides=(1,) + self.strides, padding=pad))
        fn = _ops.max_pool3d if self.op == "max" else _ops.avg_pool3d
        return fn(x, ksize=self.pool_size, strides=self.strides, padding=pad)


class MaxPooling1D(_PoolND):
    """Max over pool_size steps of (batch, steps, channels)."""
    rank, op = 1, "max"


class AveragePooling1D(_PoolND):
    """Mean over pool_size steps; with "same" the border windows average their real
    elements only."""
    rank, op = 1, "avg"


class MaxPooling3D(_PoolND):
    """Max over pool_size windows of an NDHWC volume."""
    rank, op = 3, "max"


class AveragePooling3D(_PoolND):
    """Mean over pool_size windows of an NDHWC volume."""
    rank, op = 3, "avg"


class _GlobalPoolND(Layer):
    rank, op = 1, "mean"
    channels_first_ok = True

    def __init__(self, data_format=None, keepdims=False, **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.keepdims = bool(keepdims)

    def build(self, input_shape):
        if len(input_shape) != self.rank + 2:
            raise ShapeError(f"{type(self).__name__} '{self.name}' needs an input of rank "
                             f"{self.rank + 2}, got shape {list(input_shape)}")

    def call(self, x, training=False):
        axes = list(range(1, self.rank + 1))
        mask = keras_mask(x) if self.rank == 1 and self.op == "mean" else None
        if mask is not None:             # Keras: the mean over the unmasked steps
            m = _ops.expand_dims(_ops.cast(mask, "float32"), -1)
            return _ops.reduce_sum(x * m, axis=1, keepdims=self.keepdims) / \
                _ops.reduce_sum(m, axis=1, keepdims=self.keepdims)
        return getattr(_ops, "reduce_" + self.op)(x, axis=axes, keepdims=self.keepdims)


class GlobalAveragePooling1D(_GlobalPoolND):
    """Mean over the steps: (batch, steps, channels) -> (batch, channels); with a
    Keras mask (Embedding(mask_zero=True)), over the unmasked steps."""
    rank, op = 1, "mean"


class GlobalMaxPooling1D(_GlobalPoolND):
    """Max over the steps: (batch, steps, channels) -> (batch, channels)."""
    rank, op = 1, "max"


class GlobalAveragePooling3D(_GlobalPoolND):
    """Mean over depth, height and width of an NDHWC volume."""
    rank, op = 3, "mean"


class GlobalMaxPooling3D(_GlobalPoolND):
    """Max over depth, height and width of an NDHWC volume."""
    rank, op = 3, "max"


# Keras's other names for the same layers
MaxPool1D, AvgPool1D, MaxPool3D, AvgPool3D = (MaxPooling1D, AveragePooling1D,
                                              MaxPooling3D, AveragePooling3D)
GlobalAvgPool1D, GlobalMaxPool1D = GlobalAveragePooling1D, GlobalMaxPooling1D
GlobalAvgPool3D, GlobalMaxPool3D = GlobalAveragePooling3D, GlobalMaxPooling3D
Convolution1D, Convolution2D, Convolution3D = Conv1D, Conv2D, Conv3D
Convolution2DTranspose = Conv2DTranspose

export(__all__, globals())
