"""The matmul family's knobs (codegen/matmul.py; the conv family reads the thresholds
too): one field per knob, the llvmpipe profile's value as its default; PROFILES gives
each device kind's. docs/PERFORMANCE.md has what each was measured at."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class MatmulTuning:
    # scaled dot-product attention as one fused_attention kernel (passes/attention.py),
    # its online softmax walking the keys attention_key_tile at a time
    attention_fuse: bool = True
    attention_key_tile: int = 8
    # attention.online (one kernel, q·k in the walk) for rows of v of at most this many
    # texels: each texel's fragment computes the row's scores again; wider rows take
    # attention.scores (q kᵀ by the matmul table, then the walk)
    attention_one_kernel_texels: int = 1
    # fuse_attention leaves attention unfused where its walk, batch x queries x keys x
    # texels of a row of v (exps, score and v fetches), exceeds this: llvmpipe measured
    # the walk 1.2x faster than the three unfused products at 32 tokens, 1.8x slower at
    # 65 and 2.5x at 128 (64-wide heads; docs/PERFORMANCE.md)
    attention_max_walk: int = 1 << 16
    # fuse_attention folds v's head transpose ([B, L, H, D] -> [B, H, L, D]) and the
    # result's back into the node: the walk reads v and writes the result in [B, L, H,
    # D], two kernels fewer a BERT layer (docs/PERFORMANCE.md)
    attention_heads: bool = True
    # ... and q's and k's, read by the scores' product (attention.scores) in [B, L, H,
    # D] with their strides (codegen/matmul.py Product heads)
    attention_qk_heads: bool = True
    # ... and q's, k's and v's column slices of a merged projection (merge_siblings):
    # the kernels read them in place, no slice kernels (`<r>_columns`)
    attention_columns: bool = True
    # attention.scores_blocks: where q kᵀ runs blocked, the walk reads the scores from
    # the blocked kernel's render targets, no stitch (docs/PERFORMANCE.md)
    attention_scores_blocks: bool = True
    # ... and q's, k's and v's merged projection (blocked, K not split) leaves its
    # result in its render targets, epilogue applied: the scores' blocked kernel reads
    # q and k there, the walk v (codegen/attention.py reads_blocks), no stitch
    attention_reads_blocks: bool = True
    # merge_matmuls: sibling matmuls of one operand (q, k, v) as one over their weights
    # side by side, then column slices (passes/merge_matmuls.py; docs/PERFORMANCE.md)
    merge_siblings: bool = True
    # multiply-adds from which a matmul (or a conv as one) runs blocked: several
    # outputs per fragment over several render targets, then a stitch
    blocked_min_macs: int = 1 << 17
    # multiply-adds from which it packs its operands into panels first
    packed_min_macs: int = 1 << 22
    # ... and rows of the output (all batches) from which B's panel pays for itself
    # where B's rows are whole texels already: the pack reads and writes all of B, as
    # much as a product of one row does (a token's step of a decoder). Fewer rows run
    # blocked: 1x768 @ (50257x768)^T 165 -> 58 ms a run, 1x1024 @ 1024x8192 52 -> 19
    # (process CPU, medians of 7, load 16); from 32 rows packed won (768x2304: 23 vs 28)
    packed_min_rows: int = 32
    # a blocked (or packed) matmul read only by LayerNorms as their x leaves its
    # product in its render targets: the norm's kernels add up its K splits and apply
    # its epilogue (bias, residual add) as they read x, in place of the stitch
    # (codegen/matmul.py plan_blocks, codegen/norm.py reads_blocks)
    norm_reads_blocks: bool = True
    # ... where x has at most this many elements: the norm's kernels read each of x's
    # texels three times (two statistics walks, the normalization), each read now the
    # product's texel and the epilogue's operands, where the stitch read them once
    norm_blocks_max_elements: int = 1 << 12
    # a blocked matmul (K not split) read only by blocked matmuls as their A applies
    # its epilogue itself and leaves its result in its render targets; the readers read
    # A's texels there (BERT's first feed-forward matmul, read by the second)
    matmul_reads_blocks: bool = True
    # render targets of a blocked kernel, at most (never more than the device's draw
    # buffers: codegen/limits.py)
    max_targets: int = 8
    # a blocked kernel's targets span at least this many 64x64 tiles where they have
    # the fragments (llvmpipe gives each thread whole tiles)
    min_tiles: int = 4
    # a product with fewer blocks than split_fragments splits K among fragments, each
    # split split_min_k long or more, at most split_max splits (the stitch reads each)
    split_fragments: int = 1024
    split_min_k: int = 128
    split_max: int = 16
    # the packed kernel reads a row run's later texels with textureLodOffset
    packed_offsets: bool = True
    # the blocked kernel's step with B's rows whole texels: B's 4 rows as a mat4
    mat_steps: bool = True
    # B's panel holds 4 k of one column a texel even where its rows are whole texels
    packed_b_columns: bool = True
    # the one-kernel product reads whole texels with textureLod, not texelFetch
    plain_lod_fetch: bool = True
    # the packed kernel's loop body, unrolled at least this many times
    packed_unroll: int = 4
    # one-kernel products whose output texels are not 4 columns of one B texel read
    # both operands 4 k a texel (templates/matmul_lanes.glsl.j2) ...
    lanes: bool = True
    # ... where its loop takes at most 1 / lanes_loop_share of a kernel's loop budget
    lanes_loop_share: int = 2


LLVMPIPE = MatmulTuning()
# A GPU keeps tens of thousands of fragments in flight, not llvmpipe's few threads:
# K is split until the blocks give it 16K fragments.
GPU = dataclasses.replace(LLVMPIPE, split_fragments=1 << 14)
# WebGL2 runs on the same GPUs; its 4 draw buffers cap max_targets through Limits.
WEBGL = GPU

PROFILES = {"llvmpipe": LLVMPIPE, "gpu": GPU, "webgl": WEBGL}
