"""The reduce family's knobs (codegen/reduce*.py): one field per knob, the llvmpipe
profile's value as its default; PROFILES gives each device kind's."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReduceTuning:
    pass


PROFILES = {"llvmpipe": ReduceTuning(), "gpu": ReduceTuning(), "webgl": ReduceTuning()}
