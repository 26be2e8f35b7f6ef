"""Gradient rules of the loss family (ir/ops/loss.py).

sparse_softmax_cross_entropy's gradient is its own op (one kernel, TensorFlow's
backprop). That op's gradient, for second-order derivatives, is written with the
ordinary ops: with s = softmax(logits) and G = (s - one_hot) * dy[..., None],
    d logits = s * (t - sum(s * t)),  t = H * dy[..., None]   (softmax's Jacobian)
    d dy     = sum(H * (s - one_hot))                          (G is linear in dy)
where H is the incoming gradient. Rows of out-of-range labels are NaN in G whatever the
logits, and so they stay in d dy; labels are indices and take no gradient."""
from __future__ import annotations

from ...ir.ops.loss import sparse_softmax_cross_entropy_grad
from ...ir.ops.reduce import softmax
from .build import expand_dims, mul, ones_like, reduce, sub
from .registry import gradient


@gradient("sparse_softmax_cross_entropy")
def _sparse_softmax_cross_entropy(node, dy):
    logits, labels = node.inputs
    return [sparse_softmax_cross_entropy_grad(logits, labels, dy), None]


@gradient("sparse_softmax_cross_entropy_grad")
def _sparse_softmax_cross_entropy_grad(node, ddx):
    logits, labels, dy = node.inputs
    s = softmax("softmax", logits, -1)
    t = mul(ddx, expand_dims(dy, -1))
    d_logits = mul(s, sub(t, reduce("sum", mul(s, t), -1, True)))
    # s - one_hot, NaN in the rows of bad labels: the op itself with dy = 1
    d_dy = reduce("sum", mul(ddx, sparse_softmax_cross_entropy_grad(
        logits, labels, ones_like(dy))), -1)
    return [d_logits, None, d_dy]
