"""The matmul family's knobs (codegen/matmul*.py): one field per knob, the llvmpipe
profile's value as its default; PROFILES gives each device kind's."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MatmulTuning:
    pass


PROFILES = {"llvmpipe": MatmulTuning(), "gpu": MatmulTuning(), "webgl": MatmulTuning()}
