"""Lowering elementwise nodes to templates/elementwise.glsl.j2.

A kernel is an expression DAG (`steps`) over its inputs, computed in vec4 arithmetic for
the four elements of one output texel per fragment. How each input's four lanes are
read (`read_of`) decides the fetches per output texel: one for an input of the output's
shape or one read aligned and contiguous, one for a broadcast whose four lanes share an
element, four (one per lane) otherwise."""
from __future__ import annotations

import math
import string
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ..ir.ops.elementwise import linspace_step
from ..ir.ops.registry import get_op
from ..ir.types import promote
from . import tuning as _tuning
from .common import make_kernel, operands, output_operand
from .environment import glsl_float, glsl_int
from .layout import AffineIndex, broadcast_index
from .operands import GLSL_SCALAR


@dataclass(frozen=True)
class StepOp:
    """What one step of an elementwise kernel needs of its op: a graph node's
    (`of_node`), or a fused node's step's (codegen/fused.py)."""
    op: str
    attrs: Mapping
    input_dtypes: tuple
    output_dtype: str
    label: str                      # the shader comment: the node, or the fused step

    @classmethod
    def of_node(cls, node) -> StepOp:
        return cls(node.op, node.attrs, tuple(v.dtype for v in node.inputs),
                   node.outputs[0].dtype, node.name)


def operand_dtype(step: StepOp) -> str:
    """The dtype an op computes in (its operands are converted to it): its output's,
    except where an op tests operands into a bool (comparisons, predicates): their
    promoted dtype. cast converts its operand to its output's dtype."""
    if step.output_dtype == "bool" and step.input_dtypes and step.op != "cast":
        return promote(*step.input_dtypes)
    return step.output_dtype


def step_for(step: StepOp, var: str, args: list) -> dict:
    """One expression step: `var = op(args)`, with args [(GLSL expression, GLSL type)]
    per input, converted as the op needs. The GLSL is the op record's expression
    (OpDef.glsl, its float attrs filled in) or, where it has none, the op's macro in
    elementwise_ops.glsl.j2."""
    ctype = GLSL_SCALAR[operand_dtype(step)]
    targets = [ctype] * len(args)
    if step.op == "where":
        targets[0] = "bool"
    glsl = glsl_expression(step, len(args))
    return {"var": var, "op": step.op, "glsl": glsl,
            "args": [{"expr": e, "type": t, "to": to} for (e, t), to in zip(args, targets)],
            "consts": [],
            "ctype": ctype, "otype": GLSL_SCALAR[step.output_dtype], "node": step.label}


def glsl_expression(step: StepOp, n_operands: int) -> str:
    """The record's GLSL with its float attrs filled in as literals; the operands ({0},
    {1}, ...) and their type ({t}) stay for the template to fill ("" where the record
    has no expression)."""
    glsl = get_op(step.op).glsl
    if not glsl:
        return ""
    fields = {f for _, f, _, _ in string.Formatter().parse(glsl) if f}
    attrs = {k: float_attr(step.attrs[k]) for k in fields if k in step.attrs}
    return glsl.format(*(f"{{{i}}}" for i in range(n_operands)), t="{t}", **attrs)


def float_attr(x) -> str:
    """A float attr as GLSL. Zero is the uniform ff_zero (elementwise_lib): with a
    literal 0 the compiler folds alpha * x to 0, where x = inf or NaN gives NaN."""
    if x == 0:
        return "-ff_zero" if math.copysign(1.0, x) < 0 else "ff_zero"
    return glsl_float(x)


def index_step(node, var: str) -> dict:
    """range/linspace: a step of the element index alone (the kernel's ff_lanes)."""
    a = node.attrs
    ctype = GLSL_SCALAR[node.outputs[0].dtype]
    index = [{"expr": "ff_lanes", "type": "int", "to": ctype if node.op == "range" else "int"}]
    if node.op == "range":
        literal = glsl_float if ctype == "float" else glsl_int
        consts = [literal(a["start"]), literal(a["delta"])]
    else:
        step = linspace_step(a["start"], a["stop"], a["num"])
        last = a["num"] - 1 if a["num"] > 1 else -1      # one element: start, not stop
        consts = [glsl_float(a["start"]), glsl_float(step), str(last), glsl_float(a["stop"])]
    return {"var": var, "op": node.op, "glsl": "", "args": index, "consts": consts,
            "ctype": ctype, "otype": ctype, "node": node.name}


def read_of(index: AffineIndex) -> str:
    """How an input at `index` (of the output's flat index i) gives the four lanes
    i = 4k .. 4k+3 of one output texel:
      "same"   the output's own layout: the texel at the fragment's position;
      "texel"  one aligned texel (the innermost axis is contiguous, a multiple of 4);
      "splat"  one element for all four (no term of the index moves within a texel);
      "gather" one fetch per lane."""
    if index.is_identity:
        return "same"
    if all(s % 4 == 0 for s, _, _ in index.terms):
        return "splat"
    inner = [(s, d, t) for s, d, t in index.terms if s % 4 != 0]
    if len(inner) == 1 and inner[0][0] == 1 and inner[0][1] % 4 == 0 and inner[0][2] == 1 \
            and index.offset % 4 == 0 and all(t % 4 == 0 for s, _, t in index.terms if s != 1):
        return "texel"
    return "gather"


def uniforms_pay(out_size: int) -> bool:
    """Whether an output this big takes its one-element constants as uniforms
    (Tuning.elementwise.uniform_constants_from)."""
    return out_size >= _tuning.active().elementwise.uniform_constants_from


def scalar_constants(values) -> dict:
    """{value name: Python number} of the one-element constants among values."""
    return {v.name: np.asarray(v.node.attrs["value"]).reshape(()).item() for v in values
            if v.node.op == "constant" and np.asarray(v.node.attrs["value"]).size == 1}


def _kernel(nodes, steps, result, inputs, out, prefix, constants=None, indexed=False):
    """constants: scalar_constants of the inputs (they may become uniforms); indexed:
    a step reads the element's index (range, linspace)."""
    textures, scalars, uniforms = [], [], {}
    for b in inputs:
        b.index = broadcast_index(out.layout.shape, b.layout.shape)
        b.read = read_of(b.index) if b.size > 1 else "splat"
        if b.read == "same" and (b.layout.window or out.layout.window):
            b.read = "texel"        # a window (codegen/windows.py): not this fragment's texel
        if constants and b.value in constants and uniforms_pay(out.size):
            b.read = "uniform"
            uniforms[f"u_{b.arg}"] = (b.scalar, constants[b.value])
            scalars.append(b)
        else:
            textures.append(b)
    op = nodes[0].op if len(nodes) == 1 else "fused(" + ",".join(n.op for n in nodes) + ")"
    return make_kernel("elementwise.glsl.j2", prefix, op, nodes, textures, out,
                       uniforms=uniforms, scalars=scalars, steps=steps, result=result,
                       indexed=indexed, invariant_output=True,
                       fetch_helpers={b.sampler for b in textures if b.read != "same"})


def lower_node(node, layouts, prefix):
    out = output_operand(node.outputs[0], layouts)
    if node.op == "fill":
        value = node.attrs["value"]
        literal = glsl_float(value) if node.attrs["dtype"] == "float32" else \
            ("true" if value else "false") if node.attrs["dtype"] == "bool" else glsl_int(value)
        return _kernel([node], [], literal, [], out, prefix)
    if not node.inputs:                     # range, linspace: from the element's index
        return _kernel([node], [index_step(node, "r0")], "r0", [], out, prefix, indexed=True)
    inputs = operands(node, layouts)
    arg_of = {b.value: (b.arg, b.scalar) for b in inputs}
    step = step_for(StepOp.of_node(node), "r0", [arg_of[v.name] for v in node.inputs])
    return _kernel([node], [step], "r0", inputs, out, prefix,
                   constants=scalar_constants(node.inputs))


def lower_copy(node, layouts, prefix):
    """assign: copy its new value (input 1) into the assign's own texture."""
    out = output_operand(node.outputs[0], layouts)
    inputs = [b for b in operands(node, layouts) if b.value == node.inputs[1].name]
    arg = inputs[0]
    step = {"var": "r0", "op": "identity", "glsl": "{0}", "consts": [], "ctype": arg.scalar,
            "otype": arg.scalar,
            "args": [{"expr": arg.arg, "type": arg.scalar, "to": arg.scalar}],
            "node": node.name}
    return _kernel([node], [step], "r0", inputs, out, prefix)
