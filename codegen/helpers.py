"""Each kernel carries only the GLSL helpers it calls.

templates/elementwise_lib.glsl.j2 (the elementwise_lib_*.glsl.j2 it includes, rendered
in order) is cut into its top-level definitions (one starts at a line in column 0, with
the comment lines just above it); a template that may call helpers writes
HELPERS_MARK where they belong, and `with_helpers` puts there the definitions whose
names the kernel's code uses, with the ones those use in turn, in library order (the
library defines everything before its first use)."""
from __future__ import annotations

import functools
import re

HELPERS_MARK = "// @ff-helpers"
LIBRARY = "elementwise_lib.glsl.j2"

_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
# "float ff_log(", "const float ERF_SERIES[12] =", "uniform float ff_zero;"
_DEFINITION = re.compile(r"^(?:const\s+|uniform\s+)?\w+(?:\[\d*\])?\s+([A-Za-z_]\w*)\s*[\[(=;]")


@functools.lru_cache(maxsize=1)
def library(render) -> tuple:
    """((name, text, identifiers used), ...) per top-level definition, in order."""
    chunks, comments, current = [], [], None
    for line in render(LIBRARY).splitlines(keepends=True):
        starts = _DEFINITION.match(line)
        if starts:
            current = [starts.group(1), comments + [line]]
            comments = []
            chunks.append(current)
        elif line.startswith("//") or not line.strip():
            if current is not None and not line.strip():
                current = None                  # a blank line ends a definition
            comments = comments + [line] if line.strip() else []
        elif current is not None:
            current[1].append(line)
        else:
            raise ValueError(f"{LIBRARY}: cannot tell which definition holds {line!r}")
    out = []
    for name, lines in chunks:
        text = "".join(lines)
        out.append((name, text, frozenset(_IDENTIFIER.findall(_code(text)))))
    return tuple(out)


def _code(text: str) -> str:
    return re.sub(r"//[^\n]*", "", text)


def with_helpers(source: str, render) -> str:
    """source with HELPERS_MARK's line replaced by the helpers its code calls."""
    if HELPERS_MARK not in source:
        return source
    head, _, tail = source.partition(HELPERS_MARK)
    tail = tail.split("\n", 1)[1] if "\n" in tail else ""
    used = set(_IDENTIFIER.findall(_code(head + tail)))
    chosen = []
    for name, text, uses in reversed(library(render)):   # users come after what they use
        if name in used:
            chosen.append(text)
            used |= uses
    return head + "".join(reversed(chosen)) + tail
