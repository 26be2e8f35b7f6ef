"""Keras's metrics for Sequential.compile: functions (y_true, y_pred) -> one value per
example, METRICS (their string names, the losses' too), the accuracy that "accuracy"
means for each loss, and per_example, which checks a loss's or metric's value."""
from __future__ import annotations

from ...ir.errors import ShapeError
from .. import ops as _ops
from ..tensor import Tensor
from .losses import (
    LOSSES,
    binary_crossentropy,
    categorical_crossentropy,
    sparse_categorical_crossentropy,
)


def sparse_categorical_accuracy(y_true, y_pred):
    return _ops.cast(_ops.equal(_ops.argmax(y_pred, axis=-1), y_true), "float32")


def categorical_accuracy(y_true, y_pred):
    return _ops.cast(_ops.equal(_ops.argmax(y_pred, axis=-1),
                                _ops.argmax(y_true, axis=-1)), "float32")


def binary_accuracy(y_true, y_pred):
    hit = _ops.equal(_ops.greater(y_pred, 0.5), _ops.greater(y_true, 0.5))
    return _ops.mean(_ops.cast(hit, "float32"), axis=-1)


METRICS = dict(LOSSES, sparse_categorical_accuracy=sparse_categorical_accuracy,
               categorical_accuracy=categorical_accuracy, binary_accuracy=binary_accuracy)
# what "accuracy" ("acc") means for each loss
ACCURACY_FOR_LOSS = {
    sparse_categorical_crossentropy: sparse_categorical_accuracy,
    categorical_crossentropy: categorical_accuracy,
    binary_crossentropy: binary_accuracy,
}


def per_example(fn, y_true, y_pred, what) -> Tensor:
    """fn's value with one entry per example (trailing axes averaged)."""
    value = getattr(fn, "per_example", fn)(y_true, y_pred)    # a Keras loss object's
    if not isinstance(value, Tensor) or value.ndim == 0:
        raise ShapeError(f"the {what} {getattr(fn, '__name__', fn)!r} must return one "
                         f"value per example (a tensor of rank >= 1)")
    if value.ndim > 1:
        value = _ops.mean(value, axis=list(range(1, value.ndim)))
    return value
