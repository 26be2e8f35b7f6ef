"""fused_layer_norm's kernels (passes/norms.py makes the node): the norm family's
strategy table. Both rows render templates/layer_norm.glsl.j2: a row's statistics
are its mean and 1 / sqrt(variance + epsilon) (RMSNorm: mean 0, the mean of squares),
walked twice (the mean, then the squared deviations: no cancellation); each element
is then normalized, times the scale, plus the offset. Where rows are a multiple of 4
long, the four lanes of a texel are one row's and read it as whole texels.

- norm.direct: one kernel; each fragment walks its own row. A row's statistics are
  computed again for each of its texels, so it takes rows of at most the Tuning's
  `reduce.norm_direct_width` elements.
- norm.stats: two kernels; one fragment a row writes its statistics into a scratch
  texture (one texel a row), then a kernel normalizes every element reading them."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..ir.types import TensorType
from .common import make_kernel, operands, output_operand
from .environment import glsl_float
from .limits import unroll_for
from .operands import Operand
from .reduce_tree import scratch_layout
from .strategy import Site, Strategy, lower_with


@dataclass(frozen=True)
class NormPlan:
    site: Any
    width: int              # elements a row
    same_row: bool          # the four lanes of a texel are one row (width % 4 == 0)
    unroll: int             # steps of a walk a loop trip (unroll_for: the loop budget)


def _plan(site, lanes, tuning):
    """The plan where a fragment walks `lanes` rows twice, unrolled to stay in the
    loop budget (at most tuning.reduce.norm_max_unroll steps a trip)."""
    node = site.node
    if node.op != "fused_layer_norm":
        return None
    if any(site.layouts[v.name].shape != v.type.shape for v in node.inputs):
        return None
    width = math.prod(node.inputs[0].type.shape[node.attrs["axis"]:])
    same_row = width % 4 == 0
    unroll = unroll_for(2 * (width // 4 if same_row else lanes * width))
    if unroll > tuning.reduce.norm_max_unroll:
        return None
    return NormPlan(site, width, same_row, unroll)


def _direct(site, facts, tuning):
    plan = _plan(site, lanes=4, tuning=tuning)
    return plan if plan and plan.width <= tuning.reduce.norm_direct_width else None


def _stats(site, facts, tuning):
    return _plan(site, lanes=1, tuning=tuning)


def _context(plan, inputs):
    node = plan.site.node
    x, *affine = [next(b for b in inputs if b.value == v.name) for v in node.inputs]
    scale = affine.pop(0) if node.attrs["has_scale"] else None
    offset = affine.pop(0) if node.attrs["has_offset"] else None
    return dict(x=x, scale=scale, offset=offset, width=plan.width,
                same_row=plan.same_row, unroll=plan.unroll, center=node.attrs["center"],
                epsilon=glsl_float(node.attrs["epsilon"]),
                scale_size=scale.layout.size if scale else 1,
                offset_size=offset.layout.size if offset else 1, invariant_output=True)


def _emit_direct(plan):
    site = plan.site
    inputs = operands(site.node, site.layouts)
    out = output_operand(site.node.outputs[0], site.layouts)
    return make_kernel("layer_norm.glsl.j2", site.prefix, "fused_layer_norm",
                       site.named_nodes, inputs, out, mode="direct",
                       **_context(plan, inputs))


def _emit_stats(plan):
    site = plan.site
    node, layouts = site.node, site.layouts
    x_val = node.inputs[0]
    rows = x_val.type.size // plan.width
    name = f"{node.name}:stats"
    layouts[name] = scratch_layout((rows, 4), "float32", layouts[x_val.name])
    stats = Operand(sampler="ff_out", value=name, layout=layouts[name],
                    type=str(TensorType((rows, 4), "float32")))
    x = Operand(sampler="x0", value=x_val.name, layout=layouts[x_val.name],
                type=str(x_val.type), arg="a0")
    first = make_kernel("layer_norm.glsl.j2", f"{site.prefix}.p0", "fused_layer_norm",
                        site.named_nodes, [x], stats, mode="stats",
                        **{**_context(plan, [x] + operands(node, layouts)[1:]),
                           "scale": None, "offset": None})
    inputs = operands(node, layouts)
    inputs.append(Operand(sampler=f"x{len(inputs)}", value=name, layout=layouts[name],
                          type=stats.type))
    out = output_operand(node.outputs[0], layouts)
    second = make_kernel("layer_norm.glsl.j2", site.prefix, "fused_layer_norm",
                         site.named_nodes, inputs, out, mode="apply", stats=inputs[-1],
                         **_context(plan, inputs))
    return [first, second]


TABLE = (
    Strategy("norm.direct", _direct, _emit_direct,
             "one kernel: each fragment walks its row for the mean and variance (or the "
             "mean of squares), then normalizes, scales and shifts its texel"),
    Strategy("norm.stats", _stats, _emit_stats,
             "two kernels: a row's statistics a fragment, then every element normalized"),
)


def lower_node(node, layouts, prefix):
    return lower_with(TABLE, Site(node, layouts, prefix))
