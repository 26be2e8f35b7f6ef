"""ff.losses: TensorFlow 1's tf.losses (tf.compat.v1.losses): a loss from labels and
predictions, weighted and reduced.

weights (a number, or a tensor that broadcasts to the per-element losses) multiply the
losses; reduction is one of Reduction's names:
- SUM_BY_NONZERO_WEIGHTS (the default): sum / the number of non-zero weights;
- MEAN: sum / sum of the weights;  SUM_OVER_BATCH_SIZE: sum / number of elements;
- SUM: the sum;  NONE: the weighted losses themselves.

>>> import fragflow as ff, numpy as np
>>> g = ff.Graph()
>>> with g.as_default():
...     loss = ff.losses.mean_squared_error(np.float32([1, 2]), np.float32([1, 4]))
>>> float(ff.Session(g, backend="numpy").run(loss))
2.0
"""
from __future__ import annotations

from ...ir.errors import AttrError as _AttrError
from .. import ops as _ops
from ..operands import as_tensor, check_same_shape as _check_same_shape
from ..ops_math import divide_no_nan as _divide_no_nan
from ._missing import install as _install


class Reduction:
    """tf.losses.Reduction's names."""
    NONE = "none"
    SUM = "weighted_sum"
    MEAN = "weighted_mean"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    SUM_OVER_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"

    @classmethod
    def all(cls):
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE,
                cls.SUM_BY_NONZERO_WEIGHTS)


def compute_weighted_loss(losses, weights=1.0, scope=None, loss_collection=None,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """losses * weights, reduced as reduction says (see the module docstring)."""
    if reduction not in Reduction.all():
        raise _AttrError(f"unknown reduction {reduction!r}; use ff.losses.Reduction's names")
    with _ops.name_scope(scope or "weighted_loss"):
        losses = as_tensor(losses)
        weights = as_tensor(weights)
        weighted = losses * weights
        if reduction == Reduction.NONE:
            return weighted
        total = _ops.reduce_sum(weighted)
        if reduction == Reduction.SUM:
            return total
        every = weights * _ops.ones_like(losses)          # weights broadcast to losses
        if reduction == Reduction.MEAN:
            return _safe_div(total, _ops.reduce_sum(every))
        if reduction == Reduction.SUM_OVER_BATCH_SIZE:
            return _ops.reduce_mean(weighted)
        nonzero = _ops.reduce_sum(_ops.cast(_ops.not_equal(every, 0.0), "float32"))
        return _safe_div(total, nonzero)


def _safe_div(num, den):
    """num / den, 0 where den is 0 (TensorFlow's losses give 0 for all-zero weights)."""
    return _divide_no_nan(num, den)


def _same_shape(what, labels, predictions):
    _check_same_shape(f"losses.{what}", as_tensor(labels), as_tensor(predictions),
                      ("labels", "predictions"))


def _smooth(labels, label_smoothing, classes):
    if not label_smoothing:
        return labels
    return labels * (1.0 - label_smoothing) + label_smoothing / classes


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0,
                          scope=None, loss_collection=None,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Cross-entropy of softmax(logits) against one-hot labels, one loss per example;
    label_smoothing moves labels toward 1 / classes."""
    with _ops.name_scope(scope or "softmax_cross_entropy_loss"):
        logits = as_tensor(logits)
        labels = _smooth(_ops.cast(onehot_labels, "float32"), label_smoothing,
                         logits.shape[-1])
        losses = _ops.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        return compute_weighted_loss(losses, weights, reduction=reduction)


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None,
                                 loss_collection=None,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Cross-entropy of softmax(logits) against int32 class indices."""
    with _ops.name_scope(scope or "sparse_softmax_cross_entropy_loss"):
        losses = _ops.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        return compute_weighted_loss(losses, weights, reduction=reduction)


def sigmoid_cross_entropy(multi_class_labels, logits, weights=1.0, label_smoothing=0,
                          scope=None, loss_collection=None,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Elementwise logistic loss; label_smoothing moves labels toward 1/2."""
    with _ops.name_scope(scope or "sigmoid_cross_entropy_loss"):
        labels = _ops.cast(multi_class_labels, "float32")
        if label_smoothing:
            labels = labels * (1.0 - label_smoothing) + 0.5 * label_smoothing
        losses = _ops.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
        return compute_weighted_loss(losses, weights, reduction=reduction)


def mean_squared_error(labels, predictions, weights=1.0, scope=None, loss_collection=None,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """(predictions - labels) ** 2, weighted and reduced."""
    with _ops.name_scope(scope or "mean_squared_error"):
        _same_shape("mean_squared_error", labels, predictions)
        losses = _ops.square(_ops.sub(predictions, labels))
        return compute_weighted_loss(losses, weights, reduction=reduction)


def absolute_difference(labels, predictions, weights=1.0, scope=None, loss_collection=None,
                        reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """|predictions - labels|, weighted and reduced."""
    with _ops.name_scope(scope or "absolute_difference"):
        _same_shape("absolute_difference", labels, predictions)
        losses = _ops.abs(_ops.sub(predictions, labels))
        return compute_weighted_loss(losses, weights, reduction=reduction)


def huber_loss(labels, predictions, weights=1.0, delta=1.0, scope=None,
               loss_collection=None, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """0.5 * e**2 where |e| <= delta, else delta * (|e| - 0.5 * delta)."""
    with _ops.name_scope(scope or "huber_loss"):
        error = _ops.abs(_ops.sub(predictions, labels))
        quadratic = _ops.minimum(error, delta)
        losses = 0.5 * _ops.square(quadratic) + delta * (error - quadratic)
        return compute_weighted_loss(losses, weights, reduction=reduction)


def log_loss(labels, predictions, weights=1.0, epsilon=1e-7, scope=None,
             loss_collection=None, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """-labels * log(p + epsilon) - (1 - labels) * log(1 - p + epsilon)."""
    with _ops.name_scope(scope or "log_loss"):
        p, y = as_tensor(predictions), as_tensor(labels)
        losses = -y * _ops.log(p + epsilon) - (1.0 - y) * _ops.log(1.0 - p + epsilon)
        return compute_weighted_loss(losses, weights, reduction=reduction)


def hinge_loss(labels, logits, weights=1.0, scope=None, loss_collection=None,
               reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """max(0, 1 - (2 * labels - 1) * logits), labels in {0, 1}."""
    with _ops.name_scope(scope or "hinge_loss"):
        signs = 2.0 * as_tensor(labels) - 1.0
        losses = _ops.relu(1.0 - signs * logits)
        return compute_weighted_loss(losses, weights, reduction=reduction)


__all__ = ["Reduction", "compute_weighted_loss", "softmax_cross_entropy",
           "sparse_softmax_cross_entropy", "sigmoid_cross_entropy", "mean_squared_error",
           "absolute_difference", "huber_loss", "log_loss", "hinge_loss"]
from ..tf1 import get_regularization_loss, get_regularization_losses  # noqa: E402

__all__ += ["get_regularization_loss", "get_regularization_losses"]
_install(globals(), "fragflow.losses")
