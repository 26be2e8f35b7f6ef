"""The direct depthwise 2D convolution kernel (templates/depthwise_direct.glsl.j2): one
fragment per output texel (4 channels of one pixel) in the output's own layout, its
taps unrolled, the fused epilogue (bias, activation) applied in the same kernel.

codegen/conv.py asks here first, for the depthwise convolutions that do not run
blocked (output elements x taps below matmul.BLOCKED_MIN_MACS: every depthwise layer
of MobileNet at 96x96 but the first and third). Measured on llvmpipe (process CPU per
layer, chains of fused depthwise + bias + relu6, against conv.glsl.j2's generic loop,
compiled first, i.e. on the slow side of the in-process order effect): 6x6x128 121 vs
130 us, 12x12x64 180 vs 292 us, 3x3x256 75 vs 119 us, 24x24x16 182 vs 278 us. A
fragment's 18 fetches (9 input, 9 weight texels) are its cost: ~3 ns each with
texelFetch, against ~12 ns a texel for everything else (index, epilogue, write).
"""
from __future__ import annotations

import math

from . import matmul
from .common import make_kernel

# Texels read with textureLod at their centre (templates/lod_texel.glsl.j2) rather than
# texelFetch: llvmpipe's texelFetch looks up the level's size lane by lane.
LOD_FETCH = True
# Filters up to this many taps (the taps are unrolled in Jinja).
DIRECT_MAX_TAPS = 49


def direct_kernel(g: dict, context: dict, inputs, out, prefix: str, op: str, nodes,
                  extra=(), epilogue=None):
    """The kernel of a float depthwise conv2d with whole output texels (multiplier 1 and
    C % 4 == 0, or multiplier % 4 == 0) too small for the blocked kernel, else None."""
    taps = math.prod(g["ksize"])
    c, mult = g["C"], g["M"]
    if not ((mult == 1 and c % 4 == 0) or mult % 4 == 0) or taps > DIRECT_MAX_TAPS or \
            out.dtype != "float32" or out.size * taps >= matmul.BLOCKED_MIN_MACS:
        return None
    x, w = inputs
    return make_kernel("depthwise_direct.glsl.j2", prefix, op, nodes, [x, w] + list(extra),
                       out, g=g, xs=context["xs"], epilogue=epilogue, epilogue_vec4=True,
                       lod_fetch=LOD_FETCH)
