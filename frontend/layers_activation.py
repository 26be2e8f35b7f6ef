"""Keras's activation layers with their arguments: LeakyReLU(negative_slope), PReLU
(a learned slope per element, shared over shared_axes), ELU(alpha), ReLU(max_value,
negative_slope, threshold); Softmax(axis) and Activation are in layers.py.

>>> import fragflow as ff, numpy as np
>>> g = ff.Graph()
>>> with g.as_default():
...     y = ff.keras.layers.ReLU(max_value=1.0, negative_slope=0.5)(
...         ff.constant(np.array([-2.0, 0.5, 3.0], np.float32)))
>>> ff.Session(g, backend="numpy").run(y).tolist()
[-1.0, 0.5, 1.0]
"""
from __future__ import annotations

from ..ir.errors import AttrError, ShapeError
from . import ops as _ops
from .layers import Layer, export

__all__ = ["LeakyReLU", "PReLU", "ELU", "ReLU"]


class LeakyReLU(Layer):
    """x if x >= 0, else negative_slope * x (Keras 3's default slope 0.3; Keras 2's
    alpha= is taken too)."""
    supports_masking = True

    def __init__(self, negative_slope=0.3, **kwargs):
        if "alpha" in kwargs:                # Keras 2's name
            negative_slope = kwargs.pop("alpha")
        super().__init__(**kwargs)
        self.negative_slope = float(negative_slope)
        if self.negative_slope < 0:
            raise AttrError(f"LeakyReLU: negative_slope must be >= 0, got {negative_slope}")

    def call(self, x, training=False):
        return _ops.leaky_relu(x, alpha=self.negative_slope)


class PReLU(Layer):
    """x if x >= 0, else alpha * x with alpha a weight of the input's shape after the
    batch (size 1 on shared_axes), initialised by alpha_initializer (zeros)."""

    def __init__(self, alpha_initializer="zeros", shared_axes=None, **kwargs):
        super().__init__(**kwargs)
        self.alpha_initializer = alpha_initializer
        self.shared_axes = None if shared_axes is None else \
            [int(a) for a in ([shared_axes] if isinstance(shared_axes, int) else shared_axes)]

    def build(self, input_shape):
        shape = list(input_shape[1:])
        for a in self.shared_axes or []:
            if not 1 <= a < len(input_shape):
                raise ShapeError(f"PReLU '{self.name}': shared axis {a} does not fit an "
                                 f"input of shape {list(input_shape)}")
            shape[a - 1] = 1
        if any(d is None for d in shape):
            raise ShapeError(f"PReLU '{self.name}' needs known sizes after the batch (or "
                             f"shared_axes over the unknown ones), got {list(input_shape)}")
        self.alpha = self.add_weight("alpha", tuple(shape), self.alpha_initializer)

    def call(self, x, training=False):
        return _ops.relu(x) - self.alpha * _ops.relu(-x)


class ELU(Layer):
    """x if x > 0, else alpha * (exp(x) - 1)."""
    supports_masking = True

    def __init__(self, alpha=1.0, **kwargs):
        super().__init__(**kwargs)
        self.alpha = float(alpha)

    def call(self, x, training=False):
        if self.alpha == 1.0:
            return _ops.elu(x)
        return _ops.where(x > 0.0, x, self.alpha * _ops.expm1(_ops.minimum(x, 0.0)))


class ReLU(Layer):
    """Keras's ReLU: max_value where x >= max_value, x where threshold <= x, else
    negative_slope * (x - threshold); the defaults give max(x, 0)."""
    supports_masking = True

    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, **kwargs):
        super().__init__(**kwargs)
        if (max_value is not None and max_value < 0) or negative_slope < 0:
            raise AttrError(f"ReLU: max_value and negative_slope must be >= 0, got "
                            f"{max_value}, {negative_slope}")
        self.max_value = None if max_value is None else float(max_value)
        self.negative_slope, self.threshold = float(negative_slope), float(threshold)

    def call(self, x, training=False):
        if self.negative_slope == 0.0 and self.threshold == 0.0:
            y = _ops.relu(x)
        elif self.threshold == 0.0:
            y = _ops.leaky_relu(x, alpha=self.negative_slope)
        else:
            y = _ops.where(x >= self.threshold, x,
                           (x - self.threshold) * self.negative_slope)
        return y if self.max_value is None else _ops.minimum(y, self.max_value)


export(__all__, globals())
