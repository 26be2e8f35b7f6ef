"""The reduce family's knobs (codegen/reduce*.py, codegen/scan.py; codegen/loss.py reads
direct_softmax_work): one field per knob, the llvmpipe profile's value as its default;
PROFILES gives each device kind's. docs/PERFORMANCE.md has what each was measured at."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class ReduceTuning:
    # a pass's windows keep its output at this many fragments or more (four 64x64 tiles)
    min_fragments: int = 16384
    # a pass reduces its axis at least this much (4x along rows), at most window_max
    window_min: int = 256
    window_max: int = 4096
    # elements a single pass reduces without splitting the axis
    small_work: int = 1 << 16
    # the hot loops' bodies, unrolled (a loop's overhead per iteration)
    min_unroll: int = 4
    # an intermediate texture: rows of at most scratch_row_texels texels, about
    # scratch_rows rows tall, yet scratch_min_width wide once that leaves 4 rows
    scratch_row_texels: int = 2048
    scratch_rows: int = 8
    scratch_min_width: int = 128
    # pass sources read with textureLod at texel centres instead of texelFetch
    lod_fetch: bool = True
    # render targets of a first pass down columns (1: none; at most the device's)
    column_targets: int = 8
    # texel passes step along rows in texture coordinates (reduce_tree.row_run), their
    # loop bodies unrolled row_run_unroll times
    row_runs: bool = True
    row_run_unroll: int = 8
    # passes along rows read whole texels into lane partials (reduce_tree.texel_pass)
    whole_texels: bool = True
    # softmax along 4-aligned rows keeps its max and sum as lane partials
    softmax_partials: bool = True
    # softmax (and the loss) whose elements times its axis stay under this: one kernel
    # whose elements each walk their slice
    direct_softmax_work: int = 1 << 16
    # LayerNorm / RMSNorm (passes/norms.py fuses rows of at most norm_max_width
    # elements): rows of at most norm_direct_width run as one kernel whose fragments
    # each walk their row (codegen/norm.py norm.direct), longer ones as two (norm.stats:
    # a row's statistics, then the normalization). llvmpipe (docs/PERFORMANCE.md):
    # norm.stats 1.5-6x faster than the five unfused kernels from 16 to 1024 elements,
    # norm.direct as fast up to 32, slower from 64 (0.03-0.7x unfused's at 256)
    norm_max_width: int = 16384
    norm_direct_width: int = 32
    # ... and rows of any width where rows x width² (what the fragments' walks read in
    # all) stays at most norm_direct_work: few rows, one launch less. Off: whole BERT
    # on llvmpipe (docs/PERFORMANCE.md) 1.25-1.29x slower at 128 x 256, 1.11x at 32 x
    # 256, and at the test's 32 x 128 0.97-0.98x the two kernels' but 1.03x those
    # reading the matmul's targets (matmul.norm_reads_blocks) in place of its stitch;
    # the webgl profile's export in Chromium 0.63x (SwiftShader) and 0.81x (Mesa) at
    # 32 x 128, 0.94x and 0.85x at 128 x 256: off in every profile
    norm_direct_work: int = 0
    # a LayerNorm read only by blocked matmuls as their A and by matmuls' epilogues as a
    # residual operand (post-LN BERT: the next layer's q, k, v product and its residual
    # add) runs as one kernel writing render targets, no stitch (codegen/norm.py
    # norm.rows): a fragment walks its row once into registers and writes up to
    # matmul.max_targets of its texels; the readers read them there
    norm_rows: bool = True
    # ... and such a LayerNorm that is fetched too (a model's output: BERT's last norm),
    # read by no other kind of reader: it stays in its render targets and the readback
    # puts its elements in order on the host (runtime/gl_plan.py, tools/webgl/runtime.js);
    # off: norm.stats' two kernels, the result in a texture of its own. Where a row's
    # fragments (each reads the whole row) read at most norm_rows_fetched_reads
    # elements more than norm.stats' three reads of each: rows x width x (fragments a
    # row - 3). llvmpipe in process (docs/PERFORMANCE.md): the test BERT 0.98-1.02x,
    # 32 x 128 alone 1.10x, 48 x 128 1.04x, 64 x 128 0.96x, 8 x 256 0.95x, 128 x 256
    # 0.52x, 1024 x 32 1.72x; the webgl profile's export: off (each layer is one more
    # readPixels, ~0.1 ms in Chromium: the test BERT 0.96x on SwiftShader, a norm
    # alone 0.5-0.9x)
    norm_rows_fetched: bool = True
    norm_rows_fetched_reads: int = 6144
    norm_rows_cache: bool = True
    norm_rows_targets: int = 8
    # the most a LayerNorm walk's loop body is unrolled to stay in the loop budget
    # (past it the row is not fused: a longer body, not a longer walk, is what costs)
    norm_max_unroll: int = 64
    # column sums to at most few_outputs elements down split_few_length rows or more:
    # windows of split_few_window (two passes), not a few fragments walking the axis
    split_few: bool = True
    few_outputs: int = 64
    split_few_length: int = 2048
    split_few_window: int = 64
    # cumsum's blocks (codegen/scan.py): along a contiguous axis, along a strided one
    scan_block_contiguous: int = 64
    scan_block_strided: int = 16


LLVMPIPE = ReduceTuning()
# A GPU runs tens of thousands of fragments at once: a first pass of 16K fragments
# would leave most lanes idle, so windows shrink until it has 64K.
GPU = dataclasses.replace(LLVMPIPE, min_fragments=1 << 16)
# WebGL2 runs on the same GPUs; its 4 draw buffers cap column_targets through Limits.
# A fetched norm left in render targets reads back a layer at a time (readPixels each):
# slower in Chromium on both rasterisers (docs/PERFORMANCE.md)
WEBGL = dataclasses.replace(GPU, norm_rows_fetched=False)

PROFILES = {"llvmpipe": LLVMPIPE, "gpu": GPU, "webgl": WEBGL}
