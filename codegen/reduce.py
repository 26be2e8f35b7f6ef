"""Lowering reductions to templates/reduce.glsl.j2."""
from __future__ import annotations

from ..ir.ops.reduce import identity_of
from ..ir.types import normalize_axes
from .common import make_kernel, operands, output_operand
from .environment import glsl_float, glsl_int
from .layout import affine_index, strides


def lower_node(node, layouts, prefix):
    (x,) = operands(node, layouts)
    out = output_operand(node.outputs[0], layouts)
    shape = x.layout.shape
    axes = normalize_axes(node.attrs["axis"], len(shape))
    kept = [a for a in range(len(shape)) if a not in axes]
    in_strides = strides(shape)
    kept_index = affine_index([shape[a] for a in kept], [in_strides[a] for a in kept])
    reduced_dims = [shape[a] for a in axes]
    reduced_index = affine_index(reduced_dims, [in_strides[a] for a in axes])
    count = 1
    for d in reduced_dims:
        count *= d
    identity = ""
    if node.op in ("max", "min"):
        value = identity_of(node.op, x.dtype)
        identity = glsl_float(value) if x.dtype == "float32" else glsl_int(value)
    return make_kernel("reduce.glsl.j2", prefix, node.op, [node], [x], out,
                       reduce_op=node.op, kept_index=kept_index, reduced_index=reduced_index,
                       count=count, identity=identity)
