"""fused_layer_norm's kernels (passes/norms.py makes the node): the norm family's
strategy table. Both rows render templates/layer_norm.glsl.j2: a row's statistics
are its mean and 1 / sqrt(variance + epsilon) (RMSNorm: mean 0, the mean of squares),
walked twice (the mean, then the squared deviations: no cancellation); each element
is then normalized, times the scale, plus the offset. Where rows are a multiple of 4
long, the four lanes of a texel are one row's and read it as whole texels.

- norm.direct: one kernel; each fragment walks its own row. A row's statistics are
  computed again for each of its texels, so it takes rows of at most the Tuning's
  `reduce.norm_direct_width` elements, or few rows: rows x width² (in proportion to
  what all the walks read) of at most `reduce.norm_direct_work`.
- norm.stats: two kernels; one fragment a row writes its statistics into a scratch
  texture (one texel a row), then a kernel normalizes every element reading them.
- norm.rows: one kernel writing render targets, no stitch, where plan_blocks left the
  result there (its readers read it in place: blocked matmuls as their A, matmuls'
  epilogues as a residual operand; a fetch reads it back from the targets, putting
  its texels in order on the host): a fragment walks its row once into registers
  (two passes over them for the statistics) and writes up to `matmul.max_targets` of
  the row's texels, one a target; a row of W elements is W / (4 x targets) fragments,
  each reading it once, where norm.stats reads it three times in two kernels.

Where x is a matmul's result that codegen/matmul.py plan_blocks left in its render
targets (no stitch: `reads_blocks` says which norms can), both rows read x from them
(templates/blocks_texel.glsl.j2 px_, adding up the product's K splits) and apply the
matmul's epilogue (bias, residual add: templates/epilogue.glsl.j2) to each texel they
read: the stitch's work, done where x is read."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from ..ir.types import TensorType
from . import schedule, tuning as _tuning
from .common import make_kernel, operands, output_operand, reads_at_output
from .depthwise import BlocksOperand
from .environment import glsl_float
from .layout import layout_for
from .limits import unroll_for
from .matmul import (
    Blocking,
    BlocksLayout,
    _max_texture_size,
    _on_targets,
    _reads_a_blocks,
    blocked_kernel,
    max_targets,
    target_operands,
)
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


def _planned(site, facts) -> bool:
    return facts is not None and site.node.outputs[0].name in facts.blocks


def _direct(site, facts, tuning):
    if _planned(site, facts):
        return None             # norm.rows' (plan_blocks)
    plan = _plan(site, lanes=4, tuning=tuning)
    if plan is None:
        return None
    rows = plan.site.node.inputs[0].type.size // plan.width
    knobs = tuning.reduce
    return plan if plan.width <= knobs.norm_direct_width or \
        rows * plan.width ** 2 <= knobs.norm_direct_work else None


def _stats(site, facts, tuning):
    return None if _planned(site, facts) else _plan(site, lanes=1, tuning=tuning)


def _rows(site, facts, tuning):
    """norm.rows where plan_blocks left the result in render targets."""
    if not _planned(site, facts):
        return None
    plan = _plan(site, lanes=4, tuning=tuning)
    return None if plan is None or not plan.same_row else plan


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


def _reading(site, first: int) -> tuple:
    """(x, the producer's epilogue operands, template context): x as its operand, or
    read from the render targets its producing matmul left it in (plan_blocks) with
    that matmul's epilogue, whose operands get samplers x<first>, .."""
    node, layouts = site.node, site.layouts
    x = operands(node, layouts)[0]
    view = schedule.active().blocks.get(x.value)
    if view is None or not getattr(view, "pending", False):
        return x, [], {}
    from . import fused  # fused lowers this family's node: a cycle at import
    producer = node.inputs[0].node
    extra, epilogue = ([], None) if producer.op == "matmul" else \
        fused.matmul_epilogue(producer, layouts, first)
    blocks = BlocksOperand(sampler=x.sampler, value=f"{x.value}#blocks", layout=view,
                           type=x.type, arg=x.arg)
    return blocks, extra, dict(x_blocks=view.blocking, epilogue=epilogue,
                               epilogue_vec4=True,
                               result=output_operand(producer.outputs[0], layouts))


def _emit_direct(plan):
    site = plan.site
    inputs = operands(site.node, site.layouts)
    out = output_operand(site.node.outputs[0], site.layouts)
    context = _context(plan, inputs)
    x, extra, reading = _reading(site, len(inputs))
    return make_kernel("layer_norm.glsl.j2", site.prefix, "fused_layer_norm",
                       site.named_nodes, [x] + inputs[1:] + extra, out, mode="direct",
                       **{**context, "x": x, **reading})


def _emit_stats(plan):
    site = plan.site
    node, layouts = site.node, site.layouts
    x_val = node.inputs[0]
    rows = x_val.type.size // plan.width
    name = f"{node.name}:stats"
    layouts[name] = scratch_layout((rows, 4), "float32", layouts[x_val.name])
    stats = Operand(sampler="ff_out", value=name, layout=layouts[name],
                    type=str(TensorType((rows, 4), "float32")))
    inputs = operands(node, layouts)
    x, extra, reading = _reading(site, len(inputs))
    context = {**_context(plan, inputs), "x": x, **reading}
    first = make_kernel("layer_norm.glsl.j2", f"{site.prefix}.p0", "fused_layer_norm",
                        site.named_nodes, [x] + extra, stats, mode="stats",
                        **{**context, "scale": None, "offset": None})
    inputs = [x] + inputs[1:] + extra
    inputs.append(Operand(sampler=f"x{len(inputs)}", value=name, layout=layouts[name],
                          type=stats.type))
    out = output_operand(node.outputs[0], layouts)
    second = make_kernel("layer_norm.glsl.j2", site.prefix, "fused_layer_norm",
                         site.named_nodes, inputs, out, mode="apply", stats=inputs[-1],
                         **context)
    return [first, second]


def _emit_rows(plan):
    site = plan.site
    node, layouts = site.node, site.layouts
    view = schedule.active().blocks[node.outputs[0].name]
    out = output_operand(node.outputs[0], layouts)
    blocks, names = _on_targets(target_operands(view.blocking, out,
                                                _max_texture_size(None, out)), view)
    inputs = operands(node, layouts)
    x, extra, reading = _reading(site, len(inputs))
    context = {**_context(plan, inputs), "x": x, **reading}
    return blocked_kernel("layer_norm.glsl.j2", site.prefix, "fused_layer_norm",
                          site.named_nodes, [x] + inputs[1:] + extra, blocks, names,
                          view.blocking, mode="rows",
                          cache_row=_tuning.active().reduce.norm_rows_cache, **context)


def rows_blocking(rows: int, width: int, tuning):
    """The Blocking of norm.rows' targets: one row a fragment, `cols` column texels
    (the most of matmul.max_targets and reduce.norm_rows_targets that divides the
    row's texels), one a target."""
    texels = width // 4
    most = min(max_targets(), tuning.reduce.norm_rows_targets, texels)
    cols = max(c for c in range(1, most + 1) if texels % c == 0)
    return Blocking(1, rows, width, 1, cols)


def reads_residual(node, value) -> bool:
    """Whether graph node `node` is a fused matmul reading `value` only as an operand
    of its epilogue at its own output's shape (element e of its result reads element e
    of value: a residual add): the epilogue reads it through px_ (codegen/fused.py
    matmul_epilogue, lanes "blocks")."""
    return node.op == "fused_matmul" and reads_at_output(node, value)


def _units_fit(node, limits) -> bool:
    """Whether a norm's kernels bind their textures: x's (its producer's targets), scale,
    offset, the producing fused matmul's epilogue operands, the statistics."""
    producer = node.inputs[0].node
    extra = producer.inputs[2:] if producer.op == "fused_matmul" else ()
    return len(node.inputs) + len(extra) + 1 <= limits.max_texture_units


def _fetched_pays(blocking, tuning) -> bool:
    """Whether a fetched norm may stay in its targets (reduce.norm_rows_fetched): where
    its fragments, each reading the whole row, read at most norm_rows_fetched_reads
    elements more than norm.stats' three reads of each (wider rows, more rows: its two
    kernels and one readback were faster, docs/PERFORMANCE.md)."""
    knobs = tuning.reduce
    extra = blocking.m * blocking.n * (blocking.col_slab - 3)
    return knobs.norm_rows_fetched and extra <= knobs.norm_rows_fetched_reads


def plan_blocks(graph, facts, limits, tuning) -> dict:
    """{value: BlocksLayout} for the LayerNorms run as norm.rows (codegen/lower.py
    PLANNERS): float32 rows of whole texels that TABLE takes, read only by blocked
    matmuls as their A (codegen/matmul.py _reads_a_blocks) and by fused matmuls'
    epilogues (reads_residual), where the Tuning's `reduce.norm_rows` is on; fetched
    too (a model's output, read by those or by nothing) where `reduce.norm_rows_fetched`
    is and _fetched_pays: the readback puts the targets' texels in order (lower()
    records it in LoweredGraph.fetched_blocks; runtime/gl_plan.py,
    tools/webgl/runtime.js)."""
    if not tuning.reduce.norm_rows or "norm.rows" in tuning.exclude:
        return {}
    blocks: dict = {}
    for node in graph.nodes:
        if node.op != "fused_layer_norm":
            continue
        out = node.outputs[0]
        if out.dtype != "float32" or \
                not all(v.type.is_static for v in tuple(node.inputs) + (out,)):
            continue
        layouts = {v.name: layout_for(v.type, limits.max_texture_size)
                   for v in tuple(node.inputs) + (out,)}
        plan = _plan(Site(node, layouts, ""), lanes=4, tuning=tuning)
        if plan is None or not plan.same_row:
            continue
        if not _units_fit(node, limits):
            continue
        blocking = rows_blocking(out.type.size // plan.width, plan.width, tuning)
        so_far = replace(facts, blocks=MappingProxyType({**facts.blocks, **blocks}))
        if not facts.read_only_by(out, lambda n, v, s=so_far: reads_residual(n, v) or
                                  _reads_a_blocks(n, v, s, limits, tuning),
                                  fetched=_fetched_pays(blocking, tuning)):
            continue
        result = output_operand(out, layouts)
        layout = target_operands(blocking, result, _max_texture_size(None, result))[0].layout
        blocks[out.name] = BlocksLayout(layout.shape, "float32", layout.width,
                                        layout.height, blocking=blocking)
    return blocks


def reads_blocks(node, value, limits, tuning) -> bool:
    """Whether graph node `node` is a LayerNorm that can read `value`, a matmul's
    result, from the matmul's render targets (codegen/matmul.py plan_blocks): as its x
    and nothing else, float32, rows of whole texels (width % 4 == 0), a strategy of
    TABLE taking it, and the texture units for the matmul's epilogue operands too."""
    if node.op != "fused_layer_norm" or node.inputs[0] is not value or \
            any(v is value for v in node.inputs[1:]) or value.dtype != "float32" or \
            not all(v.type.is_static for v in node.inputs) or \
            value.type.size > tuning.matmul.norm_blocks_max_elements:
        return False
    if not _units_fit(node, limits):
        return False
    layouts = {v.name: layout_for(v.type, limits.max_texture_size) for v in node.inputs}
    site = Site(node, layouts, "")
    plans = [s.applies(site, None, tuning) for s in TABLE]
    return any(p is not None and p.same_row for p in plans)


TABLE = (
    Strategy("norm.rows", _rows, _emit_rows,
             "one kernel writing render targets (no stitch, plan_blocks): a fragment "
             "walks its row once into registers and writes several of its texels"),
    Strategy("norm.direct", _direct, _emit_direct,
             "one kernel: each fragment walks its row for the mean and variance (or the "
             "mean of squares), then normalizes, scales and shifts its texel"),
    Strategy("norm.stats", _stats, _emit_stats,
             "two kernels: a row's statistics a fragment, then every element normalized"),
)


def lower_node(node, layouts, prefix):
    return lower_with(TABLE, Site(node, layouts, prefix))
