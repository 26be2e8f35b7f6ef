"""Lowering the reduce family: the first strategy of TABLE that takes a node
(codegen/strategy.py). Reductions (their records: ir/ops/reduce.py) and softmax /
log_softmax run as trees of passes (codegen/reduce_tree.py), cumsum as a scan
(codegen/scan.py), lrn / lrn_grad as one kernel (templates/reduce.glsl.j2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..ir.errors import AttrError
from ..ir.ops.registry import get_op
from ..ir.types import normalize_axes
from . import reduce_tree, scan
from .common import make_kernel, operands, output_operand
from .environment import glsl_float
from .limits import loop_trips
from .operands import Operand
from .strategy import Strategy, lower_with

SOFTMAX = ("softmax", "log_softmax")


@dataclass(frozen=True)
class ReduceSite:
    """A node of the family being lowered: its operands, the axes it reduces (softmax
    and cumsum: their one axis), the reduction (sum_like's is "sum"), its kernels'
    name prefix and op, and the layouts its values between kernels join."""
    node: Any
    inputs: tuple
    out: Operand
    axes: tuple
    op: str
    prefix: str
    kernel_op: str
    layouts: Any = None

    @property
    def x(self) -> Operand:
        return self.inputs[0]

    @property
    def reduction(self):
        """The op's record (ir/ops/reduce.py Reduction), None for softmax, cumsum, lrn."""
        return get_op(self.op).reduction


def site_of(node, layouts, prefix) -> ReduceSite:
    inputs = tuple(operands(node, layouts))
    rank = len(inputs[-1].layout.shape)
    axes = tuple(sorted(normalize_axes(node.attrs["axis"], rank))) \
        if "axis" in node.attrs else ()
    return ReduceSite(node, inputs, output_operand(node.outputs[0], layouts), axes,
                      node.op, prefix, node.op, layouts)


# -- reductions ----------------------------------------------------------------------------
def _empty(site) -> bool:
    return math.prod(site.x.layout.shape[a] for a in site.axes) == 0


def _fill(site, facts, tuning):
    return site if site.reduction is not None and _empty(site) else None


def _texel_passes(site, facts, tuning):
    """Where every tree of the reduction may keep lane partials (texel_pass)."""
    reduction = site.reduction
    if reduction is None or _empty(site) or not tuning.reduce.whole_texels:
        return None
    chain = [reduction] + ([get_op(reduction.shift).reduction] if reduction.shift else [])
    return site if all(r.folds.lane_partials for r in chain) else None


def _element_passes(site, facts, tuning):
    return site if site.reduction is not None and not _empty(site) else None


def _split_few(site, facts, tuning):
    """Where a column reduction to a few outputs takes windows of split_few_window."""
    if site.reduction is None or _empty(site) or not tuning.reduce.split_few:
        return None
    shape = site.x.layout.shape
    split = reduce_tree.plan(shape, site.axes, tuning=tuning, split_few=True)
    return site if split != reduce_tree.plan(shape, site.axes, tuning=tuning,
                                             split_few=False) else None


def _emit_fill(site):
    return reduce_tree.fill_kernels(site.node, site.out, site.op, site.prefix,
                                    site.kernel_op, site.layouts)


def _emit_tree(whole_texels, split_few=False):
    def emit(site):
        return reduce_tree.reduction_kernels(site.node, site.x, site.out, site.axes,
                                             site.op, site.prefix, site.kernel_op,
                                             site.layouts, whole_texels, split_few)
    return emit


# -- softmax, log_softmax -----------------------------------------------------------------
def _softmax_direct(site, facts, tuning):
    if site.op not in SOFTMAX:
        return None
    shape = site.x.layout.shape
    work = math.prod(shape) * shape[site.axes[0]]
    return site if work <= tuning.reduce.direct_softmax_work else None


def _softmax_partials(site, facts, tuning):
    if site.op not in SOFTMAX or not tuning.reduce.softmax_partials:
        return None
    shape, (axis,) = site.x.layout.shape, site.axes
    rows = math.prod(shape[axis + 1:]) == 1 and shape[axis] % 4 == 0 and shape[axis] >= 8
    return site if rows else None


def _softmax_tree(site, facts, tuning):
    return site if site.op in SOFTMAX else None


def _emit_softmax_direct(site):
    return reduce_tree.softmax_direct(site.node, site.x, site.out, site.axes[0],
                                      site.prefix, site.layouts)


def _emit_softmax_tree(partials):
    def emit(site):
        return reduce_tree.softmax_tree(site.node, site.x, site.out, site.axes[0],
                                        partials, site.prefix, site.layouts)
    return emit


# -- cumsum, lrn ---------------------------------------------------------------------------
@dataclass(frozen=True)
class ScanParams:
    site: ReduceSite
    blocks: tuple           # block lengths along a contiguous axis, a strided one


def _scan(site, facts, tuning):
    if site.op != "cumsum":
        return None
    return ScanParams(site, (tuning.reduce.scan_block_contiguous,
                             tuning.reduce.scan_block_strided))


def _emit_scan(params):
    site = params.site
    attrs = site.node.attrs
    return scan.cumsum_kernels(site.node, site.x, site.out, site.axes[0],
                               attrs["exclusive"], attrs["reverse"], site.prefix,
                               site.layouts, params.blocks)


def _lrn(site, facts, tuning):
    return site if site.op in ("lrn", "lrn_grad") else None


@dataclass(frozen=True, kw_only=True)
class LrnParams:
    """lrn / lrn_grad's kernel (templates/reduce.glsl.j2's lrn), in the order the kernel
    header prints them."""
    kind: str = "lrn"
    grad: bool
    depth: int              # channels: the last axis
    radius: int             # the window is [d - radius, d + radius], clipped
    bias: str               # GLSL literals of the attributes
    alpha: str
    beta: float
    beta_glsl: str
    two_alpha_beta: str


def lrn_kernel(site):
    node, out = site.node, site.out
    attrs = node.attrs
    depth = out.layout.shape[-1]
    window = min(2 * attrs["depth_radius"] + 1, depth)
    grad = node.op == "lrn_grad"
    # four lanes, each with a loop over the window (lrn_grad: a window sum per element
    # of the window), in one shader invocation: see codegen/limits.py loop_trips
    trips = 4 * window * (window + 1 if grad else 1)
    budget = loop_trips()
    if trips > budget:
        raise AttrError(f"{node.where()}: a depth_radius of {attrs['depth_radius']} over "
                        f"{depth} channels is too wide for one {node.op} kernel "
                        f"(windows up to {int((budget / 4) ** 0.5) - 1} channels wide "
                        f"for lrn_grad, {budget // 4} for lrn)")
    params = LrnParams(grad=grad, depth=depth, radius=attrs["depth_radius"],
                       bias=glsl_float(attrs["bias"]), alpha=glsl_float(attrs["alpha"]),
                       beta=float(attrs["beta"]), beta_glsl=glsl_float(attrs["beta"]),
                       two_alpha_beta=glsl_float(2 * attrs["alpha"] * attrs["beta"]))
    return make_kernel("reduce.glsl.j2", site.prefix, node.op, [node], list(site.inputs),
                       out, **reduce_tree.fields_of(params))


TABLE = (
    Strategy("reduce.fill", _fill, _emit_fill, "an empty reduction: its empty value"),
    Strategy("reduce.split_few", _split_few, _emit_tree(True, split_few=True),
             "a column reduction to a few outputs in windows, not one walk per output"),
    Strategy("reduce.texel_passes", _texel_passes, _emit_tree(True),
             "passes along 4-aligned rows read whole texels into lane partials"),
    Strategy("reduce.element_passes", _element_passes, _emit_tree(False),
             "passes whose lanes each reduce their own window"),
    Strategy("softmax.direct", _softmax_direct, _emit_softmax_direct,
             "one kernel, each element walking its slice"),
    Strategy("softmax.partials", _softmax_partials, _emit_softmax_tree(True),
             "max and sum of exp as lane partials a row, then normalize"),
    Strategy("softmax.tree", _softmax_tree, _emit_softmax_tree(False),
             "max and sum of exp as trees of passes, then normalize"),
    Strategy("scan.blocks", _scan, _emit_scan,
             "block sums, their scan, then each block's running sums"),
    Strategy("lrn.window", _lrn, lrn_kernel, "one kernel, each element its window"),
)


def reduction_kernel(node, x, out, axes, reduce_op: str, prefix: str, kernel_op=None):
    """The kernels (a tree of passes, codegen/reduce_tree.py) reducing operand x over
    axes into out (also used by sum_like)."""
    site = ReduceSite(node, (x,), out, tuple(sorted(axes)), reduce_op, prefix,
                      kernel_op or reduce_op)
    return lower_with(TABLE, site)


def lower_node(node, layouts, prefix):
    return lower_with(TABLE, site_of(node, layouts, prefix))
