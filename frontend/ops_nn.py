"""Normalisation, softmax, scans and losses (TensorFlow's tf.nn names and arguments).

Primitives with kernels of their own (ir/ops/reduce.py, templates/reduce.glsl.j2):
softmax, log_softmax, reduce_logsumexp, cumsum and local_response_normalization.
Composites built from other ops (each docstring says why): moments,
batch_normalization, and the cross-entropy losses.

>>> import numpy as np, fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     p = ff.softmax(ff.constant(np.float32([[1.0, 2.0, 3.0]])))
>>> np.round(ff.Session(g, backend="numpy").run(p), 4)
array([[0.09  , 0.2447, 0.6652]], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import DTypeError, ShapeError
from ..ir.ops import reduce as _red
from ..ir.types import normalize_axes
from . import ops as _ops
from .ops import _operands
from .tensor import Tensor, _wrap

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _tensor(x):
    return x if isinstance(x, Tensor) else _wrap(_operands(x)[0])


@_export
def softmax(logits, axis=None, name=None):
    """exp(logits) / sum(exp(logits)) along axis (None: the last), max-subtracted so
    that large logits do not overflow. A slice holding NaN or +inf, or only -inf, is NaN
    throughout (TensorFlow's); -inf logits beside finite ones get probability 0.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     p = ff.softmax(ff.constant(np.float32([1e4, 1e4, -np.inf])))
    >>> ff.Session(g, backend="numpy").run(p)
    array([0.5, 0.5, 0. ], dtype=float32)
    """
    return _wrap(_red.softmax("softmax", _operands(logits)[0], -1 if axis is None
                              else axis, name=name))


@_export
def log_softmax(logits, axis=None, name=None):
    """logits - log(sum(exp(logits))) along axis (None: the last), computed without
    forming the softmax (exact for very negative log-probabilities).

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.log_softmax(ff.constant(np.float32([0.0, -200.0])))
    >>> ff.Session(g, backend="numpy").run(y)
    array([   0., -200.], dtype=float32)
    """
    return _wrap(_red.softmax("log_softmax", _operands(logits)[0], -1 if axis is None
                              else axis, name=name))


@_export
def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    """log(sum(exp(x))) over axis (None: all, an int or a tuple), max-subtracted.
    NaN if any element is NaN, else +inf if any is +inf, -inf if all are -inf or the
    reduction is empty (TensorFlow's).

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.reduce_logsumexp(ff.constant(np.float32([1000.0, 1000.0])))
    >>> round(float(ff.Session(g, backend="numpy").run(y)), 2)  # 1000 + log(2)
    1000.69
    """
    return _wrap(_red.logsumexp(_operands(input_tensor)[0], axis, keepdims, name=name))


logsumexp = reduce_logsumexp
__all__.append("logsumexp")


@_export
def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """Running sums along axis (float32 or int32; int32 wraps). exclusive leaves each
    element out of its own sum; reverse sums from the end.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.cumsum(ff.constant(np.int32([1, 2, 3])), exclusive=True, reverse=True)
    >>> ff.Session(g, backend="numpy").run(y)
    array([5, 3, 0], dtype=int32)
    """
    return _wrap(_red.cumsum(_operands(x)[0], axis, exclusive, reverse, name=name))


@_export
def local_response_normalization(input, depth_radius=5, bias=1.0, alpha=1.0, beta=0.5,
                                 name=None):
    """TensorFlow's LRN over the channels (last axis) of a 4-D NHWC tensor:
    input / (bias + alpha * sqr_sum) ** beta, where sqr_sum is the sum of the squares of
    input[..., d - depth_radius : d + depth_radius + 1]. First-order gradients only.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.local_response_normalization(ff.constant(np.ones((1, 1, 1, 3), np.float32)),
    ...                                         depth_radius=1, bias=0.0, alpha=1.0, beta=1.0)
    >>> np.round(ff.Session(g, backend="numpy").run(y).ravel(), 4)
    array([0.5   , 0.3333, 0.5   ], dtype=float32)
    """
    return _wrap(_red.lrn(_operands(input)[0], depth_radius, bias, alpha, beta, name=name))


lrn = local_response_normalization
__all__.append("lrn")


@_export
def moments(x, axes, shift=None, keepdims=False, name=None):
    """(mean, variance) of x over axes; variance = mean((x - mean) ** 2). A composite
    (TensorFlow's is too): two means and a square, each already a kernel. Unlike
    TensorFlow's, no stop_gradient on the mean inside the variance, so second-order
    gradients are those of the function itself. shift is accepted and unused, as in
    TensorFlow.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     m, v = ff.moments(ff.constant(np.float32([1.0, 2.0, 3.0, 6.0])), axes=[0])
    >>> ff.Session(g, backend="numpy").run([m, v])
    [array(3., dtype=float32), array(3.5, dtype=float32)]
    """
    x = _tensor(x)
    axes = normalize_axes(axes, len(x.shape))
    mean = _ops.mean(x, axis=axes, keepdims=True)
    variance = _ops.mean(_ops.square(x - mean), axis=axes, keepdims=keepdims)
    if not keepdims:
        mean = _ops.squeeze(mean, axis=axes)      # a view: no second kernel
    return mean, variance


@_export
def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """(x - mean) * scale / sqrt(variance + variance_epsilon) + offset, as TensorFlow
    computes it: x * inv + (offset - mean * inv) with inv = scale * rsqrt(variance +
    variance_epsilon). offset and scale may be None. A composite: elementwise ops that
    fusion merges into one kernel.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.batch_normalization(ff.constant(np.float32([1.0, 3.0])), 2.0, 4.0,
    ...                                offset=1.0, scale=2.0, variance_epsilon=0.0)
    >>> ff.Session(g, backend="numpy").run(y)
    array([0., 2.], dtype=float32)
    """
    x = _tensor(x)
    inv = _ops.rsqrt(_tensor(variance) + variance_epsilon)
    if scale is not None:
        inv = inv * scale
    shift = -(_tensor(mean) * inv) if offset is None else offset - _tensor(mean) * inv
    return x * inv + shift


batch_norm = batch_normalization
__all__.append("batch_norm")


@_export
def softmax_cross_entropy_with_logits(labels, logits, axis=-1, name=None):
    """-sum(labels * log_softmax(logits)) along axis: one loss per example. Gradients
    flow to labels too (TensorFlow v2's). A composite: log_softmax is the stable
    primitive and the rest is a product and a sum.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     loss = ff.softmax_cross_entropy_with_logits(
    ...         labels=np.float32([[0.0, 1.0]]), logits=np.float32([[0.0, 0.0]]))
    >>> np.round(ff.Session(g, backend="numpy").run(loss), 4)  # log 2
    array([0.6931], dtype=float32)
    """
    logits, labels = _tensor(logits), _tensor(labels)
    check_same_shape("softmax_cross_entropy_with_logits", labels, logits)
    return -_ops.sum(labels * log_softmax(logits, axis), axis=axis)


def check_same_shape(what, labels, logits, names=("labels", "logits")) -> None:
    """A ShapeError naming the user's op (not the mul inside it) where labels and
    logits cannot have one shape, as TensorFlow's losses require."""
    a, b = tuple(labels.shape), tuple(logits.shape)
    if len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b)):
        return
    from ..ir.source import user_location
    hint = ""
    if len(a) == len(b) and a and a[0] != b[0] and a[1:] == b[1:]:
        hint = f" (a batch of {a[0]} {names[0]} for {b[0]} examples?)"
    raise ShapeError(f"{what} at {user_location()}: {names[0]} of shape "
                     f"{list(a)} and {names[1]} of shape {list(b)} must have the same "
                     f"shape{hint}")


@_export
def sparse_softmax_cross_entropy_with_logits(labels, logits, name=None):
    """-log_softmax(logits)[label] per example: labels int32 [d0, ..., dn-1] are class
    indices into logits [d0, ..., dn-1, classes]. A label outside [0, classes) gives a
    NaN loss (TensorFlow raises on CPU and gives NaN on GPU); nothing checks labels at
    run time (it would cost a readback per run), so training on such labels silently
    makes the weights NaN. Session(debug=True) raises NumericsError at the first one,
    naming the node '<name>/nan_where_label_out_of_range'. A composite: the class
    count is static, so a one-hot mask (labels == arange(classes)) picks the class.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     loss = ff.sparse_softmax_cross_entropy_with_logits(
    ...         labels=np.int32([1]), logits=np.float32([[0.0, 0.0]]))
    >>> np.round(ff.Session(g, backend="numpy").run(loss), 4)
    array([0.6931], dtype=float32)
    """
    logits, labels = _tensor(logits), _tensor(labels)
    if labels.dtype != "int32":
        raise DTypeError(f"sparse_softmax_cross_entropy_with_logits: labels must be "
                         f"int32 class indices, got {labels.dtype}")
    lshape, cshape = tuple(labels.shape), tuple(logits.shape)
    if len(cshape) != len(lshape) + 1 or any(
            a is not None and b is not None and a != b for a, b in zip(lshape, cshape)):
        raise ShapeError(f"sparse_softmax_cross_entropy_with_logits: labels of shape "
                         f"{list(lshape)} need logits of shape {list(lshape) + ['classes']}, "
                         f"got {list(cshape)}")
    classes = cshape[-1]
    if classes is None:
        raise ShapeError("sparse_softmax_cross_entropy_with_logits: the number of classes "
                         "(the logits' last dimension) must be known when the graph is built")
    with logits.graph.name_scope(name or "sparse_softmax_cross_entropy_with_logits"):
        hit = _ops.equal(_ops.expand_dims(labels, -1),
                         _ops.constant(np.arange(classes, dtype=np.int32)))
        # where, not a product: a -inf log-probability of another class must not give NaN
        picked = _ops.sum(_ops.where(hit, log_softmax(logits), 0.0), axis=-1)
        valid = _ops.equal(_ops.sum(_ops.cast(hit, "int32"), axis=-1), 1)
        # named so that debug mode's NaN error says what went wrong
        return _ops.where(valid, -picked, np.float32(np.nan),
                          name="nan_where_label_out_of_range")


@_export
def sigmoid_cross_entropy_with_logits(labels=None, logits=None, name=None):
    """The logistic loss of logits x against labels z, elementwise, in TensorFlow's
    stable form max(x, 0) - x * z + log(1 + exp(-|x|)) (its where() form, so the
    gradient at x = 0 is sigmoid(0) - z). A composite of elementwise ops that fusion
    merges into one kernel. (log(1 + u) rather than log1p(u): log1p was not yet
    differentiable when this was written; u = exp(-|x|) is in (0, 1], so the loss is
    off by at most ~1e-7 absolute where u is tiny.)

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     loss = ff.sigmoid_cross_entropy_with_logits(labels=np.float32([1.0]),
    ...                                                 logits=np.float32([0.0]))
    >>> np.round(ff.Session(g, backend="numpy").run(loss), 4)
    array([0.6931], dtype=float32)
    """
    if labels is None or logits is None:
        raise ShapeError("sigmoid_cross_entropy_with_logits needs both labels and logits")
    x = _tensor(logits)
    z = labels
    if isinstance(z, Tensor) or np.ndim(z):
        check_same_shape("sigmoid_cross_entropy_with_logits", _tensor(z), x)
    positive = _ops.greater_equal(x, 0.0)
    relu_x = _ops.where(positive, x, 0.0)
    neg_abs_x = _ops.where(positive, -x, x)
    return relu_x - x * z + _ops.log(1.0 + _ops.exp(neg_abs_x))
