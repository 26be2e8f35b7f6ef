"""Keras's reshaping layers: UpSampling1D/2D/3D (nearest, and bilinear in 2-D),
ZeroPadding1D/2D/3D, Cropping1D/2D/3D, Permute, RepeatVector, and the wrapper
TimeDistributed (a layer on each step: the steps folded into the batch).

>>> import fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     x = ff.placeholder((None, 5, 6, 3))
...     y = ff.keras.layers.UpSampling2D(2, interpolation="bilinear")(x)
...     y = ff.keras.layers.Cropping2D(((1, 0), (2, 3)))(ff.keras.layers.ZeroPadding2D(1)(y))
>>> y.shape
(None, 11, 9, 3)
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import AttrError, ShapeError
from . import ops as _ops
from .layers import (
    CALLS,
    BatchNormalization,
    Dropout,
    Layer,
    export,
    layer_from_config,
)
from .layers_conv import ntuple

__all__ = ["UpSampling1D", "UpSampling2D", "UpSampling3D", "ZeroPadding1D",
           "ZeroPadding2D", "ZeroPadding3D", "Cropping1D", "Cropping2D", "Cropping3D",
           "Permute", "RepeatVector", "TimeDistributed", "Identity"]


def _pairs(value, rank, what) -> tuple:
    """Keras's padding / cropping: an int, one int per axis (both sides), or a
    (before, after) pair per axis; for rank 1 an int or one pair."""
    def is_int(v):
        return isinstance(v, (int, np.integer)) and not isinstance(v, bool)
    try:
        if is_int(value):
            out = ((int(value), int(value)),) * rank
        elif rank == 1:
            out = (tuple(int(v) for v in value),)
        elif all(is_int(v) for v in value):
            out = tuple((int(v), int(v)) for v in value)
        else:
            out = tuple(tuple(int(a) for a in v) for v in value)
    except (TypeError, ValueError):
        out = ()
    if len(out) != rank or any(len(p) != 2 or min(p) < 0 for p in out):
        raise AttrError(f"{what} must be an int, {rank} ints or {rank} (before, after) "
                        f"pairs of ints >= 0, got {value!r}")
    return out


def _check_rank(layer, shape, rank):
    if len(shape) != rank:
        raise ShapeError(f"{type(layer).__name__} '{layer.name}' needs an input of rank "
                         f"{rank}, got shape {list(shape)}")


def _repeat(x, axis, n):
    """Each element along axis n times in a row (numpy's repeat)."""
    if n == 1:
        return x
    shape = list(x.shape)
    y = _ops.expand_dims(x, axis + 1)
    y = _ops.tile(y, [1] * (axis + 1) + [n] + [1] * (len(shape) - axis - 1))
    shape[axis] *= n
    return _ops.reshape(y, [-1 if d is None else d for d in shape])


class _UpSampling(Layer):
    rank = 2
    channels_first_ok = True

    def __init__(self, size=2, data_format=None, interpolation="nearest", **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.size = ntuple(size, self.rank, "size") if self.rank > 1 else int(size)
        if interpolation not in ("nearest", "bilinear") or \
                (interpolation == "bilinear" and self.rank != 2):
            raise AttrError(f"{type(self).__name__}: interpolation {interpolation!r} is not "
                            f"supported (nearest; bilinear in 2-D)")
        self.interpolation = interpolation

    def build(self, input_shape):
        _check_rank(self, input_shape, self.rank + 2)

    def call(self, x, training=False):
        sizes = (self.size,) if self.rank == 1 else self.size
        if self.rank == 2 and None in x.shape[1:3]:
            # height or width unknown until fed: a resize by whole factors, whose size
            # follows the feed (nearest: the pixel of (o + 0.5) / s is o // s, Keras's
            # repeat)
            resize = _ops.resize_bilinear if self.interpolation == "bilinear" else \
                _ops.resize_nearest_neighbor
            return resize(x, scale=tuple(sizes), half_pixel_centers=True)
        if self.interpolation == "bilinear":
            h, w = x.shape[1], x.shape[2]
            return _ops.resize_bilinear(x, (h * sizes[0], w * sizes[1]),
                                        half_pixel_centers=True)
        for axis, n in enumerate(sizes, start=1):
            x = _repeat(x, axis, n)
        return x


class UpSampling1D(_UpSampling):
    """Each step repeated size times: (N, L, C) -> (N, L * size, C)."""
    rank = 1

    def __init__(self, size=2, **kwargs):
        super().__init__(size, **kwargs)

    def get_config(self):
        config = super().get_config()
        return {k: v for k, v in config.items() if k not in ("interpolation", "data_format")}


class UpSampling2D(_UpSampling):
    """Rows and columns repeated (nearest) or interpolated (bilinear, half-pixel
    centres as Keras's resize): (N, H, W, C) -> (N, H * sh, W * sw, C)."""
    rank = 2


class UpSampling3D(_UpSampling):
    """Depth, rows and columns each repeated size times."""
    rank = 3

    def __init__(self, size=(2, 2, 2), data_format=None, **kwargs):
        super().__init__(size, data_format, **kwargs)

    def get_config(self):
        config = super().get_config()
        return {k: v for k, v in config.items() if k != "interpolation"}


class _ZeroPadding(Layer):
    rank = 2
    channels_first_ok = True

    def __init__(self, padding=1, data_format=None, **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.padding = _pairs(padding, self.rank, "padding")
        if self.rank == 1:
            self.padding = self.padding[0]

    def build(self, input_shape):
        _check_rank(self, input_shape, self.rank + 2)

    def call(self, x, training=False):
        pairs = [self.padding] if self.rank == 1 else list(self.padding)
        return _ops.pad(x, [[0, 0]] + [list(p) for p in pairs] + [[0, 0]])


class ZeroPadding1D(_ZeroPadding):
    """Zeros before and after the steps: padding an int or (before, after)."""
    rank = 1

    def __init__(self, padding=1, data_format=None, **kwargs):
        super().__init__(padding, data_format, **kwargs)


class ZeroPadding2D(_ZeroPadding):
    """Zero rows and columns around an NHWC image: padding an int, (rows, cols) or
    ((top, bottom), (left, right))."""
    rank = 2


class ZeroPadding3D(_ZeroPadding):
    """Zeros around an NDHWC volume."""
    rank = 3


class _Cropping(Layer):
    rank = 2
    channels_first_ok = True

    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, **kwargs):
        super().__init__(data_format=data_format, **kwargs)
        self.cropping = _pairs(cropping, self.rank, "cropping")
        if self.rank == 1:
            self.cropping = self.cropping[0]

    def build(self, input_shape):
        _check_rank(self, input_shape, self.rank + 2)
        pairs = [self.cropping] if self.rank == 1 else self.cropping
        for size, (a, b) in zip(input_shape[1:-1], pairs):
            if size is not None and a + b >= size:
                raise ShapeError(f"{type(self).__name__} '{self.name}': cropping "
                                 f"{self.cropping} leaves nothing of shape "
                                 f"{list(input_shape)}")

    def call(self, x, training=False):
        pairs = [self.cropping] if self.rank == 1 else self.cropping
        index = (slice(None),) + tuple(slice(a, size - b) for (a, b), size in
                                       zip(pairs, x.shape[1:-1])) + (slice(None),)
        return x[index]


class Cropping1D(_Cropping):
    """Steps cut from the start and end: cropping an int or (start, end)."""
    rank = 1

    def __init__(self, cropping=(1, 1), **kwargs):
        super().__init__(cropping, **kwargs)

    def get_config(self):
        return {k: v for k, v in super().get_config().items() if k != "data_format"}


class Cropping2D(_Cropping):
    """Rows and columns cut from an NHWC image: ((top, bottom), (left, right))."""
    rank = 2


class Cropping3D(_Cropping):
    """Cut from the three spatial axes of an NDHWC volume."""
    rank = 3

    def __init__(self, cropping=((1, 1), (1, 1), (1, 1)), data_format=None, **kwargs):
        super().__init__(cropping, data_format, **kwargs)


class Permute(Layer):
    """The axes after the batch reordered: dims a permutation of 1..rank-1."""

    def __init__(self, dims, **kwargs):
        super().__init__(**kwargs)
        self.dims = tuple(int(d) for d in dims)
        if sorted(self.dims) != list(range(1, len(self.dims) + 1)):
            raise AttrError(f"Permute: dims must be a permutation of 1..{len(self.dims)}, "
                            f"got {dims!r}")

    def build(self, input_shape):
        _check_rank(self, input_shape, len(self.dims) + 1)

    def call(self, x, training=False):
        return _ops.transpose(x, (0,) + self.dims)


class RepeatVector(Layer):
    """(N, F) -> (N, n, F): the vector repeated n times."""

    def __init__(self, n, **kwargs):
        super().__init__(**kwargs)
        self.n = int(n)

    def build(self, input_shape):
        _check_rank(self, input_shape, 2)

    def call(self, x, training=False):
        return _ops.tile(_ops.expand_dims(x, 1), [1, self.n, 1])


class Identity(Layer):
    """Its input (Keras's Identity: a placeholder layer in a model)."""
    supports_masking = True

    def call(self, x, training=False):
        return _ops.identity(x)


class TimeDistributed(Layer):
    """Keras's TimeDistributed(layer): layer applied to each step of (N, T, ...), the
    steps folded into the batch ((N * T, ...)) and unfolded after. The inner layer's
    weights are its own, named under this layer ('time_distributed/dense/kernel')."""

    def __init__(self, layer, **kwargs):
        super().__init__(**kwargs)
        self.layer = layer_from_config(layer)

    def build(self, input_shape):
        if len(input_shape) < 3 or any(d is None for d in input_shape[2:]):
            raise ShapeError(f"TimeDistributed '{self.name}' needs (batch, time, ...) with "
                             f"known sizes after time, got {list(input_shape)}")
        if input_shape[0] is None and input_shape[1] is None:
            raise ShapeError(f"TimeDistributed '{self.name}': the batch or the time size "
                             f"must be known, got {list(input_shape)}")

    @property
    def weights(self):
        return self.layer.weights

    @property
    def training_dependent(self) -> bool:
        """Its layer trains differently (Dropout, BatchNormalization inside)."""
        return isinstance(self.layer, (BatchNormalization, Dropout)) or \
            bool(getattr(self.layer, "training_dependent", False))

    @property
    def trainable_weights(self):
        return self.layer.trainable_weights if self.trainable else []

    @property
    def non_trainable_weights(self):
        return self.layer.non_trainable_weights if self.trainable else self.layer.weights

    def call(self, x, training=False):
        n, t, rest = x.shape[0], x.shape[1], tuple(x.shape[2:])
        folded = _ops.reshape(x, (-1,) + rest)
        y = self.layer(folded, training=training)
        entries = CALLS.get(y.graph, {}).get(y.value, [])      # ff.Model lists this layer
        entries[:] = [e for e in entries if e[0] is not self.layer]
        self.updates = self.layer.updates
        out = tuple(y.shape[1:])
        return _ops.reshape(y, (-1 if n is None else n, -1 if n is not None and t is None
                                else t) + out)


export(__all__, globals())
