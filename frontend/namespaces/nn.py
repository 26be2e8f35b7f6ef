"""ff.nn: tf.nn's names over fragflow's functions (activations, convolutions and
pooling on NHWC images, normalisation, losses per example).

>>> import fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     y = ff.nn.relu(ff.constant([-1.0, 2.0]))
>>> ff.Session(g, backend="numpy").run(y).tolist()
[0.0, 2.0]
"""
from __future__ import annotations

from ...ir.errors import AttrError as _AttrError
from ...ir.ops.registry import all_ops as _all_ops
from .. import ops as _ops, ops_conv as _conv, ops_random as _random
from ..tensor import Tensor as _Tensor
from . import rnn_cell
from ._missing import install as _install

relu, sigmoid, tanh = _ops.relu, _ops.sigmoid, _ops.tanh
relu6, elu, selu, softplus = _ops.relu6, _ops.elu, _ops.selu, _ops.softplus
leaky_relu = _ops.leaky_relu
softmax, log_softmax = _ops.softmax, _ops.log_softmax
conv1d, conv2d, conv3d = _ops.conv1d, _ops.conv2d, _ops.conv3d
conv2d_transpose, depthwise_conv2d = _ops.conv2d_transpose, _ops.depthwise_conv2d
conv3d_transpose = _ops.conv3d_transpose
separable_conv2d, dilation2d = _ops.separable_conv2d, _ops.dilation2d
max_pool, max_pool2d, avg_pool, avg_pool2d = (_ops.max_pool, _ops.max_pool2d,
                                              _ops.avg_pool, _ops.avg_pool2d)
max_pool3d, avg_pool3d = _ops.max_pool3d, _ops.avg_pool3d
moments, batch_normalization = _ops.moments, _ops.batch_normalization
fused_batch_norm, bias_add = _ops.fused_batch_norm, _ops.bias_add
l2_normalize, log_sigmoid = _ops.l2_normalize, _ops.log_sigmoid
in_top_k = _ops.in_top_k
gelu = _ops.gelu                          # tf.nn.gelu (frontend/ops_nn_extra.py)
max_pool_with_argmax = _conv.max_pool_with_argmax
depth_to_space, space_to_depth = _ops.depth_to_space, _ops.space_to_depth
local_response_normalization, lrn = _ops.local_response_normalization, _ops.lrn
softmax_cross_entropy_with_logits = _ops.softmax_cross_entropy_with_logits
# v2 is TF1's name for the version whose gradient reaches the labels: fragflow's is that
softmax_cross_entropy_with_logits_v2 = _ops.softmax_cross_entropy_with_logits
sparse_softmax_cross_entropy_with_logits = _ops.sparse_softmax_cross_entropy_with_logits
sigmoid_cross_entropy_with_logits = _ops.sigmoid_cross_entropy_with_logits
top_k = _ops.top_k
dynamic_rnn = rnn_cell._rnn.dynamic_rnn     # TF1's recurrent loop (frontend/rnn.py)
static_rnn = rnn_cell._rnn.static_rnn
bidirectional_dynamic_rnn = rnn_cell._rnn.bidirectional_dynamic_rnn
static_bidirectional_rnn = rnn_cell._rnn.static_bidirectional_rnn
space_to_batch_nd, batch_to_space_nd = (_ops.space_to_batch_nd,
                                        _ops.batch_to_space_nd)


def swish(features, name=None):
    """features * sigmoid(features) (tf.nn.swish, tf.nn.silu)."""
    return _ops.mul(features, _ops.sigmoid(features), name=name)


silu = swish


def l2_loss(t, name=None):
    """sum(t ** 2) / 2, as tf.nn.l2_loss."""
    return _ops.mul(_ops.reduce_sum(_ops.square(t)), 0.5, name=name)


def embedding_lookup(params, ids, name=None):
    """The rows of params at ids (tf.nn.embedding_lookup of one params tensor)."""
    return _ops.gather(params, ids, name=name)


def xw_plus_b(x, weights, biases, name=None):
    """x @ weights + biases (tf.compat.v1.nn.xw_plus_b)."""
    return _ops.add(_ops.matmul(x, weights), biases, name=name)


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """tf.nn.dropout with either TF1's keep_prob or TF2's rate: each element is kept
    with probability keep_prob (= 1 - rate) and scaled by 1 / keep_prob, else 0.

    A Python number runs ff.dropout (one kernel). A tensor (TF1's
    `keep_prob = tf.placeholder(tf.float32)`, fed 0.5 to train and 1.0 to evaluate)
    compares keep_prob with a uniform number per element made of 16 random bits (16
    ff.dropout draws of rate 0.5 on ones): keep probabilities are exact to 1/65536, and
    keep_prob = 1 keeps everything."""
    if (keep_prob is None) == (rate is None):
        raise _AttrError("dropout needs exactly one of keep_prob (TF1) and rate")
    value = rate if rate is not None else keep_prob
    if isinstance(value, _Tensor):
        keep = 1.0 - value if rate is not None else value
        return _dropout_by_tensor(x, keep, noise_shape, seed, name)
    rate = rate if rate is not None else 1.0 - float(keep_prob)
    return _random.dropout(x, rate, noise_shape, seed, name)


_UNIFORM_BITS = 16


def _dropout_by_tensor(x, keep, noise_shape, seed, name):
    with _ops.name_scope(name or "dropout"):
        x = x if isinstance(x, _Tensor) else _ops.constant(x)
        ones = _ops.ones_like(x)
        base = 0 if seed is None else int(seed) * _UNIFORM_BITS
        # bit k of u: a rate-0.5 dropout of ones is 0 or 2, i.e. 2 * bit
        bits = [_random.dropout(ones, 0.5, noise_shape, base + k) * (0.5 ** (k + 2))
                for k in range(_UNIFORM_BITS)]
        u = _ops.add_n(bits)                         # uniform on [0, 1) in steps of 2**-16
        kept = _ops.less(u, keep)
        return _ops.where(kept, x / keep, 0.0)


# tf.nn's name for every op whose record gives one (OpDef.tf) and that has no line above
for _name, _opdef in _all_ops().items():
    _tf_name = _opdef.tf.removeprefix("tf.nn.")
    if _tf_name != _opdef.tf and _tf_name.isidentifier() and _tf_name not in globals() \
            and hasattr(_ops, _name):
        globals()[_tf_name] = getattr(_ops, _name)

__all__ = sorted(n for n in list(globals()) if not n.startswith("_") and n not in
                 ("annotations",))
_install(globals(), "fragflow.nn")
