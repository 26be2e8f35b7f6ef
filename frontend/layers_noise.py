"""Keras's regularization layers that act in training only: SpatialDropout1D/2D/3D
(whole channels dropped), GaussianNoise (x + N(0, stddev)), GaussianDropout
(x * N(1, rate / (1 - rate))) and ActivityRegularization (the identity; its l1 / l2
penalty on the output is in layer.activity_loss). At inference each is its input.

>>> import fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     x = ff.placeholder((2, 5, 3))
...     y = ff.keras.layers.SpatialDropout1D(0.5, seed=1)(x, training=True)
>>> y.shape
(2, 5, 3)
"""
from __future__ import annotations

import math

from ..ir.errors import AttrError, ShapeError
from . import ops as _ops
from .layers import Layer, export
from .tf1 import shape as _shape

__all__ = ["SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianNoise",
           "GaussianDropout", "ActivityRegularization"]


def _rate(layer, rate, what="rate"):
    if not 0.0 <= float(rate) < 1.0:
        raise AttrError(f"{type(layer).__name__}: {what} must be in [0, 1), got {rate}")
    return float(rate)


def _static(layer, x) -> tuple:
    """x's shape, which the normal draws need known (the batch too)."""
    if any(d is None for d in x.shape):
        raise ShapeError(f"{type(layer).__name__} '{layer.name}' draws its noise for a "
                         f"known shape in training, got {list(x.shape)} (give the model "
                         f"a batch size: ff.keras.Input(shape, batch_size=...))")
    return tuple(x.shape)


class _SpatialDropout(Layer):
    rank = 1
    channels_first_ok = True
    training_dependent = True
    supports_masking = True

    def __init__(self, rate, seed=None, data_format=None, **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.rate, self.seed = _rate(self, rate), seed

    def build(self, input_shape):
        if len(input_shape) != self.rank + 2:
            raise ShapeError(f"{type(self).__name__} '{self.name}' needs an input of rank "
                             f"{self.rank + 2}, got shape {list(input_shape)}")

    def call(self, x, training=False):
        if not training or self.rate == 0.0:
            return x
        noise = [x.shape[0]] + [1] * self.rank + [x.shape[-1]]     # None: the input's
        return _ops.dropout(x, self.rate, noise_shape=noise, seed=self.seed)


class SpatialDropout1D(_SpatialDropout):
    """Dropout of whole channels of (N, steps, C) in training (one draw per example
    and channel)."""
    rank = 1

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(rate, seed, **kwargs)

    def get_config(self):
        return {k: v for k, v in super().get_config().items() if k != "data_format"}


class SpatialDropout2D(_SpatialDropout):
    """Dropout of whole channels of an NHWC image in training."""
    rank = 2


class SpatialDropout3D(_SpatialDropout):
    """Dropout of whole channels of an NDHWC volume in training."""
    rank = 3


class GaussianNoise(Layer):
    """x + normal noise of stddev in training; x at inference."""
    training_dependent = True
    supports_masking = True

    def __init__(self, stddev, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.stddev, self.seed = float(stddev), seed
        if self.stddev < 0:
            raise AttrError(f"GaussianNoise: stddev must be >= 0, got {stddev}")

    def call(self, x, training=False):
        if not training or self.stddev == 0.0:
            return x
        return x + _ops.random_normal(_static(self, x), stddev=self.stddev, seed=self.seed)


class GaussianDropout(Layer):
    """x * normal noise of mean 1 and stddev sqrt(rate / (1 - rate)) in training."""
    training_dependent = True
    supports_masking = True

    def __init__(self, rate, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate, self.seed = _rate(self, rate), seed

    def call(self, x, training=False):
        if not training or self.rate == 0.0:
            return x
        stddev = math.sqrt(self.rate / (1.0 - self.rate))
        return x * _ops.random_normal(_static(self, x), mean=1.0, stddev=stddev,
                                      seed=self.seed)


class ActivityRegularization(Layer):
    """The identity; layer.activity_loss is the penalty l1 * sum|x| + l2 * sum x^2 of
    its last call divided by the batch size, as Keras adds to the loss (fragflow's
    fit does not add it: docs/KERAS.md)."""
    supports_masking = True

    def __init__(self, l1=0.0, l2=0.0, **kwargs):
        super().__init__(**kwargs)
        self.l1, self.l2 = float(l1), float(l2)
        self.activity_loss = None

    def call(self, x, training=False):
        penalty = None
        if self.l1:
            penalty = self.l1 * _ops.reduce_sum(_ops.abs(x))
        if self.l2:
            term = self.l2 * _ops.reduce_sum(_ops.square(x))
            penalty = term if penalty is None else penalty + term
        if penalty is not None:
            batch = _ops.cast(_shape(x)[0], "float32")
            self.activity_loss = penalty / batch
        return _ops.identity(x)


export(__all__, globals())
