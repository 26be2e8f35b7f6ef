"""Lowering matmul: a blocked kernel (templates/matmul_blocked.glsl.j2) and a stitch
(templates/matmul_stitch.glsl.j2) for float products big enough to pay for the second
launch, one kernel otherwise: templates/matmul.glsl.j2, or for 2-D float products whose
output texels are not 4 columns at one B texel (N % 4 != 0, or B transposed)
templates/matmul_lanes.glsl.j2, which reads both operands 4 k a texel (lanes_path).

Why blocked: on llvmpipe a texel fetch (~1.5 ns) costs far more than the arithmetic
it feeds, so speed is fetches per multiply-add. A fragment of the one-kernel path
computes one texel (1 row x 4 columns) and fetches 5 texels per 16 multiply-adds; a
blocked fragment computes R rows x CT column texels (4 x 2 by default, 32 results)
and fetches R + 4 CT = 12 texels per 128 (0.09 per multiply-add instead of 0.31).
Its results go to R * CT render targets (one draw; the layers of one array texture):
target j = r * CT + h holds, for every fragment, the texel of row i0 + r * S and column
texel c0 + h * NTC, where S and NTC are the slab heights (rows and column texels divided
among the targets); with `interleaved` rows, row i0 * R + r. The stitch gathers every
output texel from its layer with one fetch (no branch: llvmpipe runs both sides of a
branch, so choosing among R * CT textures would fetch from all of them), adds up K
splits where there are any, and applies a fused epilogue (bias, activation).

Packed (products of PACKED_MIN_MACS multiply-adds or more; plain convolutions whose
input is big, codegen/conv.py): a launch first copies B into a panel
(templates/matmul_pack.glsl.j2) where the 4 CT texels that one fragment reads at a step
of K are adjacent, zero past the edges, and one more A (its R texels adjacent) unless
A's rows are runs of whole texels already (row-major, K % 4 == 0: read in place, measured
level with its panel and one launch and one pass fewer); the blocked kernel
(templates/matmul_packed.glsl.j2) then streams through both in order with an add per
step and no bounds. Profiled on llvmpipe (perf, 1024x1024): unpacked, B's rows are 4 KB
apart, a new page at every k, and the first load of B's texels took ~40% of the
samples; packed, each fragment reads three sequential runs and the time is the fetch
functions' instructions. 1.5x faster at 1024 (panels ~10% of it), level at 256.

Blocked kernels read texels with textureLod (templates/lod_texel.glsl.j2): llvmpipe's
texelFetch computes the level's size and offsets lane by lane, ~25% of the kernel.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..ir.errors import TensorTooLargeError
from ..ir.types import TensorType
from . import limits, tuning as _tuning
from .common import make_kernel, operands, output_operand
from .kernel import Binding
from .layout import Layout, affine_index, layout_for, strides
from .limits import unroll_for
from .operands import Operand
from .tuning.matmul import MatmulTuning

# until conv reads tuning.matmul: the llvmpipe profile's thresholds
BLOCKED_MIN_MACS = MatmulTuning.blocked_min_macs
PACKED_MIN_MACS = MatmulTuning.packed_min_macs


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
    channels] result) or "depthwise" (a conv.PixelBlock)."""
    blocking: object = None
    mapping: str = "matmul"


def _tiles(layout) -> int:
    return -(-layout.width // 64) * -(-layout.height // 64)


def target_operands(blocking, out: Operand, max_texture_size: int, layouts: dict) -> tuple:
    """(the blocks, render target names): the blocked kernel writes its targets into
    the layers of one array texture (value `<output>#blocks`, its per-layer layout
    registered in `layouts`); the template names targets 1.. t1, t2, .."""
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


def _splits(blocking, k: int) -> int:
    """How many parts K splits into: few blocks and a long K split it among fragments
    so that llvmpipe's threads share it."""
    knobs = _knobs()
    return max(1, min(-(-knobs.split_fragments // blocking.fragments_per_split),
                      k // knobs.split_min_k, knobs.split_max))


def _dims(node, a, out):
    """(transpose_a, transpose_b, batch shape, M, N, K) of out = a @ b."""
    ta, tb = node.attrs["transpose_a"], node.attrs["transpose_b"]
    out_shape = out.layout.shape
    k = a.layout.shape[-2] if ta else a.layout.shape[-1]
    return ta, tb, out_shape[:-2], out_shape[-2], out_shape[-1], k


def blocked_matmul(node, a, b, out, prefix, layouts, extra=(), epilogue=None,
                   op="matmul", nodes=None) -> list:
    """[blocked kernel, stitch kernel] for out = a @ b (see the module docstring)."""
    nodes = nodes or [node]
    ta, tb, batch_shape, m, n, k = _dims(node, a, out)
    nb = math.prod(batch_shape)
    blocking = choose_blocking(nb, m, n)
    if ta and m % 4 == 0 and blocking.rows == 4:
        # A stored [K, M]: one texel holds 4 consecutive rows at one k
        blocking = replace(blocking, interleaved=True)
    splits = _splits(blocking, k)
    k_chunk = -(-(-(-k // splits)) // 4) * 4 if splits > 1 else k    # a multiple of 4
    blocking = replace(blocking, splits=-(-k // k_chunk))
    max_size = _max_texture_size(layouts, out)
    blocks, names = target_operands(blocking, out, max_size, layouts)
    a_batch = affine_index(batch_shape, _batch_strides(a.layout.shape, batch_shape))
    b_batch = affine_index(batch_shape, _batch_strides(b.layout.shape, batch_shape))
    a_texels = not ta and k % 4 == 0              # a row's 4 consecutive k in one texel
    if not tb and n % 4 == 0:
        b_mode = "rows"                           # B[k, 4 columns] is one texel
    elif tb and k % 4 == 0:
        b_mode = "cols"                           # B[4 k, column] is one texel
    else:
        b_mode = "scalar"
    bound = [a, b] if a is not b else [a, _alias(a)]
    main = blocked_kernel("matmul_blocked.glsl.j2", prefix, op, nodes, bound, blocks, names,
                          blocking, ta=ta, tb=tb, k=k, a_batch=a_batch, b_batch=b_batch,
                          a_texels=a_texels, b_mode=b_mode, k_chunk=k_chunk,
                          mat_steps=_knobs().mat_steps,
                          unroll=unroll_for(k_chunk // 4))
    stitch = stitch_kernel(blocks, out, prefix + "s", op, nodes, extra, epilogue,
                           mapping="matmul", blocking=blocking, aligned=n % 4 == 0)
    return [main, stitch]


def _entry_strides(operand_shape, batch_shape):
    """Strides of an operand's batch dims in matrices (not elements), per output batch
    dim (0 where broadcast)."""
    size = operand_shape[-1] * operand_shape[-2]
    return [s // size for s in _batch_strides(operand_shape, batch_shape)]


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


def packed_kernels(prefix, op, nodes, layouts, out, blocking, a_panel, a_source,
                   b_panel_, b_source, a_batch, b_batch, extra=(), epilogue=None):
    """[pack A, pack B, packed kernel, stitch] (templates/matmul_pack.glsl.j2,
    matmul_packed.glsl.j2, matmul_stitch.glsl.j2), without pack A where `a_panel` is
    None (A read in place: row-major, K % 4 == 0); None where a panel would not fit in
    a texture of a size the context is known to allow."""
    max_size = max(_max_texture_size(layouts, out), a_source.layout.width,
                   a_source.layout.height, b_source.layout.width, b_source.layout.height)
    b_layout = panel_layout(b_panel_, max_size)
    a_layout = a_panel and panel_layout(a_panel, max_size)
    if b_layout is None or (a_panel is not None and a_layout is None):
        return None
    k4 = b_panel_.k4
    splits = _splits(blocking, k4 * 4)
    q_chunk = -(-k4 // splits)
    blocking = replace(blocking, splits=-(-k4 // q_chunk))
    kernels = []
    if a_panel is None:
        pa = a_source
    else:
        layouts[f"{out.value}#panel_a"] = a_layout
        pack_a, pa = pack_kernel(a_panel, a_layout, a_source, f"{out.value}#panel_a",
                                 prefix + "a", op, nodes)
        kernels.append(pack_a)
    layouts[f"{out.value}#panel_b"] = b_layout
    pack_b, pb = pack_kernel(b_panel_, b_layout, b_source, f"{out.value}#panel_b",
                             prefix + "b", op, nodes)
    kernels.append(pack_b)
    blocks, targets = target_operands(blocking, out, max_size, layouts)
    knobs = _knobs()
    unroll = max(unroll_for(q_chunk), knobs.packed_unroll)
    # textureLodOffset for the texels after the first of a row run (their coordinates
    # worked out once): B's 4 CT texels of a step; A's R texels of a step (packed) or
    # its rows' `unroll` steps (in place). A run must not cross a texture row.
    b_offsets = knobs.packed_offsets and 4 * blocking.cols <= 8 and \
        _pow2(b_layout.width) and b_layout.width % (4 * blocking.cols) == 0
    a_offsets = knobs.packed_offsets and (
        _pow2(a_layout.width) and a_layout.width % blocking.rows == 0 and blocking.rows <= 8
        if a_panel is not None else
        unroll <= 8 and _pow2(a_source.layout.width) and
        a_source.layout.width % unroll == 0 and k4 % unroll == 0 and
        q_chunk % unroll == 0)
    main = blocked_kernel("matmul_packed.glsl.j2", prefix, op, nodes,
                          [replace(pa, sampler="x0"), replace(pb, sampler="x1")], blocks,
                          targets, blocking, k4=k4, q_chunk=q_chunk, a_batch=a_batch,
                          b_batch=b_batch, b_kind=b_panel_.kind, a_in_place=a_panel is None,
                          unroll=unroll, a_offsets=a_offsets, b_offsets=b_offsets)
    stitch = stitch_kernel(blocks, out, prefix + "s", op, nodes, extra, epilogue,
                           mapping="matmul", blocking=blocking,
                           aligned=blocking.n % 4 == 0)
    return kernels + [main, stitch]


def packed_matmul(node, a, b, out, prefix, layouts, extra=(), epilogue=None,
                  op="matmul", nodes=None):
    """The kernels of out = a @ b through packed panels (see packed_kernels), or None
    for a product too small to pay for the two packing launches."""
    nodes = nodes or [node]
    ta, tb, batch_shape, m, n, k = _dims(node, a, out)
    if out.layout.size * k < _knobs().packed_min_macs:
        return None
    blocking = choose_blocking(math.prod(batch_shape), m, n)
    k4 = -(-k // 4)
    a_entries = math.prod(a.layout.shape[:-2])
    b_entries = math.prod(b.layout.shape[:-2])
    if not ta and k % 4 == 0:
        pa = None               # A's rows are runs of whole texels already: read in place
    else:
        pa = Panel("rows", a_entries, blocking.slab, blocking.slab, blocking.rows, k4, m,
                   k, batch_stride=m * k, row_stride=1 if ta else k,
                   col_stride=m if ta else 1)
    pb = b_panel(blocking, k, n, tb, b_entries, k4)
    a_batch = affine_index(batch_shape, _entry_strides(a.layout.shape, batch_shape))
    b_batch = affine_index(batch_shape, _entry_strides(b.layout.shape, batch_shape))
    return packed_kernels(prefix, op, nodes, layouts, out, blocking, pa, a, pb, b,
                          a_batch, b_batch, extra, epilogue)


def _max_texture_size(layouts, out) -> int:
    """A texture size the context allows: the output's own sides, or GL 3.3's minimum
    (targets hold about 1/R*CT of the output each, so they fit where it fits)."""
    return max(out.layout.width, out.layout.height, 1024)


def use_blocked(a, b, out, k) -> bool:
    return (out.layout.dtype == "float32" and a.layout.dtype == "float32"
            and b.layout.dtype == "float32" and
            out.layout.size * k >= _knobs().blocked_min_macs)


def matmul_kernel(node, a, b, out, prefix, extra=(), epilogue=None, op="matmul",
                  nodes=None, layouts=None):
    """The kernels of a matmul; with an epilogue (codegen/fused.py), elementwise steps
    are applied to each result before it is written, reading the extra operands.
    Returns a list of kernels (blocked + stitch) or one kernel."""
    ta, tb, batch, m, n, k = _dims(node, a, out)
    if layouts is not None and use_blocked(a, b, out, k):
        packed = packed_matmul(node, a, b, out, prefix, layouts, extra, epilogue, op,
                               nodes)
        if packed is not None:
            return packed
        return blocked_matmul(node, a, b, out, prefix, layouts, extra, epilogue, op, nodes)
    lanes = lanes_path(ta, tb, batch, m, n, k, a, b, out)
    if lanes is not None:
        bound = [a, b] if a is not b else [a, _alias(a)]
        return make_kernel("matmul_lanes.glsl.j2", prefix, op, nodes or [node],
                           bound + list(extra), out, m_rows=m, n=n, k=k, epilogue=epilogue,
                           **lanes)
    out_shape = out.layout.shape
    a_index = affine_index(out_shape, _batch_strides(a.layout.shape, batch)
                           + [1 if ta else k, 0])
    b_index = affine_index(out_shape, _batch_strides(b.layout.shape, batch)
                           + [0, k if tb else 1])
    a_step = m if ta else 1
    b_step = 1 if tb else n
    columns_in_texels = n % 4 == 0 and not tb
    rows_in_texels = columns_in_texels and k % 4 == 0 and not ta
    # The template names the operands inputs[0] and inputs[1]; x @ x binds one texture.
    bound = [a, b] if a is not b else [a, _alias(a)]
    return make_kernel("matmul.glsl.j2", prefix, op, nodes or [node], bound + list(extra),
                       out, a_index=a_index, b_index=b_index, a_step=a_step,
                       b_step=b_step, k=k, columns_in_texels=columns_in_texels,
                       rows_in_texels=rows_in_texels, epilogue=epilogue,
                       unroll=unroll_for(k // 4 if rows_in_texels else k),
                       lod_fetch=_knobs().plain_lod_fetch and rows_in_texels and
                       a.dtype == b.dtype == "float32")


def lanes_path(ta, tb, batch, m, n, k, a, b, out) -> dict | None:
    """The matmul_lanes template's parameters for a 2-D float product it reads better
    than matmul.glsl.j2's element loop, else None: path "window" (B not transposed,
    N % 4 != 0, N >= 3: each k's 4 lanes read 4 consecutive floats of B's row) with A
    as runs (not transposed) or strided (transposed); path "runs" (B transposed, A
    not, N % 4 == 0 or N >= 3: every lane's row and column are runs along K)."""
    knobs = _knobs()
    if not knobs.lanes or math.prod(batch) != 1 or len(a.layout.shape) != 2 or \
            len(b.layout.shape) != 2 or \
            {a.dtype, b.dtype, out.layout.dtype} != {"float32"} or \
            -(-k // 4) > limits.loop_trips() // knobs.lanes_loop_share:
        return None
    if not tb and n % 4 and n >= 3:
        return dict(path="window", a_mode="strided" if ta else "runs",
                    a_aligned=k % 4 == 0)
    if tb and not ta and (n % 4 == 0 or n >= 3):
        return dict(path="runs", a_mode="runs", a_aligned=k % 4 == 0,
                    b_aligned=k % 4 == 0, two_rows=n % 4 != 0)
    return None


def lower_node(node, layouts, prefix):
    ins = operands(node, layouts)
    a, b = (ins[0], ins[0]) if len(ins) == 1 else ins
    return matmul_kernel(node, a, b, output_operand(node.outputs[0], layouts), prefix,
                         layouts=layouts)


def _alias(op):
    return Operand(sampler="x1", value=op.value, layout=op.layout, type=op.type, arg="a1")
