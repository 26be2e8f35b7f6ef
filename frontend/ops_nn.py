"""The nn family (tf.nn): activations, softmax, normalisation and the cross-entropy
losses, with TensorFlow's names and arguments. Convolutions and pooling are in ops_conv.

Elementwise kernels (ir/ops/elementwise.py): relu, relu6, elu, selu, softplus,
leaky_relu, prelu, step. Kernels of their own (ir/ops/reduce.py): softmax, log_softmax
and local_response_normalization. Composites built from other ops (each docstring says
why): log_sigmoid, l2_normalize, bias_add, moments, batch_normalization,
fused_batch_norm, in_top_k and the cross-entropy losses.

>>> import numpy as np, fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     p = ff.softmax(ff.constant(np.float32([[1.0, 2.0, 3.0]])))
>>> np.round(ff.Session(g, backend="numpy").run(p), 4)
array([[0.09  , 0.2447, 0.6652]], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import AttrError, DTypeError, ShapeError
from ..ir.ops import elementwise as _ew, loss as _loss, reduce as _red
from ..ir.types import normalize_axes
from . import ops_math as _math, ops_structure as _structure
from .operands import as_tensor, check_same_shape, operands, scoped, static_shape, unary_function
from .ops_graph import constant
from .tensor import Tensor, wrap

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


# -- activations ---------------------------------------------------------------------------
def _unary(op):
    """ff.<op>, its docstring and argument name ("features" for most activations, as
    TensorFlow names it) from the op's record (ir/ops/elementwise/unary_ops.py)."""
    return _export(unary_function(op))


relu = _unary("relu")
relu6 = _unary("relu6")
elu = _unary("elu")
selu = _unary("selu")
softplus = _unary("softplus")
softsign = _unary("softsign")


@_export
def leaky_relu(features, alpha=0.2, name=None):
    """features if > 0, else alpha * features (tf.nn.leaky_relu; alpha defaults to 0.2).

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.leaky_relu(ff.constant([-1.0, 2.0]), alpha=0.1)
    >>> ff.Session(g, backend="numpy").run(y).tolist()
    [-0.10000000149011612, 2.0]
    """
    x = operands(features)[0]
    if x.dtype != "float32":            # TensorFlow casts integer features to float
        x = _ew.cast(x, "float32")
    return wrap(_ew.unary("leaky_relu", x, name=name, attrs={"alpha": alpha}))


@_export
def prelu(x, alpha, name=None):
    """x if x > 0, else alpha * x, with alpha a tensor broadcast against x (learned, as
    in Keras' PReLU; TensorFlow.js's tf.prelu). Gradients flow to both."""
    a, b = operands(x, alpha)
    return wrap(_ew.binary("prelu", a, b, name=name))


@_export
def step(x, alpha=0.0, name=None):
    """1 where x > 0, alpha elsewhere; NaN stays NaN (TensorFlow.js's tf.step). Its
    gradient is zero."""
    return wrap(_ew.unary("step", *operands(x), name=name, attrs={"alpha": alpha}))


@_export
def log_sigmoid(x, name=None):
    """log(sigmoid(x)) = -softplus(-x), without overflow for large |x|."""
    with scoped(name, "log_sigmoid"):
        return -softplus(-as_tensor(x))


# -- softmax and normalisation -------------------------------------------------------------
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
    return wrap(_red.softmax("softmax", operands(logits)[0], -1 if axis is None
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
    return wrap(_red.softmax("log_softmax", operands(logits)[0], -1 if axis is None
                              else axis, name=name))


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
    return wrap(_red.lrn(operands(input)[0], depth_radius, bias, alpha, beta, name=name))


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
    x = as_tensor(x)
    axes = normalize_axes(axes, len(x.shape))
    mean = _math.mean(x, axis=axes, keepdims=True)
    variance = _math.mean(_math.square(x - mean), axis=axes, keepdims=keepdims)
    if not keepdims:
        mean = _structure.squeeze(mean, axis=axes)      # a view: no second kernel
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
    x = as_tensor(x)
    inv = _math.rsqrt(as_tensor(variance) + variance_epsilon)
    if scale is not None:
        inv = inv * scale
    shift = -(as_tensor(mean) * inv) if offset is None else offset - as_tensor(mean) * inv
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
    logits, labels = as_tensor(logits), as_tensor(labels)
    check_same_shape("softmax_cross_entropy_with_logits", labels, logits)
    return -_math.sum(labels * log_softmax(logits, axis), axis=axis)


@_export
def sparse_softmax_cross_entropy_with_logits(labels, logits, name=None):
    """-log_softmax(logits)[label] per example: labels int32 [d0, ..., dn-1] are class
    indices into logits [d0, ..., dn-1, classes]. A label outside [0, classes) gives a
    NaN loss and NaN gradients in its row (TensorFlow raises on CPU and gives NaN on
    GPU); nothing checks labels at run time (it would cost a readback per run), so
    training on such labels silently makes the weights NaN. Session(debug=True) raises
    NumericsError at the first one, naming the node
    '<name>/nan_where_label_out_of_range'. One op (sparse_softmax_cross_entropy, one
    kernel) whose gradient is one more (TensorFlow's backprop: softmax - one_hot).

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     loss = ff.sparse_softmax_cross_entropy_with_logits(
    ...         labels=np.int32([1]), logits=np.float32([[0.0, 0.0]]))
    >>> np.round(ff.Session(g, backend="numpy").run(loss), 4)
    array([0.6931], dtype=float32)
    """
    logits, labels = as_tensor(logits), as_tensor(labels)
    if labels.dtype != "int32":
        raise DTypeError(f"sparse_softmax_cross_entropy_with_logits: labels must be "
                         f"int32 class indices, got {labels.dtype}")
    lshape, cshape = tuple(labels.shape), tuple(logits.shape)
    if len(cshape) != len(lshape) + 1 or any(
            a is not None and b is not None and a != b for a, b in zip(lshape, cshape)):
        raise ShapeError(f"sparse_softmax_cross_entropy_with_logits: labels of shape "
                         f"{list(lshape)} need logits of shape {list(lshape) + ['classes']}, "
                         f"got {list(cshape)}")
    if cshape[-1] is None:
        raise ShapeError("sparse_softmax_cross_entropy_with_logits: the number of classes "
                         "(the logits' last dimension) must be known when the graph is built")
    logits_value, labels_value = operands(logits, labels)
    with logits.graph.name_scope(name or "sparse_softmax_cross_entropy_with_logits"):
        # named so that debug mode's NaN error says what went wrong
        return wrap(_loss.sparse_softmax_cross_entropy(
            logits_value, labels_value, name="nan_where_label_out_of_range"))


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
    x = as_tensor(logits)
    z = labels
    if isinstance(z, Tensor) or np.ndim(z):
        check_same_shape("sigmoid_cross_entropy_with_logits", as_tensor(z), x)
    positive = _math.greater_equal(x, 0.0)
    relu_x = _math.where(positive, x, 0.0)
    neg_abs_x = _math.where(positive, -x, x)
    return relu_x - x * z + _math.log(1.0 + _math.exp(neg_abs_x))


@_export
def l2_normalize(x, axis=None, epsilon=1e-12, name=None):
    """x / sqrt(max(sum(x**2, axis), epsilon)), as tf.math.l2_normalize."""
    with scoped(name, "l2_normalize"):
        x = as_tensor(x)
        square_sum = _math.reduce_sum(_math.square(x), axis=axis, keepdims=True)
        return x * _math.rsqrt(_math.maximum(square_sum, float(epsilon)))


@_export
def bias_add(value, bias, data_format=None, name=None):
    """value + bias along the channel axis: the last (NHWC, default) or axis 1
    ("NCHW" / "NC..."), as tf.nn.bias_add."""
    with scoped(name, "bias_add"):
        value, bias = as_tensor(value), as_tensor(bias)
        if bias.ndim != 1:
            raise ShapeError(f"bias_add: bias must be 1-D, got shape {list(bias.shape)}")
        if data_format is None or data_format.startswith("N") and data_format.endswith("C"):
            return value + bias
        if data_format.startswith("NC"):
            return value + _structure.reshape(bias, [-1] + [1] * (value.ndim - 2))
        raise AttrError(f"bias_add: data_format {data_format!r} is not NHWC or NCHW")


@_export
def fused_batch_norm(x, scale, offset, mean=None, variance=None, epsilon=0.001,
                     data_format="NHWC", is_training=True, name=None,
                     exponential_avg_factor=1.0):
    """(y, batch_mean, batch_variance), as tf.compat.v1.nn.fused_batch_norm on NHWC
    images. Training: normalised by the batch's moments over N, H, W (the variance
    returned is the unbiased one, n / (n - 1) times the one used, as TensorFlow's);
    inference (is_training=False): by mean and variance."""
    if data_format != "NHWC":
        raise AttrError(f"fused_batch_norm: data_format {data_format!r} is not supported; "
                        f"fragflow uses NHWC (transpose first)")
    with scoped(name, "fused_batch_norm"):
        x = as_tensor(x)
        if x.ndim != 4:
            raise ShapeError(f"fused_batch_norm needs a 4-D NHWC input, got {x!r}")
        if is_training:
            batch_mean, batch_var = moments(x, axes=[0, 1, 2])
            y = batch_normalization(x, batch_mean, batch_var, offset, scale, epsilon)
            n = int(np.prod(static_shape(x, "fused_batch_norm")[:3]))
            unbiased = batch_var * (n / max(n - 1, 1))
            return y, batch_mean, unbiased
        if mean is None or variance is None:
            raise AttrError("fused_batch_norm with is_training=False needs mean and variance")
        y = batch_normalization(x, mean, variance, offset, scale, epsilon)
        return y, as_tensor(mean), as_tensor(variance)


@_export
def in_top_k(predictions=None, targets=None, k=None, name=None):
    """True where targets[i]'s prediction is among the k largest of predictions[i]
    (predictions [batch, classes] float32, targets [batch] int32), as tf.nn.in_top_k:
    classes tied at the boundary all count as in the top k; a target out of range or
    whose prediction is not finite gives False. Either argument order (TF1's
    predictions first, TF2's targets first) is accepted. Not differentiable (bool)."""
    p, t = as_tensor(predictions), as_tensor(targets)
    if p.dtype == "int32" and t.dtype == "float32":
        p, t = t, p                                    # tf.math.in_top_k(targets, predictions)
    if p.ndim != 2 or t.ndim != 1 or t.dtype != "int32":
        raise ShapeError(f"in_top_k needs predictions [batch, classes] and int32 targets "
                         f"[batch], got {p!r} and {t!r}")
    if k is None:
        raise AttrError("in_top_k needs k")
    with scoped(name, "in_top_k"):
        classes = static_shape(p, "in_top_k")[-1]
        with p.graph.as_default():
            hit = _math.equal(_structure.expand_dims(t, -1),
                              constant(np.arange(classes, dtype=np.int32)))
        value = _math.reduce_sum(_math.where(hit, p, 0.0), axis=-1)
        valid = _math.logical_and(_math.reduce_any(hit, axis=-1), _math.is_finite(value))
        above = _math.reduce_sum(
            _math.cast(_math.greater(p, _structure.expand_dims(value, -1)), "int32"), axis=-1)
        return _math.logical_and(valid, _math.less(above, int(k)))
