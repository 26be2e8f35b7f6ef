"""Lowering top_k_select (x -> the indices of its last axis's k largest, ir/ops/structure/
top_k.py): the first strategy of TABLE that takes the node.

- top_k.radix (rows x length^2 past the Tuning's structure.top_k_rank_max_work): a
  radix select of the k-th largest key, then the elements at or above it. Each
  element's key is a uint ordered as the values (NaN first; -0.0 as 0.0; int32 offset
  by 2^31). Round r settles `bits` more bits of K, the k-th largest key, from the top:
  a count kernel writes, per block of a row, how many keys are >= P | j << shift for
  the 2^bits - 1 digits j (P: the bits settled so far; one fragment per 4 digits and
  block), and a decide kernel sums the blocks and keeps the largest digit whose count
  is still >= k. After 32 / bits rounds P is K. Then a kernel counts per block the
  keys > K and == K; a select kernel gives slot s the s-th key > K in index order, or
  past those the first keys == K (ties keep the lower index), finding its block from
  the block counts and walking it; a rank kernel sorts those k by (key descending,
  index ascending) and a place kernel writes each place's index. Work: each round
  reads the row ceil((2^bits - 1) / 4) times; k^2 for the sort; 2 * 32 / bits + 4
  draws (36 for the default 2 bits).
- top_k.rank: each element ranked against its whole row (n^2 compares), then the index
  of each rank 0..k-1: two draws, best for short rows.

Values between kernels are "<node>:r<i>" (reduce_tree.TreeBuilder); the template is
structure_top_k_radix.glsl.j2 (the rank kernels are structure.glsl.j2's)."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .common import output_operand
from .limits import loop_trips, unroll_for
from .operands import Operand
from .reduce_tree import TreeBuilder
from .strategy import Site, Strategy, lower_with

LANES = 4           # output elements per fragment (structure.py's)
RADIX_BITS = (1, 2, 4, 8)


@dataclass(frozen=True)
class RadixPlan:
    rows: int            # R: the rows (the leading dims' product)
    length: int          # N: the last axis
    k: int
    bits: int            # of K settled per round
    block: int           # elements per counted block (a multiple of 4)

    @property
    def digits(self) -> int:             # candidates per round, 2^bits - 1
        return (1 << self.bits) - 1

    @property
    def texels_per_block(self) -> int:   # count texels per block: 4 digits each
        return -(-self.digits // 4)

    @property
    def blocks(self) -> int:             # NB per row
        return -(-self.length // self.block)

    @property
    def rounds(self) -> int:
        return 32 // self.bits


def radix_plan(rows: int, length: int, k: int, tuning) -> RadixPlan | None:
    """Blocks of at least the tuning's top_k_block elements, grown until a block's walk
    and the per-round sum over a row's blocks are about as long (the two serial loops);
    None where a fragment's loops would pass the loop budget."""
    t = tuning.structure
    bits = t.top_k_radix_bits
    per_block = -(-((1 << bits) - 1) // 4)
    balanced = 2 * math.isqrt(length * per_block)
    block = max(t.top_k_block, balanced, 4)
    block = min(-(-block // 4) * 4, -(-length // 4) * 4)
    plan = RadixPlan(rows, length, k, bits, block)
    # per fragment: a decide's 4 rows each sum blocks * texels_per_block texels; a
    # select's 4 slots each walk the blocks twice and one block
    walks = LANES * max(plan.blocks * per_block, 2 * plan.blocks + block // 4 + 2)
    return plan if walks <= loop_trips() else None


def _rows_and_length(site: Site):
    shape = site.layouts[site.node.inputs[0].name].shape
    length = shape[-1]
    return math.prod(shape[:-1]), length


def _radix(site: Site, facts, tuning):
    rows, length = _rows_and_length(site)
    k = site.node.attrs["k"]
    if rows * length * length <= tuning.structure.top_k_rank_max_work or k == 0:
        return None
    if tuning.structure.top_k_radix_bits not in RADIX_BITS:
        return None
    plan = radix_plan(rows, length, k, tuning)
    return None if plan is None else {"site": site, "plan": plan}


def _emit_radix(params) -> list:
    site, p = params["site"], params["plan"]
    node = site.node
    builder = TreeBuilder(node, site.prefix, node.op, site.layouts)
    x_layout = site.layouts[node.inputs[0].name]
    x = Operand(sampler="x0", value=node.inputs[0].name, layout=x_layout,
                type=str(node.inputs[0].type))
    common = {"R": p.rows, "N": p.length, "K": p.k, "S": p.block, "NB": p.blocks,
              "TPB": p.texels_per_block, "digits": p.digits, "bits": p.bits}
    state = None
    for r in range(p.rounds):
        shift = 32 - (r + 1) * p.bits
        counts = builder.scratch((p.rows, p.blocks, 4 * p.texels_per_block), "int32",
                                 x_layout)
        builder.add("structure_top_k_radix.glsl.j2", [x] + ([state] if state else []),
                    counts, kind="count", shift=shift, first=state is None, **common)
        prefix = builder.scratch((p.rows,), "int32", x_layout)
        builder.add("structure_top_k_radix.glsl.j2", [counts] + ([state] if state else []),
                    prefix, kind="decide", shift=shift, first=state is None, **common)
        state = prefix
    ties = builder.scratch((p.rows, p.blocks, 4), "int32", x_layout)
    builder.add("structure_top_k_radix.glsl.j2", [x, state], ties, kind="ties", **common)
    chosen = builder.scratch((p.rows, p.k), "int32", x_layout)
    builder.add("structure_top_k_radix.glsl.j2", [x, state, ties], chosen, kind="select",
                **common)
    rank = builder.scratch((p.rows, p.k), "int32", x_layout)
    builder.add("structure_top_k_radix.glsl.j2", [x, chosen], rank, kind="rank",
                unroll=unroll_for(LANES * p.k), **common)
    out = output_operand(node.outputs[0], site.layouts)
    builder.add("structure_top_k_radix.glsl.j2", [chosen, rank], out, kind="place",
                unroll=unroll_for(LANES * p.k), **common)
    return builder.kernels


def _rank(site: Site, facts, tuning):
    return {"site": site}


def _emit_rank(params) -> list:
    site = params["site"]
    node = site.node
    rows, n = _rows_and_length(site)
    builder = TreeBuilder(node, site.prefix, node.op, site.layouts)
    x_layout = site.layouts[node.inputs[0].name]
    x = Operand(sampler="x0", value=node.inputs[0].name, layout=x_layout,
                type=str(node.inputs[0].type))
    loop = {"trips": n, "unroll": unroll_for(LANES * n)}
    ranks = builder.scratch(x_layout.shape, "int32", x_layout)
    builder.add("structure.glsl.j2", [x], ranks, kind="top_k_rank", src=["x0"], **loop)
    out = output_operand(node.outputs[0], site.layouts)
    builder.add("structure.glsl.j2", [ranks], out, kind="top_k_indices", src=["x0"],
                K=node.attrs["k"], **loop)
    return builder.kernels


TABLE = (
    Strategy("top_k.radix", _radix, _emit_radix,
             "rows x length^2 past structure.top_k_rank_max_work: radix select of the k-th "
             "largest key, then the elements at or above it, sorted"),
    Strategy("top_k.rank", _rank, _emit_rank,
             "every element ranked against its row, then the index of each rank < k"),
)


def lower_top_k_select(node, layouts, prefix):
    return lower_with(TABLE, Site(node, layouts, prefix))
