"""The structure family's knobs (codegen/top_k.py): one field per knob, the llvmpipe
profile's value as its default; PROFILES gives each device kind's. docs/PERFORMANCE.md
has what each was measured at."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StructureTuning:
    # top_k whose rows x length^2 is at most this ranks every element against its row
    # (top_k.rank: two draws); more takes the radix select (top_k.radix, 4 + 64 / bits
    # draws). llvmpipe: a row of 256, 0.4 ms against 0.8; of 512, 1.1 against 1.0; 64
    # rows of 256, 12.4 against 1.9
    top_k_rank_max_work: int = 1 << 17
    # bits of the k-th largest key a radix round settles (1, 2, 4 or 8; another leaves
    # top_k.radix out): 2^bits - 1 counts per element and round, 32 / bits rounds of
    # two draws each; past 2 bits a block's elements are read once per 4 counts
    # (llvmpipe, a row of 1,310,720: 2 bits 130 ms, 4 bits 350 ms, 8 bits 2.2 s)
    top_k_radix_bits: int = 2
    # elements a counting fragment walks, at least (grown to balance the block walks
    # with the per-round sum over the blocks, about 2 * sqrt(row * texels per block))
    top_k_block: int = 1024


LLVMPIPE = StructureTuning()
# Not measured on a GPU: a round's two draws are cheap there and a count pass has
# rows x blocks fragments, so llvmpipe's values stand (more bits: fewer draws, more reads)
GPU = LLVMPIPE
WEBGL = GPU

PROFILES = {"llvmpipe": LLVMPIPE, "gpu": GPU, "webgl": WEBGL}
