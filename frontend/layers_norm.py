"""Keras's normalization layers beside BatchNormalization (layers.py):
LayerNormalization (and its rms_scaling form), RMSNormalization, GroupNormalization and
UnitNormalization. Statistics are computed in the graph from the input, in float32,
with the (biased) variance mean((x - mean) ** 2), as Keras does.

>>> import fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     y = ff.keras.layers.GroupNormalization(groups=2)(ff.placeholder((None, 5, 6)))
>>> y.shape
(None, 5, 6)
"""
from __future__ import annotations

from ..ir.errors import AttrError, ShapeError
from . import ops as _ops
from .layers import Layer, export

__all__ = ["LayerNormalization", "GroupNormalization", "UnitNormalization",
           "RMSNormalization"]


def _axes(layer, axis, rank) -> tuple:
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    out = tuple(sorted(int(a) % rank for a in axes))
    if any(not -rank <= int(a) < rank for a in axes) or 0 in out:
        raise ShapeError(f"{type(layer).__name__} '{layer.name}': axis {axis} does not fit "
                         f"an input of rank {rank} (the batch axis cannot be one)")
    return out


def _moments(x, axes):
    mean = _ops.reduce_mean(x, axis=list(axes), keepdims=True)
    return mean, _ops.reduce_mean(_ops.square(x - mean), axis=list(axes), keepdims=True)


class LayerNormalization(Layer):
    """Normalise each example over axis (default the features): (x - mean) /
    sqrt(variance + epsilon) * gamma + beta, gamma and beta of the axes' sizes. With
    rms_scaling, Keras 3's rule: x / sqrt(variance + epsilon) * gamma (not centred, no
    beta)."""
    supports_masking = True          # Keras: the mask goes on

    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True, rms_scaling=False,
                 beta_initializer="zeros", gamma_initializer="ones", **kwargs):
        super().__init__(**kwargs)
        self.axis = axis if isinstance(axis, int) else tuple(int(a) for a in axis)
        self.epsilon, self.center, self.scale = float(epsilon), bool(center), bool(scale)
        self.rms_scaling = bool(rms_scaling)
        self.beta_initializer, self.gamma_initializer = beta_initializer, gamma_initializer

    def build(self, input_shape):
        rank = len(input_shape)
        self._axes = _axes(self, self.axis, rank)
        shape = tuple(input_shape[a] for a in self._axes)
        if any(d is None for d in shape):
            raise ShapeError(f"LayerNormalization '{self.name}': axis {self.axis} of "
                             f"{list(input_shape)} must be known")
        # the weights broadcast against the input: their axes in place, ones elsewhere
        self._broadcast = [input_shape[a] if a in self._axes else 1 for a in range(rank)]
        self.gamma = self.add_weight("gamma", shape, self.gamma_initializer) \
            if self.scale or self.rms_scaling else None
        self.beta = self.add_weight("beta", shape, self.beta_initializer) \
            if self.center and not self.rms_scaling else None

    def _param(self, w):
        return w if self._axes == (len(self._broadcast) - 1,) else \
            _ops.reshape(w, self._broadcast)

    def call(self, x, training=False):
        mean, var = _moments(x, self._axes)
        if self.rms_scaling:     # Keras 3's (deprecated) rule: by the variance, not centred
            return x * _ops.rsqrt(var + self.epsilon) * self._param(self.gamma)
        y = (x - mean) * _ops.rsqrt(var + self.epsilon)
        if self.gamma is not None:
            y = y * self._param(self.gamma)
        if self.beta is not None:
            y = y + self._param(self.beta)
        return y


class RMSNormalization(Layer):
    """x / sqrt(mean(x ** 2 over axis) + epsilon) * scale, scale a weight of the axes'
    sizes (ones)."""
    supports_masking = True

    def __init__(self, axis=-1, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis if isinstance(axis, int) else tuple(int(a) for a in axis)
        self.epsilon = float(epsilon)

    def build(self, input_shape):
        rank = len(input_shape)
        self._axes = _axes(self, self.axis, rank)
        shape = tuple(input_shape[a] for a in self._axes)
        if any(d is None for d in shape):
            raise ShapeError(f"RMSNormalization '{self.name}': axis {self.axis} of "
                             f"{list(input_shape)} must be known")
        self._broadcast = [input_shape[a] if a in self._axes else 1 for a in range(rank)]
        self.scale = self.add_weight("scale", shape, "ones")

    def call(self, x, training=False):
        ms = _ops.reduce_mean(_ops.square(x), axis=list(self._axes), keepdims=True)
        scale = self.scale if self._axes == (len(self._broadcast) - 1,) else \
            _ops.reshape(self.scale, self._broadcast)
        return x * _ops.rsqrt(ms + self.epsilon) * scale


class GroupNormalization(Layer):
    """The channels (axis) split into groups; each example normalised over every
    other axis and its group's channels; gamma and beta per channel."""

    def __init__(self, groups=32, axis=-1, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", **kwargs):
        super().__init__(**kwargs)
        self.groups, self.axis, self.epsilon = int(groups), int(axis), float(epsilon)
        self.center, self.scale = bool(center), bool(scale)
        self.beta_initializer, self.gamma_initializer = beta_initializer, gamma_initializer

    def build(self, input_shape):
        rank = len(input_shape)
        if self.axis % rank != rank - 1:
            raise AttrError(f"GroupNormalization '{self.name}': fragflow takes the channels "
                            f"last (axis=-1), got axis={self.axis}")
        channels = input_shape[-1]
        if channels is None or channels % self.groups:
            raise ShapeError(f"GroupNormalization '{self.name}': {channels} channels do not "
                             f"split into {self.groups} groups")
        if any(d is None for d in input_shape[1:]):
            raise ShapeError(f"GroupNormalization '{self.name}' needs known sizes after the "
                             f"batch, got {list(input_shape)}")
        self.gamma = self.add_weight("gamma", (channels,), self.gamma_initializer) \
            if self.scale else None
        self.beta = self.add_weight("beta", (channels,), self.beta_initializer) \
            if self.center else None

    def call(self, x, training=False):
        shape = tuple(x.shape)
        rest, channels = shape[1:-1], shape[-1]
        grouped = _ops.reshape(x, (-1,) + rest + (self.groups, channels // self.groups))
        axes = list(range(1, len(rest) + 1)) + [len(rest) + 2]
        mean, var = _moments(grouped, axes)
        y = (grouped - mean) * _ops.rsqrt(var + self.epsilon)
        y = _ops.reshape(y, (-1 if shape[0] is None else shape[0],) + shape[1:])
        if self.gamma is not None:
            y = y * self.gamma
        if self.beta is not None:
            y = y + self.beta
        return y


class UnitNormalization(Layer):
    """x / ||x|| over axis (l2; ff.l2_normalize with epsilon 1e-12)."""
    supports_masking = True          # Keras: the mask goes on

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis if isinstance(axis, int) else tuple(int(a) for a in axis)

    def call(self, x, training=False):
        axis = self.axis if isinstance(self.axis, int) else list(self.axis)
        return _ops.l2_normalize(x, axis=axis)


export(__all__, globals())
