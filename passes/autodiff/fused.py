"""Gradients of fused ops: taken through the ops they stand for (rebuilt from their
steps), so every activation differentiates, to any order."""
from __future__ import annotations

from ...ir.ops.fused import decompose
from .engine import gradients
from .registry import gradient


@gradient("fused_elementwise", "fused_matmul", "fused_conv", "fused_sum_like",
          "fused_attention", "fused_layer_norm")
def _fused(node, dy):
    value = decompose(node)
    inputs = list(node.inputs)
    grads = gradients([value], inputs, grad_ys=[dy], through_xs=False)
    # a value read twice (fused_sum_like(g, b, lr, b): b gives the shape and is an
    # operand) has its whole gradient in each slot: count it once
    seen: set = set()
    once = []
    for v, grad in zip(inputs, grads):
        once.append(None if v in seen else grad)
        seen.add(v)
    return once
