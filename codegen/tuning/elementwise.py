"""The elementwise family's knobs (codegen/elementwise.py): one field per knob, the
llvmpipe profile's value as its default; PROFILES gives each device kind's.
docs/PERFORMANCE.md has what each was measured at."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class ElementwiseTuning:
    # from this many output elements on, one-element constants are uniforms: each
    # fragment saves a fetch; below, the glUniform call every launch makes costs more
    uniform_constants_from: int = 1 << 16
    # a texel's row, a block's slab (codegen/environment.py quotient): a division by a
    # constant that is not a power of two as a float multiplication by its reciprocal
    # (exact below 2^22); False: the integer division, which LLVM (llvmpipe) turns into
    # a multiplication itself but SwiftShader's JIT divides lane by lane
    float_division: bool = False


LLVMPIPE = ElementwiseTuning()
# unmeasured on a GPU (a fetch of one texel is cached there, a glUniform call cheap):
# llvmpipe's threshold until one is measured
# WebGL: SwiftShader, Chromium's CPU rasteriser, divides lane by lane (an elementwise
# kernel on 250-wide textures 9.5 -> 7.8 ms; Mesa through ANGLE within its noise)
WEBGL = dataclasses.replace(LLVMPIPE, float_division=True)
PROFILES = {"llvmpipe": LLVMPIPE, "gpu": LLVMPIPE, "webgl": WEBGL}
