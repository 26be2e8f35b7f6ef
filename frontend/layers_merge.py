"""Keras's merging layers, ff.keras.layers.Add, Subtract, Multiply, Average, Maximum,
Minimum, Concatenate and Dot, and their functions (ff.keras.layers.add(inputs), ...).
Each is called on a list of tensors; the elementwise ones broadcast as the ops do
(Keras allows the same broadcasting of size-1 axes).

>>> import fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     a, b = ff.placeholder((None, 3)), ff.placeholder((None, 3))
...     y = ff.keras.layers.Concatenate()([a, ff.keras.layers.Add()([a, b])])
>>> y.shape
(None, 6)
"""
from __future__ import annotations

from functools import reduce

from ..ir.errors import AttrError, ShapeError
from . import ops as _ops
from .layers import Layer, export, keras_mask, set_keras_mask
from .tensor import Tensor

__all__ = ["Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum", "Concatenate",
           "Dot", "add", "subtract", "multiply", "average", "maximum", "minimum",
           "concatenate", "dot"]


class _Merge(Layer):
    """A layer over a list of at least `least` tensors."""
    least = 2
    keeps_masks = True               # Keras's compute_mask: the AND of the inputs' masks

    def build(self, input_shape):
        if not isinstance(input_shape, list) or len(input_shape) < self.least:
            raise ShapeError(f"{type(self).__name__} '{self.name}' needs a list of at "
                             f"least {self.least} tensors, got {input_shape!r}")

    def __call__(self, inputs, training=False, **kwargs):
        out = super().__call__(inputs, training=training, **kwargs)
        # Keras's rule: the output's mask is the AND of the inputs' masks
        if not self.keeps_masks or not isinstance(inputs, (list, tuple)) or \
                not all(isinstance(x, Tensor) for x in inputs):
            return out
        masks = [m for m in (keras_mask(x) for x in inputs) if m is not None]
        if masks and keras_mask(out) is None and len(out.shape) >= 2 and \
                all(tuple(x.shape[:2]) == tuple(out.shape[:2]) for x in inputs):
            with out.graph.as_default():
                set_keras_mask(out, reduce(_ops.logical_and, masks))
        return out

    def call(self, xs, training=False):
        return reduce(self.merge, xs)

    def merge(self, a, b):
        raise NotImplementedError


class Add(_Merge):
    """The sum of its inputs."""

    def merge(self, a, b):
        return a + b


class Subtract(_Merge):
    """inputs[0] - inputs[1] (exactly two)."""

    def build(self, input_shape):
        if not isinstance(input_shape, list) or len(input_shape) != 2:
            raise ShapeError(f"Subtract '{self.name}' needs a list of exactly 2 tensors")

    def merge(self, a, b):
        return a - b


class Multiply(_Merge):
    """The elementwise product of its inputs."""

    def merge(self, a, b):
        return a * b


class Maximum(_Merge):
    """The elementwise maximum of its inputs."""

    def merge(self, a, b):
        return _ops.maximum(a, b)


class Minimum(_Merge):
    """The elementwise minimum of its inputs."""

    def merge(self, a, b):
        return _ops.minimum(a, b)


class Average(_Merge):
    """The mean of its inputs."""

    def call(self, xs, training=False):
        return reduce(lambda a, b: a + b, xs) * (1.0 / len(xs))


class Concatenate(_Merge):
    """Its inputs joined along axis (default -1, the features)."""

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = int(axis)

    def build(self, input_shape):
        super().build(input_shape)
        ranks = {len(s) for s in input_shape}
        if len(ranks) != 1:
            raise ShapeError(f"Concatenate '{self.name}' needs inputs of one rank, got "
                             f"shapes {[list(s) for s in input_shape]}")

    def call(self, xs, training=False):
        return _ops.concat(list(xs), axis=self.axis)


class Dot(_Merge):
    """Keras's Dot(axes, normalize=False): the batched dot product of two tensors over
    axes (an int for both, or one per input; the batch axis 0 is not one), with
    normalize the cosine (each input l2-normalised over its axis first). Inputs of rank
    2 give (batch, 1); of rank 3, (batch, n, m) as a batched matmul."""

    keeps_masks = False              # Keras's Dot gives no mask

    def __init__(self, axes, normalize=False, **kwargs):
        super().__init__(**kwargs)
        self.axes = axes if isinstance(axes, int) else tuple(int(a) for a in axes)
        self.normalize = bool(normalize)

    def build(self, input_shape):
        if not isinstance(input_shape, list) or len(input_shape) != 2:
            raise ShapeError(f"Dot '{self.name}' needs a list of exactly 2 tensors")
        ranks = [len(s) for s in input_shape]
        if ranks[0] != ranks[1] or ranks[0] not in (2, 3):
            raise ShapeError(f"Dot '{self.name}' takes two inputs of rank 2 or both of rank "
                             f"3, got shapes {[list(s) for s in input_shape]}")
        axes = (self.axes, self.axes) if isinstance(self.axes, int) else self.axes
        self._axes = tuple(a % ranks[0] for a in axes)
        if 0 in self._axes:
            raise AttrError(f"Dot '{self.name}': axes {self.axes} include the batch axis")
        a, b = input_shape
        if a[self._axes[0]] != b[self._axes[1]]:
            raise ShapeError(f"Dot '{self.name}': axis {self._axes[0]} of {list(a)} and "
                             f"axis {self._axes[1]} of {list(b)} differ")

    def call(self, xs, training=False):
        a, b = xs
        if self.normalize:
            a = _ops.l2_normalize(a, axis=self._axes[0])
            b = _ops.l2_normalize(b, axis=self._axes[1])
        if len(a.shape) == 2:
            return _ops.reduce_sum(a * b, axis=1, keepdims=True)
        # (batch, n, k) @ (batch, k, m): the contracted axis last in a, first in b
        a = a if self._axes[0] == 2 else _ops.transpose(a, (0, 2, 1))
        b = b if self._axes[1] == 1 else _ops.transpose(b, (0, 2, 1))
        return _ops.matmul(a, b)


def _functional(cls):
    def fn(inputs, **kwargs):
        return cls(**kwargs)(inputs)
    fn.__name__ = cls.__name__.lower()
    fn.__doc__ = f"{cls.__name__}(**kwargs)(inputs) (keras.layers.{fn.__name__})."
    return fn


add, subtract, multiply, average, maximum, minimum, concatenate = (
    _functional(c) for c in (Add, Subtract, Multiply, Average, Maximum, Minimum,
                             Concatenate))


def dot(inputs, axes=-1, **kwargs):
    """Dot(axes, **kwargs)(inputs) (keras.layers.dot)."""
    return Dot(axes, **kwargs)(inputs)


export(__all__, globals())
