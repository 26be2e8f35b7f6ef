"""The structure family's knobs (codegen/top_k.py): one field per knob, the llvmpipe
profile's value as its default; PROFILES gives each device kind's. docs/PERFORMANCE.md
has what each was measured at."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StructureTuning:
    # top_k rows at least this long take the radix select (top_k.radix); shorter ones
    # rank every element against its row (top_k.rank, quadratic but two draws)
    top_k_radix_min: int = 2048
    # bits of the k-th largest key a radix round settles (1, 2, 4 or 8): 2^bits - 1
    # counts per element and round, 32 / bits rounds of two draws each
    top_k_radix_bits: int = 4
    # elements a counting fragment walks, at least (grown to balance the block walks
    # with the per-round sum over the blocks, about 2 * sqrt(row * texels per block))
    top_k_block: int = 1024


LLVMPIPE = StructureTuning()
GPU = LLVMPIPE
WEBGL = GPU

PROFILES = {"llvmpipe": LLVMPIPE, "gpu": GPU, "webgl": WEBGL}
