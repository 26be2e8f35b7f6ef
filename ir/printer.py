"""The text form of a graph, in the spirit of a jaxpr: one node per line, SSA names,
types after a colon, non-default attrs in braces, scope/name and file:line as a
trailing comment."""
from __future__ import annotations

import numpy as np

from .graph import Graph
from .ops.registry import REQUIRED, get_op

_COMMENT_COLUMN = 64
_INLINE_ELEMENTS = 8


def format_attr(value) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= _INLINE_ELEMENTS:
            return np.array2string(value, separator=",").replace("\n", "")
        return f"<{value.dtype.name}{list(value.shape)}>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "(" + ",".join(format_attr(v) for v in value) + ")"
    if isinstance(value, str):
        return value
    if value is None:
        return "none"
    return repr(value)


def format_steps(steps) -> str:
    """A fused op's steps as s0=mul(in0,in1); s1=relu(s0)."""
    parts = []
    for j, (op, attrs, args) in enumerate(steps):
        operands = [("in" if kind == "in" else "s") + str(k) for kind, k in args]
        operands += [f"{k}={format_attr(v)}" for k, v in attrs]
        parts.append(f"s{j}={op}({','.join(operands)})")
    return "[" + "; ".join(parts) + "]"


def _attrs(node) -> str:
    opdef = get_op(node.op)
    shown = []
    for key, value in node.attrs.items():
        if isinstance(value, Graph):
            continue      # a sub-graph: printed nested after the node (_subgraphs)
        if key == "steps":
            shown.append(f"steps={format_steps(value)}")
            continue
        if key in opdef.hidden_attrs:
            continue      # provenance and bookkeeping: kernel headers show them
        if key == "glsl":
            shown.append(f"glsl=<{len(value.strip().splitlines())} lines>")
            continue
        default = opdef.attrs.get(key, REQUIRED)
        if default is not REQUIRED and not isinstance(value, np.ndarray) and value == default:
            continue
        shown.append(f"{key}={format_attr(value)}")
    return " {" + ", ".join(shown) + "}" if shown else ""


class _Names:
    """SSA names: %name for placeholders and variables, %0, %1... for the rest."""

    def __init__(self):
        self.names, self.counter = {}, 0

    def define(self, node) -> list:
        out = []
        for v in node.outputs:
            if node.op in ("placeholder", "variable"):
                name = "%" + node.name.replace("/", ".")
            else:
                name = f"%{self.counter}"
                self.counter += 1
            self.names[v] = name
            out.append(name)
        return out

    def __getitem__(self, value):
        return self.names.get(value, f"%?{value.name}")


def format_node(node, names: _Names) -> str:
    results = names.define(node)
    lhs = ", ".join(results)
    types = ", ".join(str(v.type) for v in node.outputs)
    printer = get_op(node.op).printer
    if printer is not None:
        rhs = printer(node, format_attr)
    else:
        rhs = f"{node.op}({', '.join(names[v] for v in node.inputs)}){_attrs(node)}"
    text = f"  {lhs} = {rhs} : {types}"
    comment = f"# {node.name}" + (f"  {node.source}" if node.source else "")
    line = f"{text.ljust(_COMMENT_COLUMN)} {comment}" if len(text) < _COMMENT_COLUMN \
        else f"{text}  {comment}"
    return line + _subgraphs(node)


def _subgraphs(node) -> str:
    """A control-flow node's sub-graphs, nested below it as a jaxpr prints
    while[cond_jaxpr={...} body_jaxpr={...}]: each with names of its own, its
    parameters the loop variables (or carries, slices) and then captured values, in
    the order of the node's inputs."""
    parts = [(key, value) for key, value in node.attrs.items() if isinstance(value, Graph)]
    if not parts:
        return ""
    lines = []
    for key, sub in parts:
        nested = format_graph(sub, title=key).splitlines()
        lines += ["    " + nested[0]] + ["    " + line for line in nested[1:]]
    return "\n" + "\n".join(lines)


def format_graph(graph, title: str | None = None) -> str:
    names = _Names()
    body = [format_node(node, names) for node in graph.nodes]
    params = ", ".join(f"%{n.name.replace('/', '.')}: {n.outputs[0].type}"
                       for n in graph.nodes if n.op == "placeholder")
    lines = [f"graph {title or graph.name}({params}) {{", *body]
    if graph.outputs:
        lines.append("  return " + ", ".join(names[v] for v in graph.outputs))
    lines.append("}")
    return "\n".join(lines)
