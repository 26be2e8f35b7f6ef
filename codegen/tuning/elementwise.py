"""The elementwise family's knobs (codegen/elementwise.py): one field per knob, the
llvmpipe profile's value as its default; PROFILES gives each device kind's.
docs/PERFORMANCE.md has what each was measured at."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ElementwiseTuning:
    # from this many output elements on, one-element constants are uniforms: each
    # fragment saves a fetch; below, the glUniform call every launch makes costs more
    uniform_constants_from: int = 1 << 16


LLVMPIPE = ElementwiseTuning()
# unmeasured on a GPU (a fetch of one texel is cached there, a glUniform call cheap):
# llvmpipe's threshold until one is measured
PROFILES = {"llvmpipe": LLVMPIPE, "gpu": LLVMPIPE, "webgl": LLVMPIPE}
