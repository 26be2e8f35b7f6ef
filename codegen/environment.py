"""The Jinja environment that renders kernels from codegen/templates/."""
from __future__ import annotations

import functools
import math
import os
import struct

import jinja2

from ..ir import sanitize
from .helpers import HELPERS_MARK, with_helpers
from .limits import active
from .tuning import active as active_tuning

TEMPLATE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


def glsl_float(x) -> str:
    """A float literal GLSL reads back exactly (inf and NaN through bit patterns)."""
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        bits = struct.unpack("<I", struct.pack("<f", x))[0]
        return f"uintBitsToFloat({bits:#010x}u)"
    text = repr(float(struct.unpack("<f", struct.pack("<f", x))[0]))
    return text if ("e" in text or "." in text) else text + ".0"


def glsl_int(x) -> str:
    x = int(x)
    return f"int({x & 0xffffffff:#010x}u)" if x == -2 ** 31 else str(x)


# (x + 0.5) * fl(1 / c) floors to x / c for 0 <= x < 2^22: its relative error is below
# 2^-23 and (x + 0.5) / c lies at least 0.5 / c from an integer
FLOAT_DIVISION_BOUND = 1 << 22


def quotient(x: str, c: int, bound: int) -> str:
    """GLSL for x / c (c > 0 a constant, 0 <= x < bound): a shift where c is a power of
    two; (x + 0.5) times c's reciprocal, floored, where the active Tuning's
    `elementwise.float_division` is on and bound allows (SwiftShader's JIT divides
    lane by lane: its texel addresses ~15% of an elementwise kernel, docs/PERFORMANCE.md
    "Filter panels"); else the integer division."""
    c = int(c)
    if c & (c - 1) == 0:
        return f"(({x}) >> {c.bit_length() - 1})" if c > 1 else f"({x})"
    if active_tuning().elementwise.float_division and bound <= FLOAT_DIVISION_BOUND:
        return f"int((float({x}) + 0.5) * {glsl_float(1.0 / c)})"
    return f"(({x}) / {c})"


def split_index(x: str, c: int, bound: int, quot: str, rem: str) -> str:
    """GLSL declaring ints `quot` = x / c and `rem` = x % c (0 <= x < bound), the
    remainder from the quotient: a mask where c is a power of two."""
    c = int(c)
    if c & (c - 1) == 0:
        return f"int {quot} = {quotient(x, c, bound)}; int {rem} = ({x}) & {c - 1};"
    return f"int {quot} = {quotient(x, c, bound)}; int {rem} = ({x}) - {quot} * {c};"


@functools.lru_cache(maxsize=1)
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATE_DIR),
        undefined=jinja2.StrictUndefined,       # a typo in a template fails loudly
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["glsl_float"] = glsl_float
    env.filters["glsl_int"] = glsl_int
    env.filters["comment"] = sanitize.comment   # all text from users/files in // comments
    env.globals["helpers_mark"] = HELPERS_MARK    # where a template wants its helpers
    env.globals["quotient"] = quotient
    env.globals["split_index"] = split_index
    return env


def use_bytecode_cache(directory) -> bool:
    """Keep the compiled templates in `directory` (the runtime points it into fragflow's
    cache directory), so a new process loads them instead of compiling its templates
    again (~1 s of Jinja in a process's first run). Jinja keys each entry by the
    template's source, so an edited template compiles afresh. The entries are Python
    code: only a directory that is this user's alone is used. Returns whether it is."""
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        info = os.stat(directory)
        if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & 0o022):
            return False
    except OSError:
        return False
    environment().bytecode_cache = jinja2.FileSystemBytecodeCache(str(directory))
    return True


def _render_plain(template: str) -> str:
    return environment().get_template(template).render()


def render(template: str, **context) -> str:
    """The template's text, with the helpers its code calls where it asks for them.
    `dialect` (the prologue's version line and precision block) is the active
    lowering's Limits (codegen/limits.py) unless given."""
    context.setdefault("dialect", active())
    return with_helpers(environment().get_template(template).render(**context),
                        _render_plain)
