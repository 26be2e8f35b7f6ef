"""Gradients of fused ops: taken through the ops they stand for (rebuilt from their
steps), so every activation differentiates, to any order."""
from __future__ import annotations

from ...ir.ops.fused import decompose
from .registry import gradient


@gradient("fused_elementwise", "fused_matmul", "fused_conv")
def _fused(node, dy):
    from .engine import gradients
    value = decompose(node)
    inputs = list(node.inputs)
    grads = gradients([value], inputs, grad_ys=[dy])
    return grads
