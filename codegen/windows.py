"""Which kernels honour windows (codegen/lower.py `windows`): a value read or written
at a texel offset inside a larger texture, the offset an int uniform set per draw (a
scan step's element slices and outputs, runtime/control_flow.py).

The prologue's fetch helpers (texel_, tx_ in fast_texel and lod_texel) add the offset,
and its main() subtracts it from the fragment's texel and discards the rest. A kernel
honours a window only where every fetch goes through those: each GLSL line naming a
windowed input's sampler (past its declaration) or gl_FragCoord also names the window's
uniform. Any other kernel reads or writes the value as a texture of its own; the
runtime then copies instead (a check on the rendered source, so a template that
addresses a texture its own way can never read a window wrongly).
"""
from __future__ import annotations

import re

from .kernel import Kernel


def unsafe_windows(kernel: Kernel) -> set:
    """The windows (uniform names) among kernel's inputs and outputs it does not honour."""
    lines = [line.split("//", 1)[0] for line in kernel.compiled_source.splitlines()]
    bad = set()
    for b in kernel.inputs:
        window = b.layout.window
        if window and not _every_use_names(lines, rf"\b{re.escape(b.sampler)}\b", window,
                                           rf"^\s*uniform\b.*\b{b.sampler}\s*;"):
            bad.add(window)
    for b in kernel.outputs:
        window = b.layout.window
        if window and (len(kernel.outputs) != 1 or kernel.output_layers or
                       not _every_use_names(lines, r"\bgl_FragCoord\b", window, need=True)):
            bad.add(window)
    return bad


def _every_use_names(lines, pattern: str, window: str, declaration: str = "",
                     need: bool = False) -> bool:
    """Whether each line matching pattern (but declaration) names the window; need:
    and there is one."""
    uses = [line for line in lines if re.search(pattern, line)
            and not (declaration and re.search(declaration, line))]
    return (bool(uses) or not need) and all(re.search(rf"\b{window}\b", line)
                                            for line in uses)
