"""The conv family's knobs (codegen/conv.py, depthwise.py, pool.py; the thresholds in
blocks of multiply-adds are matmul's: `tuning.matmul.blocked_min_macs`,
`packed_min_macs`): one field per knob, the llvmpipe profile's value as its default;
PROFILES gives each device kind's. docs/PERFORMANCE.md has what each was measured at."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class ConvTuning:
    # a plain convolution whose input has this many elements or more runs as im2col
    # into the packed matmul's panel (past a core's L2 the windows miss the cache)
    packed_min_input: int = 1 << 19
    # the blocked conv2d's channel step as 4 filter rows in a mat4 times a texel
    mat_steps: bool = True
    # ... and with COUT % 4 != 0 (and C % 4 == 0) a filter row's 4 output channels as
    # one texel or two (the row's offset in its texel is known per step), not 4 scalar
    # fetches
    filter_row_texels: bool = True
    # the blocked conv2d's channel texels a fragment, at most (its other targets take
    # that many more pixels)
    blocked_cols: int = 2
    # the blocked conv2d of one image works out its pixels' positions by stepping from
    # the first's (one division a fragment), not each by its own divisions
    step_positions: bool = False
    # a 1x1, stride-1, unpadded conv2d (a matmul of [pixels, C] and [C, COUT]) reads
    # output pixel p's image at element p * C in the direct and blocked kernels: no
    # window positions, padding tests or tap loops; the blocked one unrolls its channel
    # loop where it has at most pointwise_inline_steps steps (texels, or channels where
    # C % 4 != 0)
    pointwise: bool = False
    pointwise_inline_steps: int = 0
    # ... and a big one (packed_min_input) may run as im2col + the packed matmul; False:
    # the blocked kernel, which reads the image in place (no im2col copy of it)
    pointwise_packed: bool = True
    # the blocked conv2d reads its image and filter with textureLod at texel centres
    # (lod_texel.glsl.j2), not texelFetch
    blocked_lod_fetch: bool = True
    # the blocked conv2d (C % 4 == 0) reads a constant filter from a panel made once
    # (hoisted): each output channel texel's rows adjacent, so a channel step's 4 rows
    # are 4 neighbouring texels at one computed address, not 4 addresses
    filter_panel: bool = False
    # ... and its image's texels at one address a pixel and tap plus the step's offset,
    # shared by the fragment's pixels (where a pixel's texels start a texture row or fit
    # in one), not an address a texel
    image_walk: bool = False
    # a conv2d of an image with C % 4 != 0 channels reads it padded to a multiple of 4
    # (one pad kernel; zero filter rows) where that adds at most C / 3 channels and the
    # conv has pad_channels_min_macs multiply-adds or more (passes/pad_channels.py): its
    # kernel then reads whole texels, not one element a channel and tap
    pad_channels: bool = True
    pad_channels_min_macs: int = 1 << 20
    # a conv2d whose one window is its whole image (VALID, a 1x1 output: a head's dense
    # layer written as a conv) runs as the matmul of the image's rows and the filter's
    # (passes/conv_as_matmul.py): matmul's kernels split the long sums, the conv's sum
    # each output alone
    whole_window_matmul: bool = True
    # depthwise filters up to this many taps run blocked (its loops unrolled in Jinja)
    blocked_depthwise_taps: int = 49
    # a filter gradient splits its batch until it has about this many fragments ...
    filter_gradient_fragments: int = 1024
    # ... and an image's output rows too where one image a split leaves fewer
    split_rows: bool = True
    # a blocked conv2d read only by depthwise kernels leaves its result in its render
    # targets (no stitch), and a depthwise conv read only by conv2d kernels likewise
    stitch_free: bool = True
    depthwise_stitch_free: bool = True
    # ... and one whose readers include fused convs reading it as an epilogue operand at
    # their own shape (a residual add's shortcut), from the targets too
    epilogue_blocks: bool = True
    # ... and one read by blocked conv2d kernels as their image (MobileNet-v2's project
    # conv feeding the next block's expand conv)
    conv_reads_blocks: bool = True
    # such targets are layers this many texels wide (wider where they would be too tall)
    blocks_width: int = 16
    # a stitch-free conv2d with C % 4 == 0 and this many products per output or more
    # runs blocked rather than direct
    blocked_first_depth: int = 16
    # the direct conv2d (one fragment per output texel): sums of up to direct_max_depth
    # products per output past blocked_min_macs, fewer than direct_max_macs in all,
    # filters up to direct_max_taps taps, channel loops of up to direct_inline_steps
    # steps unrolled
    direct_max_depth: int = 32
    direct_max_macs: int = 1 << 21
    direct_max_taps: int = 49
    direct_inline_steps: int = 8
    # ... and channel loops (steps past direct_inline_steps) only in windows of up to
    # this many taps: llvmpipe compiled 4x4 taps of 14-16 step loops in 70 s (3x3 taps
    # of 64 steps 0.2 s, 4x4 of 16 unrolled 1 s; docs/PERFORMANCE.md, conv.direct);
    # conv.generic takes the rest
    direct_max_looped_taps: int = 9
    # with C % 4 != 0, window rows of up to direct_row_floats floats read as whole
    # texels (row_reads), a constant filter of up to literal_max_c4 output texels
    # written into the source (literal_weights), channels picked aligned
    row_reads: bool = True
    direct_row_floats: int = 16
    literal_weights: bool = True
    literal_max_c4: int = 4
    aligned_picks: bool = True
    # the direct depthwise kernel: filters up to this many taps (unrolled), its texels
    # read with textureLod at their centres rather than texelFetch
    depthwise_direct_max_taps: int = 49
    depthwise_lod_fetch: bool = True
    # pools four channels a fragment: windows up to this many taps (unrolled)
    pool_max_taps: int = 64
    # the pass conv_backprop_as_conv (passes/conv_lowering.py) turns a stride-1 input
    # gradient's filter by one gather of the flat filter at constant indices (one launch)
    # rather than a strided_slice and a transpose, for filters of up to
    # backprop_one_gather_max elements (the indices are a constant as big as the filter)
    backprop_one_gather: bool = True
    backprop_one_gather_max: int = 1 << 18
    # ... and a strided one as one conv2d of its s * s phases (the phases as channels)
    # and an interleave (depth_to_space, a crop where the phases overhang), rather than
    # the generic gather kernel, which loops over every tap to find the few that land
    backprop_phases: bool = True


LLVMPIPE = ConvTuning()
# A GPU's texelFetch is a plain load (llvmpipe looks up the level's size lane by lane,
# which textureLod avoids), and its thousands of lanes want a filter gradient's sum
# split among more fragments than llvmpipe's two threads do.
GPU = dataclasses.replace(LLVMPIPE, depthwise_lod_fetch=False,
                          filter_gradient_fragments=4096)
# WebGL2 runs on the same GPUs; its 4 draw buffers come from Limits, not from here.
# With 4 targets the blocked conv2d takes 4 pixels of one channel texel a fragment, not
# 2 x 2: 8 texel fetches a channel step (4 of the image, the filter's 4 rows once), not
# 10. Measured in Chromium (docs/PERFORMANCE.md, "Pose models on SwiftShader"): Mesa
# llvmpipe through ANGLE 7-11% faster on the four pose models, SwiftShader within its
# noise (-15% .. +13% a model). Its blocked conv2d reads the image from a plain texture,
# not from a blocked conv2d's render targets (conv_reads_blocks): Mesa through ANGLE
# -1% .. +14% a pose model (two sessions), SwiftShader within 2%.
# A 1x1 conv2d reads its image as the matmul's rows (pointwise) and runs blocked however
# big (pointwise_packed off: no im2col copy): MobileNet-v2's expand convs in Chromium
# 10-15% faster on SwiftShader and on Mesa through ANGLE; 128x128x32 -> 192 blocked
# rather than packed 14% faster on SwiftShader, 40% on Mesa ("1x1 convolutions with
# short sums"). Its channel loop is unrolled up to 2 texel steps (C <= 8), not 8: an
# unrolled C = 32 (8 steps, 32 texture reads) costs SwiftShader's JIT ~3x the loop's at
# the first draw, and the steady draws were no slower on either rasteriser
# (docs/PERFORMANCE.md, "First runs on SwiftShader: pointwise loops").
# A constant filter is read from its panel (filter_panel): SwiftShader's JIT spends more
# on a texel's address than on its fetch, so one address a step instead of 4 took a 1x1
# 25x25x384 -> 384 kernel from 38 to 32 ms (docs/PERFORMANCE.md, "Filter panels").
WEBGL = dataclasses.replace(GPU, blocked_cols=1, conv_reads_blocks=False, pointwise=True,
                            pointwise_inline_steps=2, pointwise_packed=False,
                            filter_panel=True, image_walk=True)

PROFILES = {"llvmpipe": LLVMPIPE, "gpu": GPU, "webgl": WEBGL}
