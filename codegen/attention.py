"""fused_attention's kernels (passes/attention.py makes the node): the attention
family's strategy table.

Both rows end in templates/attention.glsl.j2: each fragment walks its query row's keys
once, `matmul.attention_key_tile` keys at a time: their scores (the scale, the mask),
the tile's max, then the running max and sum of exp rescaled and the product with v
accumulated (an online softmax, as flash attention's). Where the output's last axis is
a multiple of 4 the texel's four lanes are one query row: a score serves four columns
of v, read as one texel; else each lane walks its own row. A row holding NaN or +inf,
or only -inf, gives NaN throughout, as softmax does.

- attention.online: one kernel, q·k computed in the walk. A fragment writes one texel,
  so a row's scores are computed once per texel of the row (dv / 4 times): it takes
  rows of at most `matmul.attention_one_kernel_texels` texels.
- attention.scores_blocks: two kernels, q kᵀ by the blocked matmul kernel
  (matmul.blocked without its stitch), then the walk reading the scores straight from
  its render targets (a matmul.BlocksLayout, adding up K splits), where
  `matmul.attention_scores_blocks` is on and the product runs blocked.
- attention.scores: q kᵀ by the matmul table into a scratch texture (a blocked
  product is two kernels, the blocked one and its stitch), then the walk reading the
  scores (scale and mask applied as it reads them)."""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from ..ir.errors import FragflowError
from ..ir.ops.fused import columns_shape
from ..ir.types import TensorType
from . import matmul, schedule
from .common import make_kernel, operands, output_operand
from .depthwise import BlocksOperand
from .environment import glsl_float
from .layout import broadcast_index, layout_for
from .limits import loop_trips
from .matmul import matmul_kernel
from .operands import Operand
from .reduce_tree import scratch_layout
from .strategy import Site, Strategy, choose, lower_with


@dataclass(frozen=True, kw_only=True)
class AttentionParams:
    """The walk's shape and choices, in the order its header prints them."""
    lq: int                  # queries
    lk: int                  # keys
    d: int                   # q·k's length
    dv: int                  # v's columns
    tile: int                # keys a step of the walk
    same_row: bool           # the four lanes of a texel are one query row
    vec_dot: bool            # q·k as dots of texels (k as [..., Lk, D], D % 4 == 0)
    precomputed: bool        # the scores come from the kernel before (attention.scores)
    scores_blocks: bool      # ... read from its render targets (attention.scores_blocks)
    transpose_k: bool
    transpose_v: bool
    scale: str | None        # GLSL literal
    divide: bool
    subtract_mask: bool      # scores - mask (Keras' Attention), not + mask
    v_heads: bool            # v as [..., Lk, H, Dv] (ir/ops/fused.py)
    out_heads: bool          # the result as [..., Lq, H, Dv]
    heads: int               # H where either
    v_row: int               # v_heads: the stride of v's rows (H * DV, or a merged row)
    v_start: int             # v_heads: v's first column in its row
    v_texels: bool           # ... v's rows start on texels (read 4 columns a fetch)
    mask_offset: int
    mask_terms: tuple        # ((out stride, dim, mask stride), ...) from a score's index


@dataclass(frozen=True)
class AttentionPlan:
    site: Any
    params: AttentionParams


def _plan(site, tuning, precomputed, splits=0):
    node = site.node
    if node.op != "fused_attention":
        return None
    if (node.attrs["q_heads"] or node.attrs["k_heads"]) and not precomputed:
        return None                     # q and k read in [B, L, H, D]: the scores' product
    q, k = (_heads(_shape(node, r)) if node.attrs[f"{r}_heads"] else _shape(node, r)
            for r in "qk")
    out = node.outputs[0].type.shape
    if any(site.layouts[t.name].shape != t.type.shape for t in node.inputs) or \
            site.layouts[node.outputs[0].name].shape != out:
        return None
    lq, d = q[-2], q[-1]
    lk = k[-2] if node.attrs["transpose_k"] else k[-1]
    dv = out[-1]
    tile = max(1, tuning.matmul.attention_key_tile)
    same_row = dv % 4 == 0
    vec_dot = node.attrs["transpose_k"] and d % 4 == 0 and d <= 256 and not precomputed
    walks = 1 if same_row else min(4, math.prod(out))
    per_key = max(1, splits) if vec_dot or precomputed else tile * d + 1
    if walks * -(-lk // tile) * per_key > loop_trips():
        return None
    mask_offset, mask_terms = 0, ()
    v_heads, out_heads = node.attrs["v_heads"], node.attrs["out_heads"]
    if v_heads and node.attrs["transpose_v"]:
        return None
    heads = _shape(node, "v")[-2] if v_heads else out[-2] if out_heads else 1
    # v as [..., LK, H, DV]: its rows' stride and first column (a merged projection's
    # column slice: v_columns, ir/ops/fused.py)
    v_columns = node.attrs["v_columns"]
    v_row = node.inputs[2].type.shape[-1] if v_columns else heads * dv
    v_start = v_columns[0] if v_columns else 0
    v_texels = v_start % 4 == 0 and v_row % 4 == 0     # a texel: 4 columns of a row
    if len(node.inputs) == 4:          # the scores: q's batch dims, [Lq, Lk]
        index = broadcast_index(q[:-1] + (lk,), node.inputs[3].type.shape)
        mask_offset, mask_terms = index.offset, index.terms
    scale = node.attrs["scale"]
    return AttentionPlan(site, AttentionParams(
        lq=lq, lk=lk, d=d, dv=dv, tile=tile, same_row=same_row, vec_dot=vec_dot,
        precomputed=precomputed, scores_blocks=splits > 0, transpose_k=node.attrs["transpose_k"],
        transpose_v=node.attrs["transpose_v"],
        scale=None if scale is None else glsl_float(scale), divide=node.attrs["divide"],
        subtract_mask=node.attrs["subtract_mask"], v_heads=v_heads, out_heads=out_heads,
        heads=heads, v_row=v_row, v_start=v_start, v_texels=v_texels,
        mask_offset=mask_offset, mask_terms=mask_terms))


def _shape(node, role):
    """The [..., L, (H,) D] shape operand `role` (q, k or v) stands for."""
    value = node.inputs["qkv".index(role)]
    return columns_shape(value.type.shape, node.attrs[f"{role}_columns"])


def _heads(shape):
    """[..., L, H, D] as [..., H, L, D]."""
    return tuple(shape[:-3]) + (shape[-2], shape[-3], shape[-1])


def _targets_only(node, facts) -> bool:
    """Whether q, k and v are only in their producer's render targets (reads_blocks):
    only attention.scores_blocks reads them there."""
    view = getattr(facts, "blocks", {}).get(node.inputs[0].name)
    return view is not None and not view.pending


def _online(site, facts, tuning):
    node = site.node
    if node.op != "fused_attention" or _targets_only(node, facts):
        return None
    dv = node.outputs[0].type.shape[-1]
    texels = -(-dv // 4) if dv % 4 == 0 else dv      # walks of a row's scores
    if texels > tuning.matmul.attention_one_kernel_texels:
        return None
    return _plan(site, tuning, precomputed=False)


def _scores(site, facts, tuning):
    if _targets_only(site.node, facts):
        return None
    return _plan(site, tuning, precomputed=True)


@dataclass(frozen=True)
class ScoresBlocksPlan:
    site: Any
    params: AttentionParams
    blocked: Any             # matmul.BlockedParams of q kᵀ


def _scores_site(site, layouts, p):
    """(the scores' Operand, the bound inputs, q kᵀ's MatmulSite); p: the walk's
    AttentionParams."""
    node = site.node
    q_shape = _shape(node, "q")
    shape = (_heads(q_shape) if node.attrs["q_heads"] else q_shape)[:-2] + (p.lq, p.lk)
    name = f"{node.name}:scores"
    layout = scratch_layout(shape, "float32", layouts[node.inputs[0].name])
    scores = Operand(sampler="ff_out", value=name, layout=layout,
                     type=str(TensorType(shape, "float32")))
    bound = operands(node, layouts)
    q, k, *_ = _by_role(node, bound)
    head = ScoresHead(node)
    msite = matmul.matmul_site(head, q, k, scores, f"{site.prefix}.p0", nodes=[head],
                               layouts=layouts)
    return scores, bound, msite


def _scores_blocks(site, facts, tuning):
    """attention.scores where q kᵀ runs blocked: its targets are read by the walk."""
    if site.node.op != "fused_attention" or not tuning.matmul.attention_scores_blocks \
            or "matmul.blocked" in tuning.exclude:
        return None
    plan = _plan(site, tuning, precomputed=True)
    if plan is None:
        return None
    _, _, msite = _scores_site(site, site.layouts, plan.params)
    blocked = matmul._blocked(msite, facts, tuning)
    if blocked is None or blocked.blocking.interleaved:
        return None
    plan = _plan(site, tuning, precomputed=True, splits=blocked.blocking.splits)
    return None if plan is None else ScoresBlocksPlan(site, plan.params, blocked)


def _walk(plan, roles, inputs, prefix, **context):
    site, p = plan.site, plan.params
    node = site.node
    out = output_operand(node.outputs[0], site.layouts)
    return make_kernel("attention.glsl.j2", prefix, "fused_attention", site.named_nodes,
                       inputs, out, roles=roles, params=p, **context,
                       **{f: getattr(p, f) for f in AttentionParams.__dataclass_fields__
                          if f != "mask_terms"})


def _by_role(node, inputs):
    """The bound operand of each input of node (a value read twice binds once)."""
    return [next(b for b in inputs if b.value == t.name) for t in node.inputs]


def _emit_online(plan):
    site = plan.site
    inputs = operands(site.node, site.layouts)
    q, k, v, *mask = _by_role(site.node, inputs)
    roles = {"q": q, "k": k, "v": v, "mask": mask[0] if mask else None, "scores": None}
    return _walk(plan, roles, inputs, site.prefix)


@dataclass(frozen=True)
class ScoresHead:
    """q kᵀ as codegen/matmul.py reads a matmul node, under the fused node's name."""
    fused: Any
    op: str = "matmul"

    @property
    def attrs(self):
        return {"transpose_a": False, "transpose_b": self.fused.attrs["transpose_k"],
                "a_heads": self.fused.attrs["q_heads"],
                "b_heads": self.fused.attrs["k_heads"],
                "a_columns": self.fused.attrs["q_columns"],
                "b_columns": self.fused.attrs["k_columns"]}

    @property
    def name(self):
        return f"{self.fused.name}/scores"

    @property
    def scope(self):
        return self.fused.scope

    @property
    def source(self):
        return self.fused.source

    def where(self):
        return self.fused.where()


def _emit_scores(plan):
    site, p = plan.site, plan.params
    node, layouts = site.node, site.layouts
    q_shape = _shape(node, "q")
    batch = (_heads(q_shape) if node.attrs["q_heads"] else q_shape)[:-2]
    name = f"{node.name}:scores"
    layouts[name] = scratch_layout(batch + (p.lq, p.lk), "float32",
                                   layouts[node.inputs[0].name])
    scores = Operand(sampler="ff_out", value=name, layout=layouts[name],
                     type=str(TensorType(batch + (p.lq, p.lk), "float32")))
    bound = operands(node, layouts)
    q, k, v, *mask = _by_role(node, bound)
    head = ScoresHead(node)
    first = matmul_kernel(head, q, k, scores, f"{site.prefix}.p0", layouts=layouts,
                          nodes=[head])
    first = first if isinstance(first, list) else [first]
    # the walk binds the scores, v and the mask
    walk_inputs = []
    for value in [scores, v] + mask:
        if value.value not in [b.value for b in walk_inputs]:
            walk_inputs.append(Operand(sampler=f"x{len(walk_inputs)}", value=value.value,
                                       layout=value.layout, type=value.type))
    named = {b.value: b for b in walk_inputs}
    roles = {"q": None, "k": None, "v": named[v.value],
             "mask": named[mask[0].value] if mask else None, "scores": named[name]}
    return first + [_walk(plan, roles, walk_inputs, site.prefix)]


def _qkv_blocks(node, bound):
    """(q, k and v's producer's BlocksLayout, the bound operands with q, k and v as
    its render targets) where codegen/matmul.py plan_blocks left the merged projection
    there (reads_blocks), else (None, bound)."""
    view = schedule.active().blocks.get(node.inputs[0].name)
    if view is None or view.pending or view.mapping != "matmul":
        return None, bound
    name = f"{matmul._blocks_root(node.inputs[0]).name}#blocks"     # through views
    return view, [BlocksOperand(sampler=b.sampler, value=name, layout=view, type=b.type,
                                arg=b.arg) if b.value == node.inputs[0].name else b
                  for b in bound]


def reads_blocks(node, value, facts, limits, tuning) -> bool:
    """Whether graph node `node` is a fused_attention that reads `value`, a matmul's
    result, as its q, k and v (a merged projection's columns, each a run of whole
    texels, the heads' D a multiple of 4) and nothing else of it, and runs
    attention.scores_blocks with q kᵀ reading q's and k's texels (k transposed): so its
    kernels can read them from the matmul's render targets (codegen/matmul.py
    plan_blocks; templates/blocks_texel.glsl.j2 `flat`)."""
    if node.op != "fused_attention" or any(v is not value for v in node.inputs[:3]) or \
            any(v is value for v in node.inputs[3:]) or value.dtype != "float32" or \
            not node.attrs["transpose_k"] or node.attrs["transpose_v"] or \
            not all(v.type.is_static for v in tuple(node.inputs) + tuple(node.outputs)):
        return False
    for role in "qkv":
        columns = node.attrs[f"{role}_columns"]
        if not columns or columns[0] % 4 or columns[2] % 4 or \
                not node.attrs[f"{role}_heads"]:
            return False
    if len(node.inputs) + 1 > limits.max_texture_units:
        return False
    layouts = {v.name: layout_for(v.type, limits.max_texture_size)
               for v in tuple(node.inputs) + tuple(node.outputs)}
    try:
        strategy, plan = choose(TABLE, Site(node, layouts, ""), facts, tuning)
    except FragflowError:
        return False
    return strategy.name == "attention.scores_blocks" and plan.params.same_row and \
        plan.params.v_texels and plan.blocked.a_texels and plan.blocked.b_mode == "cols"


def _emit_scores_blocks(plan):
    """[q kᵀ's blocked kernel, the walk reading its render targets]; q, k and v read
    from their producer's render targets where it left them there (reads_blocks)."""
    site, blocked = plan.site, plan.blocked
    node, layouts = site.node, site.layouts
    blocking = blocked.blocking
    scores, bound, msite = _scores_site(site, layouts, plan.params)
    blocks, names = matmul.target_operands(blocking, scores,
                                           matmul._max_texture_size(None, scores))
    targets = matmul.BlocksLayout(blocks.layout.shape, "float32", blocks.layout.width,
                                  blocks.layout.height, blocking, "matmul")
    blocks = replace(blocks, layout=targets)
    names = [replace(n, layout=targets) for n in names]
    layouts[blocks.value] = targets
    view, product = _qkv_blocks(node, msite.product.bound)
    if view is None:
        first = matmul.blocked_main(blocked, blocks, names)
    else:
        if not (blocked.a_texels and blocked.b_mode == "cols"):
            raise FragflowError(f"{node.where()}: q and k left in render targets, but "
                                f"q kᵀ does not read them as texels (codegen/attention.py "
                                f"reads_blocks)")
        first = matmul.blocked_main(blocked, blocks, names, product, qk_blocks=view.blocking)
    _, _, v, *mask = _by_role(node, bound)
    if view is not None:
        v = _qkv_blocks(node, [v])[1][0]
    walk_inputs = [BlocksOperand(sampler="x0", value=blocks.value, layout=targets,
                                 type=blocks.type)]
    for value in [v] + mask:
        if value.value not in [b.value for b in walk_inputs]:
            walk_inputs.append(type(value)(sampler=f"x{len(walk_inputs)}", value=value.value,
                                           layout=value.layout, type=value.type))
    named = {b.value: b for b in walk_inputs}
    roles = {"q": None, "k": None, "v": named[v.value],
             "mask": named[mask[0].value] if mask else None, "scores": walk_inputs[0]}
    # the prologue's texelFetch helpers take a sampler2D: none for the layers
    return [first, _walk(plan, roles, walk_inputs, site.prefix, blocking=blocking,
                         v_blocks=view and view.blocking,
                         fetch_helpers={b.sampler for b in walk_inputs[1:]})]


TABLE = (
    Strategy("attention.online", _online, _emit_online,
             "one kernel: q·k, scale, mask and an online softmax over key tiles times v"),
    Strategy("attention.scores_blocks", _scores_blocks, _emit_scores_blocks,
             "two kernels: q kᵀ blocked, the walk reading its render targets"),
    Strategy("attention.scores", _scores, _emit_scores,
             "two kernels: q kᵀ by the matmul table, then the online softmax times v"),
)


def lower_node(node, layouts, prefix):
    return lower_with(TABLE, Site(node, layouts, prefix))
