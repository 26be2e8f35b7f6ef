"""The direct depthwise 2D convolution kernel (templates/depthwise_direct.glsl.j2): one
fragment per output texel (4 channels of one pixel) in the output's own layout, its
taps unrolled, the fused epilogue (bias, activation) applied in the same kernel.

codegen/conv.py asks here first, for the depthwise convolutions that do not run
blocked (output elements x taps below matmul.BLOCKED_MIN_MACS, and not read only by
conv2d kernels that take a blocked depthwise kernel's targets: MobileNet's layers
run blocked without a stitch, see conv.DEPTHWISE_STITCH_FREE). Measured on llvmpipe (process CPU per
layer, chains of fused depthwise + bias + relu6, against conv.glsl.j2's generic loop,
compiled first, i.e. on the slow side of the in-process order effect): 6x6x128 121 vs
130 us, 12x12x64 180 vs 292 us, 3x3x256 75 vs 119 us, 24x24x16 182 vs 278 us. A
fragment's 18 fetches (9 input, 9 weight texels) are its cost: ~3 ns each with
texelFetch, against ~12 ns a texel for everything else (index, epilogue, write).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from . import tuning as _tuning
from .common import make_kernel
from .operands import Operand


def _direct_applies(taps: int, c: int, mult: int, dtype: str, out_size: int) -> bool:
    tuning = _tuning.active()
    return ((mult == 1 and c % 4 == 0) or mult % 4 == 0) and \
        taps <= tuning.conv.depthwise_direct_max_taps and dtype == "float32" and \
        out_size * taps < tuning.matmul.blocked_min_macs


def reads_blocks(node, value) -> bool:
    """Whether graph node `node` is a depthwise conv that can read `value` (its image,
    and nothing else of it) straight from the render targets of the blocked conv2d
    that computes it (matmul.BlocksLayout: multiplier 1, no stitch in between): the
    direct kernel reads them, and the blocked one where the node is too big for the
    direct one (codegen/conv.py)."""
    conv_op = node.attrs.get("conv_op") if node.op == "fused_conv" else node.op
    if conv_op != "depthwise_conv2d" or node.inputs[0] is not value or \
            any(v is value for v in node.inputs[1:]):
        return False
    x, w, out = node.inputs[0].type, node.inputs[1].type, node.outputs[0].type
    knobs = _tuning.active().conv
    if len(x.shape) != 4 or len(w.shape) != 4 or not x.is_static or not w.is_static:
        return False
    return w.shape[3] == 1 and x.shape[3] % 4 == 0 and \
        x.dtype == w.dtype == out.dtype == "float32" and \
        w.shape[0] * w.shape[1] <= min(knobs.depthwise_direct_max_taps,
                                       knobs.blocked_depthwise_taps)


@dataclass
class BlocksOperand(Operand):
    """An input read from a blocked kernel's render targets (an array texture)."""
    sampler_type = property(lambda self: "sampler2DArray")


def direct_kernel(g, context: dict, inputs, out, prefix: str, op: str, nodes,
                  extra=(), epilogue=None, layouts=None):
    """The kernel of a float depthwise conv2d with whole output texels (multiplier 1 and
    C % 4 == 0, or multiplier % 4 == 0) too small for the blocked kernel, else None.
    Where the image's producer left it in its render targets (layouts holds a
    BlocksLayout for "<image>#blocks", see reads_blocks), the kernel reads them."""
    taps = math.prod(g.ksize)
    x, w = inputs
    view = (layouts or {}).get(f"{x.value}#blocks")
    blocks = getattr(view, "blocking", None)
    if not _direct_applies(taps, g.C, g.M, out.dtype, out.size):
        return None             # the blocked kernel's (it reads the targets too)
    if blocks is not None:
        x = BlocksOperand(sampler=x.sampler, value=f"{x.value}#blocks", layout=view,
                          type=x.type, arg=x.arg)
    bound = [x, w] + list(extra)
    # the prologue's texelFetch helpers take a sampler2D: none for the layers
    helpers = {"fetch_helpers": {b.sampler for b in bound[1:]}} if blocks else {}
    return make_kernel("depthwise_direct.glsl.j2", prefix, op, nodes, bound,
                       out, g=g, xs=context["xs"], epilogue=epilogue, epilogue_vec4=True,
                       lod_fetch=_tuning.active().conv.depthwise_lod_fetch,
                       x_blocks=blocks, **helpers)
