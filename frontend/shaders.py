"""Generated shaders as files a person (or a second compiler) can read.

Each kernel becomes one `.frag` file, numbered in run order (`03_k3_dense_relu.frag`),
holding exactly `kernel.source`: the GLSL with the header comment rendered from the
kernel's record (codegen/kernel.py) — the kernel and the graph nodes it implements
(every node a fusion folded in, with its scope and the user's file:line), each input's
and output's shape and texture layout, and the uniforms with the values each launch
sets. The file compiles exactly as the kernel does.

    fn = sess.compile([loss], feeds=[x]); fn(xb)
    fn.dump_shaders("shaders/")        # -> ["shaders/00_k0_dense_matmul.frag", ...]
"""
from __future__ import annotations

import os
import re

from ..ir.errors import FragflowError


def user_op(kernel) -> str:
    """The op(s) the user wrote that a kernel runs: "relu", "matmul+add+relu", or a
    gpgpu_program's name — never an internal kernel op such as "fused_matmul"."""
    ops = [n.user_op for n in kernel.node_records]
    return "+".join(ops) if ops else kernel.op


def user_scope(kernel) -> str:
    """The name scope(s) of a kernel's nodes ("" is the root), distinct, in order."""
    scopes = []
    for n in kernel.node_records:
        if n.scope not in scopes:
            scopes.append(n.scope)
    return ", ".join(s or "(root)" for s in scopes) if scopes else (kernel.scope or "")


def shader_text(kernel) -> str:
    """The text of a kernel's .frag file: its source, header included."""
    return kernel.source


def file_name(index: int, kernel) -> str:
    return f"{index:02d}_{re.sub(r'[^A-Za-z0-9_.-]', '_', kernel.name)}.frag"


def select(kernels, wanted: str | None) -> list:
    """(index, kernel) pairs; wanted matches a kernel's name, its op, a program's name or
    the name of a node it implements. An unknown name raises, listing the kernels."""
    pairs = list(enumerate(kernels))
    if wanted is None:
        return pairs
    chosen = [(i, k) for i, k in pairs
              if wanted in (k.name, k.op) or wanted in (getattr(k, "nodes", ()) or ())]
    if not chosen:
        raise FragflowError(f"no kernel named {wanted!r} (nor one implementing a node or "
                            f"op of that name); the kernels are: "
                            f"{', '.join(k.name for k in kernels) or 'none'}")
    return chosen


def write_shaders(kernels, directory: str, only: str | None = None) -> list:
    """One .frag file per kernel (or per kernel `only` selects) in directory, which is
    created; returns the paths in run order."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for index, kernel in select(kernels, only):
        path = os.path.join(directory, file_name(index, kernel))
        with open(path, "w", encoding="utf-8") as f:
            f.write(shader_text(kernel))
        paths.append(path)
    return paths
