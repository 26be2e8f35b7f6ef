"""Generated shaders as files a person (or a second compiler) can read.

Each kernel becomes one `.frag` file, numbered in run order (`03_k3_dense_relu.frag`).
The file is the kernel's GLSL with a complete header comment in place of the one the
code generator wrote: the kernel and the graph nodes it implements (every node a fusion
folded in, with its scope and the user's file:line), each input's and the output's
shape and texture layout, and the uniforms with the values this launch sets. Comments
are all that changes, so the file compiles exactly as the kernel does.

    fn = sess.compile([loss], feeds=[x]); fn(xb)
    fn.dump_shaders("shaders/")        # -> ["shaders/00_k0_dense_matmul.frag", ...]
"""
from __future__ import annotations

import os
import re

from ..ir import sanitize

HEADER_END = "// -- end of header --"
_USER_CODE_MARK = "// -- user code --"
_IMPLEMENTS = re.compile(r"^//   (\S+) = (\S+)(?:  (.*))?$")


def implemented_nodes(kernel, *graphs) -> list:
    """[{name, op, scope, source}] for the graph nodes a kernel computes, in the order it
    computes them. Looked up in `graphs` (the user's graph first: it has every node a
    fusion folded away); else read from the header the code generator wrote."""
    from_header = {m.group(1): (m.group(2), m.group(3) or "")
                   for m in map(_IMPLEMENTS.match, _header(kernel)) if m}
    out = []
    for name in getattr(kernel, "nodes", ()) or (kernel.name,):
        node = next((g.node(name) for g in graphs if g is not None and name in g), None)
        if node is not None and node.op.startswith("fused") and node.attrs.get("nodes") \
                and len(kernel.nodes) == 1:
            # a compiled graph's fused node: the nodes the fusion folded into it
            for member, op, source in node.attrs["nodes"]:
                out.append({"name": member, "op": op, "scope": member.rpartition("/")[0],
                            "source": source or "", "user_op": op})
            continue
        member = next((m for m in node.attrs.get("nodes") or () if m[0] == name), None) \
            if node is not None and node.op.startswith("fused") else None
        if member is not None:
            # a fused node takes its last member's name: report the member's own op
            op, scope, source, program = member[1], node.scope, member[2] or "", None
        elif node is not None:
            op, scope, source = node.op, node.scope, node.source or ""
            program = node.attrs.get("name") if op == "gpgpu_program" else None
        else:
            op, source = from_header.get(name, (kernel.op, getattr(kernel, "location", "")))
            scope = getattr(kernel, "scope", "") if len(kernel.nodes) == 1 else \
                name.rpartition("/")[0]
            program = kernel.op if op == "gpgpu_program" else None
        out.append({"name": name, "op": op, "scope": scope, "source": source or "",
                    "user_op": program or op})
    return out


def user_op(kernel, *graphs) -> str:
    """The op(s) the user wrote that a kernel runs: "relu", "matmul+add+relu", or a
    gpgpu_program's name — never an internal kernel op such as "fused_matmul"."""
    ops = [n["user_op"] for n in implemented_nodes(kernel, *graphs)]
    return "+".join(ops) if ops else kernel.op


def user_scope(kernel, *graphs) -> str:
    """The name scope(s) of a kernel's nodes ("" is the root), distinct, in order."""
    scopes = []
    for n in implemented_nodes(kernel, *graphs):
        if n["scope"] not in scopes:
            scopes.append(n["scope"])
    return ", ".join(s or "(root)" for s in scopes) if scopes else (kernel.scope or "")


def _header(kernel) -> list:
    source = getattr(kernel, "source", "") or ""
    head = source.split(HEADER_END, 1)[0] if HEADER_END in source else ""
    return head.splitlines()


def _layout(layout) -> str:
    fmt = "RGBA32I" if layout.dtype != "float32" else "RGBA32F"
    return f"{layout.width}x{layout.height} {fmt} texels"


def _type(layout) -> str:
    short = {"float32": "f32", "int32": "i32", "bool": "bool"}.get(layout.dtype,
                                                                   layout.dtype)
    return f"{short}[{','.join(str(d) for d in layout.shape)}]"


def header_lines(kernel, index: int | None = None, *graphs) -> list:
    """The comment block a shader file starts with (without the leading "// ")."""
    nodes = implemented_nodes(kernel, *graphs)
    position = f" (#{index} in run order)" if index is not None else ""
    lines = [f"fragflow kernel {kernel.name}{position}: {kernel.op}"]
    fused = ", fused into one kernel" if len(nodes) > 1 else ""
    lines.append(f"implements {len(nodes)} node{'s' if len(nodes) != 1 else ''}{fused}:")
    width = max(len(f"{n['name']} = {n['op']} '{n['user_op']}'") if n["op"] != n["user_op"]
                else len(f"{n['name']} = {n['op']}") for n in nodes)
    for n in nodes:
        op = n["op"] if n["op"] == n["user_op"] else f"{n['op']} '{n['user_op']}'"
        lhs = f"{n['name']} = {op}".ljust(width)
        lines.append(f"  {lhs}  scope '{n['scope'] or '(root)'}'"
                     + (f"  {n['source']}" if n["source"] else ""))
    if getattr(kernel, "user_code", None):
        program, first, _ = kernel.user_code
        lines.append(f"user GLSL of program '{program}' starts at line {first} of "
                     f"kernel.source")
    lines.append("texture layout: row-major, 4 consecutive elements per RGBA texel")
    lines.append("inputs:" if kernel.inputs else "inputs: none")
    for b in kernel.inputs:
        lines.append(f"  {b.sampler} <- {b.value} : {_type(b.layout)}  ({_layout(b.layout)})")
    out = kernel.output
    lines.append("output:")
    lines.append(f"  {out.sampler} -> {out.value} : {_type(out.layout)}  "
                 f"({_layout(out.layout)})")
    lines.append("uniforms:" if kernel.uniforms else "uniforms: none")
    for name, (glsl_type, value) in kernel.uniforms.items():
        lines.append(f"  {glsl_type} {name} = {value!r}")
    return lines


def shader_text(kernel, index: int | None = None, *graphs) -> str:
    """The kernel's GLSL with the full header comment. Only comments differ from
    kernel.source, so it compiles as the kernel does (the program cache keys on the
    part after the header, so the two are one program)."""
    source = kernel.source
    first, _, rest = source.partition("\n")        # "#version 330 core"
    body = rest.split(HEADER_END + "\n", 1)[-1] if HEADER_END in rest else rest
    lines = header_lines(kernel, index, *graphs)
    if getattr(kernel, "user_code", None):    # the user's line numbers in this file
        program, _, _ = kernel.user_code
        mark = next((i for i, line in enumerate(body.splitlines())
                     if line.strip() == _USER_CODE_MARK), -1)
        lines = [f"user GLSL of program '{program}' starts at line {len(lines) + mark + 4}"
                 if line.startswith("user GLSL of program") else line for line in lines]
    header = "\n".join("// " + sanitize.comment(line) for line in lines)   # user text
    return f"{first}\n{header}\n{HEADER_END}\n{body}"


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
        from ..ir.errors import FragflowError
        raise FragflowError(f"no kernel named {wanted!r} (nor one implementing a node or "
                            f"op of that name); the kernels are: "
                            f"{', '.join(k.name for k in kernels) or 'none'}")
    return chosen


def write_shaders(kernels, directory: str, *graphs, only: str | None = None) -> list:
    """One .frag file per kernel (or per kernel `only` selects) in directory, which is
    created; returns the paths in run order."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for index, kernel in select(kernels, only):
        path = os.path.join(directory, file_name(index, kernel))
        with open(path, "w", encoding="utf-8") as f:
            f.write(shader_text(kernel, index, *graphs))
        paths.append(path)
    return paths
