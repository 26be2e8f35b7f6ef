"""Keras's preprocessing layers that models hold: Rescaling (x * scale + offset),
Resizing (bilinear or nearest, half-pixel centres), CenterCrop and Normalization
(with given or adapted mean and variance). They are graph ops like any layer, so a
model exported to the browser preprocesses there too.

>>> import fragflow as ff, numpy as np
>>> norm = ff.keras.layers.Normalization()
>>> norm.adapt(np.array([[0.0, 10.0], [2.0, 30.0]], np.float32))
>>> g = ff.Graph()
>>> with g.as_default():
...     y = norm(ff.constant(np.array([[1.0, 20.0]], np.float32)))
>>> ff.Session(g, backend="numpy").run(y).tolist()
[[0.0, 0.0]]
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import AttrError, FragflowError, ShapeError
from . import ops as _ops
from .layers import Layer, export
from .tensor import Tensor

__all__ = ["Rescaling", "Resizing", "CenterCrop", "Normalization"]

# Keras's backend epsilon, the floor of Normalization's standard deviation
_EPSILON = 1e-7


class Rescaling(Layer):
    """x * scale + offset (scale and offset numbers, or per-channel lists)."""

    def __init__(self, scale, offset=0.0, **kwargs):
        super().__init__(**kwargs)
        self.scale, self.offset = scale, offset

    def call(self, x, training=False):
        scale = np.asarray(self.scale, np.float32)
        offset = np.asarray(self.offset, np.float32)
        return x * _ops.constant(scale) + _ops.constant(offset)


def _check_image(layer, shape):
    if len(shape) not in (3, 4) or any(d is None for d in shape[-3:-1]):
        raise ShapeError(f"{type(layer).__name__} '{layer.name}' needs (N,) H, W, C images "
                         f"of known height and width, got {list(shape)}")


class Resizing(Layer):
    channels_first_ok = True
    """Images resized to (height, width): interpolation "bilinear" (default) or
    "nearest", half-pixel centres, no antialiasing (Keras's defaults)."""

    def __init__(self, height, width, interpolation="bilinear", crop_to_aspect_ratio=False,
                 pad_to_aspect_ratio=False, fill_mode="constant", fill_value=0.0,
                 antialias=False, data_format=None, **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.height, self.width = int(height), int(width)
        if interpolation not in ("bilinear", "nearest"):
            raise AttrError(f"Resizing: interpolation {interpolation!r} is not supported "
                            f"(bilinear, nearest)")
        if crop_to_aspect_ratio or pad_to_aspect_ratio or antialias:
            raise AttrError("Resizing: crop_to_aspect_ratio, pad_to_aspect_ratio and "
                            "antialias are not supported (docs/KERAS.md)")
        self.interpolation = interpolation
        self.crop_to_aspect_ratio = self.pad_to_aspect_ratio = self.antialias = False
        self.fill_mode, self.fill_value = fill_mode, float(fill_value)

    def build(self, input_shape):
        _check_image(self, input_shape)

    def call(self, x, training=False):
        single = len(x.shape) == 3
        images = _ops.expand_dims(x, 0) if single else x
        fn = _ops.resize_bilinear if self.interpolation == "bilinear" else \
            _ops.resize_nearest_neighbor
        y = fn(images, (self.height, self.width), half_pixel_centers=True)
        return _ops.squeeze(y, [0]) if single else y


class CenterCrop(Layer):
    channels_first_ok = True
    """The central (height, width) window of each image (at least that large)."""

    def __init__(self, height, width, data_format=None, **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.height, self.width = int(height), int(width)

    def build(self, input_shape):
        _check_image(self, input_shape)
        h, w = input_shape[-3], input_shape[-2]
        if h < self.height or w < self.width:
            raise ShapeError(f"CenterCrop '{self.name}': images of {h}x{w} are smaller than "
                             f"{self.height}x{self.width}; fragflow does not upscale them")

    def call(self, x, training=False):
        h, w = x.shape[-3], x.shape[-2]
        top, left = (h - self.height) // 2, (w - self.width) // 2
        return x[..., top:top + self.height, left:left + self.width, :]


class Normalization(Layer):
    """(x - mean) / max(sqrt(variance), 1e-7) per feature of axis, or with invert its
    inverse. mean and variance given, or learnt by adapt(data) (non-trainable weights
    mean, variance and count, as Keras's)."""

    def __init__(self, axis=-1, mean=None, variance=None, invert=False, **kwargs):
        super().__init__(**kwargs)
        self.axis = (axis,) if isinstance(axis, int) else \
            (() if axis is None else tuple(int(a) for a in axis))
        if (mean is None) != (variance is None):
            raise AttrError("Normalization: give both mean and variance, or neither")
        self.mean, self.variance, self.invert = mean, variance, bool(invert)
        self._adapted = None

    def _shape(self, input_shape):
        rank = len(input_shape)
        axes = sorted(a % rank for a in self.axis)
        if any(input_shape[a] is None for a in axes):
            raise ShapeError(f"Normalization '{self.name}': axis {self.axis} of "
                             f"{list(input_shape)} must be known")
        return axes, [input_shape[a] if a in axes else 1 for a in range(rank)]

    def adapt(self, data) -> None:
        """Learn mean and variance (over every axis but axis) from a numpy array."""
        if self.built:
            raise FragflowError(f"Normalization '{self.name}' is built; adapt it first")
        data = np.asarray(data, np.float64)
        axes, shape = self._shape(data.shape)
        reduce = tuple(a for a in range(data.ndim) if a not in axes)
        mean = data.mean(axis=reduce).reshape([shape[a] for a in axes])
        var = data.var(axis=reduce).reshape([shape[a] for a in axes])
        count = np.float32(np.prod([data.shape[a] for a in reduce]))
        self._adapted = (mean.astype(np.float32), var.astype(np.float32), count)

    def build(self, input_shape):
        axes, self._broadcast = self._shape(input_shape)
        shape = tuple(input_shape[a] for a in axes)
        if self.mean is not None:
            self._stats = [np.broadcast_to(np.asarray(v, np.float32), shape).copy()
                           for v in (self.mean, self.variance)]
            return
        mean, var, count = self._adapted if self._adapted is not None else \
            (np.zeros(shape, np.float32), np.ones(shape, np.float32), np.float32(0))
        self.adapt_mean = self.add_weight("mean", shape, lambda s: mean, trainable=False)
        self.adapt_variance = self.add_weight("variance", shape, lambda s: var,
                                              trainable=False)
        self.count = self.add_weight("count", (), lambda s: count, trainable=False)
        self._stats = [self.adapt_mean, self.adapt_variance]

    def call(self, x, training=False):
        mean, var = (_ops.reshape(v if isinstance(v, Tensor) else _ops.constant(v),
                                  self._broadcast) for v in self._stats)
        std = _ops.maximum(_ops.sqrt(var), _EPSILON)
        return mean + x * std if self.invert else (x - mean) / std

    def get_config(self):
        config = super().get_config()
        config["axis"] = self.axis
        for key in ("mean", "variance"):
            value = getattr(self, key)
            config[key] = np.asarray(value).tolist() if value is not None else None
        return config


export(__all__, globals())
