"""Lowering elementwise nodes to templates/elementwise.glsl.j2.

A kernel is an expression DAG (`steps`) over its inputs; each input is read at its
broadcast index, or a whole texel at a time when every input has the output's shape
(or one element)."""
from __future__ import annotations

from ..ir.ops.elementwise import linspace_step
from ..ir.types import promote
from .common import make_kernel, operands, output_operand
from .environment import glsl_float, glsl_int
from .layout import broadcast_index
from .operands import GLSL_SCALAR

LOGICAL = {"logical_and", "logical_or", "logical_not"}
COMPARISONS = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"}
PREDICATES = {"is_nan", "is_inf", "is_finite"}          # float in, bool out
FLOAT_ATTRS = {"leaky_relu": ("alpha",), "step": ("alpha",)}   # become GLSL literals
INDEXED = {"range", "linspace"}    # no inputs: the value is computed from the index i


def operand_dtype(node) -> str:
    """The dtype an op computes in (its operands are converted to it)."""
    if node.op in LOGICAL:
        return "bool"
    if node.op == "div":
        return "float32"
    if node.op in COMPARISONS or node.op in PREDICATES:
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
    return {"var": var, "op": op, "args": args, "consts": constants_of(node),
            "ctype": ctype, "otype": GLSL_SCALAR[node.outputs[0].dtype], "node": node.name}


def constants_of(node) -> list:
    """The GLSL literals an op's macro takes after its operands (from its attrs)."""
    if node.op in FLOAT_ATTRS:
        return [glsl_float(node.attrs[k]) for k in FLOAT_ATTRS[node.op]]
    return []


def index_step(node, var: str) -> dict:
    """range/linspace: a step of the element index alone (the kernel's expr takes i)."""
    a = node.attrs
    ctype = GLSL_SCALAR[node.outputs[0].dtype]
    index = [{"expr": "i", "type": "int", "to": ctype if node.op == "range" else "int"}]
    if node.op == "range":
        literal = glsl_float if ctype == "float" else glsl_int
        consts = [literal(a["start"]), literal(a["delta"])]
    else:
        step = linspace_step(a["start"], a["stop"], a["num"])
        last = a["num"] - 1 if a["num"] > 1 else -1      # one element: start, not stop
        consts = [glsl_float(a["start"]), glsl_float(step), str(last), glsl_float(a["stop"])]
    return {"var": var, "op": node.op, "args": index, "consts": consts, "ctype": ctype,
            "otype": ctype, "node": node.name}


def _kernel(nodes, steps, result, inputs, out, prefix):
    for b in inputs:
        b.index = broadcast_index(out.layout.shape, b.layout.shape)
    vectorized = all(b.index.is_identity or b.size == 1 for b in inputs) and \
        all(b.size == out.size or b.size == 1 for b in inputs)
    op = nodes[0].op if len(nodes) == 1 else "fused(" + ",".join(n.op for n in nodes) + ")"
    indexed = any(n.op in INDEXED for n in nodes)
    return make_kernel("elementwise.glsl.j2", prefix, op, nodes, inputs, out,
                       steps=steps, result=result, vectorized=vectorized, indexed=indexed)


def lower_node(node, layouts, prefix):
    out = output_operand(node.outputs[0], layouts)
    if node.op == "fill":
        value = node.attrs["value"]
        literal = glsl_float(value) if node.attrs["dtype"] == "float32" else \
            ("true" if value else "false") if node.attrs["dtype"] == "bool" else glsl_int(value)
        return _kernel([node], [], literal, [], out, prefix)
    if node.op in INDEXED:
        return _kernel([node], [index_step(node, "r0")], "r0", [], out, prefix)
    inputs = operands(node, layouts)
    arg_of = {b.value: (b.arg, b.scalar) for b in inputs}
    step = step_for(node, "r0", arg_of)
    return _kernel([node], [step], "r0", inputs, out, prefix)


def lower_copy(node, layouts, prefix):
    """assign: copy its new value (input 1) into the assign's own texture."""
    out = output_operand(node.outputs[0], layouts)
    inputs = [b for b in operands(node, layouts) if b.value == node.inputs[1].name]
    arg = inputs[0]
    step = {"var": "r0", "op": "identity", "consts": [], "ctype": arg.scalar,
            "otype": arg.scalar,
            "args": [{"expr": arg.arg, "type": arg.scalar, "to": arg.scalar}],
            "node": node.name}
    return _kernel([node], [step], "r0", inputs, out, prefix)
