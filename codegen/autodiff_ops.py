"""Lowering the autodiff ops (ir/ops/autodiff_ops.py). reshape_like, stop_gradient
and custom_gradient are views (codegen/lower.py); sum_like is a sum over the
broadcast axes (templates/reduce.glsl.j2); strided_slice_grad has its own template."""
from __future__ import annotations

from ..ir.ops.autodiff_ops import broadcast_axes
from ..ir.ops.shape import slice_plan
from .common import make_kernel, operands, output_operand
from .layout import strides
from .reduce import reduction_kernel


def lower_sum_like(node, layouts, prefix):
    g = operands(node, layouts)[0]
    out = output_operand(node.outputs[0], layouts)
    axes = broadcast_axes(g.layout.shape, out.layout.shape)
    return reduction_kernel(node, g, out, axes, "sum", prefix, kernel_op="sum_like")


def lower_slice_grad(node, layouts, prefix):
    dy = operands(node, layouts)[0]
    out = output_operand(node.outputs[0], layouts)
    x_shape = out.layout.shape
    spec = node.attrs["spec"]
    plan, dy_shape = slice_plan(x_shape, spec)
    dy_strides = strides(dy_shape)
    x_strides = strides(x_shape)
    axes, out_axis, in_axis = [], 0, 0
    for entry in spec:
        if entry[0] == "new":
            out_axis += 1
            continue
        start, step, count = plan[in_axis]
        axis = {"dim": x_shape[in_axis], "stride": x_strides[in_axis], "start": start}
        if entry[0] == "index":
            axis["kind"] = "index"
        else:
            axis.update(kind="range", step=step, count=count,
                        dy_stride=dy_strides[out_axis])
            out_axis += 1
        axes.append(axis)
        in_axis += 1
    return make_kernel("autodiff_ops.glsl.j2", prefix, "strided_slice_grad", [node], [dy],
                       out, axes=axes)


def lower_node(node, layouts, prefix):
    if node.op == "sum_like":
        return lower_sum_like(node, layouts, prefix)
    return lower_slice_grad(node, layouts, prefix)
