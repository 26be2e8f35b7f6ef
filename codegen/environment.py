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
