"""fused_layer_norm's kernel (passes/norms.py makes the node): the norm family's
strategy table, one row.

- norm.direct: one kernel, templates/layer_norm.glsl.j2. Each fragment walks its row
  twice (the mean, then the mean of squared deviations; RMSNorm: the mean of squares
  only) and writes its four elements normalized, times the scale, plus the offset.
  Where the row is a multiple of 4 long, the four lanes are one row: its statistics
  are computed once, from whole texels; else each lane walks its own row. A row's
  statistics are computed again by each of its texels' fragments, so passes/norms.py
  fuses rows of at most the Tuning's `reduce.norm_max_width` elements."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .common import make_kernel, operands, output_operand
from .environment import glsl_float
from .limits import loop_trips
from .strategy import Site, Strategy, lower_with


@dataclass(frozen=True)
class NormPlan:
    site: Any
    width: int              # elements a row
    same_row: bool          # the four lanes of a texel are one row (width % 4 == 0)


def _direct(site, facts, tuning):
    node = site.node
    if node.op != "fused_layer_norm":
        return None
    if any(site.layouts[v.name].shape != v.type.shape for v in node.inputs):
        return None
    width = math.prod(node.inputs[0].type.shape[node.attrs["axis"]:])
    same_row = width % 4 == 0
    walks = 2 * (width // 4 if same_row else 4 * width)
    if walks > loop_trips():
        return None
    return NormPlan(site, width, same_row)


def _emit_direct(plan):
    site = plan.site
    node = site.node
    inputs = operands(node, site.layouts)
    x, *affine = [next(b for b in inputs if b.value == v.name) for v in node.inputs]
    scale = affine.pop(0) if node.attrs["has_scale"] else None
    offset = affine.pop(0) if node.attrs["has_offset"] else None
    out = output_operand(node.outputs[0], site.layouts)
    return make_kernel("layer_norm.glsl.j2", site.prefix, "fused_layer_norm",
                       site.named_nodes, inputs, out, x=x, scale=scale, offset=offset,
                       width=plan.width, same_row=plan.same_row,
                       center=node.attrs["center"],
                       epsilon=glsl_float(node.attrs["epsilon"]),
                       scale_size=scale.layout.size if scale else 1,
                       offset_size=offset.layout.size if offset else 1,
                       invariant_output=True)


TABLE = (
    Strategy("norm.direct", _direct, _emit_direct,
             "one kernel: each fragment walks its row for the mean and variance (or the "
             "mean of squares), then normalizes, scales and shifts its texel"),
)


def lower_node(node, layouts, prefix):
    return lower_with(TABLE, Site(node, layouts, prefix))
