"""Lowering of the conv op family to templates/conv.glsl.j2.

Python decides here: the op's kind, its window geometry (padding resolved to numbers),
which path the template takes, and how far to unroll the innermost loop so that a
fragment stays under llvmpipe's 65535 loop iterations (see codegen/reduce.py).

Paths of the sums of products (a fragment computes one RGBA texel = 4 outputs):
- conv: vec4 when the output's channels come in fours (C_out % 4 == 0; depthwise:
  multiplier % 4 == 0, or multiplier 1 and C % 4 == 0): the texel is 4 channels of one
  pixel and the filter is read a texel at a time; the input too when C % 4 == 0.
- backprop_filter: vec4 when the filter's last axis % 4 == 0 (dy read a texel at a time).
- otherwise scalar lanes: four outputs, each with its own pixel, in one shared loop.

Float conv2d with COUT % 4 == 0 that is small, or sums few products per output
(MobileNet's stem and first pointwise layers), runs as the direct kernel
(templates/conv_direct.glsl.j2, see ConvTuning.direct_max_depth): one fragment per output texel,
the fused epilogue inside, no stitch.

Big enough 2D float ones (see blocked_conv) run as a blocked kernel plus the stitch of
codegen/matmul.py instead, each fragment computing a block of outputs into several
render targets: conv2d as the matmul of its windows with the filter (4 pixels x 8
output channels), depthwise as 4 channels of 2 x 4 adjacent pixels (each input texel of
their footprint read once), conv2d_backprop_filter as the transposed windows times dy
(4 input channels x 8 output channels, the batch split among fragments when the filter
is small). Stride-1 input gradients are convolutions (passes/conv_lowering.py). A
plain convolution with a big input runs as im2col into the packed matmul's panel and
that matmul (see ConvTuning.packed_min_input). A blocked conv2d read only by direct depthwise
kernels runs without its stitch (see ConvTuning.stitch_free): it applies the epilogue itself and
they read its render targets.

Pools and their gradients with C % 4 == 0 run four channels a fragment (codegen/pool.py).

Padding: a tap on the padding adds 0 * w (NaN for a NaN or inf weight, as the
reference and TensorFlow), the 0 hidden from the compiler (pad0 in the templates:
Mesa folds a constant 0 * w to 0); a conv2d with padding_taps "skip" (an input
gradient written as a convolution, passes/conv_lowering.py) adds nothing there
(g.skip_padding). conv2d_backprop_filter takes an epilogue too (an optimizer's
update of the filter, passes/fusion.py), applied by its stitch or generic kernel.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace

import numpy as np

from ..ir.errors import FragflowError
from ..ir.ops import conv as _conv
from . import depthwise as depthwise_kernels, matmul, pool, tuning as _tuning
from .common import make_kernel, operands, output_operand
from .layout import strides
from .limits import active, loop_trips, unroll_for
from .tuning.conv import ConvTuning


@dataclass(frozen=True)
class PixelBlock:
    """How the blocked depthwise kernel divides its output: a fragment per block of
    rows x cols adjacent output pixels and channel texel, one render target per pixel
    of the block (templates/depthwise_blocked.glsl.j2)."""
    batch: int
    out_h: int
    out_w: int
    c4: int              # output channel texels per pixel
    rows: int
    cols: int

    @property
    def rows_count(self) -> int:
        return -(-self.out_h // self.rows)

    @property
    def cols_count(self) -> int:
        return -(-self.out_w // self.cols)

    @property
    def fragments(self) -> int:
        return self.batch * self.rows_count * self.cols_count * self.c4

    @property
    def targets(self) -> int:
        return self.rows * self.cols




def _knobs() -> ConvTuning:
    return _tuning.active().conv


def _min_macs() -> int:
    return _tuning.active().matmul.blocked_min_macs


def blocked_conv(node, g, context, inputs, out, layouts, prefix, extra, epilogue, op,
                 nodes):
    """[blocked kernel, stitch] for a 2D convolution big enough to pay for the second
    launch, or None. A plain convolution is a matmul of its windows with the filter:
    fragments compute 4 pixels x 8 output channels (codegen/matmul.py's blocking);
    a depthwise one computes 4 channels of 2 x 4 adjacent pixels, reading each input
    texel of their shared footprint once."""
    taps = math.prod(g.ksize)
    if context["kind"] == "backprop_filter":
        return _blocked_filter_gradient(g, context, inputs, out, layouts, prefix, op, nodes,
                                        extra, epilogue)
    x, w = inputs
    x_blocks = blocks_view(layouts, x.value)
    if context["depthwise"]:
        free = _knobs().depthwise_stitch_free and depthwise_stitch_free(node, g)
        if out.layout.size * taps < _min_macs() and not free and \
                x_blocks is None:
            return None
        return _blocked_depthwise(g, context, x, w, out, layouts, prefix, extra, epilogue,
                                  op, nodes, taps, free)
    if out.layout.size * taps * g.C < _min_macs() and x_blocks is None:
        return None
    blocking = matmul.choose_blocking(1, g.N * g.out_count, g.COUT)
    k = taps * g.C
    if not g.skip_padding and \
            g.N * math.prod(g.in_size) * g.C >= _knobs().packed_min_input and \
            out.layout.size * k >= _tuning.active().matmul.packed_min_macs and x_blocks is None:
        # im2col into A's panel (each window read once, padding zeros), the filter
        # [taps * C, COUT] into B's, then the packed matmul kernel and its stitch
        k4 = -(-k // 4)
        pa = matmul.Panel("rows", 1, blocking.slab, blocking.slab, blocking.rows, k4,
                          blocking.m, k, conv=g.as_dict(), xs=tuple(context["xs"]))
        pb = matmul.b_panel(blocking, k, g.COUT, False, 1, k4)
        none = matmul.affine_index((1,), [0])
        packed = matmul.packed_kernels(prefix, op, nodes, layouts, out, blocking, pa, x,
                                       pb, w, none, none, extra, epilogue)
        if packed is not None:
            return packed
    fours = g.C % 4 == 0
    if x_blocks is not None:
        x = _blocks_operand(x, layouts)
    common = dict(g=g, xs=context["xs"], channels_in_fours=fours, mat_steps=_knobs().mat_steps,
                  x_blocks=x_blocks and x_blocks.blocking,
                  unroll=unroll_for(taps * g.C // (4 if fours else 1)),
                  **_helpers(x_blocks, [w] + list(extra)))
    max_size = matmul._max_texture_size(layouts, out)
    if _knobs().stitch_free and stitch_free(node):
        # the epilogue runs here and the readers read the targets (see stitch_free)
        blocking = stitch_free_blocking(g)
        blocks, names = matmul.target_operands(blocking, out, max_size, layouts)
        blocks, names = _stitch_free_targets(blocks, names, blocking, "matmul", layouts,
                                             max_size)
        return [matmul.blocked_kernel(
            "conv_blocked.glsl.j2", prefix, op, nodes, [x, w] + list(extra), blocks, names,
            blocking, epilogue=epilogue, epilogue_vec4=True, result=out, **common)]
    blocks, names = matmul.target_operands(blocking, out, max_size, layouts)
    main = matmul.blocked_kernel(
        "conv_blocked.glsl.j2", prefix, op, nodes, [x, w], blocks, names, blocking,
        epilogue=None, **common)
    stitch = matmul.stitch_kernel(blocks, out, prefix + "s", op, nodes, extra, epilogue,
                                  mapping="matmul", blocking=blocking,
                                  aligned=g.COUT % 4 == 0)
    return [main, stitch]




def _graph_of(node):
    return node.fused.graph if hasattr(node, "fused") else node.graph


def stitch_free_blocking(g) -> matmul.Blocking:
    """The blocking of a stitch-free conv2d: matmul's (4 pixels x 2 channel texels)."""
    return matmul.choose_blocking(1, g.N * g.out_count, g.COUT)


def stitch_free(node) -> bool:
    """Whether the blocked conv2d `node` may leave its result in its render targets:
    whole output texels, not a fetched value, and read only by kernels that read the
    targets (depthwise.reads_blocks: each as its image)."""
    if node.outputs[0].type.shape[-1] % 4:
        return False
    return _read_only_by(node, depthwise_kernels.reads_blocks)


def _read_only_by(node, reads) -> bool:
    """Whether node's output is not fetched and has readers, each of which reads(reader,
    value): the condition for leaving it in the node's render targets."""
    graph = _graph_of(node)
    value = node.outputs[0]
    if any(v.name == value.name for v in graph.outputs):
        return False
    readers = [n for n in graph.nodes if any(v is value for v in n.inputs)]
    return bool(readers) and all(reads(n, value) for n in readers)


def blocks_view(layouts, value: str):
    """The BlocksLayout of `value` where the kernel computing it left it in its render
    targets (no stitch), else None."""
    view = layouts.get(f"{value}#blocks")
    return view if isinstance(view, matmul.BlocksLayout) else None


def _blocks_operand(x, layouts):
    """Operand x read from its producer's render targets."""
    return depthwise_kernels.BlocksOperand(
        sampler=x.sampler, value=f"{x.value}#blocks", layout=blocks_view(layouts, x.value),
        type=x.type, arg=x.arg)


def _helpers(x_blocks, others) -> dict:
    """The prologue's texelFetch helpers take a sampler2D: none for the layers."""
    return {"fetch_helpers": {b.sampler for b in others}} if x_blocks else {}


def _stitch_free_targets(blocks, names, blocking, mapping, layouts, max_size):
    """The targets of a stitch-free kernel: layers blocks_width texels wide (wider where
    they would be too tall), registered as a BlocksLayout for the readers."""
    width = _knobs().blocks_width
    while -(-blocking.fragments // width) > max_size:
        width *= 2
    layout = matmul.BlocksLayout(blocks.layout.shape, "float32", width,
                                 -(-blocking.fragments // width), blocking, mapping)
    layouts[blocks.value] = layout
    return replace(blocks, layout=layout), [replace(n, layout=layout) for n in names]


def reads_depthwise_blocks(node, value) -> bool:
    """Whether graph node `node` is a conv2d that reads `value` (its image, and nothing
    else of it) as the blocked kernel (conv_blocked.glsl.j2) can from a blocked
    depthwise kernel's render targets: C % 4 == 0, float, an input too small for the
    packed path."""
    conv_op = node.attrs.get("conv_op") if node.op == "fused_conv" else node.op
    if conv_op != "conv2d" or node.inputs[0] is not value or \
            any(v is value for v in node.inputs[1:]):
        return False
    x, w = node.inputs[0].type, node.inputs[1].type
    if len(x.shape) != 4 or not x.is_static or not w.is_static:
        return False
    return x.shape[3] % 4 == 0 and x.dtype == w.dtype == "float32" and \
        x.size < _knobs().packed_min_input and (_blocked_anyway(node) or stitch_free(node))


def _blocked_anyway(node) -> bool:
    """Whether conv2d `node` runs blocked (with its stitch) whoever reads it: the
    direct kernel would not take it (see direct_kernel). Running a small conv2d
    blocked to read a depthwise kernel's targets would add its stitch."""
    x, w, out = node.inputs[0].type, node.inputs[1].type, node.outputs[0].type
    taps, c = w.shape[0] * w.shape[1], x.shape[3]
    macs = out.size * taps * c
    return macs >= _min_macs() and \
        not _direct_fits(taps, c, out.shape[-1], macs)


def depthwise_stitch_free(node, g) -> bool:
    """Whether the depthwise conv `node` runs blocked and leaves its result in its
    render targets: multiplier 1, C % 4 == 0, a filter the blocked kernel unrolls, not
    a fetched value, and read only by conv2d kernels that read the targets."""
    if g.M != 1 or g.C % 4 or math.prod(g.ksize) > _knobs().blocked_depthwise_taps:
        return False
    return _read_only_by(node, reads_depthwise_blocks)


def _blocked_filter_gradient(g, context, inputs, out, layouts, prefix, op, nodes,
                             extra=(), epilogue=None):
    """conv2d_backprop_filter as the blocked matmul of the transposed windows with dy,
    4 (tap, input channel) rows per fragment (4 channels of a tap reading one texel of x
    per pixel where C % 4 == 0), templates/conv_filter_blocked.glsl.j2; None where that
    does not apply."""
    pixels = g.N * g.out_count
    if context["depthwise"] or out.layout.size * pixels < _min_macs():
        return None
    taps = math.prod(g.ksize)
    # rows: the 4 input channels of one texel of x (so at most 2 column texels)
    if matmul.max_targets() < 4:
        return None
    blocking = matmul.Blocking(1, taps * g.C, g.COUT, 4,
                               min(2, -(-g.COUT // 4), matmul.max_targets() // 4),
                               interleaved=True)
    # few blocks (a small filter): split the batch among more fragments
    per_split = -(-g.N // min(g.N, -(-_knobs().filter_gradient_fragments //
                                          blocking.fragments_per_split)))
    out_h, out_w = g.out_size
    # one image a split and still few fragments (conv1 of W13: 9 x 8 filter, 3 blocks):
    # split each image's output rows too
    row_splits = 1
    if _knobs().split_rows and per_split == 1:
        row_splits = min(out_h, -(-_knobs().filter_gradient_fragments //
                                  (blocking.fragments_per_split * g.N)))
    rows_per = -(-out_h // row_splits)
    row_splits = -(-out_h // rows_per)
    blocking = replace(blocking, splits=-(-g.N // per_split) * row_splits)
    unroll = 1
    budget = loop_trips()
    while unroll < out_w and per_split * (1 + out_h * (1 + -(-out_w // unroll))) > budget:
        unroll *= 2
    if per_split * (1 + out_h * (1 + -(-out_w // unroll))) > budget:
        return None                 # too many pixels for one fragment's loops
    blocks, names = matmul.target_operands(
        blocking, out, matmul._max_texture_size(layouts, out), layouts)
    main = matmul.blocked_kernel(
        "conv_filter_blocked.glsl.j2", prefix, op, nodes, list(inputs), blocks, names,
        blocking, g=g, xs=context["xs"], unroll=unroll, per_split=per_split,
        row_splits=row_splits, rows_per=rows_per, fours=g.C % 4 == 0)
    # the epilogue (an optimizer's update of the filter) runs in the stitch
    stitch = matmul.stitch_kernel(blocks, out, prefix + "s", op, nodes, extra, epilogue,
                                  mapping="matmul", blocking=blocking,
                                  aligned=g.COUT % 4 == 0)
    return [main, stitch]


def _blocked_depthwise(g, context, x, w, out, layouts, prefix, extra, epilogue, op, nodes,
                       taps, free=False):
    c, mult = g.C, g.M
    x_blocks = blocks_view(layouts, x.value)
    if not ((mult == 1 and c % 4 == 0) or mult % 4 == 0) or taps > _knobs().blocked_depthwise_taps:
        if x_blocks is not None or free:
            raise FragflowError(f"{nodes[0].where()}: the blocked depthwise kernel cannot "
                                f"run it but it was planned to (codegen/conv.py)")
        return None
    out_h, out_w = g.out_size
    cols = min(4, out_w, matmul.max_targets())
    rows = min(matmul.max_targets() // cols, out_h)
    block = PixelBlock(g.N, out_h, out_w, g.COUT // 4, rows, cols)
    kh, kw = g.ksize
    (sy, sx), (dy, dx) = g.strides, g.dilations
    uses = {}
    for py in range(rows):
        for px in range(cols):
            for ky in range(kh):
                for kx in range(kw):
                    uses.setdefault((py * sy + ky * dy, px * sx + kx * dx), []).append(
                        (py * cols + px, ky * kw + kx))
    footprint = [(fy, fx, pairs) for (fy, fx), pairs in sorted(uses.items())]
    # WebGL (ES): one block row's footprint is a loop over the filter rows, its columns
    # unrolled, not the whole footprint unrolled: SwiftShader compiles each shader at its
    # first draw, in time that grows with the code. The same reads, in the same order.
    row_loop = active().es and rows == 1
    if row_loop:
        common_extra = dict(row_loop=True, kh=kh, kw=kw, dil_y=dy, row_uses=[
            (fx, [(j, tap) for j, tap in pairs]) for fy, fx, pairs in footprint if fy == 0])
    else:
        common_extra = {}
    max_size = matmul._max_texture_size(layouts, out)
    blocks, names = matmul.target_operands(block, out, max_size, layouts)
    if x_blocks is not None:
        x = _blocks_operand(x, layouts)
    common = dict(block=block, g=g, xs=context["xs"], taps=taps, footprint=footprint,
                  footprint_rows=sorted({fy for fy, _, _ in footprint}),
                  footprint_cols=sorted({fx for _, fx, _ in footprint}),
                  x_blocks=x_blocks and x_blocks.blocking,
                  **_helpers(x_blocks, [w] + list(extra)), **common_extra)
    if free:
        # the epilogue runs here and the readers read the targets
        blocks, names = _stitch_free_targets(blocks, names, block, "depthwise", layouts,
                                             max_size)
        return [matmul.blocked_kernel(
            "depthwise_blocked.glsl.j2", prefix, op, nodes, [x, w] + list(extra), blocks,
            names, block, epilogue=epilogue, epilogue_vec4=True, result=out, **common)]
    main = matmul.blocked_kernel(
        "depthwise_blocked.glsl.j2", prefix, op, nodes, [x, w], blocks, names, block,
        epilogue=None, **common)
    stitch = matmul.stitch_kernel(blocks, out, prefix + "s", op, nodes, extra, epilogue,
                                  mapping="depthwise", aligned=True, g=g, block=block)
    return [main, stitch]




def direct_kernel(g, context, inputs, out, prefix, op, nodes, extra=(), epilogue=None,
                  w_value=None):
    """The direct kernel (conv_direct.glsl.j2) of a float conv2d with COUT % 4 == 0 that
    is small or sums few products per output (see ConvTuning.direct_max_depth), else None."""
    taps = math.prod(g.ksize)
    x, w = inputs
    if context["depthwise"] or {out.dtype, x.dtype, w.dtype} != {"float32"} or \
            not _direct_fits(taps, g.C, g.COUT, out.size * taps * g.C):
        return None
    row = g.ksize[1] * g.C          # a window row's floats, contiguous in x
    row_texels = (-(-(row + 3) // 4) if _knobs().row_reads and g.C % 4 and
                  g.dilations[1] == 1 and row <= _knobs().direct_row_floats else 0)
    literals = _weight_literals(w_value, g) if row_texels else None
    return make_kernel("conv_direct.glsl.j2", prefix, op, nodes, [x, w] + list(extra),
                       out, g=g, xs=context["xs"], epilogue=epilogue, epilogue_vec4=True,
                       inline_steps=_knobs().direct_inline_steps, row_texels=row_texels,
                       w_literals=literals, aligned_picks=_knobs().aligned_picks)


def _direct_fits(taps: int, c: int, cout: int, macs: int) -> bool:
    """Whether the direct kernel takes a float conv2d of taps x c inputs per output,
    cout output channels and macs products in all (direct_kernel; _blocked_anyway asks
    the same of a graph node)."""
    steps = -(-c // 4) if c % 4 == 0 else c
    if cout % 4 or taps > _knobs().direct_max_taps or taps * steps > loop_trips() or \
            macs >= _knobs().direct_max_macs:
        return False
    # past BLOCKED_MIN_MACS, a deep sum per output is the blocked kernel's: its fewer
    # fetches pay for its stitch
    return macs < _min_macs() or taps * c <= _knobs().direct_max_depth




def _weight_literals(w_value, g):
    """[filter row k][c4] -> a GLSL vec4 literal of the weights' exact bits, for a
    constant filter (w_value: its array, or None) with few output channel texels."""
    if w_value is None or g.COUT // 4 > _knobs().literal_max_c4:
        return None
    bits = np.ascontiguousarray(w_value, np.float32).reshape(-1, g.COUT).view(np.uint32)
    return [["vec4(" + ", ".join(f"uintBitsToFloat(0x{int(b):08x}u)" for b in row[4 * c:4 * c + 4])
             + ")" for c in range(g.COUT // 4)] for row in bits]




@dataclass(frozen=True)
class ConvGeometry:
    """A window op's geometry, padding resolved to numbers: per spatial axis the input
    and output sizes, the filter's taps, strides, dilations and leading padding (and the
    taps' strides in the filter); the batch N, input channels C, the filter's last axis
    M and the output channels COUT; whether padding taps add nothing (padding_taps
    "skip"). The templates' `g`."""
    in_size: list
    ksize: list
    strides: list
    dilations: list
    pad: list
    out_size: list
    tap_strides: list
    out_count: int
    N: int
    C: int
    M: int
    COUT: int
    skip_padding: bool = False

    @classmethod
    def of(cls, win: _conv.Window, **extra) -> ConvGeometry:
        return cls(in_size=list(win.in_size), ksize=list(win.ksize),
                   strides=list(win.strides), dilations=list(win.dilations),
                   pad=[b for b, _ in win.pads], out_size=list(win.out_size),
                   tap_strides=list(strides(win.ksize)),
                   out_count=math.prod(win.out_size), **extra)

    @property
    def taps(self) -> int:
        return math.prod(self.ksize)

    def as_dict(self) -> dict:
        """The fields as a dict (matmul.Panel's `conv`)."""
        return dataclasses.asdict(self)


def lower_node(node, layouts, prefix, extra=(), epilogue=None, kernel_op=None,
               nodes=None):
    """A kernel for node; with an epilogue (codegen/fused.py), conv kernels apply
    elementwise steps to each result before writing it, reading the extra operands."""
    kind, d, depthwise = _conv.SPATIAL[node.op]
    by_value = {op.value: op for op in operands(node, layouts)}
    shapes = [layouts[v.name].shape for v in node.inputs]
    out = output_operand(node.outputs[0], layouts)
    attrs = node.attrs
    roles = {"conv": ("x", "w"), "backprop_input": ("dy", "w"),
             "backprop_filter": ("x", "dy"), "pool": ("x",), "pool_grad": ("x", None, "dy"),
             "pool_grad_grad": ("x", None, "g"), "avg_pool_grad": ("dy",),
             "dilation": ("x", "w"), "dilation_grad": ("x", "w", "dy")}[kind]
    ops = {role: by_value[v.name] for role, v in zip(roles, node.inputs) if role}
    inputs = [op for op in by_value.values() if op in ops.values()]
    context = dict(kind=kind, depthwise=depthwise, vec4=False, x_texels=False, unroll=1,
                   extremum="sum", wrt="", xs=[], ys=[], ops=ops)
    base = _conv.base_op(node.op)
    if kind in ("conv", "backprop_input", "backprop_filter"):
        if kind == "conv":
            x_shape, w_shape = shapes
        elif kind == "backprop_input":
            dy_shape, w_shape = shapes
            x_shape = (dy_shape[0],) + tuple(attrs["input_size"]) + (w_shape[d],)
        else:
            x_shape, dy_shape = shapes
            w_shape = out.layout.shape
        win = _conv.conv_window(x_shape, w_shape, attrs, d)
        c, m = x_shape[-1], w_shape[-1]
        cout = c * m if depthwise else m
        g = ConvGeometry.of(win, N=x_shape[0], C=c, M=m, COUT=cout,
                      skip_padding=attrs.get("padding_taps") == "skip")
        context.update(xs=list(strides(x_shape)), ys=list(strides(
            (x_shape[0],) + win.out_size + (cout,))))
        taps = math.prod(win.ksize)
        if kind == "conv":
            vec4 = (m % 4 == 0 or (m == 1 and c % 4 == 0)) if depthwise else m % 4 == 0
            x_texels = vec4 and not depthwise and c % 4 == 0
            trips = taps * (1 if depthwise else -(-c // (4 if x_texels else 1)))
            context.update(vec4=vec4, x_texels=x_texels)
        elif kind == "backprop_input":
            trips = taps * m
        else:
            context.update(vec4=m % 4 == 0)
            trips = x_shape[0] * g.out_count
        context["unroll"] = unroll_for(trips)
    else:
        if kind == "avg_pool_grad":
            x_shape = out.layout.shape
        else:
            x_shape = shapes[0]
        if kind.startswith("dilation"):
            win = _conv.dilation_window(x_shape, shapes[1], attrs)
            context.update(extremum="max",
                           wrt="input" if node.op.endswith("input") else "filter")
        else:
            win = _conv.pool_window(x_shape, attrs, d)
            context["extremum"] = base[:3]
        g = ConvGeometry.of(win, N=x_shape[0], C=x_shape[-1], M=1, COUT=x_shape[-1])
        context.update(xs=list(strides(x_shape)), ys=list(strides(
            (x_shape[0],) + win.out_size + (x_shape[-1],))))
        # max/min pool gradients: a texel's 4 channels share their windows
        context["vec4"] = kind == "pool_grad" and g.C % 4 == 0
        taps = math.prod(win.ksize)
        trips = {"pool": taps, "dilation": taps, "pool_grad_grad": taps,
                 "avg_pool_grad": taps, "pool_grad": taps * (taps + 1),
                 "dilation_grad": taps * (taps + 1) if context["wrt"] == "input"
                 else x_shape[0] * g.out_count * (taps + 1)}[kind]
        most = active().max_loop_iterations
        if 4 * trips > active().window_trips:
            raise FragflowError(
                f"{node.where()}: its kernel would loop {4 * trips} times per fragment, "
                f"too near the {most} a fragment may run (llvmpipe's limit); use a "
                f"smaller window or batch")
    if epilogue is not None and kind not in ("conv", "backprop_filter"):
        raise FragflowError(f"{node.where()}: only convolutions and filter gradients "
                            f"take an epilogue")
    if kind in pool.KINDS:
        fast = pool.vec4_kernel(kind, g, context, inputs, out, prefix, kernel_op or node.op,
                                nodes or [node], layouts)
        if fast is not None:
            return fast
    x_blocks = blocks_view(layouts, inputs[0].value) if kind == "conv" else None
    dw_free = kind == "conv" and depthwise and d == 2 and _knobs().depthwise_stitch_free and \
        len(inputs) == 2 and depthwise_stitch_free(node, g)
    if kind == "conv" and depthwise and d == 2 and len(inputs) == 2 and not dw_free:
        direct = depthwise_kernels.direct_kernel(g, context, inputs, out, prefix,
                                                 kernel_op or node.op, nodes or [node],
                                                 extra, epilogue, layouts)
        if direct is not None:
            return direct
    # a conv2d big enough for the blocked kernel runs blocked where no stitch follows
    # (see ConvTuning.blocked_first_depth)
    blocked_first = kind == "conv" and not depthwise and d == 2 and _knobs().stitch_free and \
        g.C % 4 == 0 and math.prod(g.ksize) * g.C >= _knobs().blocked_first_depth and \
        out.layout.size * math.prod(g.ksize) * g.C >= _min_macs() and \
        out.dtype == "float32" and stitch_free(node)
    blocked_first = blocked_first or (x_blocks is not None and not depthwise)
    if kind == "conv" and d == 2 and len(inputs) == 2 and not blocked_first:
        filter_node = node.inputs[1].node
        direct = direct_kernel(g, context, inputs, out, prefix, kernel_op or node.op,
                               nodes or [node], extra, epilogue,
                               filter_node.attrs["value"] if _knobs().literal_weights and
                               filter_node.op == "constant" else None)
        if direct is not None:
            return direct
    if kind in ("conv", "backprop_filter") and d == 2 and len(inputs) == 2:
        blocked = blocked_conv(node, g, context, inputs, out, layouts, prefix, extra,
                               epilogue, kernel_op or node.op, nodes or [node])
        if blocked is not None:
            return blocked
    if x_blocks is not None or dw_free:
        raise FragflowError(f"{node.where()}: planned to run without a stitch but no "
                            f"kernel that reads render targets took it (codegen/conv.py)")
    return make_kernel("conv.glsl.j2", prefix, kernel_op or node.op, nodes or [node],
                       inputs + list(extra), out, g=g, epilogue=epilogue, **context)
