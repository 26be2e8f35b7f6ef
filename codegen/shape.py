"""Lowering transpose and strided_slice to templates/shape.glsl.j2: every output
element reads one input element at an affine index."""
from __future__ import annotations

from ..ir.ops.shape import slice_plan, transpose_perm
from .common import make_kernel, operands, output_operand
from .layout import affine_index, strides


def source_index(node, in_shape, out_shape):
    in_strides = strides(in_shape)
    if node.op == "transpose":
        perm = transpose_perm(node.attrs, len(in_shape))
        return affine_index(out_shape, [in_strides[p] for p in perm])
    # strided_slice
    plan, _ = slice_plan(in_shape, node.attrs["spec"])
    offset, per_out_axis, axis = 0, [], 0
    for entry in node.attrs["spec"]:
        if entry[0] == "new":
            per_out_axis.append(0)
            continue
        start, step, count = plan[axis]
        offset += start * in_strides[axis]
        if entry[0] == "range":
            per_out_axis.append(step * in_strides[axis])
        axis += 1
    return affine_index(out_shape, per_out_axis, offset)


def lower_node(node, layouts, prefix):
    (x,) = operands(node, layouts)
    out = output_operand(node.outputs[0], layouts)
    index = source_index(node, x.layout.shape, out.layout.shape)
    return make_kernel("shape.glsl.j2", prefix, node.op, [node], [x], out,
                       source_index=index)
