"""What codegen hands the runtime: a Kernel (GLSL source and how to bind it) and a
Program (the whole compiled graph as a flat list of steps)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from .layout import Layout


_COMMENT = re.compile(r"//[^\n]*")


@dataclass(frozen=True)
class Binding:
    """One texture a kernel reads (or the one it writes)."""
    sampler: str          # GLSL name of the sampler uniform (or of the output)
    value: str            # IR value it holds
    layout: Layout

    @property
    def shape(self):
        return self.layout.shape

    @property
    def dtype(self):
        return self.layout.dtype


@dataclass(frozen=True)
class Kernel:
    name: str             # unique in its program, e.g. "k2_dense_matmul"
    op: str               # the op it runs ("matmul"), or "fused(...)" later
    nodes: tuple          # names of the IR nodes it implements
    scope: str            # the name scope of its (first) node
    location: str         # the user's file:line of its (first) node
    source: str           # full GLSL fragment shader
    inputs: tuple         # (Binding, ...) in texture-unit order
    output: Binding
    uniforms: dict = field(default_factory=dict)   # name -> (glsl type, value)
    # user-written GLSL inside the source: (program name, first source line, its text)
    user_code: tuple | None = None
    # more render targets (layout locations 1, 2, ..) written by the same draw: blocked
    # kernels spread a fragment's block of results over several textures
    extra_outputs: tuple = ()
    # > 0: the output is a 2D array texture of that many layers, layer j written by
    # render target j (a blocked kernel's blocks; its stitch reads them as one sampler)
    output_layers: int = 0

    @property
    def outputs(self) -> tuple:
        """Every texture the kernel writes, the primary output first."""
        return (self.output,) + tuple(self.extra_outputs)

    @property
    def compiled_source(self) -> str:
        """The source with its // comments emptied (lines kept, so compiler messages
        keep their line numbers): what is compiled, and the program cache's key, so
        that identical kernels of differently named nodes share one program — in this
        process and, through Mesa's disk cache, in the next."""
        return _COMMENT.sub("", self.source)

    def __repr__(self):
        return (f"Kernel({self.name!r}, op={self.op!r}, scope={self.scope!r}, "
                f"inputs={[b.value for b in self.inputs]}, output={self.output.value!r})")


@dataclass
class Program:
    """A compiled graph: where every value comes from, in run order.

    steps: ("kernel", Kernel) or ("alias", out_value, in_value) — an alias is a view
    of the same texture (reshape, squeeze, identity...)."""
    layouts: dict                 # value name -> Layout
    feeds: list                   # value names, in feed order
    constants: dict               # value name -> numpy array
    variables: dict               # value name -> variable name
    steps: list
    assigns: list                 # (variable name, value name), applied when a run ends
    outputs: list                 # value names, in fetch order

    @property
    def kernels(self) -> list:
        return [step[1] for step in self.steps if step[0] == "kernel"]
