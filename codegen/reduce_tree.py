"""Reductions as trees of passes (templates/reduce_tree.glsl.j2).

A pass views its input as outer x R x inner and reduces windows of W elements of R
into outer x ceil(R/W) x inner, until the axis is gone (several reduced axes go
innermost first); a fragment writes one texel (four outputs, "lanes"). Kinds of pass
(Pass.mode): contiguous rows (inner == 1), 4-aligned columns (one fetch feeds all four
lanes; a first one writes neighbouring texels to render targets laid out for llvmpipe's
4 x 2 fragment blocks: column_targets, lane_blocks), other strides. Along 4-aligned rows
a combine with lane partials reads each window as one run of whole texels into four
partials (texel_pass), stepping along source rows in texture coordinates (row_run).
Windows (choose_window) and intermediate layouts (scratch_layout) follow the tuning's
reduce section (codegen/tuning/reduce.py); values between passes are "<node>:r<k>".

What a reduction folds and how its last pass finishes is its record (ir/ops/reduce.py
Reduction and Combine): mean divides the sum, argmax/argmin carry positions, logsumexp
and variance run their shift's tree first (the max, the mean). softmax / log_softmax
is the max and the sum of exp, then a kernel normalising every element, or one kernel
when small (softmax_direct); codegen/reduce.py's TABLE chooses. A kernel's template
context is a frozen dataclass (PassParams, FillParams, ...: template_context).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..ir.ops.reduce import COMBINES
from ..ir.ops.registry import get_op
from ..ir.types import TensorType
from . import tuning as _tuning
from .common import decisions, make_kernel
from .environment import glsl_float, glsl_int
from .kernel import Binding
from .layout import Layout, affine_index
from .limits import active, unroll_for
from .operands import Operand


@dataclass(frozen=True)
class Pass:
    """Reduce windows of `window` along `length` of an outer x length x inner view."""
    outer: int
    length: int
    inner: int
    window: int

    @property
    def out_length(self) -> int:
        return -(-self.length // self.window)

    @property
    def out_size(self) -> int:
        return self.outer * self.out_length * self.inner

    @property
    def mode(self) -> str:
        if self.inner == 1:
            return "contiguous"
        return "strided4" if self.inner % 4 == 0 else "strided"


def knobs(tuning=None):
    """The reduce section of `tuning` (a Tuning; None: the active one)."""
    return (_tuning.active() if tuning is None else tuning).reduce


def choose_window(outer: int, length: int, inner: int, tuning=None,
                  split_few: bool | None = None) -> int:
    """The window of a pass over outer x length x inner (see the module docstring);
    split_few: whether a column sum to a few outputs splits (None: the tuning's)."""
    t = knobs(tuning)
    split_few = t.split_few if split_few is None else split_few
    kept = outer * inner
    if length <= t.window_max and (kept >= 4 * t.min_fragments
                                   or length * kept <= t.small_work or length <= t.window_min):
        if split_few and inner > 1 and kept <= t.few_outputs and \
                length >= t.split_few_length:
            return t.split_few_window  # a few fragments would walk the whole axis alone
        return length
    window = length * kept // (4 * t.min_fragments)
    # along rows a fragment reads 4x the least window (docs/PERFORMANCE.md)
    least = t.window_min * 4 if inner == 1 else t.window_min
    window = min(t.window_max, max(least, window))
    window -= window % 4                         # whole texels along contiguous rows
    return min(window, length)


def groups_of(shape, axes) -> list:
    """[size, reduced] runs of adjacent axes of one kind (size-1 axes dropped)."""
    groups = []
    for axis, size in enumerate(shape):
        if size == 1:
            continue
        reduced = axis in axes
        if groups and groups[-1][1] == reduced:
            groups[-1][0] *= size
        else:
            groups.append([size, reduced])
    return groups


def plan(shape, axes, whole_texels: bool = False, tuning=None,
         split_few: bool | None = None) -> list:
    """[(Pass, group sizes and kinds of its output)] reducing `axes` of `shape`,
    innermost reduced run first; one pass of window 1 (a copy) when nothing is
    reduced (every reduced axis has length 1).

    whole_texels: the reduction does not care which partial result an element goes
    into (sum, prod, max, min: not argmax's first position), so a pass along a
    4-aligned row that does not finish it (see texel_pass) keeps four partials per
    window, one per lane. tuning: a Tuning (None: the active one); split_few: as
    choose_window's."""
    t = knobs(tuning)
    groups = groups_of(shape, axes)
    passes = []
    while any(reduced for _, reduced in groups):
        g = max(i for i, (_, reduced) in enumerate(groups) if reduced)
        outer = math.prod(size for size, _ in groups[:g])
        inner = math.prod(size for size, _ in groups[g + 1:])
        step = Pass(outer, groups[g][0], inner,
                    choose_window(outer, groups[g][0], inner, tuning, split_few))
        groups = [list(grp) for grp in groups]
        groups[g][0] = step.out_length
        if whole_texels and t.whole_texels and texel_pass(step) is not None:
            step = texel_pass(step)
            groups[g][0] = step.out_length * 4       # the lanes' partials, still reduced
        out_groups = [tuple(grp) for grp in groups]
        passes.append((step, out_groups))
        groups = groups_of([size for size, _ in groups],
                           {i for i, (_, reduced) in enumerate(groups) if reduced})
        # groups_of drops the finished run (length 1) and merges its neighbours
    if not passes:
        size = math.prod(shape)
        passes.append((Pass(size, 1, 1, 1), [(size, False)]))
    return passes


def texel_pass(step: Pass) -> Pass | None:
    """A pass along 4-aligned rows (inner == 1) that leaves more than one window per
    row, as windows of whole texels: the row viewed as R/4 x 4, reduced down its
    texels (strided4 with inner 4). A fragment reads the same number of texels as
    step's (whose four lanes read four windows of W/4 texels each), as one
    contiguous run of W texels into four partial results, one per lane, which the
    next pass reduces with the rest; the output is as large as step's. One run per
    fragment instead of four. None where that does not apply."""
    if step.inner != 1 or step.length % 4 or step.out_length < 2:
        return None
    return Pass(step.outer, step.length // 4, 4, step.window)


def scratch_layout(shape, dtype: str, like: Layout) -> Layout:
    """A texture for a value between passes: about scratch_rows texels tall where it
    can be, yet at least scratch_min_width wide once that leaves 4 rows (llvmpipe
    shades 4x4 blocks and splits a pass into 64x64 tiles over its threads), rows of a
    power of two texels (cheap index arithmetic), no wider or taller than `like`
    allows."""
    t = knobs()
    size = math.prod(shape)
    texels = max(1, -(-size // 4))
    cap = max(like.width, like.height, 1)
    width = 1
    while (width * t.scratch_rows < texels or width < t.scratch_min_width <= texels // 4) \
            and width < t.scratch_row_texels:
        width *= 2
    width = min(width, cap)
    return Layout(tuple(shape), dtype, width, -(-texels // width))


def _literal(value, dtype: str) -> str:
    return glsl_float(value) if dtype == "float32" else glsl_int(value)


class TreeBuilder:
    """The kernels of one node, in run order. Passes before the node's last kernel are
    named k<N>.p<i>_<node> (the last keeps the k<N>_<node> a single kernel would have);
    the values between them are <node>:r<k>, their layouts added to `layouts`."""

    def __init__(self, node, prefix: str, kernel_op: str, layouts: dict | None = None):
        self.node, self.prefix, self.kernel_op = node, prefix, kernel_op
        self.layouts = {} if layouts is None else layouts
        self.kernels: list = []
        self._values = 0

    def scratch(self, shape, dtype: str, like: Layout, lane_blocked=False) -> Operand:
        """A value between passes; lane_blocked: laid out for lane_blocks where it can."""
        name = f"{self.node.name}:r{self._values}"
        self._values += 1
        layout = scratch_layout(shape, dtype, like)
        if lane_blocked:
            layout = lane_block_layout(layout)
        self.layouts[name] = layout
        return Operand(sampler="ff_out", value=name, layout=layout,
                       type=str(TensorType(tuple(shape), dtype)))

    def add(self, template: str, inputs, out: Operand, **context) -> Operand:
        final = out.value in {v.name for v in self.node.outputs}
        prefix = self.prefix if final else f"{self.prefix}.p{len(self.kernels)}"
        self.kernels.append(make_kernel(template, prefix, self.kernel_op, [self.node],
                                        _rename(inputs), out, **context))
        return out


def bind_inputs(inputs) -> dict:
    """{value name: its operand as bound}, samplers x0, x1, ... in binding order, one
    per distinct value (a plan frees a kernel's input texture once per binding)."""
    bound = {}
    for op in inputs:
        if op.value not in bound:
            bound[op.value] = Operand(sampler=f"x{len(bound)}", value=op.value,
                                      layout=op.layout, type=op.type)
    return bound


def _rename(inputs) -> list:
    """Samplers x0, x1, ... in binding order, one per distinct value."""
    return list(bind_inputs(inputs).values())


def tree_reduce(builder: TreeBuilder, x: Operand, out: Operand, axes, combine: str,
                finish: str = "", shift: Operand | None = None,
                shift_partials: bool = False, whole_texels: bool = True,
                split_few: bool | None = None) -> Operand:
    """Passes reducing x over axes with a combine (ir/ops/reduce.py COMBINES) into out;
    the last finishes with `finish` (a Reduction's GLSL; "": the combine's). shift: one
    value per kept element that a combine or finish reading {shift} shifts elements by;
    shift_partials: x's last axis is 4 lanes of one slice (softmax_tree) and shift their
    lane partials. whole_texels, split_few: as plan's (the strategies' choices)."""
    shape = x.layout.shape
    folds = COMBINES[combine]
    steps = plan(shape, axes, folds.lane_partials and whole_texels, split_few=split_few)
    count = math.prod(shape[a] for a in axes)
    src, values, layered, layers = x, None, None, 1
    for number, (step, out_groups) in enumerate(steps):
        last = number == len(steps) - 1
        arg = bool(folds.positional)
        pass_op = folds.then if number > 0 and folds.then else combine
        targets = 1 if last or number else column_targets(step, src, pass_op)
        target = out if last else _scratch_for(builder, step, src, x, targets, arg)
        shifted = "{shift}" in COMBINES[pass_op].glsl
        finish_glsl = finish if last else ""
        bound = bind_inputs(([src] if layered is None else []) +
                            ([values] if values is not None else []) +
                            [shift] * (shifted + ("{shift}" in finish_glsl)))
        if "{shift}" in finish_glsl:   # the finish reads the shift at the output element
            finish_glsl = finish_glsl.replace("{shift}", bound[shift.value].sampler)
        emit_pass(builder, bound, target, pass_params(
            bound, target, step, pass_op, layers_of(layered),
            axis_length=shape[axes[0]] if arg and axes else 1,
            values=values and bound[values.value],
            shift=bound[shift.value] if shifted else None,
            shift_index=_kept_index(out_groups) if shifted else None,
            shift_partials=shift_partials, finish_glsl=finish_glsl, count=count,
            pass_number=number + 1, pass_count=len(steps), layers=layers, targets=targets))
        if arg and number == 0:
            values = x
        src = target
        layered, layers = (target, targets) if targets > 1 else (None, 1)
    return out


def _scratch_for(builder, step: Pass, src: Operand, x: Operand, targets: int, arg: bool):
    """The value a pass before the last writes: `targets` layers, or positions (int32)."""
    if targets > 1:
        return builder.scratch((step.out_size // targets,), src.dtype, x.layout,
                               lane_blocked=True)
    return builder.scratch((step.outer, step.out_length, step.inner),
                           "int32" if arg else x.dtype, x.layout)


def column_targets(step: Pass, src: Operand, op: str, tuning=None) -> int:
    """Render targets for a first pass down 4-aligned columns: K adjacent column texels
    per fragment (K * 16 contiguous bytes a row), or 1 where that does not apply."""
    wanted = knobs(tuning).column_targets
    if wanted < 2 or step.mode != "strided4" or src.dtype != "float32" or \
            not COMBINES[op].lane_partials or step.out_length < 2:
        return 1
    k = min(wanted, active().max_draw_buffers)
    while k > 1 and ((step.inner // 4) % k or src.layout.width % k):
        k //= 2
    return k


def lane_blocks(targets_layout: Layout | None) -> bool:
    """Whether a first pass down columns into render targets of this layout gives each
    4 x 2 block of fragments (what llvmpipe shades at once) eight consecutive groups of
    columns (the next pass reading them back from there): the eight then read one run
    of 8 K texels of each row instead of two runs of 4 K in windows far apart."""
    return targets_layout is not None and targets_layout.width % 4 == 0 and \
        targets_layout.height % 2 == 0


def lane_block_layout(layout: Layout) -> Layout:
    """layout with an even number of rows of a multiple of 4 texels (for lane_blocks),
    where that takes at most a few texels more: rows as long as the texels need over
    the next even height. Unchanged where it already is, or is tiny."""
    texels = -(-layout.size // 4)
    if lane_blocks(layout) or texels < 16 or layout.height < 2:
        return layout
    height = layout.height + layout.height % 2
    width = -(-texels // height)
    width += -width % 4
    return layout if width > layout.width else \
        dataclasses.replace(layout, width=width, height=height)


class TreeKernel:
    """What templates/reduce_tree.glsl.j2 reads of every kind of its kernel, as a kind
    without it has it (a plain base: each kind's dataclass below has some as fields),
    and the decisions it derives from them (reduce_tree.glsl.j2 reads them as
    `params`)."""
    kind = ""
    layered = None
    targets = 1
    lane_blocks = False
    lod_fetch = False
    row_run = False
    shift_partials = False
    partials = False
    positional = ""

    @property
    def main(self) -> str:
        """The kind's main: reduce_tree_<main>.glsl.j2's main()."""
        return self.kind

    @property
    def arg(self) -> bool:
        """Whether it carries positions (argmax, argmin)."""
        return self.positional != ""

    @property
    def max4(self) -> bool:
        """Whether it folds lane partials' maxima (ff_max4)."""
        return bool(self.partials or self.shift_partials)


@dataclass(frozen=True, kw_only=True)
class PassParams(TreeKernel):
    """One pass (emit_pass): a Pass's view and window, how it reads its source, the
    combine's GLSL (ir/ops/reduce.py COMBINES), and the values, shift and finish of
    the reduction around it; in the order the kernel header prints them."""
    kind: str = "pass"
    rop: str                         # the combine (op) this pass folds with
    mode: str                        # Pass.mode
    outer: int
    length: int
    inner: int
    window: int
    out_length: int
    out_size: int
    layered: Operand | None = None   # the previous pass's render targets, as ff_layers
    lod_fetch: bool = False
    row_run: str = ""                # row_run()
    lane_blocks: bool = False
    aligned: bool = False            # rows and windows multiples of 4
    init: str = ""                   # the accumulators' first value (GLSL)
    positional: str = ""
    update_glsl: str = ""
    merge_glsl: str = ""
    unroll: int = 1
    axis_length: int = 1             # the axis the candidates (values) index
    values: Operand | None = None    # argmax's values, where the source holds positions
    shift: Operand | None = None
    shift_index: object = None       # the affine map to the shift's element
    shift_partials: bool = False
    finish_glsl: str = ""
    count: int = 1                   # elements reduced into each result
    pass_number: int = 1
    pass_count: int = 1
    layers: int = 1                  # layers of the source (layered)
    targets: int = 1                 # render targets written (column_targets)

    @property
    def main(self) -> str:
        """A first pass down columns into render targets is "columns", else its mode."""
        return "columns" if self.mode == "strided4" and self.targets > 1 else self.mode

    @property
    def winner(self) -> str:
        return "largest" if self.positional == ">" else "smallest"

    @property
    def counts(self) -> bool:
        """Whether the finish divides by the count (mean, variance)."""
        return "COUNT" in self.finish_glsl

    @property
    def stepping(self) -> str:
        """How a strided4 pass steps to the next row of its window: along the rows in
        texture coordinates (row_run: "uv"), to the next 4 x 2 block of the previous
        pass's render targets ("blocks"), along their layers ("layers"), or along the
        source's texels ("texels")."""
        if self.row_run:
            return "uv"
        if self.layered is not None:
            return "blocks" if self.lane_blocks else "layers"
        return "texels"

    @property
    def step_texels(self) -> int:
        """Texels (of one layer) from a row of the window to the next (strided4)."""
        return self.inner // 4 // self.layers


@dataclass(frozen=True, kw_only=True)
class FillParams(TreeKernel):
    """An empty reduction (fill_kernels): its empty value as GLSL."""
    kind: str = "fill"
    rop: str
    values: None = None
    identity: str


@dataclass(frozen=True, kw_only=True)
class SoftmaxParams(TreeKernel):
    """softmax / log_softmax's last kernel (softmax_direct, softmax_tree)."""
    kind: str
    rop: str
    values: None = None
    log: bool
    length: int                      # the softmax axis
    inner: int                       # elements after it


@dataclass(frozen=True, kw_only=True)
class SoftmaxDirectParams(SoftmaxParams):
    """One kernel each element of which walks its slice."""
    kind: str = "softmax_direct"
    unroll: int


@dataclass(frozen=True, kw_only=True)
class NormalizeParams(SoftmaxParams):
    """Each element from its slice's max and sum; partials: those are lane partials."""
    kind: str = "normalize"
    partials: bool

    @property
    def texel_slice(self) -> bool:
        """Whether a texel's four elements lie in one slice."""
        return self.inner == 1 and self.length % 4 == 0


def fields_of(params) -> dict:
    """A params dataclass's fields in declaration order, as keyword values."""
    return {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}


def template_context(params) -> dict:
    """params as a template's context: its fields (fields_of), in the order the kernel
    header prints them (common.decisions), and params itself as `params` for the
    decisions it derives (left out of the header: params holds an operand or None)."""
    if decisions({"params": params}):
        raise TypeError(f"a {type(params).__name__} would show in the kernel header")
    return {**fields_of(params), "params": params}


def layers_of(layered: Operand | None) -> Operand | None:
    """The previous pass's array texture as a pass binds it (ff_layers)."""
    if layered is None:
        return None
    return Operand(sampler="ff_layers", value=layered.value, layout=layered.layout,
                   type=layered.type)


def pass_params(bound: dict, target: Operand, step: Pass, op: str,
                layered: Operand | None = None, **context) -> PassParams:
    """The pass reducing the first bound operand (or `layered`, as layers_of binds it),
    viewed as step's outer x length x inner, with combine op (ir/ops/reduce.py COMBINES)
    into target; context: PassParams's values, shift, finish_glsl, ...."""
    src = layered or next(iter(bound.values()))
    t = knobs()
    run = row_run(step, src, layered is None)
    folds = COMBINES[op]
    dtype = (context.get("values") or src).dtype
    targets = context.get("targets", 1)
    return PassParams(
        rop=op, mode=step.mode, outer=step.outer, length=step.length, inner=step.inner,
        window=step.window, out_length=step.out_length, out_size=step.out_size,
        layered=layered, lod_fetch=t.lod_fetch, row_run=run,
        lane_blocks=lane_blocks(layered.layout if layered is not None else
                                target.layout if targets > 1 else None),
        aligned=step.length % 4 == 0 and step.window % 4 == 0,
        init=folds.init or _literal(folds.identity(dtype), dtype),
        positional=folds.positional, update_glsl=folds.update(dtype),
        merge_glsl=folds.merge,
        unroll=max(t.row_run_unroll if run else t.min_unroll if step.window >= 16
                   else 1, unroll_for(step.window + 8)),
        **{**context, "finish_glsl": context.get("finish_glsl") or folds.out})


def emit_pass(builder: TreeBuilder, bound: dict, target: Operand,
              params: PassParams) -> Operand:
    """One pass kernel (templates/reduce_tree.glsl.j2) of `params` (pass_params)."""
    builder.add("reduce_tree.glsl.j2", list(bound.values()), target,
                **template_context(params))
    builder.kernels[-1] = _layered(builder.kernels[-1], params.layered, params.targets)
    return target


def _layered(kernel, layered: Operand | None, targets: int):
    """kernel reading the previous pass's array texture (bound first, as a
    sampler2DArray the prologue skips) and writing `targets` layers of one."""
    if layered is not None:
        kernel = dataclasses.replace(kernel, inputs=(Binding(
            layered.sampler, layered.value, layered.layout),) + kernel.inputs)
    if targets > 1:
        kernel = dataclasses.replace(kernel, output_layers=targets)
    return kernel


def row_run(step: Pass, src: Operand, plain_source: bool, tuning=None) -> str:
    """How a pass reading whole consecutive texels (strided4 with inner 4: a
    texel_pass) can step along the rows of its source (a plain 2D texture whose width
    is a power of two) in texture coordinates, exactly: "within" when every window
    lies in one row (the width a multiple of the window), "rows" when every window is
    whole rows (the window a multiple of the width); windows start at multiples of
    the window. "" otherwise (a wrap test and an int to float conversion per texel)."""
    width, window = src.layout.width, step.window
    t = knobs(tuning)
    if not (t.row_runs and t.lod_fetch and plain_source and step.mode == "strided4" and
            step.inner == 4 and width & (width - 1) == 0 and
            (step.outer == 1 or step.length % window == 0)):
        return ""
    if width % window == 0:
        return "within"
    return "rows" if window % width == 0 else ""


def _kept_index(out_groups):
    """The affine map from a pass's output element to its kept element (reduced groups
    contribute nothing)."""
    sizes = [size for size, _ in out_groups]
    kept_sizes = [size for size, reduced in out_groups if not reduced]
    kept_strides, acc = [], 1
    for size in reversed(kept_sizes):
        kept_strides.append(acc)
        acc *= size
    kept_strides.reverse()
    it = iter(kept_strides)
    return affine_index(sizes, [0 if reduced else next(it) for _, reduced in out_groups])


# --- lowerings --------------------------------------------------------------------------

def fill_kernels(node, out: Operand, op: str, prefix: str, kernel_op: str | None = None,
                 layouts: dict | None = None) -> list:
    """An empty reduction: its record's empty value everywhere."""
    builder = TreeBuilder(node, prefix, kernel_op or op, layouts)
    value = get_op(op).reduction.empty(out.dtype)
    builder.add("reduce_tree.glsl.j2", [], out, **template_context(
        FillParams(rop=op, identity=_literal(value, out.dtype))))
    return builder.kernels


def reduction_kernels(node, x: Operand, out: Operand, axes, op: str, prefix: str,
                      kernel_op: str | None = None, layouts: dict | None = None,
                      whole_texels: bool = True, split_few: bool | None = None) -> list:
    """The kernels reducing x over axes (none empty) with the reduction op (its
    record's OpDef.reduction: sum, mean, max, min, prod, argmax, argmin, logsumexp,
    variance) into out."""
    builder = TreeBuilder(node, prefix, kernel_op or op, layouts)
    reduce_into(builder, x, out, tuple(sorted(axes)), get_op(op).reduction, whole_texels,
                split_few)
    return builder.kernels


def reduce_into(builder: TreeBuilder, x: Operand, out: Operand, axes, reduction,
                whole_texels: bool = True, split_few: bool | None = None) -> Operand:
    """The passes of a Reduction record: its shift's first (into a value of the kept
    shape), then its combine's, finished in the last pass."""
    shift = None
    if reduction.shift:
        kept = tuple(d for a, d in enumerate(x.layout.shape) if a not in axes)
        shift = builder.scratch(kept, x.dtype, x.layout)
        reduce_into(builder, x, shift, axes, get_op(reduction.shift).reduction,
                    whole_texels, split_few)
    return tree_reduce(builder, x, out, axes, reduction.combine,
                       finish=reduction.finish_for(x.dtype), shift=shift,
                       whole_texels=whole_texels, split_few=split_few)


def softmax_direct(node, x: Operand, out: Operand, axis: int, prefix: str,
                   layouts: dict | None = None) -> list:
    """softmax / log_softmax as one kernel whose elements each walk their slice (small
    ones, such as a classifier's logits)."""
    builder = TreeBuilder(node, prefix, node.op, layouts)
    shape = x.layout.shape
    builder.add("reduce_tree.glsl.j2", [x], out, **template_context(SoftmaxDirectParams(
        rop=node.op, log=node.op == "log_softmax", length=shape[axis],
        inner=math.prod(shape[axis + 1:]), unroll=unroll_for(shape[axis]))))
    return builder.kernels


def softmax_tree(node, x: Operand, out: Operand, axis: int, partials: bool, prefix: str,
                 layouts: dict | None = None) -> list:
    """softmax / log_softmax along axis: its max, its sum of exp(x - max), then one
    kernel normalising every element. partials: the axis is the last and 4-aligned:
    the max and sum of each row stay four lane partials (one texel), each pass reading
    one run of texels (texel_pass), which the normalize kernel folds."""
    builder = TreeBuilder(node, prefix, node.op, layouts)
    shape = x.layout.shape
    kept = tuple(d for a, d in enumerate(shape) if a != axis)
    if partials:
        rows = math.prod(kept)
        view = (rows, shape[axis] // 4, 4)
        x_view = dataclasses.replace(x, layout=dataclasses.replace(x.layout, shape=view))
        slice_max = builder.scratch((rows, 4), "float32", x.layout)
        tree_reduce(builder, x_view, slice_max, (1,), "max")
        total = builder.scratch((rows, 4), "float32", x.layout)
        tree_reduce(builder, x_view, total, (1,), "sumexp", shift=slice_max,
                    shift_partials=True)
    else:
        slice_max = builder.scratch(kept, "float32", x.layout)
        tree_reduce(builder, x, slice_max, (axis,), "max")
        total = builder.scratch(kept, "float32", x.layout)
        tree_reduce(builder, x, total, (axis,), "sumexp", shift=slice_max)
    builder.add("reduce_tree.glsl.j2", [x, slice_max, total], out, **template_context(
        NormalizeParams(rop=node.op, log=node.op == "log_softmax", length=shape[axis],
                        inner=math.prod(shape[axis + 1:]), partials=partials)))
    return builder.kernels
