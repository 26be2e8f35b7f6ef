"""The matmul family's knobs (codegen/matmul.py; the conv family reads the thresholds
too): one field per knob, the llvmpipe profile's value as its default; PROFILES gives
each device kind's."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MatmulTuning:
    # multiply-adds from which a matmul (or a conv as one) runs blocked: several
    # outputs per fragment over several render targets, then a stitch
    blocked_min_macs: int = 1 << 17
    # multiply-adds from which it packs its operands into panels first
    packed_min_macs: int = 1 << 22


PROFILES = {"llvmpipe": MatmulTuning(), "gpu": MatmulTuning(), "webgl": MatmulTuning()}
