"""Pieces every family's lowering uses: operands, the kernel record, rendering."""
from __future__ import annotations

import dataclasses
import re

from ..ir import sanitize
from ..ir.types import TensorType
from .environment import render
from .kernel import Binding, Kernel, records_of
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


def reads_at_output(node, value) -> bool:
    """Whether fused node `node` reads `value` only as an operand of its epilogue at its
    own output's shape, float32 (element e of its result reads element e of value: a
    residual add's shortcut), not as its head's first two inputs: the epilogue can read
    it from the render targets its producer left it in (templates/epilogue.glsl.j2,
    lanes "blocks")."""
    if any(v is value for v in node.inputs[:2]):
        return False
    out = node.outputs[0].type
    return value.type.is_static and value.type.shape == out.shape and \
        value.dtype == out.dtype == "float32"


def output_operand(value, layouts) -> Operand:
    return Operand(sampler="ff_out", value=value.name, layout=layouts[value.name],
                   type=str(TensorType(layouts[value.name].shape, value.dtype)))


# a decision's text: a word or number (never GLSL, never a user's text)
_PLAIN = re.compile(r"[A-Za-z0-9_.+-]{1,32}")


def decisions(context: dict) -> dict:
    """The lowering's choices in a template's context, as the kernel record keeps them
    (Kernel.params): numbers, flags and words (rows=4, mode=strided4), a dataclass of
    them as a dict (blocking), and the ops of elementwise or epilogue steps as a tuple;
    operands, layouts, GLSL text and index maps are left out.

    >>> from fragflow.codegen.matmul import Blocking
    >>> decisions({"k": 96, "vec4": True, "init": "uintBitsToFloat(0xff800000u)",
    ...            "epilogue": {"operands": [], "steps": [{"op": "add"}, {"op": "relu"}]},
    ...            "blocking": Blocking(batch=1, m=64, n=128, rows=4, cols=2)})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'k': 96, 'vec4': True, 'epilogue': ('add', 'relu'),
     'blocking': {'batch': 1, 'm': 64, 'n': 128, 'rows': 4, 'cols': 2,
                  'interleaved': False, 'splits': 1}}
    """
    out = {}
    for key, value in context.items():
        shown = _decision(value)
        if shown is not None and shown != ():
            out[key] = shown
    return out


def _scalar(value) -> bool:
    return isinstance(value, (bool, int, float)) or \
        (isinstance(value, str) and _PLAIN.fullmatch(value) is not None)


def _decision(value):
    if _scalar(value):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return fields if all(map(_scalar, fields.values())) else None
    if isinstance(value, dict) and isinstance(value.get("steps"), list):   # an epilogue
        value = value["steps"]
    if isinstance(value, (list, tuple)):
        if all(isinstance(step, dict) and "op" in step for step in value):    # steps
            return tuple(str(step["op"]) for step in value)
        if len(value) <= 8 and all(map(_scalar, value)):
            return tuple(value)
    return None


def make_kernel(template: str, prefix: str, op: str, nodes, inputs, out, *,
                uniforms=None, user_code=None, **context) -> Kernel:
    name = kernel_name(prefix, nodes[0])
    uniforms = uniforms or {}
    if (context.get("epilogue") or {}).get("steps"):
        # elementwise steps after a matmul/conv: exact, as in elementwise kernels
        # (prologue.glsl.j2); blocked kernels run them in their stitch pass, so the
        # accumulation keeps its fused multiply-adds there (measured: no cost)
        context.setdefault("invariant_output", True)
    source = render(template, inputs=inputs, out=out, uniforms=uniforms, **context)
    # the record renders its header into the source (Kernel.__post_init__), and finds
    # the line the user's GLSL starts at
    kernel = Kernel(name=name, op=op, nodes=tuple(n.name for n in nodes),
                    scope=nodes[0].scope, location=nodes[0].source, source=source,
                    inputs=tuple(Binding(b.sampler, b.value, b.layout) for b in inputs),
                    output=Binding("ff_out", out.value, out.layout), uniforms=uniforms,
                    user_code=(user_code[0], 0, user_code[1]) if user_code else None,
                    implements=records_of(nodes), template=template,
                    params=decisions(context))
    user = kernel.user_code
    sanitize.check_shader(kernel.source, range(user[1], user[1] + user[2].count("\n") + 1)
                          if user else range(0))
    return kernel
