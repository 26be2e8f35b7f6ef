"""The conv family's knobs (codegen/conv*.py): one field per knob, the llvmpipe
profile's value as its default; PROFILES gives each device kind's."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConvTuning:
    pass


PROFILES = {"llvmpipe": ConvTuning(), "gpu": ConvTuning(), "webgl": ConvTuning()}
