"""Lowering of the conv op family (convolutions, their gradients, pools, dilation2d):
the first strategy of TABLE that applies to a node gives its kernels.

`conv_site` works out a node's kind, its window geometry (ConvGeometry: padding
resolved to numbers) and the generic kernel's context (templates/conv.glsl.j2: vec4 or
scalar lanes, the innermost loop's unroll under the loop budget, codegen/limits.py).
The strategies, in order: pools four channels a fragment (codegen/pool.py), the direct
depthwise kernel (codegen/depthwise.py), the direct conv2d (conv_direct.glsl.j2: one
fragment per output texel, the epilogue inside), im2col + the packed matmul for big
inputs, blocked kernels plus the stitch of codegen/matmul.py (conv2d as the matmul of
its windows with the filter, depthwise as 4 channels of 2 x 4 adjacent pixels, the
filter gradient as the transposed windows times dy), and the generic kernel.

`plan_blocks` (codegen/lower.py PLANNERS) decides before lowering which blocked kernels
leave their result in their render targets for their readers (no stitch: a conv2d read
only by depthwise kernels, a depthwise conv read only by conv2d kernels): it runs the
same table on each node, so the readers find the producer's BlocksLayout in
`facts.blocks`. Padding taps add 0 * w (NaN for a non-finite weight, as TensorFlow),
the 0 hidden from the compiler (pad0); padding_taps "skip" adds nothing there.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import numpy as np

from ..ir.errors import FragflowError
from ..ir.ops import conv as _conv
from ..ir.types import TensorType
from . import depthwise as depthwise_kernels, matmul, pool, schedule
from .common import make_kernel, operands, output_operand, reads_at_output
from .fused import ConvHead
from .layout import layout_for, strides
from .limits import active, loop_trips, unroll_for
from .operands import Operand
from .strategy import Site, Strategy, choose, lower_with
from .tuning.conv import ConvTuning


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

    @property
    def inside(self) -> bool:
        """No padding before and every window inside the image (VALID): no tap is a
        padding tap, so a kernel needs no tests or clamps."""
        return all(p == 0 and (o - 1) * s + (k - 1) * d <= n - 1 for p, o, s, k, d, n in
                   zip(self.pad, self.out_size, self.strides, self.ksize, self.dilations,
                       self.in_size))

    def as_dict(self) -> dict:
        """The fields as a dict (matmul.Panel's `conv`)."""
        return dataclasses.asdict(self)


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


@dataclass(frozen=True)
class ConvSite(Site):
    """A conv-family node being lowered, with what every strategy reads: its kind
    (ir/ops/conv.py SPATIAL), spatial axes d, geometry, operands by role and the
    generic kernel's template context."""
    kind: str = ""
    d: int = 0
    depthwise: bool = False
    g: ConvGeometry | None = None
    inputs: tuple = ()              # the distinct operands, x (dy) first
    out: Any = None
    context: Mapping = field(default_factory=dict)

    @property
    def two_operand_2d(self) -> bool:
        """A 2D window over two distinct operands: what the fast kernels take."""
        return self.d == 2 and len(self.inputs) == 2

    @property
    def macs(self) -> int:
        """Multiply-adds of a convolution (output elements x taps x input channels)."""
        return self.out.layout.size * self.g.taps * (1 if self.depthwise else self.g.C)


@dataclass(frozen=True)
class ConvPlan:
    """A strategy's decision for a site: the image's producer's render targets where
    the kernel reads them (x_blocks), its own where it leaves its result there
    (targets; no stitch), and what else its kernels need (detail)."""
    site: ConvSite
    knobs: ConvTuning
    x_blocks: Any = None
    targets: Any = None
    detail: Mapping = field(default_factory=dict)


_ROLES = {"conv": ("x", "w"), "backprop_input": ("dy", "w"), "backprop_filter": ("x", "dy"),
          "pool": ("x",), "pool_grad": ("x", None, "dy"), "pool_grad_grad": ("x", None, "g"),
          "avg_pool_grad": ("dy",), "dilation": ("x", "w"), "dilation_grad": ("x", "w", "dy")}
_SUMS = ("conv", "backprop_input", "backprop_filter")


def conv_site(node, layouts, prefix, extra=(), epilogue=None, kernel_op=None,
              nodes=None) -> ConvSite:
    """The site of a conv-family node (a graph node or a fused node's ConvHead)."""
    kind, d, depthwise = _conv.SPATIAL[node.op]
    by_value = {op.value: op for op in operands(node, layouts)}
    shapes = [layouts[v.name].shape for v in node.inputs]
    out = output_operand(node.outputs[0], layouts)
    ops = {role: by_value[v.name] for role, v in zip(_ROLES[kind], node.inputs) if role}
    inputs = [op for op in by_value.values() if op in ops.values()]
    context = dict(kind=kind, depthwise=depthwise, vec4=False, x_texels=False, unroll=1,
                   extremum="sum", wrt="", xs=[], ys=[], ops=ops)
    if kind in _SUMS:
        g = _sum_geometry(node, kind, d, depthwise, shapes, out, context)
    else:
        g = _window_geometry(node, kind, d, shapes, out, context)
    if epilogue is not None and kind not in ("conv", "backprop_filter"):
        raise FragflowError(f"{node.where()}: only convolutions and filter gradients "
                            f"take an epilogue")
    return ConvSite(node, layouts, prefix, tuple(extra), epilogue, kernel_op,
                    tuple(nodes) if nodes else None, kind=kind, d=d, depthwise=depthwise,
                    g=g, inputs=tuple(inputs), out=out, context=context)


def _sum_geometry(node, kind, d, depthwise, shapes, out, context) -> ConvGeometry:
    """A sum of products' geometry; sets the generic kernel's vec4 paths and unroll."""
    attrs = node.attrs
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
    taps = g.taps
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
    return g


def _window_geometry(node, kind, d, shapes, out, context) -> ConvGeometry:
    """A pool's or dilation2d's geometry; refuses loops near the device's limit."""
    x_shape = out.layout.shape if kind == "avg_pool_grad" else shapes[0]
    if kind.startswith("dilation"):
        win = _conv.dilation_window(x_shape, shapes[1], node.attrs)
        context.update(extremum="max", wrt="input" if node.op.endswith("input") else "filter")
    else:
        win = _conv.pool_window(x_shape, node.attrs, d)
        context["extremum"] = _conv.base_op(node.op)[:3]
    g = ConvGeometry.of(win, N=x_shape[0], C=x_shape[-1], M=1, COUT=x_shape[-1])
    context.update(xs=list(strides(x_shape)), ys=list(strides(
        (x_shape[0],) + win.out_size + (x_shape[-1],))))
    # max/min pool gradients: a texel's 4 channels share their windows
    context["vec4"] = kind == "pool_grad" and g.C % 4 == 0
    taps = g.taps
    trips = {"pool": taps, "dilation": taps, "pool_grad_grad": taps,
             "avg_pool_grad": taps, "pool_grad": taps * (taps + 1),
             "dilation_grad": taps * (taps + 1) if context["wrt"] == "input"
             else x_shape[0] * g.out_count * (taps + 1)}[kind]
    if 4 * trips > active().window_trips:
        raise FragflowError(
            f"{node.where()}: its kernel would loop {4 * trips} times per fragment, "
            f"too near the {active().max_loop_iterations} a fragment may run (llvmpipe's "
            f"limit); use a smaller window or batch")
    return g


def lower_node(node, layouts, prefix, extra=(), epilogue=None, kernel_op=None,
               nodes=None):
    """The kernels of node (TABLE's first strategy that applies); with an epilogue
    (codegen/fused.py), conv kernels apply elementwise steps to each result before
    writing it, reading the extra operands."""
    site = conv_site(node, layouts, prefix, extra, epilogue, kernel_op, nodes)
    kernels = lower_with(TABLE, site)
    _check_planned(site, kernels, schedule.active())
    return kernels


def _check_planned(site, kernels, facts) -> None:
    """plan_blocks decided that this node reads its image from, or leaves its result
    in, render targets: a kernel of the chosen strategy must bind them."""
    values = [site.out.value] + ([site.inputs[0].value] if site.kind == "conv" else [])
    bound = {b.value: b.layout for k in (kernels if isinstance(kernels, list) else [kernels])
             for b in k.inputs + k.outputs}
    for value in values:
        if value in facts.blocks and bound.get(f"{value}#blocks") != facts.blocks[value]:
            raise FragflowError(f"{site.node.where()}: planned to run without a stitch but "
                                f"no kernel that reads render targets took it "
                                f"(codegen/conv.py plan_blocks)")


def plan_blocks(graph, facts, limits, tuning) -> dict:
    """{value: BlocksLayout} for the conv2d and depthwise convs whose chosen strategy
    leaves their result in their render targets, in graph order (a reader's choice
    sees its producer's): codegen/lower.py PLANNERS."""
    blocks: dict = {}
    for node in graph.nodes:
        head = ConvHead.of(node) if node.op == "fused_conv" else node
        if head.op not in ("conv2d", "depthwise_conv2d"):
            continue
        try:
            layouts = {v.name: layout_for(v.type, limits.max_texture_size)
                       for v in tuple(head.inputs) + tuple(head.outputs)}
            site = conv_site(head, layouts, "")
            so_far = replace(facts, blocks=MappingProxyType({**facts.blocks, **blocks}))
            _, plan = choose(TABLE, site, so_far, tuning)
        except FragflowError:
            continue                # lowering the node reports it
        if plan.targets is not None:
            blocks[site.out.value] = plan.targets
    return blocks


# -- what spans nodes: who may read a producer's render targets -----------------------

def stitch_free(node, facts, tuning) -> bool:
    """Whether the blocked conv2d `node` may leave its result in its render targets:
    whole output texels, not a fetched value, and read only by kernels that read the
    targets (depthwise.reads_blocks: each as its image; with conv.epilogue_blocks, a
    fused conv's epilogue operand, reads_epilogue_blocks; with conv.conv_reads_blocks,
    a blocked conv2d's image, reads_depthwise_blocks, as from a depthwise kernel's)."""
    if not tuning.conv.stitch_free or node.outputs[0].type.shape[-1] % 4:
        return False
    epilogue, convs = tuning.conv.epilogue_blocks, tuning.conv.conv_reads_blocks
    return facts.read_only_by(node.outputs[0], lambda n, v: (
        depthwise_kernels.reads_blocks(n, v, tuning) or
        (epilogue and reads_epilogue_blocks(n, v)) or
        (convs and reads_depthwise_blocks(n, v, facts, tuning))))


def reads_epilogue_blocks(node, value) -> bool:
    """Whether graph node `node` is a fused conv2d / depthwise conv that reads `value`
    only as an operand of its epilogue, at its own output's shape (element e of its
    result reads element e of value: a residual add's shortcut): its epilogue reads it
    from the render targets of the blocked conv2d computing it (templates/
    epilogue.glsl.j2, lanes "blocks"; codegen/fused.py lower_fused_conv)."""
    return node.op == "fused_conv" and \
        node.attrs["conv_op"] in ("conv2d", "depthwise_conv2d") and reads_at_output(node, value)


def reads_depthwise_blocks(node, value, facts, tuning) -> bool:
    """Whether graph node `node` is a conv2d that reads `value` (its image, and nothing
    else of it) as the blocked kernel (conv_blocked.glsl.j2) can from a blocked
    depthwise kernel's render targets (or a blocked conv2d's): C % 4 == 0, float, an
    input too small for the packed path, and a kernel that runs blocked anyway."""
    conv_op = node.attrs.get("conv_op") if node.op == "fused_conv" else node.op
    if conv_op != "conv2d" or node.inputs[0] is not value or \
            any(v is value for v in node.inputs[1:]):
        return False
    x, w = node.inputs[0].type, node.inputs[1].type
    if len(x.shape) != 4 or not x.is_static or not w.is_static:
        return False
    return x.shape[3] % 4 == 0 and x.dtype == w.dtype == "float32" and \
        x.size < tuning.conv.packed_min_input and \
        (_blocked_anyway(node, tuning) or stitch_free(node, facts, tuning))


def _blocked_anyway(node, tuning) -> bool:
    """Whether conv2d `node` runs blocked (with its stitch) whoever reads it: the
    direct kernel would not take it. Running a small conv2d blocked to read a depthwise
    kernel's targets would add its stitch."""
    x, w, out = node.inputs[0].type, node.inputs[1].type, node.outputs[0].type
    taps, c = w.shape[0] * w.shape[1], x.shape[3]
    macs = out.size * taps * c
    return macs >= tuning.matmul.blocked_min_macs and \
        not _direct_fits(taps, c, out.shape[-1], macs, tuning)


def depthwise_stitch_free(site, facts, tuning) -> bool:
    """Whether the depthwise conv of `site` runs blocked and leaves its result in its
    render targets: multiplier 1, C % 4 == 0, a filter the blocked kernel unrolls, not
    a fetched value, and read only by conv2d kernels that read the targets."""
    g = site.g
    if not (tuning.conv.depthwise_stitch_free and site.kind == "conv" and site.depthwise
            and site.two_operand_2d) or g.M != 1 or g.C % 4 or \
            g.taps > tuning.conv.blocked_depthwise_taps:
        return False
    return facts.read_only_by(site.node.outputs[0],
                              lambda n, v: reads_depthwise_blocks(n, v, facts, tuning))


def _x_blocks(site, facts):
    """The BlocksLayout of the image where its producer leaves it in its targets."""
    return facts.blocks.get(site.inputs[0].value) if site.kind == "conv" else None


def _blocks_operand(x, view):
    """Operand x read from its producer's render targets (BlocksLayout view)."""
    return depthwise_kernels.BlocksOperand(sampler=x.sampler, value=f"{x.value}#blocks",
                                           layout=view, type=x.type, arg=x.arg)


def _helpers(x_blocks, others) -> dict:
    """The prologue's texelFetch helpers take a sampler2D: none for the layers."""
    return {"fetch_helpers": {b.sampler for b in others}} if x_blocks else {}


def _targets_layout(blocking, mapping, max_size, knobs) -> matmul.BlocksLayout:
    """The targets of a stitch-free kernel: layers blocks_width texels wide (wider where
    they would be too tall), as its readers see them."""
    width = knobs.blocks_width
    while -(-blocking.fragments // width) > max_size:
        width *= 2
    return matmul.BlocksLayout((blocking.fragments * 4,), "float32", width,
                               -(-blocking.fragments // width), blocking, mapping)


def _target_operands(blocking, out, layouts, targets=None) -> tuple:
    """(blocks, names) of a blocked kernel; on `targets` (a BlocksLayout) where it
    leaves its result there."""
    blocks, names = matmul.target_operands(
        blocking, out, matmul._max_texture_size(layouts, out), {})
    if targets is None:
        return blocks, names
    return replace(blocks, layout=targets), [replace(n, layout=targets) for n in names]


# -- pools (codegen/pool.py) and the direct depthwise kernel (codegen/depthwise.py) -----

def _pool_applies(path):
    def applies(site, facts, tuning):
        if pool.path(site.kind, site.g, site.out, tuning.conv) != path:
            return None
        return ConvPlan(site, tuning.conv)
    return applies


def _emit_pool(plan):
    site = plan.site
    return pool.kernels(pool.path(site.kind, site.g, site.out, plan.knobs), site.kind,
                        site.g, site.context, list(site.inputs), site.out, site.prefix,
                        site.op, site.named_nodes)


def _depthwise_direct_applies(site, facts, tuning):
    g = site.g
    if site.kind != "conv" or not site.depthwise or not site.two_operand_2d or \
            depthwise_stitch_free(site, facts, tuning) or \
            not depthwise_kernels.direct_applies(g.taps, g.C, g.M, site.out.dtype,
                                                 site.out.size, tuning):
        return None
    return ConvPlan(site, tuning.conv, x_blocks=_x_blocks(site, facts))


def _emit_depthwise_direct(plan):
    site = plan.site
    return depthwise_kernels.direct_kernel(
        site.g, site.context, list(site.inputs), site.out, site.prefix, site.op,
        site.named_nodes, site.extra, site.epilogue, plan.x_blocks, plan.knobs)


# -- the direct conv2d (templates/conv_direct.glsl.j2) ---------------------------------

def _direct_fits(taps: int, c: int, cout: int, macs: int, tuning) -> bool:
    """Whether the direct kernel takes a float conv2d of taps x c inputs per output,
    cout output channels and macs products in all (conv.direct; _blocked_anyway asks
    the same of a graph node)."""
    knobs = tuning.conv
    steps = -(-c // 4) if c % 4 == 0 else c
    if cout % 4 or taps > knobs.direct_max_taps or taps * steps > loop_trips() or \
            macs >= knobs.direct_max_macs:
        return False
    if steps > knobs.direct_inline_steps and taps > knobs.direct_max_looped_taps:
        return False        # a loop per tap: a compile time that explodes on llvmpipe
    # past blocked_min_macs, a deep sum per output is the blocked kernel's: its fewer
    # fetches pay for its stitch
    return macs < tuning.matmul.blocked_min_macs or taps * c <= knobs.direct_max_depth


def _blocked_first(site, facts, tuning) -> bool:
    """A conv2d that runs blocked whatever the direct kernel would take: it reads its
    image from a depthwise kernel's targets, or it is stitch-free and deep and big
    enough for the blocked kernel (blocked_first_depth)."""
    g, out = site.g, site.out
    depth = g.taps * g.C
    return _x_blocks(site, facts) is not None or (
        tuning.conv.stitch_free and g.C % 4 == 0 and
        depth >= tuning.conv.blocked_first_depth and
        out.layout.size * depth >= tuning.matmul.blocked_min_macs and
        out.dtype == "float32" and stitch_free(site.node, facts, tuning))


def _direct_applies(site, facts, tuning):
    if site.kind != "conv" or site.depthwise or not site.two_operand_2d:
        return None
    g, (x, w), out = site.g, site.inputs, site.out
    if {out.dtype, x.dtype, w.dtype} != {"float32"} or \
            not _direct_fits(g.taps, g.C, g.COUT, out.size * g.taps * g.C, tuning) or \
            _blocked_first(site, facts, tuning):
        return None
    return ConvPlan(site, tuning.conv)


def _emit_direct(plan):
    site, knobs = plan.site, plan.knobs
    g, (x, w), out = site.g, site.inputs, site.out
    filter_node = site.node.inputs[1].node
    w_value = filter_node.attrs["value"] if knobs.literal_weights and \
        filter_node.op == "constant" else None
    row = g.ksize[1] * g.C          # a window row's floats, contiguous in x
    row_texels = (-(-(row + 3) // 4) if knobs.row_reads and g.C % 4 and
                  g.dilations[1] == 1 and row <= knobs.direct_row_floats else 0)
    literals = _weight_literals(w_value, g, knobs) if row_texels else None
    return make_kernel("conv_direct.glsl.j2", site.prefix, site.op, site.named_nodes,
                       [x, w] + list(site.extra), out, g=g, xs=site.context["xs"],
                       epilogue=site.epilogue, epilogue_vec4=True,
                       inline_steps=knobs.direct_inline_steps, row_texels=row_texels,
                       w_literals=literals, aligned_picks=knobs.aligned_picks,
                       pointwise=_pointwise(g, knobs) and g.C % 4 == 0)


def _pointwise(g, knobs) -> bool:
    """A 1x1, stride-1, unpadded window (conv.pointwise): output pixel p reads the
    image's pixel p, the matmul's row p, with no window arithmetic or padding tests."""
    return knobs.pointwise and g.taps == 1 and g.strides == [1, 1] and \
        g.pad == [0, 0] and g.in_size == g.out_size


def _weight_literals(w_value, g, knobs):
    """[filter row k][c4] -> a GLSL vec4 literal of the weights' exact bits, for a
    constant filter (w_value: its array, or None) with few output channel texels."""
    if w_value is None or g.COUT // 4 > knobs.literal_max_c4:
        return None
    bits = np.ascontiguousarray(w_value, np.float32).reshape(-1, g.COUT).view(np.uint32)
    return [["vec4(" + ", ".join(_literal(int(b)) for b in row[4 * c:4 * c + 4])
             + ")" for c in range(g.COUT // 4)] for row in bits]


def _literal(bits: int) -> str:
    """A weight's exact bits as GLSL; a zero as the kernel's pad0 (a 0 the compiler
    cannot see: Mesa folds x * 0.0 to 0, which drops an inf or NaN x, TensorFlow's
    NaN)."""
    if bits & 0x7FFFFFFF == 0:
        return "-pad0" if bits else "pad0"
    return f"uintBitsToFloat(0x{bits:08x}u)"


# -- im2col + the packed matmul, and the blocked conv2d (conv_blocked.glsl.j2) --------

def _packed_applies(site, facts, tuning):
    g, out = site.g, site.out
    if site.kind != "conv" or site.depthwise or not site.two_operand_2d or \
            _x_blocks(site, facts) is not None or g.skip_padding or \
            (not tuning.conv.pointwise_packed and _pointwise(g, tuning.conv)) or \
            site.macs < tuning.matmul.blocked_min_macs or \
            g.N * math.prod(g.in_size) * g.C < tuning.conv.packed_min_input or \
            out.layout.size * g.taps * g.C < tuning.matmul.packed_min_macs:
        return None
    # im2col into A's panel (each window read once, padding zeros), the filter
    # [taps * C, COUT] into B's, then the packed matmul kernel and its stitch
    x, w = site.inputs
    blocking = matmul.choose_blocking(1, g.N * g.out_count, g.COUT)
    k = g.taps * g.C
    k4 = -(-k // 4)
    pa = matmul.Panel("rows", 1, blocking.slab, blocking.slab, blocking.rows, k4,
                      blocking.m, k, conv=g.as_dict(), xs=tuple(site.context["xs"]))
    pb = matmul.b_panel(blocking, k, g.COUT, False, 1, k4)
    size = max(matmul._max_texture_size(site.layouts, out), x.layout.width,
               x.layout.height, w.layout.width, w.layout.height)
    if matmul.panel_layout(pa, size) is None or matmul.panel_layout(pb, size) is None:
        return None                 # a panel would not fit in a texture
    return ConvPlan(site, tuning.conv, detail=dict(blocking=blocking, pa=pa, pb=pb))


def _emit_packed(plan):
    site, d = plan.site, plan.detail
    x, w = site.inputs
    none = matmul.affine_index((1,), [0])
    return matmul.packed_kernels(site.prefix, site.op, site.named_nodes, dict(site.layouts),
                                 site.out, d["blocking"], d["pa"], x, d["pb"], w, none,
                                 none, list(site.extra), site.epilogue)


def _conv_blocking(m: int, n: int, knobs) -> matmul.Blocking:
    """The blocked conv2d's division of its [pixels, COUT] result: up to
    conv.blocked_cols channel texels a fragment, then as many pixels as the render
    targets leave (matmul.choose_blocking's 2 column texels by default)."""
    nt = -(-n // 4)
    most = matmul.max_targets()
    cols = min(knobs.blocked_cols, nt, most)
    rows = min(most // cols, m)
    return matmul.Blocking(1, m, n, rows, min(most // rows, nt))


def _blocked_applies(site, facts, tuning):
    g, out = site.g, site.out
    x_blocks = _x_blocks(site, facts)
    if site.kind != "conv" or site.depthwise or not site.two_operand_2d or \
            (site.macs < tuning.matmul.blocked_min_macs and x_blocks is None):
        return None
    blocking = _conv_blocking(g.N * g.out_count, g.COUT, tuning.conv)
    # stitch-free: the epilogue runs here and the readers read the targets
    targets = _targets_layout(blocking, "matmul", matmul._max_texture_size(
        site.layouts, out), tuning.conv) if stitch_free(site.node, facts, tuning) else None
    return ConvPlan(site, tuning.conv, x_blocks=x_blocks, targets=targets,
                    detail=dict(blocking=blocking))


def _emit_blocked(plan):
    site, knobs, x_blocks = plan.site, plan.knobs, plan.x_blocks
    g, (x, w), out = site.g, site.inputs, site.out
    blocking, extra = plan.detail["blocking"], list(site.extra)
    fours = g.C % 4 == 0
    # (its image in a producer's render targets is read by pixel position)
    pointwise = x_blocks is None and _pointwise(g, knobs)
    if x_blocks is not None:
        x = _blocks_operand(x, x_blocks)
    common = dict(g=g, xs=site.context["xs"], channels_in_fours=fours,
                  mat_steps=knobs.mat_steps, x_blocks=x_blocks and x_blocks.blocking,
                  filter_row_texels=knobs.filter_row_texels, lod_fetch=knobs.blocked_lod_fetch,
                  step_positions=knobs.step_positions,
                  pointwise=pointwise,
                  unrolled=pointwise and g.C // (4 if fours else 1) <= knobs.pointwise_inline_steps,
                  unroll=unroll_for(g.taps * g.C // (4 if fours else 1)),
                  **_helpers(x_blocks, [w] + extra))
    common["x_walk"] = _image_walk(site, knobs, x, x_blocks, fours)
    pack = _filter_panel(site, knobs, fours)
    if pack is not None:
        pack, w = pack[0], replace(pack[1], sampler=w.sampler)
        # the epilogue's operands take the prologue's helpers; the image and the
        # panel are read by tx_ / the walk and wpanel4
        common.update(filter_panel=True, fetch_helpers={b.sampler for b in extra})
    blocks, names = _target_operands(blocking, out, site.layouts, plan.targets)
    return ([pack] if pack is not None else []) + _blocked_kernels(
        "conv_blocked.glsl.j2", plan, x, w, blocks, names, blocking, common,
        mapping="matmul", blocking=blocking, aligned=g.COUT % 4 == 0)


def _image_walk(site, knobs, x, x_blocks, fours):
    """conv.image_walk: how the blocked conv2d's channel loop reads each pixel's image
    texels (conv_blocked_steps.glsl.j2), at an address computed once a tap plus the
    step's offset, shared by the pixels: "rows" where a pixel's C / 4 texels start a
    texture row or fit in one (C / 4 and the texture's width divide one another, every
    pixel at a multiple of C / 4 texels: x's strides multiples of C, or a depthwise
    kernel's blocks), "wrap" where the width is a power of two (the offset's whole rows
    carried into the row: exact, the column a dyadic fraction), else None (an address
    a texel)."""
    if not (knobs.image_walk and fours) or \
            (x_blocks is not None and x.layout.mapping != "depthwise"):
        return None
    c4, width = site.g.C // 4, x.width
    aligned = x_blocks is not None or not any(s % site.g.C for s in site.context["xs"][:3])
    if aligned and (c4 % width == 0 or width % c4 == 0):
        return "rows"
    return "wrap" if width & (width - 1) == 0 else None


def _filter_panel(site, knobs, fours):
    """(pack kernel, panel operand) of conv.filter_panel, or None: a constant filter
    seen as [taps * C, COUT] repacked so that output channel texel ct's rows are texels
    ct * K .. ct * K + K - 1 (matmul.Panel "k", one column texel a group): a channel
    step's 4 rows are 4 adjacent texels of one row of the panel (K % 4 == 0 and the
    panel's width a multiple of 4), read at one computed address (conv_filter_rows
    wpanel4). The pack kernel reads only a constant, so a plan draws it once (hoisted)."""
    w = site.node.inputs[1]
    if not (knobs.filter_panel and knobs.mat_steps and fours) or \
            w.node.op != "constant" or w.dtype != "float32":
        return None
    g = site.g
    k, nt = g.taps * g.C, -(-g.COUT // 4)
    panel = matmul.Panel("k", batch=1, groups=nt, slab=nt, lanes=4, k4=k // 4, rows=k,
                         cols=g.COUT, row_stride=g.COUT, col_stride=1, batch_stride=k * g.COUT)
    layout = matmul.panel_layout(panel, matmul._max_texture_size(site.layouts, site.out))
    if layout is None or layout.width % 4:
        return None
    name = f"{site.out.value}#filter_panel"
    if g.COUT % 4:          # rows that straddle texels: matmul's pack, element by element
        return matmul.pack_kernel(panel, layout, site.inputs[1], name, site.prefix + "w",
                                  site.op, site.named_nodes)
    # whole texels: one program for every conv's panel (its sizes uniforms)
    out = Operand(sampler="ff_out", value=name, layout=layout,
                  type=str(TensorType((panel.texels * 4,), "float32")))
    kernel = make_kernel(PANEL_TEMPLATE, site.prefix + "w", site.op + "_pack",
                         site.named_nodes, [site.inputs[1]], out,
                         uniforms={"u_k": ("int", k), "u_nt": ("int", nt),
                                   "u_width": ("int", layout.width)})
    return kernel, out


PANEL_TEMPLATE = "conv_filter_panel.glsl.j2"


def panel_of(kernel, filt):
    """What `kernel` computes from the constant `filt` (an array, its input) where it
    is a filter panel's pack (PANEL_TEMPLATE): the filter's texels permuted on the host,
    panel texel ct * K + k = the filter's row k, texel ct; else None. The WebGL export
    stores this in the filter's place (tools/webgl/export.py fold_filter_panels)."""
    if kernel.template != PANEL_TEMPLATE:
        return None
    k, nt = (int(kernel.uniforms[name][1]) for name in ("u_k", "u_nt"))
    return np.asarray(filt, dtype=np.float32).reshape(k, nt, 4).transpose(1, 0, 2).reshape(-1)


def _blocked_kernels(template, plan, x, w, blocks, names, tiling, common, **stitch):
    """A blocked conv's kernel and its stitch (applying the epilogue); where the
    planner leaves the result in the render targets (plan.targets), the blocked kernel
    alone, applying the epilogue itself. tiling: the blocked kernel's Blocking (or
    depthwise block); stitch: the stitch's template context."""
    site = plan.site
    args = (site.prefix, site.op, site.named_nodes)
    extra = list(site.extra)
    if plan.targets is not None:
        return [matmul.blocked_kernel(
            template, *args, [x, w] + extra, blocks, names, tiling,
            epilogue=site.epilogue, epilogue_vec4=True, result=site.out, **common)]
    main = matmul.blocked_kernel(template, *args, [x, w], blocks, names, tiling,
                                 epilogue=None, **common)
    return [main, matmul.stitch_kernel(blocks, site.out, site.prefix + "s", site.op,
                                       site.named_nodes, extra, site.epilogue, **stitch)]


# -- the blocked depthwise conv (depthwise_blocked.glsl.j2) ----------------------------

def _depthwise_blocked_applies(site, facts, tuning):
    g, out = site.g, site.out
    if site.kind != "conv" or not site.depthwise or not site.two_operand_2d:
        return None
    free = depthwise_stitch_free(site, facts, tuning)
    x_blocks = _x_blocks(site, facts)
    if site.macs < tuning.matmul.blocked_min_macs and not free and x_blocks is None:
        return None
    if not ((g.M == 1 and g.C % 4 == 0) or g.M % 4 == 0) or \
            g.taps > tuning.conv.blocked_depthwise_taps:
        return None
    out_h, out_w = g.out_size
    cols = min(4, out_w, matmul.max_targets())
    rows = min(matmul.max_targets() // cols, out_h)
    block = PixelBlock(g.N, out_h, out_w, g.COUT // 4, rows, cols)
    targets = _targets_layout(block, "depthwise", matmul._max_texture_size(
        site.layouts, out), tuning.conv) if free else None
    return ConvPlan(site, tuning.conv, x_blocks=x_blocks, targets=targets,
                    detail=dict(block=block))


def _footprint(g, block) -> list:
    """[(fy, fx, [(target, tap), ..])]: the input offsets a block's pixels read, each
    with the pixels and taps that use it, in order."""
    kh, kw = g.ksize
    (sy, sx), (dy, dx) = g.strides, g.dilations
    uses = {}
    for py in range(block.rows):
        for px in range(block.cols):
            for ky in range(kh):
                for kx in range(kw):
                    uses.setdefault((py * sy + ky * dy, px * sx + kx * dx), []).append(
                        (py * block.cols + px, ky * kw + kx))
    return [(fy, fx, pairs) for (fy, fx), pairs in sorted(uses.items())]


def _emit_depthwise_blocked(plan):
    site, x_blocks, block = plan.site, plan.x_blocks, plan.detail["block"]
    g, (x, w), out, extra = site.g, site.inputs, site.out, list(site.extra)
    footprint = _footprint(g, block)
    kh, kw = g.ksize
    # WebGL (ES): one block row's footprint is a loop over the filter rows, its columns
    # unrolled, not the whole footprint unrolled: SwiftShader compiles each shader at its
    # first draw, in time that grows with the code. The same reads, in the same order.
    row_loop = {}
    if active().es and block.rows == 1:
        row_loop = dict(row_loop=True, kh=kh, kw=kw, dil_y=g.dilations[0], row_uses=[
            (fx, [(j, tap) for j, tap in pairs]) for fy, fx, pairs in footprint if fy == 0])
    blocks, names = _target_operands(block, out, site.layouts, plan.targets)
    if x_blocks is not None:
        x = _blocks_operand(x, x_blocks)
    common = dict(block=block, g=g, xs=site.context["xs"], taps=g.taps, footprint=footprint,
                  footprint_rows=sorted({fy for fy, _, _ in footprint}),
                  footprint_cols=sorted({fx for _, fx, _ in footprint}),
                  x_blocks=x_blocks and x_blocks.blocking, lod_fetch=plan.knobs.blocked_lod_fetch,
                  **_helpers(x_blocks, [w] + extra), **row_loop)
    return _blocked_kernels("depthwise_blocked.glsl.j2", plan, x, w, blocks, names, block,
                            common, mapping="depthwise", aligned=True, g=g, block=block)


# -- the blocked filter gradient (conv_filter_blocked.glsl.j2) -------------------------

def _filter_blocked_applies(site, facts, tuning):
    """conv2d_backprop_filter as the blocked matmul of the transposed windows with dy,
    4 (tap, input channel) rows per fragment (4 channels of a tap reading one texel of x
    per pixel where C % 4 == 0), the batch (and output rows) split among fragments
    where the filter is small."""
    g, out, knobs = site.g, site.out, tuning.conv
    if site.kind != "backprop_filter" or site.depthwise or not site.two_operand_2d or \
            out.layout.size * g.N * g.out_count < tuning.matmul.blocked_min_macs or \
            matmul.max_targets() < 4:   # rows: the 4 input channels of one texel of x
        return None
    blocking = matmul.Blocking(1, g.taps * g.C, g.COUT, 4,
                               min(2, -(-g.COUT // 4), matmul.max_targets() // 4),
                               interleaved=True)
    # few blocks (a small filter): split the batch among more fragments
    per_split = -(-g.N // min(g.N, -(-knobs.filter_gradient_fragments //
                                     blocking.fragments_per_split)))
    out_h, out_w = g.out_size
    # one image a split and still few fragments (conv1 of W13: 9 x 8 filter, 3 blocks):
    # split each image's output rows too
    row_splits = 1
    if knobs.split_rows and per_split == 1:
        row_splits = min(out_h, -(-knobs.filter_gradient_fragments //
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
    return ConvPlan(site, knobs, detail=dict(blocking=blocking, unroll=unroll,
                                             per_split=per_split, row_splits=row_splits,
                                             rows_per=rows_per))


def _emit_filter_blocked(plan):
    site, d = plan.site, plan.detail
    g, blocking = site.g, d["blocking"]
    blocks, names = _target_operands(blocking, site.out, site.layouts)
    main = matmul.blocked_kernel(
        "conv_filter_blocked.glsl.j2", site.prefix, site.op, site.named_nodes,
        list(site.inputs), blocks, names, blocking, g=g, xs=site.context["xs"],
        unroll=d["unroll"], per_split=d["per_split"], row_splits=d["row_splits"],
        rows_per=d["rows_per"], fours=g.C % 4 == 0)
    # the epilogue (an optimizer's update of the filter) runs in the stitch
    stitch = matmul.stitch_kernel(blocks, site.out, site.prefix + "s", site.op,
                                  site.named_nodes, list(site.extra), site.epilogue,
                                  mapping="matmul", blocking=blocking,
                                  aligned=g.COUT % 4 == 0)
    return [main, stitch]


# -- every kind: templates/conv.glsl.j2 ------------------------------------------------

def _emit_generic(plan):
    site = plan.site
    return make_kernel("conv.glsl.j2", site.prefix, site.op, site.named_nodes,
                       list(site.inputs) + list(site.extra), site.out, g=site.g,
                       epilogue=site.epilogue, **site.context)


TABLE = (
    Strategy("pool.lanes", _pool_applies("lanes"), _emit_pool,
             "max/min pool gradient, C % 4 != 0: argmaxes, then dy routed by them"),
    Strategy("pool.routed", _pool_applies("routed"), _emit_pool,
             "max/min pool gradient over overlapping windows, 4 channels a fragment"),
    Strategy("pool.vec4", _pool_applies("vec4"), _emit_pool,
             "pools and their gradients with C % 4 == 0, 4 channels a fragment"),
    Strategy("depthwise.direct", _depthwise_direct_applies, _emit_depthwise_direct,
             "small float depthwise conv2d, a fragment per output texel"),
    Strategy("conv.direct", _direct_applies, _emit_direct,
             "float conv2d with COUT % 4 == 0, small or with short sums"),
    Strategy("conv.packed", _packed_applies, _emit_packed,
             "conv2d with a big input: im2col into the packed matmul"),
    Strategy("conv.blocked", _blocked_applies, _emit_blocked,
             "conv2d as a blocked matmul of windows and filter (+ stitch)"),
    Strategy("depthwise.blocked", _depthwise_blocked_applies, _emit_depthwise_blocked,
             "depthwise conv2d, 4 channels of 2 x 4 pixels a fragment (+ stitch)"),
    Strategy("conv.filter_blocked", _filter_blocked_applies, _emit_filter_blocked,
             "conv2d_backprop_filter as a blocked matmul (+ stitch)"),
    Strategy("conv.generic", lambda site, facts, tuning: ConvPlan(site, tuning.conv),
             _emit_generic, "every kind, every shape: templates/conv.glsl.j2"),
)
