"""Keras's losses for Sequential.compile: functions (y_true, y_pred) -> one loss per
example, the loss classes (ff.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
...) and LOSSES, the table of their string names.

As in Keras, a cross-entropy on the output of a softmax (sigmoid) layer is computed from
that layer's logits (ff.layers remembers them), which is exact where the probabilities
round to 0."""
from __future__ import annotations

import numpy as np

from .. import ops as _ops
from ..layers import logits_of

_EPSILON = 1e-7            # Keras's clip of probabilities in cross-entropies


def _probabilities(y_pred, axis_sum=True):
    p = y_pred / _ops.sum(y_pred, axis=-1, keepdims=True) if axis_sum else y_pred
    return _ops.clip_by_value(p, _EPSILON, 1.0 - _EPSILON)


def sparse_categorical_crossentropy(y_true, y_pred):
    logits = logits_of(y_pred, "softmax")
    if logits is not None:
        return _ops.sparse_softmax_cross_entropy_with_logits(labels=y_true, logits=logits)
    classes = y_pred.shape[-1]
    one_hot = _ops.cast(_ops.equal(_ops.expand_dims(y_true, -1),
                                   _ops.constant(np.arange(classes, dtype=np.int32))),
                        "float32")
    return -_ops.sum(one_hot * _ops.log(_probabilities(y_pred)), axis=-1)


def categorical_crossentropy(y_true, y_pred):
    logits = logits_of(y_pred, "softmax")
    if logits is not None:
        return _ops.softmax_cross_entropy_with_logits(labels=y_true, logits=logits)
    return -_ops.sum(y_true * _ops.log(_probabilities(y_pred)), axis=-1)


def binary_crossentropy(y_true, y_pred):
    logits = logits_of(y_pred, "sigmoid")
    if logits is not None:
        per_element = _ops.sigmoid_cross_entropy_with_logits(labels=y_true,
                                                                     logits=logits)
    else:
        p = _probabilities(y_pred, axis_sum=False)
        per_element = -(y_true * _ops.log(p) + (1.0 - y_true) * _ops.log(1.0 - p))
    return _ops.mean(per_element, axis=-1)


def mean_squared_error(y_true, y_pred):
    return _ops.mean(_ops.square(y_pred - y_true), axis=-1)


def mean_absolute_error(y_true, y_pred):
    return _ops.mean(_ops.abs(y_pred - y_true), axis=-1)


# Keras's loss classes (tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
# ...): callables (y_true, y_pred) -> one loss per example, for compile(loss=...)
class _KerasLoss:
    sparse_labels = False

    def __init__(self, from_logits=False, name=None):
        self.from_logits = bool(from_logits)
        self.__name__ = name or _snake_name(type(self).__name__)

    def __call__(self, y_true, y_pred, sample_weight=None):
        """The mean loss over the examples, as a Keras loss object gives it (compile and
        fit use per_example)."""
        value = self.per_example(y_true, y_pred)
        if sample_weight is not None:
            value = value * sample_weight
        return _ops.mean(value)

    def per_example(self, y_true, y_pred):
        raise NotImplementedError

    def __repr__(self):
        return f"<ff.keras.losses.{type(self).__name__} from_logits={self.from_logits}>"


def _snake_name(name):
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


class SparseCategoricalCrossentropy(_KerasLoss):
    """Cross-entropy against int32 class indices; from_logits: y_pred are logits."""
    sparse_labels = True

    def per_example(self, y_true, y_pred):
        if self.from_logits:
            return _ops.sparse_softmax_cross_entropy_with_logits(labels=y_true,
                                                                         logits=y_pred)
        return sparse_categorical_crossentropy(y_true, y_pred)


class CategoricalCrossentropy(_KerasLoss):
    """Cross-entropy against one-hot labels; from_logits: y_pred are logits."""

    def per_example(self, y_true, y_pred):
        if self.from_logits:
            return _ops.softmax_cross_entropy_with_logits(labels=y_true,
                                                                  logits=y_pred)
        return categorical_crossentropy(y_true, y_pred)


class BinaryCrossentropy(_KerasLoss):
    """Logistic loss, averaged over the last axis; from_logits: y_pred are logits."""

    def per_example(self, y_true, y_pred):
        if self.from_logits:
            return _ops.mean(_ops.sigmoid_cross_entropy_with_logits(
                labels=y_true, logits=y_pred), axis=-1)
        return binary_crossentropy(y_true, y_pred)


class MeanSquaredError(_KerasLoss):
    """(y_pred - y_true) ** 2 averaged over the last axis."""

    def per_example(self, y_true, y_pred):
        return mean_squared_error(y_true, y_pred)


class MeanAbsoluteError(_KerasLoss):
    """|y_pred - y_true| averaged over the last axis."""

    def per_example(self, y_true, y_pred):
        return mean_absolute_error(y_true, y_pred)


LOSSES = {
    "sparse_categorical_crossentropy": sparse_categorical_crossentropy,
    "categorical_crossentropy": categorical_crossentropy,
    "binary_crossentropy": binary_crossentropy,
    "mean_squared_error": mean_squared_error, "mse": mean_squared_error,
    "mean_absolute_error": mean_absolute_error, "mae": mean_absolute_error,
}
