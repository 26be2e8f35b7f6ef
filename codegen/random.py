"""Lowering the random ops (ir/ops/random.py) to templates/random.glsl.j2: Philox-4x32-10
in GLSL on the same (key, counter) as the numpy reference, so both draw the same bits."""
from __future__ import annotations

from ..ir.ops.random import (
    MAX_ATTEMPTS,
    PHILOX_M,
    PHILOX_ROUNDS,
    PHILOX_W,
    TRUNCATE,
    dropout_scale,
    key_of,
    resolve_noise_shape,
    uniform_bounds,
)
from .common import make_kernel, operands, output_operand
from .environment import glsl_float
from .layout import broadcast_index
from .limits import unroll_for


def glsl_uint(x: int) -> str:
    return f"{x & 0xFFFFFFFF:#010x}u"


def _context(node, ins, out) -> dict:
    attrs = node.attrs
    key = key_of(attrs)
    ctx = {"key": [glsl_uint(k) for k in key], "mul": [glsl_uint(m) for m in PHILOX_M],
           "weyl": [glsl_uint(w) for w in PHILOX_W], "rounds": PHILOX_ROUNDS,
           "draw_pair": node.inputs[-1].shape == (2,)}
    if node.op == "random_uniform" and attrs["dtype"] == "int32":
        ctx.update(kind="uniform_int", minval=glsl_uint(attrs["minval"]),
                   span=glsl_uint(attrs["maxval"] - attrs["minval"]))
    elif node.op == "random_uniform":
        lo, span = uniform_bounds(attrs)
        ctx.update(kind="uniform", minval=glsl_float(lo), span=glsl_float(span))
    elif node.op in ("random_normal", "truncated_normal"):
        ctx.update(kind="normal" if node.op == "random_normal" else "truncated",
                   mean=glsl_float(attrs["mean"]), stddev=glsl_float(attrs["stddev"]),
                   attempts=MAX_ATTEMPTS, truncate=glsl_float(TRUNCATE))
    elif node.op == "multinomial":
        classes = ins[0].layout.shape[1]
        # three passes over the classes for each of a texel's four samples
        ctx.update(kind="multinomial", classes=classes, samples=attrs["num_samples"],
                   unroll=unroll_for(12 * classes))
    else:                                            # dropout
        shape = out.layout.shape
        noise = resolve_noise_shape(attrs["noise_shape"], shape)
        ctx.update(kind="dropout", noise_index=broadcast_index(shape, noise),
                   rate=glsl_float(attrs["rate"]),
                   scale=glsl_float(dropout_scale(attrs["rate"])))
    return ctx


def lower_node(node, layouts, prefix):
    ins = operands(node, layouts)
    out = output_operand(node.outputs[0], layouts)
    return make_kernel("random.glsl.j2", prefix, node.op, [node], ins, out,
                       **_context(node, ins, out))
