"""Lowering the reduce family: reductions (logsumexp among them) and softmax /
log_softmax as trees of passes (codegen/reduce_tree.py), cumsum as a scan
(codegen/scan.py), lrn / lrn_grad (templates/reduce.glsl.j2)."""
from __future__ import annotations

from ..ir.errors import AttrError
from ..ir.types import normalize_axes
from . import reduce_tree, scan
from .common import make_kernel, operands, output_operand
from .environment import glsl_float
from .limits import loop_trips, unroll_for  # noqa: F401 - until the families import limits


def reduction_kernel(node, x, out, axes, reduce_op: str, prefix: str, kernel_op=None):
    """The kernels (a tree of passes, codegen/reduce_tree.py) reducing operand x over
    axes into out (also used by sum_like)."""
    return reduce_tree.reduction_kernels(node, x, out, axes, reduce_op, prefix, kernel_op)


def lrn_kernel(node, inputs, out, prefix):
    attrs = node.attrs
    depth = out.layout.shape[-1]
    window = min(2 * attrs["depth_radius"] + 1, depth)
    grad = node.op == "lrn_grad"
    # four lanes, each with a loop over the window (lrn_grad: a window sum per element
    # of the window), in one shader invocation: see LOOP_TRIPS
    trips = 4 * window * (window + 1 if grad else 1)
    budget = loop_trips()
    if trips > budget:
        raise AttrError(f"{node.where()}: a depth_radius of {attrs['depth_radius']} over "
                        f"{depth} channels is too wide for one {node.op} kernel "
                        f"(windows up to {int((budget / 4) ** 0.5) - 1} channels wide "
                        f"for lrn_grad, {budget // 4} for lrn)")
    return make_kernel("reduce.glsl.j2", prefix, node.op, [node], inputs, out, kind="lrn",
                       grad=grad, depth=depth, radius=attrs["depth_radius"],
                       bias=glsl_float(attrs["bias"]), alpha=glsl_float(attrs["alpha"]),
                       beta=float(attrs["beta"]), beta_glsl=glsl_float(attrs["beta"]),
                       two_alpha_beta=glsl_float(2 * attrs["alpha"] * attrs["beta"]))


def lower_node(node, layouts, prefix):
    inputs = operands(node, layouts)
    out = output_operand(node.outputs[0], layouts)
    if node.op in ("softmax", "log_softmax"):
        axis = normalize_axes(node.attrs["axis"], len(inputs[0].layout.shape))[0]
        return reduce_tree.softmax_kernels(node, inputs[0], out, axis, prefix, layouts)
    if node.op == "cumsum":
        axis = normalize_axes(node.attrs["axis"], len(inputs[0].layout.shape))[0]
        return scan.cumsum_kernels(node, inputs[0], out, axis, node.attrs["exclusive"],
                                   node.attrs["reverse"], prefix, layouts)
    if node.op in ("lrn", "lrn_grad"):
        return lrn_kernel(node, inputs, out, prefix)
    x = inputs[0]
    axes = normalize_axes(node.attrs["axis"], len(x.layout.shape))
    return reduce_tree.reduction_kernels(node, x, out, axes, node.op, prefix,
                                         layouts=layouts)
