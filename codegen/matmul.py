"""Lowering matmul: the first strategy of TABLE that takes the product (codegen/strategy.py).

- matmul.packed: products of tuning.matmul.packed_min_macs multiply-adds or more, with
  packed_min_rows output rows or more where B's rows are whole texels (and
  plain convolutions whose input is big, codegen/conv.py): B, and A unless its rows are
  runs of whole texels already, copied into panels (templates/matmul_pack.glsl.j2)
  whose texels one fragment reads in order, then the blocked kernel over them
  (matmul_packed.glsl.j2) and the stitch.
- matmul.blocked: float products of blocked_min_macs or more: a fragment computes R
  rows x CT column texels (Blocking) into R * CT render targets, the layers of one
  array texture (matmul_blocked.glsl.j2): fewer fetches per multiply-add, which is
  what a product costs on llvmpipe. Target j = r * CT + h holds the texel of row
  i0 + r * S and column texel c0 + h * NTC (S, NTC: the slab heights; `interleaved`:
  row i0 * R + r). The stitch (matmul_stitch.glsl.j2) gathers each output texel from
  its layer with one fetch, adds up K splits and applies a fused epilogue.
- matmul.lanes: 2-D float products whose output texels are not 4 columns of one B
  texel (N % 4 != 0, or B transposed) read both operands 4 k a texel (matmul_lanes).
- matmul.plain: the element loop, any shape and dtype (matmul.glsl.j2).
Blocked kernels read with textureLod (lod_texel.glsl.j2); docs/PERFORMANCE.md has
what each strategy measured. `plan_blocks` decides before lowering which blocked
products stay in their render targets for readers that read them there (no stitch).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from ..ir.errors import FragflowError, TensorTooLargeError
from ..ir.types import TensorType
from . import limits, tuning as _tuning
from .common import make_kernel, operands, output_operand
from .depthwise import BlocksOperand as _BlocksOperand
from .kernel import Binding
from .layout import VIEW_OPS, Layout, affine_index, layout_for, strides
from .limits import unroll_for
from .operands import Operand
from .strategy import Site, Strategy, choose, lower_with
from .tuning.matmul import MatmulTuning


def _knobs() -> MatmulTuning:
    return _tuning.active().matmul


def _pow2(n: int) -> bool:
    return n & (n - 1) == 0


def _batch_strides(operand_shape, batch_shape):
    """Strides of an operand's batch dims, per output batch dim (0 where broadcast)."""
    own = operand_shape[:-2]
    padded = (1,) * (len(batch_shape) - len(own)) + tuple(own)
    own_strides = strides(operand_shape)[:-2]
    padded_strides = (0,) * (len(batch_shape) - len(own)) + tuple(own_strides)
    return [0 if d == 1 else s for d, s in zip(padded, padded_strides)]


def _entry_strides(operand_shape, batch_shape):
    """Strides of an operand's batch dims in matrices (not elements), per output batch
    dim (0 where broadcast)."""
    size = operand_shape[-1] * operand_shape[-2]
    return [s // size for s in _batch_strides(operand_shape, batch_shape)]


@dataclass(frozen=True)
class Blocking:
    """How a blocked kernel divides a [batch, M, N] result among fragments and render
    targets (see the module docstring)."""
    batch: int
    m: int
    n: int
    rows: int            # R: rows per fragment
    cols: int            # CT: column texels (4 columns each) per fragment
    # rows row0 * R + r (consecutive) instead of row0 + r * S (slabs): where one texel
    # holds 4 consecutive rows' values at one k (a transposed A, a filter gradient)
    interleaved: bool = False
    # K split among this many fragments per block (their partial sums at texels
    # f + s * fragments_per_split, added up by the stitch): where the blocks are too
    # few to keep llvmpipe's threads busy
    splits: int = 1

    @property
    def slab(self) -> int:              # S: rows per target
        return -(-self.m // self.rows)

    @property
    def col_texels(self) -> int:        # NT: column texels of a result row
        return -(-self.n // 4)

    @property
    def col_slab(self) -> int:          # NTC: column texels per target
        return -(-self.col_texels // self.cols)

    @property
    def fragments_per_split(self) -> int:
        return self.batch * self.slab * self.col_slab

    @property
    def fragments(self) -> int:
        return self.fragments_per_split * self.splits

    @property
    def targets(self) -> int:
        return self.rows * self.cols


def max_targets() -> int:
    """Render targets a blocked kernel may write: the tuning's max_targets, never more
    than the device's draw buffers (codegen/limits.py; ES 3.0 and WebGL2 guarantee 4)."""
    return min(_knobs().max_targets, limits.active().max_draw_buffers)


def choose_blocking(batch: int, m: int, n: int) -> Blocking:
    """4 rows x 2 column texels where the result has them; narrower results take more
    rows, shorter ones more column texels (at most max_targets() targets)."""
    nt = -(-n // 4)
    most = max_targets()
    cols = min(2, nt, most)
    rows = min(most // cols, m)
    cols = min(most // rows, nt)
    return Blocking(batch, m, n, rows, cols)


@dataclass(frozen=True)
class BlocksLayout(Layout):
    """The layout of a blocked kernel's render targets (the layers of one array
    texture) when no stitch follows: its consumers read the value from the layers
    (templates/blocks_texel.glsl.j2), `blocking` saying which layer and texel hold each
    output texel as the stitch's `mapping` does: "matmul" (a Blocking of a [pixels,
    channels] result) or "depthwise" (a conv.PixelBlock). `pending`: the producer (a
    matmul, plan_blocks) left the product as it is, its K splits' partials apart and
    its epilogue not applied: the reader adds the splits up (px_ does) and applies the
    producer's epilogue itself (codegen/norm.py)."""
    blocking: object = None
    mapping: str = "matmul"
    pending: bool = False


def _tiles(layout) -> int:
    return -(-layout.width // 64) * -(-layout.height // 64)


def target_operands(blocking, out: Operand, max_texture_size: int,
                    layouts: dict | None = None) -> tuple:
    """(the blocks, render target names): the blocked kernel writes its targets into
    the layers of one array texture (value `<output>#blocks`, its per-layer layout
    registered in `layouts` where given); the template names targets 1.. t1, t2, .."""
    ttype = TensorType((blocking.fragments * 4,), "float32")
    layout = layout_for(ttype, max_texture_size, f"{out.value}'s blocks")
    if layout.height < 4:
        # llvmpipe shades 4x4 pixel blocks: a texture 1 or 2 rows tall would leave half
        # its lanes idle; 4 rows of a quarter of the width cost the same fragments
        width = -(-blocking.fragments // 16) * 4
        layout = Layout(ttype.shape, "float32", width, -(-blocking.fragments // width))
    elif _tiles(layout) < (tiles := _knobs().min_tiles) and \
            blocking.fragments >= tiles * 64 * 4:
        # llvmpipe gives each thread whole 64x64 tiles: a squarish texture of a few
        # thousand fragments is one or two tiles; rows of min_tiles * 64 texels (at
        # least 4 tall) spread the same fragments over min_tiles tiles
        width = min(tiles * 64, -(-blocking.fragments // 4))
        layout = Layout(ttype.shape, "float32", width, -(-blocking.fragments // width))
    name = f"{out.value}#blocks"
    if layouts is not None:
        layouts[name] = layout
    blocks = Operand(sampler="ff_blocks", value=name, layout=layout, type=str(ttype))
    names = [Operand(sampler=f"t{j}", value=name, layout=layout, type=str(ttype))
             for j in range(1, blocking.targets)]
    return blocks, names


@dataclass(frozen=True)
class Panel:
    """An operand repacked for the packed kernel (templates/matmul_pack.glsl.j2): per
    batch entry, `groups` groups of `lanes` texels per step of 4 k, the texels one
    fragment reads at a step adjacent. The operand is seen as a matrix [rows, cols]
    (cols along K for kinds "rows" and "columns", along N for "k"), element (row, col)
    of entry b at b * batch_stride + row * row_stride + col * col_stride; `conv`, when
    set, is a convolution's geometry and the matrix its windows (x's strides `xs`)."""
    kind: str
    batch: int
    groups: int
    slab: int
    lanes: int
    k4: int
    rows: int
    cols: int
    batch_stride: int = 0
    row_stride: int = 0
    col_stride: int = 1
    conv: dict | None = None
    xs: tuple = ()

    @property
    def texels(self) -> int:
        return self.batch * self.groups * self.k4 * self.lanes

    @property
    def fast(self) -> bool:
        """Four consecutive elements are one aligned texel of the operand."""
        if self.conv is not None:
            return self.conv["C"] % 4 == 0
        return self.col_stride == 1 and self.cols % 4 == 0


def panel_layout(panel: Panel, max_size: int) -> Layout | None:
    """The panel's texture layout, or None where it would not fit in one texture."""
    try:
        return layout_for(TensorType((panel.texels * 4,), "float32"), max_size)
    except TensorTooLargeError:
        return None


def pack_kernel(panel: Panel, layout: Layout, source, name: str, prefix, op, nodes):
    """(kernel, operand): the kernel writing `panel` (value `name`) from operand
    `source`, and the panel as an input of the packed kernel."""
    out = Operand(sampler="ff_out", value=name, layout=layout,
                  type=str(TensorType((panel.texels * 4,), "float32")))
    kernel = make_kernel("matmul_pack.glsl.j2", prefix, op + "_pack", nodes, [source],
                         out, panel=panel)
    return kernel, out


def blocked_kernel(template, prefix, op, nodes, inputs, blocks, names, blocking, **context):
    """A blocked kernel writing blocking.targets render targets (layers of `blocks`)."""
    kernel = make_kernel(template, prefix, op, nodes, inputs, blocks, blocking=blocking,
                         extra_outputs=names, **context)
    return replace(kernel, output_layers=blocking.targets)


def stitch_kernel(blocks, out, prefix, op, nodes, extra=(), epilogue=None, **context):
    """The kernel that gathers each output texel from its target (and applies the
    epilogue); `context` tells the template how the blocks map (matmul, depthwise)."""
    kernel = make_kernel("matmul_stitch.glsl.j2", prefix, op + "_stitch", nodes,
                         list(extra), out, blocks=blocks, epilogue=epilogue,
                         epilogue_vec4=True, **context)
    return replace(kernel, inputs=(Binding(blocks.sampler, blocks.value, blocks.layout),)
                   + kernel.inputs)


def _max_texture_size(layouts, out) -> int:
    """A texture size the context allows: the output's own sides, or GL 3.3's minimum
    (targets hold about 1/R*CT of the output each, so they fit where it fits)."""
    return max(out.layout.width, out.layout.height, 1024)


def _splits(blocking, k: int, knobs: MatmulTuning) -> int:
    """How many parts K splits into: few blocks and a long K split it among fragments
    so that llvmpipe's threads share it."""
    return max(1, min(-(-knobs.split_fragments // blocking.fragments_per_split),
                      k // knobs.split_min_k, knobs.split_max))


def b_panel(blocking, k, n, tb, batch, k4, batch_stride=None) -> Panel:
    """B's panel: 4 k of one column a texel ("columns") where B is stored transposed
    or its rows are not whole texels, else 4 columns at one k ("k"), one fetch each
    where the operand's texels allow."""
    common = dict(batch=batch, groups=blocking.col_slab, slab=blocking.col_slab,
                  lanes=4 * blocking.cols, k4=k4,
                  batch_stride=k * n if batch_stride is None else batch_stride)
    if tb or n % 4 or _knobs().packed_b_columns:
        return Panel("columns", rows=n, cols=k, row_stride=k if tb else 1,
                     col_stride=1 if tb else n, **common)
    return Panel("k", rows=k, cols=n, row_stride=n, col_stride=1, **common)


# -- the product and its site ------------------------------------------------------------
@dataclass(frozen=True)
class Product:
    """out = a @ b as the strategies see it: operands, transposes, the output's batch
    shape, M, N and K."""
    a: Operand
    b: Operand
    out: Operand
    ta: bool
    tb: bool
    batch: tuple
    m: int
    n: int
    k: int

    # A (not transposed) or B (transposed) stored [..., L, H, K] where the product's
    # last batch dim is H and its rows (columns) are L: attention's q and k before the
    # head split's transpose (codegen/attention.py). Only blocked and plain take these.
    a_heads: bool = False
    b_heads: bool = False
    # ... and within those, a column slice (start, H, K) of a [..., L, W] operand (a
    # merged q, k, v projection: ir/ops/fused.py q_columns)
    a_columns: tuple = ()
    b_columns: tuple = ()

    @classmethod
    def of(cls, node, a, b, out) -> Product:
        ta, tb = node.attrs["transpose_a"], node.attrs["transpose_b"]
        shape = out.layout.shape
        a_columns = tuple(node.attrs.get("a_columns", ()))
        k = a_columns[2] if a_columns else a.layout.shape[-2] if ta else a.layout.shape[-1]
        return cls(a, b, out, ta, tb, tuple(shape[:-2]), shape[-2], shape[-1], k,
                   node.attrs.get("a_heads", False), node.attrs.get("b_heads", False),
                   a_columns, tuple(node.attrs.get("b_columns", ())))

    @property
    def heads(self) -> bool:
        return self.a_heads or self.b_heads

    def _strides(self, operand, heads, columns=()):
        """The operand's element strides per batch dim, and of its rows (A) or columns
        (B transposed): K unless stored [..., L, H, K] (or as columns of [..., L, W])."""
        if columns:
            st = strides(operand.layout.shape)       # [..., L, W]
            return list(st[:-2]) + [columns[2]], st[-2]
        if not heads:
            return _batch_strides(operand.layout.shape, self.batch), self.k
        st = strides(operand.layout.shape)           # [..., L, H, K]
        return list(st[:-3]) + [st[-2]], st[-3]

    def a_strides(self):
        return self._strides(self.a, self.a_heads, self.a_columns)

    def b_strides(self):
        return self._strides(self.b, self.b_heads, self.b_columns)

    def whole_texels(self, side: str) -> bool:
        """Whether operand `side` ("a" or "b"), where a column slice, has rows starting
        on texels (its start and row stride multiples of 4): the blocked kernel then
        reads 4 k a texel."""
        operand, columns = (self.a, self.a_columns) if side == "a" else \
            (self.b, self.b_columns)
        return not columns or (columns[0] % 4 == 0 and operand.layout.shape[-1] % 4 == 0)

    @property
    def a_offset(self) -> int:
        """Where A's first element is in its texture (a column slice's start)."""
        return self.a_columns[0] if self.a_columns else 0

    @property
    def b_offset(self) -> int:
        return self.b_columns[0] if self.b_columns else 0

    @property
    def macs(self) -> int:
        return self.out.layout.size * self.k

    @property
    def bound(self) -> list:
        """The operands as the templates name them (inputs[0], inputs[1]); x @ x binds
        one texture under both names."""
        return [self.a, self.b] if self.a is not self.b else [self.a, _alias(self.a)]

    def batch_index(self, operand, entries: bool = False, side: str = ""):
        """The operand's batch offset per output batch entry: in elements, or with
        `entries` in matrices. side "a" or "b" says which where A is B (q and k
        columns of one merged projection)."""
        is_a = side == "a" if side else operand is self.a
        if not entries and is_a and self.a_heads:
            return affine_index(self.batch, self.a_strides()[0], self.a_offset)
        if not entries and not is_a and self.b_heads:
            return affine_index(self.batch, self.b_strides()[0], self.b_offset)
        rule = _entry_strides if entries else _batch_strides
        return affine_index(self.batch, rule(operand.layout.shape, self.batch))


@dataclass(frozen=True)
class MatmulSite(Site):
    """A matmul (or fused_matmul) being lowered, with its product."""
    product: Product | None = None


def matmul_site(node, a, b, out, prefix, extra=(), epilogue=None, op="matmul",
                nodes=None, layouts=None) -> MatmulSite:
    return MatmulSite(node, layouts or {}, prefix, tuple(extra), epilogue, op,
                      tuple(nodes) if nodes else None, product=Product.of(node, a, b, out))


def site_of(node, layouts, prefix) -> MatmulSite:
    """The site of a matmul node (its operands and output from `layouts`)."""
    ins = operands(node, layouts)
    a, b = (ins[0], ins[0]) if len(ins) == 1 else ins
    return matmul_site(node, a, b, output_operand(node.outputs[0], layouts), prefix,
                       layouts=layouts)


def _alias(op):
    return Operand(sampler="x1", value=op.value, layout=op.layout, type=op.type, arg="a1")


def use_blocked(a, b, out, k, knobs: MatmulTuning | None = None) -> bool:
    """Float32 products of blocked_min_macs multiply-adds (outputs x k) or more."""
    knobs = knobs or _knobs()
    return (out.layout.dtype == "float32" and a.layout.dtype == "float32"
            and b.layout.dtype == "float32" and out.layout.size * k >= knobs.blocked_min_macs)


# -- matmul.packed -----------------------------------------------------------------------
@dataclass(frozen=True)
class PackedPlan:
    """The packed kernels of a product (packed_plan): its panels (A's None: read in
    place) and their layouts, the blocking with its K splits, the loop's chunk of K
    texels, unroll and which runs read with offsets."""
    prefix: str
    op: str
    nodes: tuple
    out: Operand
    blocking: Blocking
    a_panel: Panel | None
    a_layout: Layout | None
    a_source: Operand
    b_panel: Panel
    b_layout: Layout
    b_source: Operand
    a_batch: Any
    b_batch: Any
    q_chunk: int
    unroll: int
    a_offsets: bool
    b_offsets: bool
    max_size: int
    extra: tuple = ()
    epilogue: Any = None
    targets: Any = None         # a pending BlocksLayout: no stitch (plan_blocks)


def _offsets(blocking, b_layout, a_panel, a_layout, a_source, unroll, k4, q_chunk,
             knobs) -> tuple:
    """(a_offsets, b_offsets): textureLodOffset for the texels after the first of a
    row run (their coordinates worked out once): B's 4 CT texels of a step; A's R
    texels of a step (packed) or its rows' `unroll` steps (in place). A run must not
    cross a texture row."""
    b_offsets = knobs.packed_offsets and 4 * blocking.cols <= 8 and \
        _pow2(b_layout.width) and b_layout.width % (4 * blocking.cols) == 0
    a_offsets = knobs.packed_offsets and (
        _pow2(a_layout.width) and a_layout.width % blocking.rows == 0 and blocking.rows <= 8
        if a_panel is not None else
        unroll <= 8 and _pow2(a_source.layout.width) and
        a_source.layout.width % unroll == 0 and k4 % unroll == 0 and
        q_chunk % unroll == 0)
    return a_offsets, b_offsets


def packed_plan(prefix, op, nodes, out, blocking, a_panel, a_source, b_panel_, b_source,
                a_batch, b_batch, extra=(), epilogue=None) -> PackedPlan | None:
    """The plan of the packed kernels, None where a panel would not fit in a texture of
    a size the context is known to allow."""
    max_size = max(_max_texture_size(None, out), a_source.layout.width,
                   a_source.layout.height, b_source.layout.width, b_source.layout.height)
    b_layout = panel_layout(b_panel_, max_size)
    a_layout = a_panel and panel_layout(a_panel, max_size)
    if b_layout is None or (a_panel is not None and a_layout is None):
        return None
    knobs = _knobs()
    k4 = b_panel_.k4
    q_chunk = -(-k4 // _splits(blocking, k4 * 4, knobs))
    blocking = replace(blocking, splits=-(-k4 // q_chunk))
    unroll = max(unroll_for(q_chunk), knobs.packed_unroll)
    a_offsets, b_offsets = _offsets(blocking, b_layout, a_panel, a_layout, a_source,
                                    unroll, k4, q_chunk, knobs)
    return PackedPlan(prefix, op, tuple(nodes), out, blocking, a_panel, a_layout, a_source,
                      b_panel_, b_layout, b_source, a_batch, b_batch, q_chunk, unroll,
                      a_offsets, b_offsets, max_size, tuple(extra), epilogue)


def _pack(plan: PackedPlan, side: str, panel, layout, source, layouts) -> tuple:
    """(kernel, operand) packing operand `side` ("a" or "b") into its panel."""
    name = f"{plan.out.value}#panel_{side}"
    if layouts is not None:
        layouts[name] = layout
    return pack_kernel(panel, layout, source, name, plan.prefix + side, plan.op,
                       list(plan.nodes))


def emit_packed(plan: PackedPlan, layouts: dict | None = None) -> list:
    """[pack A, pack B, packed kernel, stitch] (templates/matmul_pack.glsl.j2,
    matmul_packed.glsl.j2, matmul_stitch.glsl.j2), without pack A where A is read in
    place; the panels' and targets' layouts registered in `layouts` where given."""
    kernels, pa = [], plan.a_source
    if plan.a_panel is not None:
        pack_a, pa = _pack(plan, "a", plan.a_panel, plan.a_layout, plan.a_source, layouts)
        kernels.append(pack_a)
    pack_b, pb = _pack(plan, "b", plan.b_panel, plan.b_layout, plan.b_source, layouts)
    kernels.append(pack_b)
    blocking, nodes = plan.blocking, list(plan.nodes)
    blocks, targets = _on_targets(target_operands(blocking, plan.out, plan.max_size,
                                                  layouts), plan.targets)
    main = blocked_kernel("matmul_packed.glsl.j2", plan.prefix, plan.op, nodes,
                          [replace(pa, sampler="x0"), replace(pb, sampler="x1")], blocks,
                          targets, blocking, k4=plan.b_panel.k4, q_chunk=plan.q_chunk,
                          a_batch=plan.a_batch, b_batch=plan.b_batch,
                          b_kind=plan.b_panel.kind, a_in_place=plan.a_panel is None,
                          unroll=plan.unroll, a_offsets=plan.a_offsets,
                          b_offsets=plan.b_offsets)
    if plan.targets is not None:
        return kernels + [main]         # its readers read the targets (plan_blocks)
    stitch = stitch_kernel(blocks, plan.out, plan.prefix + "s", plan.op, nodes, plan.extra,
                           plan.epilogue, mapping="matmul", blocking=blocking,
                           aligned=blocking.n % 4 == 0)
    return kernels + [main, stitch]


def packed_kernels(prefix, op, nodes, layouts, out, blocking, a_panel, a_source,
                   b_panel_, b_source, a_batch, b_batch, extra=(), epilogue=None):
    """emit_packed of packed_plan (codegen/conv.py's im2col path), or None where a
    panel would not fit."""
    plan = packed_plan(prefix, op, nodes, out, blocking, a_panel, a_source, b_panel_,
                       b_source, a_batch, b_batch, extra, epilogue)
    return None if plan is None else emit_packed(plan, layouts)


def _packed(site: MatmulSite, facts, tuning) -> PackedPlan | None:
    if site.product.heads:
        return None
    p = site.product
    if not use_blocked(p.a, p.b, p.out, p.k, tuning.matmul) or \
            p.macs < tuning.matmul.packed_min_macs:
        return None
    b_whole_texels = (p.k if p.tb else p.n) % 4 == 0
    if b_whole_texels and math.prod(p.batch) * p.m < tuning.matmul.packed_min_rows:
        return None             # too few rows to pay for B's panel (tuning.matmul)
    blocking = choose_blocking(math.prod(p.batch), p.m, p.n)
    k4 = -(-p.k // 4)
    if not p.ta and p.k % 4 == 0:
        pa = None               # A's rows are runs of whole texels already: read in place
    else:
        pa = Panel("rows", math.prod(p.a.layout.shape[:-2]), blocking.slab, blocking.slab,
                   blocking.rows, k4, p.m, p.k, batch_stride=p.m * p.k,
                   row_stride=1 if p.ta else p.k, col_stride=p.m if p.ta else 1)
    pb = b_panel(blocking, p.k, p.n, p.tb, math.prod(p.b.layout.shape[:-2]), k4)
    plan = packed_plan(site.prefix, site.op, site.named_nodes, p.out, blocking, pa, p.a,
                       pb, p.b, p.batch_index(p.a, True), p.batch_index(p.b, True),
                       site.extra, site.epilogue)
    return plan and replace(plan, targets=_planned(facts, p.out, plan.blocking))


# -- matmul.blocked ----------------------------------------------------------------------
@dataclass(frozen=True)
class BlockedParams:
    """The blocked kernel's choices: the blocking (its K splits), the chunk of K a
    split sums, how A's and B's texels hold the operands, the loop."""
    site: MatmulSite
    blocking: Blocking
    k_chunk: int
    a_texels: bool              # a row's 4 consecutive k in one texel
    b_mode: str                 # "rows": B[k, 4 columns] a texel; "cols": B[4 k, column]
    mat_steps: bool
    unroll: int
    targets: Any = None         # a BlocksLayout: no stitch (plan_blocks)
    a_blocks: Any = None        # A's producer's BlocksLayout, where A stays in its targets


def _blocked(site: MatmulSite, facts, tuning) -> BlockedParams | None:
    p = site.product
    if not use_blocked(p.a, p.b, p.out, p.k, tuning.matmul) or \
            p.heads and (p.ta or not p.tb and p.b_heads):
        return None
    blocking = choose_blocking(math.prod(p.batch), p.m, p.n)
    if p.ta and p.m % 4 == 0 and blocking.rows == 4:
        # A stored [K, M]: one texel holds 4 consecutive rows at one k
        blocking = replace(blocking, interleaved=True)
    splits = _splits(blocking, p.k, tuning.matmul)
    k_chunk = -(-(-(-p.k // splits)) // 4) * 4 if splits > 1 else p.k    # a multiple of 4
    blocking = replace(blocking, splits=-(-p.k // k_chunk))
    if not p.tb and p.n % 4 == 0:
        b_mode = "rows"
    elif p.tb and p.k % 4 == 0 and p.whole_texels("b"):
        b_mode = "cols"
    else:
        b_mode = "scalar"
    a_texels = not p.ta and p.k % 4 == 0 and p.whole_texels("a")
    return BlockedParams(site, blocking, k_chunk, a_texels, b_mode,
                         tuning.matmul.mat_steps, unroll_for(k_chunk // 4),
                         _planned(facts, p.out, blocking), _a_blocks(facts, p))


def blocked_main(params: BlockedParams, blocks, names, bound=None, **extra):
    """The blocked kernel alone (matmul_blocked.glsl.j2), writing the layers of
    `blocks`: emit_blocked's first kernel (`bound`, `extra`: its A read from another
    matmul's targets, its epilogue where no stitch follows), and
    codegen/attention.py's scores, which its walk reads from the targets without a
    stitch."""
    site, p, blocking = params.site, params.site.product, params.blocking
    return blocked_kernel("matmul_blocked.glsl.j2", site.prefix, site.op,
                          site.named_nodes, p.bound if bound is None else bound,
                          blocks, names, blocking, ta=p.ta, tb=p.tb, k=p.k,
                          a_batch=p.batch_index(p.a, side="a"),
                          b_batch=p.batch_index(p.b, side="b"),
                          a_texels=params.a_texels, b_mode=params.b_mode,
                          k_chunk=params.k_chunk, mat_steps=params.mat_steps,
                          unroll=params.unroll, a_row=p.a_strides()[1],
                          b_col=p.b_strides()[1], **extra)


def emit_blocked(params: BlockedParams) -> list:
    """[blocked kernel, stitch] (matmul_blocked.glsl.j2, matmul_stitch.glsl.j2)."""
    site, p, blocking = params.site, params.site.product, params.blocking
    nodes = site.named_nodes
    blocks, names = _on_targets(target_operands(blocking, p.out,
                                                _max_texture_size(None, p.out)),
                                params.targets)
    bound, applied = list(p.bound), params.targets is not None and not params.targets.pending
    if params.a_blocks is not None:
        a = bound[0]
        root = _blocks_root(site.node.inputs[0]).name
        bound[0] = _BlocksOperand(sampler=a.sampler, value=f"{root}#blocks",
                                  layout=params.a_blocks, type=a.type, arg=a.arg)
    if applied:             # no stitch, readers that want the value: the epilogue here
        bound += list(site.extra)
    main = blocked_main(params, blocks, names, bound,
                        a_blocks=params.a_blocks and params.a_blocks.blocking,
                        epilogue=site.epilogue if applied else None,
                        epilogue_vec4=True, result=p.out)
    if params.targets is not None:
        return [main]                   # its readers read the targets (plan_blocks)
    stitch = stitch_kernel(blocks, p.out, site.prefix + "s", site.op, nodes, site.extra,
                           site.epilogue, mapping="matmul", blocking=blocking,
                           aligned=p.n % 4 == 0)
    return [main, stitch]


# -- matmul.lanes ------------------------------------------------------------------------
@dataclass(frozen=True)
class Lanes:
    """The matmul_lanes template's choices: path "window" (B not transposed, N % 4 !=
    0, N >= 3: each k's 4 lanes read 4 consecutive floats of B's row) with A as runs
    (not transposed) or strided (transposed); path "runs" (B transposed, A not, N % 4
    == 0 or N >= 3: every lane's row and column are runs along K)."""
    path: str
    a_mode: str
    a_aligned: bool
    b_aligned: bool | None = None       # path "runs" only
    two_rows: bool | None = None        # path "runs" only

    def context(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}


def lanes_path(ta, tb, batch, m, n, k, a, b, out, knobs: MatmulTuning | None = None):
    """The Lanes of a 2-D float product the lanes kernel reads better than the
    element loop, whose loop stays within its share of the loop budget; else None."""
    knobs = knobs or _knobs()
    if not knobs.lanes or math.prod(batch) != 1 or len(a.layout.shape) != 2 or \
            len(b.layout.shape) != 2 or \
            {a.dtype, b.dtype, out.layout.dtype} != {"float32"} or \
            -(-k // 4) > limits.loop_trips() // knobs.lanes_loop_share:
        return None
    if not tb and n % 4 and n >= 3:
        return Lanes("window", "strided" if ta else "runs", k % 4 == 0)
    if tb and not ta and (n % 4 == 0 or n >= 3):
        return Lanes("runs", "runs", k % 4 == 0, b_aligned=k % 4 == 0, two_rows=n % 4 != 0)
    return None


@dataclass(frozen=True)
class LanesParams:
    site: MatmulSite
    lanes: Lanes


def _lanes(site: MatmulSite, facts, tuning) -> LanesParams | None:
    if site.product.heads:
        return None
    p = site.product
    lanes = lanes_path(p.ta, p.tb, p.batch, p.m, p.n, p.k, p.a, p.b, p.out, tuning.matmul)
    return None if lanes is None else LanesParams(site, lanes)


def emit_lanes(params: LanesParams):
    site, p = params.site, params.site.product
    return make_kernel("matmul_lanes.glsl.j2", site.prefix, site.op, site.named_nodes,
                       p.bound + list(site.extra), p.out, m_rows=p.m, n=p.n, k=p.k,
                       epilogue=site.epilogue, **params.lanes.context())


# -- matmul.plain ------------------------------------------------------------------------
@dataclass(frozen=True)
class PlainParams:
    """The element loop's choices: where output element i's row of A and column of B
    start and their steps along K; whether B's (and A's) texels hold 4 outputs' (4 k's)
    values; its unroll and whether it reads with textureLod."""
    site: MatmulSite
    a_index: Any
    b_index: Any
    a_step: int
    b_step: int
    columns_in_texels: bool
    rows_in_texels: bool
    unroll: int
    lod_fetch: bool


def _plain(site: MatmulSite, facts, tuning) -> PlainParams:
    p = site.product
    shape = p.out.layout.shape
    (a_batch, a_row), (b_batch, b_col) = p.a_strides(), p.b_strides()
    a_index = affine_index(shape, a_batch + [1 if p.ta else a_row, 0], p.a_offset)
    b_index = affine_index(shape, b_batch + [0, b_col if p.tb else 1], p.b_offset)
    columns = p.n % 4 == 0 and not p.tb
    rows = columns and p.k % 4 == 0 and not p.ta
    return PlainParams(site, a_index, b_index, p.m if p.ta else 1, 1 if p.tb else p.n,
                       columns, rows, unroll_for(p.k // 4 if rows else p.k),
                       tuning.matmul.plain_lod_fetch and rows and
                       p.a.dtype == p.b.dtype == "float32")


def emit_plain(params: PlainParams):
    site, p = params.site, params.site.product
    return make_kernel("matmul.glsl.j2", site.prefix, site.op, site.named_nodes,
                       p.bound + list(site.extra), p.out, a_index=params.a_index,
                       b_index=params.b_index, a_step=params.a_step, b_step=params.b_step,
                       k=p.k, columns_in_texels=params.columns_in_texels,
                       rows_in_texels=params.rows_in_texels, epilogue=site.epilogue,
                       unroll=params.unroll, lod_fetch=params.lod_fetch)


TABLE = (
    Strategy("matmul.packed", _packed, emit_packed,
             "operands packed into panels read in order, then blocked + stitch"),
    Strategy("matmul.blocked", _blocked, emit_blocked,
             "R x CT outputs a fragment into R * CT render targets, then a stitch"),
    Strategy("matmul.lanes", _lanes, emit_lanes,
             "one kernel reading both operands 4 k a texel (N % 4 != 0, B transposed)"),
    Strategy("matmul.plain", _plain, emit_plain, "one kernel, the element loop"),
)


# -- results left in the render targets (no stitch) ----------------------------------------

def plan_blocks(graph, facts, limits, tuning) -> dict:
    """{value: BlocksLayout} for the matmuls that leave their result in their render
    targets, no stitch (codegen/lower.py PLANNERS), in graph order: a blocked (or
    packed) matmul read only by LayerNorms as their x where the Tuning's
    `matmul.norm_reads_blocks` is on (codegen/norm.py reads_blocks), its layout
    `pending` (the norm's kernels add up its K splits and apply its epilogue); a
    blocked one, K not split, read only by blocked matmuls as their A where
    `matmul.matmul_reads_blocks` is on (_reads_a_blocks), its epilogue applied by its
    own kernel; likewise one, K not split, read only by fused_attention kernels as
    their q, k and v (a merged projection's columns; GPT-2's through the Gemm's
    reshapes) where `matmul.attention_reads_blocks` is on (codegen/attention.py
    reads_blocks)."""
    from . import attention, norm  # both read this module (and norm codegen/fused.py)
    knobs = tuning.matmul
    blocks: dict = {}
    for node in graph.nodes:
        if node.op not in ("matmul", "fused_matmul"):
            continue
        out = node.outputs[0]
        if not out.type.is_static or len(out.shape) < 2 or out.shape[-1] % 4:
            continue
        so_far = replace(facts, blocks=MappingProxyType({**facts.blocks, **blocks}))
        pending = knobs.norm_reads_blocks and facts.read_only_by(
            out, lambda n, v: norm.reads_blocks(n, v, limits, tuning))
        views = _row_views(out, facts)
        applied = not pending and knobs.matmul_reads_blocks and views is not None and \
            all(facts.read_only_by(v, lambda n, v_, s=so_far: n.op in VIEW_OPS or
                                   _reads_a_blocks(n, v_, s, limits, tuning))
                for v in views)
        if not (pending or applied) and knobs.attention_reads_blocks and \
                views is not None and \
                all(facts.read_only_by(v, lambda n, v_, s=so_far: n.op in VIEW_OPS or
                                       attention.reads_blocks(n, v_, s, limits, tuning))
                    for v in views):
            applied = True
        if not (pending or applied):
            continue
        chosen = _choice(node, so_far, limits, tuning)
        if chosen is None:
            continue
        strategy, params, site = chosen
        if strategy.name == "matmul.packed" and pending:
            blocking, size = params.blocking, params.max_size
        elif strategy.name == "matmul.blocked":
            blocking, size = params.blocking, _max_texture_size(None, site.product.out)
        else:
            continue
        if blocking.interleaved or applied and (
                blocking.splits > 1 or
                len(node.inputs) > limits.max_texture_units):
            continue        # the stitch adds K splits; the epilogue's operands bound here
        layout = target_operands(blocking, site.product.out, size)[0].layout
        view = BlocksLayout(layout.shape, "float32", layout.width, layout.height,
                            blocking=blocking, pending=pending)
        # a view of the result that keeps its rows (a reshape): its readers read the
        # same targets (their kernels bind the result's, _blocks_root)
        blocks.update({v.name: view for v in (views if applied else [out])})
    return blocks


def _row_views(value, facts):
    """[value, then the views of it (through chains) that keep its rows: same last
    dim], or None where a view of it changes its rows or is fetched."""
    found, todo = [value], [value]
    while todo:
        v = todo.pop()
        for reader in facts.readers_of(v):
            if reader.op not in VIEW_OPS:
                continue
            w = reader.outputs[0]
            if w.name in facts.fetched or not w.type.is_static or \
                    w.shape[-1:] != value.shape[-1:]:
                return None
            found.append(w)
            todo.append(w)
    return found


def _blocks_root(value):
    """The value a chain of views shows: whose producer wrote the targets."""
    while value.node.op in VIEW_OPS:
        value = value.node.inputs[0]
    return value


def _choice(node, facts, limits, tuning):
    """(strategy, params, site) of TABLE's choice for matmul `node`, or None where
    lowering it would fail (it reports that)."""
    try:
        layouts = {v.name: layout_for(v.type, limits.max_texture_size)
                   for v in tuple(node.inputs) + tuple(node.outputs)}
        ins = {b.value: b for b in operands(node, layouts)}
        site = matmul_site(node, ins[node.inputs[0].name], ins[node.inputs[1].name],
                           output_operand(node.outputs[0], layouts), "", layouts=layouts)
        return choose(TABLE, site, facts, tuning) + (site,)
    except FragflowError:
        return None


def _reads_a_blocks(node, value, facts, limits, tuning) -> bool:
    """Whether graph node `node` is a matmul that reads `value` as its A (and nothing
    else of it), not transposed, a batch of one, and runs matmul.blocked: its kernel
    reads A's texels from the render targets of the blocked matmul computing it
    (templates/matmul_blocked.glsl.j2 a_blocks), with their epilogue applied."""
    if node.op not in ("matmul", "fused_matmul") or node.inputs[0] is not value or \
            any(v is value for v in node.inputs[1:]) or node.attrs["transpose_a"] or \
            node.attrs.get("a_heads") or node.attrs.get("b_heads") or \
            not node.outputs[0].type.is_static or \
            math.prod(node.outputs[0].shape[:-2]) != 1 or math.prod(value.shape[:-2]) != 1:
        return False
    chosen = _choice(node, facts, limits, tuning)
    return chosen is not None and chosen[0].name == "matmul.blocked"


def _a_blocks(facts, p: Product):
    """A's producer's BlocksLayout where it left A in its targets, epilogue applied."""
    view = facts.blocks.get(p.a.value)
    if view is None or getattr(view, "pending", True) or view.mapping != "matmul":
        return None
    return view


def _planned(facts, out: Operand, blocking):
    """The BlocksLayout plan_blocks chose for this product's result, if any."""
    view = facts.blocks.get(out.value)
    if view is None:
        return None
    if view.blocking != blocking:
        raise FragflowError(f"{out.value}: planned to be left in render targets blocked "
                            f"as {view.blocking}, lowered as {blocking} "
                            f"(codegen/matmul.py plan_blocks)")
    return view


def _on_targets(blocks_names, targets) -> tuple:
    """(blocks, names) of target_operands, on `targets` (a BlocksLayout) where the
    result stays there."""
    blocks, names = blocks_names
    if targets is None:
        return blocks, names
    return replace(blocks, layout=targets), [replace(n, layout=targets) for n in names]


def matmul_kernel(node, a, b, out, prefix, extra=(), epilogue=None, op="matmul",
                  nodes=None, layouts=None):
    """The kernels of out = a @ b by the first strategy of TABLE that takes it; with
    an epilogue (codegen/fused.py), elementwise steps are applied to each result before
    it is written, reading the extra operands. One kernel or a list."""
    return lower_with(TABLE, matmul_site(node, a, b, out, prefix, extra, epilogue, op,
                                         nodes, layouts))


def lower_node(node, layouts, prefix):
    return lower_with(TABLE, site_of(node, layouts, prefix))
