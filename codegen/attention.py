"""fused_attention's kernel (passes/attention.py makes the node): the strategy table
of the attention family, one row.

attention.online: one kernel, each fragment walking its query row's keys once,
`matmul.attention_key_tile` keys at a time: their scores (q·k, the scale, the mask),
the tile's max, then the running max and sum of exp rescaled and the product with v
accumulated (an online softmax: flash attention's, one fragment per output texel).
Where the output's last axis is a multiple of 4 the texel's four lanes are one query
row: the scores are computed once for four columns of v, read as one texel. A row
holding NaN or +inf, or only -inf, gives NaN throughout, as softmax does."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .common import make_kernel, operands, output_operand
from .environment import glsl_float
from .layout import broadcast_index
from .limits import loop_trips
from .strategy import Site, Strategy, lower_with


@dataclass(frozen=True, kw_only=True)
class AttentionParams:
    """The kernel's shape and choices, in the order its header prints them."""
    lq: int                  # queries
    lk: int                  # keys
    d: int                   # q·k's length
    dv: int                  # v's columns
    tile: int                # keys a step of the walk
    same_row: bool           # the four lanes of a texel are one query row
    vec_dot: bool            # q·k as dots of texels (k as [..., Lk, D], D % 4 == 0)
    transpose_k: bool
    transpose_v: bool
    scale: str | None        # GLSL literal
    divide: bool
    mask_offset: int
    mask_terms: tuple        # ((out stride, dim, mask stride), ...) from a score's index


@dataclass(frozen=True)
class AttentionPlan:
    site: Any
    params: AttentionParams


def _online(site, facts, tuning):
    node = site.node
    if node.op != "fused_attention":
        return None
    q, k, v = (t.type.shape for t in node.inputs[:3])
    out = node.outputs[0].type.shape
    if any(site.layouts[t.name].shape != t.type.shape for t in node.inputs) or \
            site.layouts[node.outputs[0].name].shape != out:
        return None
    lq, d = q[-2], q[-1]
    lk = k[-2] if node.attrs["transpose_k"] else k[-1]
    dv = out[-1]
    tile = max(1, tuning.matmul.attention_key_tile)
    same_row = dv % 4 == 0
    vec_dot = node.attrs["transpose_k"] and d % 4 == 0 and d <= 256
    walks = 1 if same_row else min(4, math.prod(out))
    trips = walks * -(-lk // tile) * (1 if vec_dot else tile * d + 1)
    if trips > loop_trips():
        return None
    mask_offset, mask_terms = 0, ()
    if len(node.inputs) == 4:
        index = broadcast_index(out[:-1] + (lk,), node.inputs[3].type.shape)
        mask_offset, mask_terms = index.offset, index.terms
    scale = node.attrs["scale"]
    return AttentionPlan(site, AttentionParams(
        lq=lq, lk=lk, d=d, dv=dv, tile=tile, same_row=same_row, vec_dot=vec_dot,
        transpose_k=node.attrs["transpose_k"], transpose_v=node.attrs["transpose_v"],
        scale=None if scale is None else glsl_float(scale), divide=node.attrs["divide"],
        mask_offset=mask_offset, mask_terms=mask_terms))


def _emit(plan):
    site, p = plan.site, plan.params
    node = site.node
    inputs = operands(node, site.layouts)
    # a value read twice (q is k) binds once: the template reads operands by role
    roles = [next(b for b in inputs if b.value == t.name) for t in node.inputs]
    out = output_operand(node.outputs[0], site.layouts)
    nodes = site.named_nodes
    return make_kernel("attention.glsl.j2", site.prefix, "fused_attention", nodes,
                       inputs, out, roles=roles, params=p,
                       **{f: getattr(p, f) for f in AttentionParams.__dataclass_fields__
                          if f not in ("mask_terms",)})


TABLE = (
    Strategy("attention.online", _online, _emit,
             "one kernel: scores, mask and an online softmax over key tiles times v"),
)


def lower_node(node, layouts, prefix):
    return lower_with(TABLE, Site(node, layouts, prefix))
