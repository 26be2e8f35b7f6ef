"""What a kernel choice may depend on besides the graph: the shader dialect and the
device's limits, in one frozen record that lowering reads and the plan cache keys on.

The fields are described on `Limits`.

`Limits.from_context(ctx.info())` reads a context's; `Limits.webgl2()` is what a page
can count on. `lower(graph, limits)` makes them the active limits while it lowers
(`active()`), so a family's lowering reads `active().max_draw_buffers` instead of a
constant of its own.

>>> Limits().version_line, Limits.webgl2().version_line
('#version 330 core', '#version 300 es')
>>> Limits.webgl2().max_draw_buffers
4
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.errors import FragflowError
from ..ir.program_loops import LLVMPIPE_LOOP_LIMIT
from . import tuning as _tuning
from .active import Active

DIALECTS = ("330", "300 es")
# the loop iterations a window op's kernel keeps clear of max_loop_iterations
WINDOW_MARGIN = 5535

# What the shaders need declared in GLSL ES (it has no default precision for float in
# fragment shaders nor for any sampler). highp int explicitly: indices reach 2^24 and more.
ES_PRECISION = (
    "precision highp float;",
    "precision highp int;",
    "precision highp sampler2D;",
    "precision highp isampler2D;",
    "precision highp sampler2DArray;",
)


@dataclass(frozen=True)
class Limits:
    """The shader dialect and the device's limits a kernel choice may depend on.

    - `glsl`: "330" renders `#version 330 core` (desktop OpenGL 3.3); "300 es" renders
      `#version 300 es` and a precision block (OpenGL ES 3.0, WebGL2). The same templates
      render both (templates/prologue.glsl.j2, the vertex shader in runtime/gl_resources.py).
    - `max_draw_buffers`: render targets one kernel writes (a blocked matmul's or conv's
      blocks, a first reduction pass down columns, a fused update's results). GL 3.3
      guarantees 8, ES 3.0 and WebGL2 only 4.
    - `max_texture_units`: textures one kernel reads (GL_MAX_TEXTURE_IMAGE_UNITS; 16 in
      GL 3.3 and ES 3.0).
    - `max_texture_size`: the widest texture a layout may use (GL_MAX_TEXTURE_SIZE).
    - `max_loop_iterations`: loop iterations one fragment may run in all. No GL query says
      it; llvmpipe ends a shader invocation's loops after 65,535 (one limiter per shader,
      shared by every loop in it) without an error, so that is the default everywhere.
    """
    glsl: str = "330"
    max_draw_buffers: int = 8
    max_texture_units: int = 16
    max_texture_size: int = 16384
    max_loop_iterations: int = LLVMPIPE_LOOP_LIMIT

    def __post_init__(self):
        if self.glsl not in DIALECTS:
            raise FragflowError(f"unknown GLSL dialect {self.glsl!r}; use one of {DIALECTS}")
        for name in ("max_draw_buffers", "max_texture_units", "max_texture_size",
                     "max_loop_iterations"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise FragflowError(f"Limits.{name} must be a positive int, not {value!r}")

    @classmethod
    def from_context(cls, info: dict) -> Limits:
        """A context's limits from GLContext.info(): its dialect ("gles": ES) and the
        GL_MAX_* values it reports."""
        return cls(glsl="300 es" if info.get("api") == "gles" else "330",
                   max_draw_buffers=int(info["max_draw_buffers"]),
                   max_texture_units=int(info["max_texture_image_units"]),
                   max_texture_size=int(info["max_texture_size"]))

    @classmethod
    def webgl2(cls, max_draw_buffers: int = 4, max_texture_size: int = 4096,
               max_texture_units: int = 16, **others) -> Limits:
        """What every WebGL2 implementation guarantees (MAX_DRAW_BUFFERS 4,
        MAX_TEXTURE_SIZE 2048 by the spec, 4096 on practically every device;
        MAX_TEXTURE_IMAGE_UNITS 16); raise max_draw_buffers to 8 for desktops only."""
        return cls(glsl="300 es", max_draw_buffers=max_draw_buffers,
                   max_texture_size=max_texture_size, max_texture_units=max_texture_units,
                   **others)

    @property
    def es(self) -> bool:
        return self.glsl == "300 es"

    @property
    def version_line(self) -> str:
        return "#version 300 es" if self.es else "#version 330 core"

    @property
    def precision(self) -> tuple:
        """The precision statements after the version (none in GLSL 330)."""
        return ES_PRECISION if self.es else ()

    @property
    def loop_trips(self) -> int:
        """A kernel's loop budget: half of max_loop_iterations (32768 of 65535), so a
        loop's setup and the lanes around it stay well inside the limit."""
        return (self.max_loop_iterations + 1) // 2

    @property
    def window_trips(self) -> int:
        """The most loop iterations a window op's kernel (a pool, dilation2d) may run:
        max_loop_iterations less WINDOW_MARGIN (60000 of 65535); more is refused."""
        return self.max_loop_iterations - WINDOW_MARGIN

    def key(self) -> tuple:
        """The fields as a tuple (the plan cache's key)."""
        return (self.glsl, self.max_draw_buffers, self.max_texture_units,
                self.max_texture_size, self.max_loop_iterations)


DESKTOP = Limits()      # GL 3.3 core's guarantees: what lowering assumes unless told

_ACTIVE = Active("fragflow_limits", DESKTOP)
active = _ACTIVE.get          # the value of the lowering in progress
lowering_with = _ACTIVE.using    # lower() wraps itself in it


def loop_trips() -> int:
    """The loop iterations one kernel may plan for: the active limits' loop_trips, or
    the active Tuning's max_loop_trips where that is smaller (tests shrink it to reach
    the unrolled paths with small inputs)."""
    cap = _tuning.active().max_loop_trips
    return min(cap, active().loop_trips) if cap else active().loop_trips


def unroll_for(trips: int) -> int:
    """The smallest power-of-two unroll that runs `trips` steps in <= loop_trips() loop
    iterations (1 for short loops: unrolled code costs JIT time)."""
    unroll = 1
    budget = loop_trips()
    while trips > budget * unroll:
        unroll *= 2
    return unroll
