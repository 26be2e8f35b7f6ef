"""Gradient rules of the ops that move elements."""
from __future__ import annotations

from ...ir.ops.shape import transpose_perm
from .build import reshape_like, strided_slice_grad, transpose
from .registry import gradient


@gradient("reshape", "expand_dims", "squeeze")
def _reshape(node, dy):
    return [reshape_like(dy, node.inputs[0])]


@gradient("transpose")
def _transpose(node, dy):
    perm = transpose_perm(node.attrs, node.inputs[0].type.rank)
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return [transpose(dy, inverse)]


@gradient("strided_slice")
def _strided_slice(node, dy):
    return [strided_slice_grad(dy, node.inputs[0], node.attrs["spec"])]
