"""Lowering reductions to templates/reduce.glsl.j2."""
from __future__ import annotations

from ..ir.ops.reduce import identity_of
from ..ir.types import normalize_axes
from .common import make_kernel, operands, output_operand
from .environment import glsl_float, glsl_int
from .layout import affine_index, strides

# llvmpipe ends a shader invocation's loops after 65535 iterations in all (one limiter
# per shader, shared by every loop in it), without an error. Keep a kernel's iterations
# well below that by unrolling loop bodies.
LOOP_TRIPS = 32768


def unroll_for(trips: int) -> int:
    """The smallest power-of-two unroll that runs `trips` steps in <= LOOP_TRIPS loop
    iterations (1 for short loops: unrolled code costs JIT time)."""
    unroll = 1
    while trips > LOOP_TRIPS * unroll:
        unroll *= 2
    return unroll


def reduction_kernel(node, x, out, axes, reduce_op: str, prefix: str, kernel_op=None):
    """A kernel reducing operand x over axes into out (also used by sum_like)."""
    shape = x.layout.shape
    kept = [a for a in range(len(shape)) if a not in axes]
    in_strides = strides(shape)
    kept_index = affine_index([shape[a] for a in kept], [in_strides[a] for a in kept])
    reduced_dims = [shape[a] for a in axes]
    reduced_index = affine_index(reduced_dims, [in_strides[a] for a in axes])
    count = 1
    for d in reduced_dims:
        count *= d
    identity = ""
    if reduce_op in ("max", "min"):
        value = identity_of(reduce_op, x.dtype)
        identity = glsl_float(value) if x.dtype == "float32" else glsl_int(value)
    return make_kernel("reduce.glsl.j2", prefix, kernel_op or reduce_op, [node], [x], out,
                       reduce_op=reduce_op, kept_index=kept_index,
                       reduced_index=reduced_index, count=count, identity=identity,
                       unroll=unroll_for(count - (1 if reduce_op in ("argmax", "argmin")
                                                  else 0)))


def lower_node(node, layouts, prefix):
    (x,) = operands(node, layouts)
    out = output_operand(node.outputs[0], layouts)
    axes = normalize_axes(node.attrs["axis"], len(x.layout.shape))
    return reduction_kernel(node, x, out, axes, node.op, prefix)
