"""Pools and their gradients four channels at a time (templates/pool_vec4.glsl.j2):
strategies "pool.vec4", "pool.routed" and "pool.lanes" of codegen/conv.py TABLE.

Where the image's channel count is a multiple of 4, a texel holds 4 channels of one
pixel, and those 4 channels share every window: a fragment computes a whole texel with
one set of window positions, reading x (dy, g) a texel per tap, its window unrolled
(the generic conv.glsl.j2 computes each element on its own and, for max/min
gradients, loops over lanes with dynamic vector indexing: slow scalar code on llvmpipe).
A max/min pool gradient over overlapping windows (3x3 stride 2, say), or with
C % 4 != 0 (templates/pool_lanes.glsl.j2), runs as two kernels: each window's argmax
tap once, then dy routed by it.

codegen/conv.py decides the geometry and the loop-trip limit; this module decides
which path applies and which taps need border checks.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import replace

from ..ir.types import TensorType
from .common import make_kernel
from .layout import layout_for
from .operands import Operand

KINDS = ("pool", "pool_grad", "pool_grad_grad", "avg_pool_grad")


def border_checks(g) -> list:
    """checked[j][k]: whether offset k of the window along axis j falls outside the
    image for some output position (VALID pools: never)."""
    out = []
    for size, k, s, pad, n in zip(g.in_size, g.ksize, g.strides, g.pad,
                                  g.out_size):
        out.append([not (t - pad >= 0 and (n - 1) * s - pad + t < size) for t in range(k)])
    return out


def path(kind, g, out, knobs) -> str | None:
    """"vec4" (four channels a fragment, C % 4 == 0), "routed" (a max/min pool
    gradient over overlapping windows: argmaxes, then dy routed by them), "lanes" (a
    max/min pool gradient with C % 4 != 0, the same two kernels four elements a
    fragment), or None: dilated or very big windows, C % 4 != 0 for the other kinds
    (the generic kernel of templates/conv.glsl.j2)."""
    if kind not in KINDS or any(d != 1 for d in g.dilations) or \
            math.prod(g.ksize) > knobs.pool_max_taps or out.layout.dtype != "float32":
        return None
    if g.C % 4:
        return "lanes" if kind == "pool_grad" else None
    if kind == "pool_grad" and any(s < k for s, k in zip(g.strides, g.ksize)):
        return "routed"
    return "vec4"


def kernels(path_, kind, g, context, inputs, out, prefix, op, nodes):
    """The kernel (a list of two for "routed" and "lanes") of a pool-family node on
    `path_` (see path)."""
    checked = border_checks(g)
    taps = [(tap, ks, [j for j, k in enumerate(ks) if checked[j][k]])
            for tap, ks in enumerate(itertools.product(*(range(k) for k in g.ksize)))]
    image = context["xs"]              # element strides of the image (N, spatial.., C)
    pooled = context["ys"]             # ... and of the pool's output
    common = dict(g=g, extremum=context["extremum"], C4=g.C // 4, taps=taps,
                  checked=checked, xt=[s // 4 for s in image[:-1]],
                  yt=[s // 4 for s in pooled[:-1]], xs=image, ys=pooled)
    ops = context["ops"]
    if path_ != "vec4":
        template = "pool_lanes.glsl.j2" if path_ == "lanes" else "pool_vec4.glsl.j2"
        return _argmax_then_route(template, g, ops, out, prefix, op, nodes, common)
    return make_kernel("pool_vec4.glsl.j2", prefix, op, nodes, inputs, out, ops=ops,
                       kind=kind, texels=out.layout.size // 4, **common)


def _argmax_then_route(template, g, ops, out, prefix, op, nodes, common):
    """[each window's argmax tap, dy routed by it] for max/min_pool_grad (lowering
    records the value between them from the first kernel's output)."""
    # scanning every window that holds an element would read each window several
    # times (and, four elements a fragment, a window per lane): each argmax once
    shape = (g.N,) + tuple(g.out_size) + (g.C,)
    name = f"{out.value}#argmax"
    layout = layout_for(TensorType(shape, "float32"),
                        max(out.layout.width, out.layout.height, 1024), name)
    arg = Operand(sampler="ff_out", value=name, layout=layout,
                  type=str(TensorType(shape, "float32")))
    first = make_kernel(template, prefix, op, nodes, [ops["x"]], arg,
                        ops={"x": ops["x"]}, kind="pool_argmax",
                        texels=arg.layout.size // 4, **common)
    routed_ops = {"arg": replace(arg, sampler="x0"), "dy": replace(ops["dy"],
                                                                    sampler="x1")}
    second = make_kernel(template, prefix + "r", op, nodes,
                         list(routed_ops.values()), out, ops=routed_ops,
                         kind="pool_routed", texels=out.layout.size // 4, **common)
    return [first, second]
