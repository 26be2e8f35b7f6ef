"""Pieces every family's lowering uses: operands, the header comment, rendering."""
from __future__ import annotations

import re

from ..ir import sanitize
from ..ir.types import TensorType
from .environment import render
from .kernel import Binding, Kernel
from .operands import Operand


def kernel_name(prefix: str, node) -> str:
    return f"{prefix}_{re.sub(r'[^A-Za-z0-9_]', '_', node.name)}"   # safe by construction


def operands(node, layouts) -> list:
    """One Operand per distinct input value, samplers named x0, x1, ..."""
    seen, out = {}, []
    for v in node.inputs:
        if v.name in seen:
            continue
        op = Operand(sampler=f"x{len(out)}", value=v.name, layout=layouts[v.name],
                     type=str(v.type), arg=f"a{len(out)}")
        seen[v.name] = op
        out.append(op)
    return out


def output_operand(value, layouts) -> Operand:
    return Operand(sampler="ff_out", value=value.name, layout=layouts[value.name],
                   type=str(TensorType(layouts[value.name].shape, value.dtype)))


def header_lines(nodes, inputs, out) -> list:
    """The header comment's lines, raw: prologue.glsl.j2 writes each through the
    `comment` filter (names and source lines come from users and files)."""
    lines = ["implements:"]
    for n in nodes:
        where = f"  {n.source}" if n.source else ""
        lines.append(f"  {n.name} = {n.op}{where}")
    lines.append("inputs:")
    for b in inputs:
        lines.append(f"  {b.sampler} <- {b.value} : {b.type}  "
                     f"({b.layout.width}x{b.layout.height} texels)")
    lines.append(f"output: {out.value} : {out.type}  "
                 f"({out.layout.width}x{out.layout.height} texels, 4 elements per texel)")
    return lines


def make_kernel(template: str, prefix: str, op: str, nodes, inputs, out, *,
                uniforms=None, user_code=None, **context) -> Kernel:
    name = kernel_name(prefix, nodes[0])
    uniforms = uniforms or {}
    if (context.get("epilogue") or {}).get("steps"):
        # elementwise steps after a matmul/conv: exact, as in elementwise kernels
        # (prologue.glsl.j2); blocked kernels run them in their stitch pass, so the
        # accumulation keeps its fused multiply-adds there (measured: no cost)
        context.setdefault("invariant_output", True)
    source = render(template, kernel_name=name, kernel_op=op,
                    header=header_lines(nodes, inputs, out), inputs=inputs, out=out,
                    uniforms=uniforms, **context)
    user = _locate(user_code, source)
    sanitize.check_shader(source, range(user[1], user[1] + user[2].count("\n") + 1)
                          if user else range(0))
    return Kernel(name=name, op=op, nodes=tuple(n.name for n in nodes),
                  scope=nodes[0].scope, location=nodes[0].source, source=source,
                  inputs=tuple(Binding(b.sampler, b.value, b.layout) for b in inputs),
                  output=Binding("ff_out", out.value, out.layout), uniforms=uniforms,
                  user_code=user)


USER_CODE_MARK = "// -- user code --"


def _locate(user_code, source):
    """(program name, first line of the user's GLSL in source, its text)."""
    if user_code is None:
        return None
    name, text = user_code
    lines = source.splitlines()
    start = next(i for i, line in enumerate(lines, 1) if line.strip() == USER_CODE_MARK)
    return (name, start + 1, text)
