"""The loss family: softmax cross-entropy against class indices as one op, and its
gradient as another (TensorFlow's SparseSoftmaxCrossEntropyWithLogits, which returns the
loss and its backprop from one kernel).

sparse_softmax_cross_entropy(logits, labels): logits float32 [d0, ..., dn-1, classes],
labels int32 [d0, ..., dn-1]; one loss per example, -log_softmax(logits)[label] =
logsumexp(logits) - logits[label]. As log_softmax: a row holding NaN or +inf, or only
-inf, gives NaN; a -inf logit of another class is harmless; a -inf logit of the label's
class gives +inf. A label outside [0, classes) gives NaN (TensorFlow raises on CPU and
gives NaN on GPU; nothing here reads labels back to check them).

sparse_softmax_cross_entropy_grad(logits, labels, dy): the gradient of the loss with
respect to the logits, (softmax(logits) - one_hot(labels)) * dy[..., None], NaN in the
rows of out-of-range labels (TensorFlow's GPU backprop). Both are one kernel each on GL
(codegen/loss.py); the composite they replace (log_softmax, a one-hot mask, sums, a
where, and their gradients) took 13.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..types import TensorType, format_shape
from .common import apply
from .registry import OpDef, register

_NAME = "sparse_softmax_cross_entropy"


def check_labels_and_logits(what: str, logits: TensorType, labels: TensorType) -> None:
    """labels int32 [d0..dn-1], logits float32 [d0..dn-1, classes] (classes known)."""
    if labels.dtype != "int32":
        raise DTypeError(f"{what}: labels must be int32 class indices, got {labels.dtype}")
    if logits.dtype != "float32":
        raise DTypeError(f"{what}: logits must be float32, got {logits.dtype}")
    lshape, cshape = tuple(labels.shape), tuple(logits.shape)
    if len(cshape) != len(lshape) + 1 or any(
            a is not None and b is not None and a != b for a, b in zip(lshape, cshape)):
        raise ShapeError(f"{what}: labels of shape {list(lshape)} need logits of shape "
                         f"{list(lshape) + ['classes']}, got {list(cshape)}")
    if cshape[-1] is None:
        raise ShapeError(f"{what}: the number of classes (the logits' last dimension) "
                         f"must be known when the graph is built")


def _loss_type(types, attrs):
    logits, labels = types
    check_labels_and_logits(_NAME, logits, labels)
    return TensorType(logits.shape[:-1], "float32")


def _grad_type(types, attrs):
    logits, labels, dy = types
    check_labels_and_logits(_NAME + "_grad", logits, labels)
    # one dy per example, never broadcast: the kernel reads dy at each row's index
    if dy.dtype != "float32" or len(dy.shape) != len(labels.shape) or any(
            a is not None and b is not None and a != b
            for a, b in zip(dy.shape, labels.shape)):
        raise ShapeError(f"{_NAME}_grad: dy must be float32 of the labels' shape "
                         f"{format_shape(labels.shape)}, got {dy.dtype}{format_shape(dy.shape)}")
    return TensorType(logits.shape, "float32")


def _row_stats(x):
    """(max-shifted logits, sum of their exponentials, undefined rows) along the last
    axis, with log_softmax's rules: NaN, +inf or only -inf make a row undefined."""
    with np.errstate(invalid="ignore", over="ignore"):
        top = np.max(x, axis=-1, keepdims=True) if x.shape[-1] else \
            np.full(x.shape[:-1] + (1,), -np.inf, x.dtype)
        undefined = np.isnan(top) | np.isinf(top)
        shifted = np.where(undefined, 0, x - top).astype(x.dtype)
        total = np.sum(np.exp(shifted), axis=-1, keepdims=True)
    return shifted, total, undefined[..., 0]


def _valid(labels, classes):
    return (labels >= 0) & (labels < classes)


def _picked(values, labels):
    """values[..., label] per row (a clipped label where it is out of range)."""
    index = np.clip(labels, 0, max(values.shape[-1] - 1, 0))[..., None]
    if values.shape[-1] == 0:
        return np.zeros(labels.shape, values.dtype)
    return np.take_along_axis(values, index.astype(np.int64), axis=-1)[..., 0]


def _loss_ref(arrays, attrs):
    logits, labels = arrays
    shifted, total, undefined = _row_stats(logits)
    with np.errstate(invalid="ignore", divide="ignore"):
        loss = np.log(total[..., 0]) - _picked(shifted, labels)
    bad = undefined | ~_valid(labels, logits.shape[-1])
    return np.where(bad, np.nan, loss).astype(logits.dtype)


def _grad_ref(arrays, attrs):
    logits, labels, dy = arrays
    shifted, total, undefined = _row_stats(logits)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        softmax = np.exp(shifted) / total
        one_hot = np.arange(logits.shape[-1]) == labels[..., None]
        grad = (softmax - one_hot) * dy[..., None]
    bad = undefined | ~_valid(labels, logits.shape[-1])
    return np.where(bad[..., None], np.nan, grad).astype(logits.dtype)


register(OpDef(_NAME, "loss", _loss_type, _loss_ref, num_inputs=2,
               tf="tf.nn.sparse_softmax_cross_entropy_with_logits",
               doc="-log_softmax(logits)[label] per example, in one kernel; NaN where a "
                   "label is out of range"))
register(OpDef(_NAME + "_grad", "loss", _grad_type, _grad_ref, num_inputs=3,
               tf="SparseSoftmaxCrossEntropyWithLogits (backprop)",
               doc="(softmax(logits) - one_hot(labels)) * dy[..., None]: the loss's "
                   "gradient, in one kernel"))


# -- builders -----------------------------------------------------------------------------
def sparse_softmax_cross_entropy(logits, labels, name=None):
    return apply(_NAME, [logits, labels], None, name)


def sparse_softmax_cross_entropy_grad(logits, labels, dy, name=None):
    return apply(_NAME + "_grad", [logits, labels, dy], None, name)
