"""Gradient rules of the autodiff ops (ir/ops/autodiff_ops.py), so that gradients of
gradients work."""
from __future__ import annotations

from ...ir.errors import GradientError
from ...ir.graph import Value
from .build import broadcast_like, reshape_like
from .registry import gradient


@gradient("sum_like")
def _sum_like(node, dy):
    g, _ = node.inputs
    return [broadcast_like(dy, g), None]


@gradient("reshape_like")
def _reshape_like(node, dy):
    return [reshape_like(dy, node.inputs[0]), None]


@gradient("strided_slice_grad")
def _strided_slice_grad(node, dy):
    # strided_slice_grad is linear in its first input; its adjoint is the slice itself
    from ...ir.ops.common import apply
    return [apply("strided_slice", [dy], {"spec": node.attrs["spec"]}), None]


@gradient("custom_gradient")
def _custom(node, dy):
    fn = node.graph.custom_gradients.get(node.attrs["key"])
    if fn is None:
        raise GradientError(f"{node.where()}: its custom gradient function is not in this "
                            f"graph (graphs loaded from JSON do not carry Python code)")
    grads = fn(dy)
    grads = list(grads) if isinstance(grads, (list, tuple)) else [grads]
    inputs = node.inputs[1:]
    if len(grads) != len(inputs):
        raise GradientError(f"{node.where()}: the custom gradient returned {len(grads)} "
                            f"gradient(s) for {len(inputs)} input(s)")
    for g in grads:
        if g is not None and not isinstance(g, Value):
            raise GradientError(f"{node.where()}: the custom gradient returned {g!r}, "
                                f"not a graph tensor")
    return [None] + grads
