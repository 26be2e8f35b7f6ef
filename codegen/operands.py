"""What templates know about a kernel's inputs and output."""
from __future__ import annotations

from dataclasses import dataclass

from .layout import AffineIndex, Layout

GLSL_SCALAR = {"float32": "float", "int32": "int", "bool": "bool"}
GLSL_VEC = {"float32": "vec4", "int32": "ivec4", "bool": "ivec4"}
GLSL_SAMPLER = {"float32": "sampler2D", "int32": "isampler2D", "bool": "isampler2D"}


@dataclass
class Operand:
    """A texture as a template sees it. `index` maps the output's flat index to this
    operand's (elementwise kernels and epilogues); `read` is how an elementwise kernel
    reads its four lanes (codegen/elementwise.py read_of); `arg` is its name in the
    kernel's expressions."""
    sampler: str
    value: str
    layout: Layout
    type: str                      # "f32[2,3]", for comments
    index: AffineIndex | None = None
    arg: str = ""
    read: str = ""

    dtype = property(lambda self: self.layout.dtype)
    width = property(lambda self: self.layout.width)
    size = property(lambda self: self.layout.size)
    scalar = property(lambda self: GLSL_SCALAR[self.layout.dtype])
    vec = property(lambda self: GLSL_VEC[self.layout.dtype])
    sampler_type = property(lambda self: GLSL_SAMPLER[self.layout.dtype])
