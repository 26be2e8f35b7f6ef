"""Lowering elementwise nodes to templates/elementwise.glsl.j2.

A kernel is an expression DAG (`steps`) over its inputs; each input is read at its
broadcast index, or a whole texel at a time when every input has the output's shape
(or one element)."""
from __future__ import annotations

from ..ir.types import promote
from .common import make_kernel, operands, output_operand
from .environment import glsl_float, glsl_int
from .layout import broadcast_index
from .operands import GLSL_SCALAR

LOGICAL = {"logical_and", "logical_or", "logical_not"}
COMPARISONS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}


def operand_dtype(node) -> str:
    """The dtype an op computes in (its operands are converted to it)."""
    if node.op in LOGICAL:
        return "bool"
    if node.op == "div":
        return "float32"
    if node.op in COMPARISONS:
        return promote(*(v.dtype for v in node.inputs))
    return node.outputs[0].dtype


def step_for(node, var: str, arg_of: dict) -> dict:
    """One expression step: `var = op(args)`, operands converted as the op needs."""
    ctype = GLSL_SCALAR[operand_dtype(node)]
    op, inputs = node.op, list(node.inputs)
    targets = [ctype] * len(inputs)
    if op == "where":
        targets[0] = "bool"
    if op == "cast":
        op = "identity"
    args = [{"expr": arg_of[v.name][0], "type": arg_of[v.name][1], "to": t}
            for v, t in zip(inputs, targets)]
    return {"var": var, "op": op, "args": args, "ctype": ctype,
            "otype": GLSL_SCALAR[node.outputs[0].dtype], "node": node.name}


def _kernel(nodes, steps, result, inputs, out, prefix):
    for b in inputs:
        b.index = broadcast_index(out.layout.shape, b.layout.shape)
    vectorized = all(b.index.is_identity or b.size == 1 for b in inputs) and \
        all(b.size == out.size or b.size == 1 for b in inputs)
    op = nodes[0].op if len(nodes) == 1 else "fused(" + ",".join(n.op for n in nodes) + ")"
    return make_kernel("elementwise.glsl.j2", prefix, op, nodes, inputs, out,
                       steps=steps, result=result, vectorized=vectorized)


def lower_node(node, layouts, prefix):
    out = output_operand(node.outputs[0], layouts)
    if node.op == "fill":
        value = node.attrs["value"]
        literal = glsl_float(value) if node.attrs["dtype"] == "float32" else \
            ("true" if value else "false") if node.attrs["dtype"] == "bool" else glsl_int(value)
        return _kernel([node], [], literal, [], out, prefix)
    inputs = operands(node, layouts)
    arg_of = {b.value: (b.arg, b.scalar) for b in inputs}
    step = step_for(node, "r0", arg_of)
    return _kernel([node], [step], "r0", inputs, out, prefix)


def lower_copy(node, layouts, prefix):
    """assign: copy its new value (input 1) into the assign's own texture."""
    out = output_operand(node.outputs[0], layouts)
    inputs = [b for b in operands(node, layouts) if b.value == node.inputs[1].name]
    arg = inputs[0]
    step = {"var": "r0", "op": "identity", "ctype": arg.scalar, "otype": arg.scalar,
            "args": [{"expr": arg.arg, "type": arg.scalar, "to": arg.scalar}],
            "node": node.name}
    return _kernel([node], [step], "r0", inputs, out, prefix)
