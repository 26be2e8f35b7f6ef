"""Lowering the image ops (ir/ops/image.py) to templates/image.glsl.j2.

The forward resizes read their taps directly. The gradients are gathers (a fragment
cannot scatter): each input pixel walks the window of dy pixels that can read it and
re-derives, with the forward's own coordinate rule, whether and how much each one did.
The window per axis starts a pixel before the first candidate (rounding margin) and is
long enough for the largest span of output pixels one input pixel can feed."""
from __future__ import annotations

import math

from ..ir.ops.image import resize_scale
from .common import make_kernel, operands, output_operand
from .environment import glsl_float
from .limits import unroll_for


def _axis(in_size: int, out_size: int, node, kind: str) -> dict:
    """One spatial axis: its sizes, scale, and (for the gradients) the window of output
    coordinates o whose source coordinate scale * o + offset can land on an input pixel."""
    ac, hp = node.attrs["align_corners"], node.attrs["half_pixel_centers"]
    scale = float(resize_scale(in_size, out_size, ac))
    if not hp:
        offset = 0.0
    elif kind == "bilinear":
        offset = 0.5 * scale - 0.5          # (o + 0.5) * scale - 0.5
    else:
        offset = 0.5 * scale                # (o + 0.5) * scale, floored
    # Pixel p is read by outputs whose source lies in (p - 1, p + 1): 2 / scale of them,
    # plus a margin of two on each side for float rounding and clamping. The window
    # starts at 0 at the least, so out_size outputs are always enough.
    window = out_size if scale == 0 else min(out_size, math.ceil(2 / scale) + 4)
    return {"in": in_size, "out": out_size, "scale": glsl_float(scale),
            "offset": glsl_float(offset), "window": window, "whole": scale == 0}


def lower_node(node, layouts, prefix):
    ins = operands(node, layouts)
    out = output_operand(node.outputs[0], layouts)
    kind = "bilinear" if "bilinear" in node.op else "nearest"
    grad = node.op.endswith("_grad")
    if grad:
        dy = ins[0]
        _, in_h, in_w, channels = out.layout.shape      # the original images' shape
        _, out_h, out_w, _ = dy.layout.shape
        inputs = [dy]                                    # images give their shape only
    else:
        _, in_h, in_w, channels = ins[0].layout.shape
        _, out_h, out_w, _ = out.layout.shape
        inputs = ins
    ay = _axis(in_h, out_h, node, kind)
    ax = _axis(in_w, out_w, node, kind)
    unroll = unroll_for(4 * ay["window"] * ax["window"]) if grad else 1
    return make_kernel("image.glsl.j2", prefix, node.op, [node], inputs, out,
                       kind=kind, grad=grad, channels=channels, ay=ay, ax=ax,
                       align_corners=node.attrs["align_corners"],
                       half_pixel_centers=node.attrs["half_pixel_centers"], unroll=unroll)
