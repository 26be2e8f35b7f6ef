"""Constant folding, common-subexpression elimination and algebraic simplification."""
from __future__ import annotations

import numpy as np

from ..ir.ops.registry import get_op
from ..ir.ops.shape import _perm
from .rewrite import rebuild

FOLD_LIMIT = 1 << 16          # elements: bigger results stay computed on the GPU
NEVER_FOLD_FAMILIES = {"random", "state"}


def _constant(value):
    node = value.node
    return node.attrs["value"] if node.op == "constant" else None


def _folded(node, inputs, new, report):
    """node as a constant when its inputs are all constants (numpy reference), or
    when it is zeros_like/ones_like of a static shape (only the shape matters); else
    None."""
    opdef = get_op(node.op)
    if (opdef.stateful or opdef.family in NEVER_FOLD_FAMILIES or len(node.outputs) != 1
            or not node.outputs[0].type.is_static
            or node.outputs[0].type.size > FOLD_LIMIT):
        return None
    out = node.outputs[0]
    if node.op in ("zeros_like", "ones_like"):
        # the gradients' seeds and accumulators: no kernel, and x + 0, x * 1 go away
        value = np.full(out.shape, 0 if node.op == "zeros_like" else 1,
                        dtype=np.dtype(out.dtype))
    elif not inputs or any(v.node.op != "constant" for v in inputs):
        return None
    else:
        with np.errstate(all="ignore"):
            (value,) = opdef.run_reference([_constant(v) for v in inputs], node.attrs)
        value = np.asarray(value, dtype=np.dtype(out.dtype)).reshape(out.shape)
    report.append(f"folded {node.op} '{node.name}' into a constant")
    return new.add_node("constant", [], {"value": value}, exact_name=node.name,
                        scope=node.scope, source=node.source).outputs


def fold_constants(graph, report):
    """Nodes whose inputs are all constants become constants (numpy references), and
    so do zeros_like/ones_like of static shapes."""
    return rebuild(graph, lambda node, inputs, new, mapping:
                   _folded(node, inputs, new, report))


def _attr_key(value):
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.name, value.shape, value.tobytes())
    if isinstance(value, tuple):
        return tuple(_attr_key(v) for v in value)
    return value


def eliminate_common_subexpressions(graph, report):
    """Two nodes with the same op, inputs and attrs compute the same value once."""
    seen: dict = {}

    def transform(node, inputs, new, mapping):
        opdef = get_op(node.op)
        if opdef.stateful or opdef.family == "random" or node.op == "custom_gradient":
            return None
        key = (node.op, tuple(id(v) for v in inputs),
               tuple(sorted((k, _attr_key(v)) for k, v in node.attrs.items())))
        if key in seen:
            report.append(f"'{node.name}' is '{seen[key][0].node.name}' again")
            return seen[key]
        outputs = new.add_node(node.op, inputs, dict(node.attrs), exact_name=node.name,
                               scope=node.scope, source=node.source).outputs
        seen[key] = outputs
        return outputs
    return rebuild(graph, transform)


POWERS = {2.0: "square", -1.0: "reciprocal", 0.5: "sqrt", -0.5: "rsqrt"}


def _scalar(value):
    """A constant's value if it holds one number, else None."""
    array = _constant(value)
    return float(array.reshape(())) if array is not None and array.size == 1 \
        and array.ndim == 0 else None


def _all_equal(value, number) -> bool:
    array = _constant(value)
    return array is not None and array.size > 0 and bool(np.all(array == number))


def simplify(graph, report):
    """x*1, 1*x, x+0, 0+x, x-0, -(-x), cast to the same dtype, transpose of a transpose
    and reshape of a reshape — only where the result keeps the node's type (a
    broadcasting 1 or 0 changes the shape and stays); and the gradients' sum_like(g, x)
    and g + zeros_like(x) where g already has the result's shape; a node left with
    constant inputs only (zeros_like/ones_like became constants here) is folded."""
    def same_type(a, node):
        return a.type == node.outputs[0].type

    def transform(node, inputs, new, mapping):
        op = node.op
        out = None
        if any(v.node.op == "constant" for v in inputs) or op in ("zeros_like", "ones_like"):
            folded = _folded(node, inputs, new, report)   # constants this pass made
            if folded is not None:
                return folded
        if op == "sum_like" or (op == "add" and inputs[1].node.op == "zeros_like"):
            # gradients undo broadcasting with these; with concrete shapes that match,
            # there was no broadcasting to undo
            out = inputs[0]
        elif op == "mul":
            a, b = inputs
            out = a if _all_equal(b, 1) else b if _all_equal(a, 1) else None
        elif op == "add":
            a, b = inputs
            out = a if _all_equal(b, 0) else b if _all_equal(a, 0) else None
        elif op == "sub" and _all_equal(inputs[1], 0):
            out = inputs[0]
        elif op == "pow" and inputs[0].dtype == "float32" and \
                _scalar(inputs[1]) in POWERS and same_type(inputs[0], node):
            # small integer and half powers without exp2(log2): x**2 is exactly x*x
            unary = POWERS[_scalar(inputs[1])]
            report.append(f"pow '{node.name}' by {_scalar(inputs[1]):g} runs as {unary}")
            return new.add_node(unary, [inputs[0]], {}, exact_name=node.name,
                                scope=node.scope, source=node.source).outputs
        elif op == "neg" and inputs[0].node.op == "neg":
            out = inputs[0].node.inputs[0]
        elif op == "cast" and inputs[0].dtype == node.attrs["dtype"]:
            out = inputs[0]
        elif op == "transpose" and inputs[0].node.op == "transpose":
            inner = inputs[0].node
            rank = inputs[0].type.rank
            p_in, p_out = _perm(inner.attrs, rank), _perm(node.attrs, rank)
            perm = tuple(p_in[p] for p in p_out)
            if perm == tuple(range(rank)):
                out = inner.inputs[0]
            else:
                report.append(f"merged transposes '{inner.name}' and '{node.name}'")
                return new.add_node("transpose", [inner.inputs[0]], {"perm": perm},
                                    exact_name=node.name, scope=node.scope,
                                    source=node.source).outputs
        elif op == "reshape" and inputs[0].node.op == "reshape":
            report.append(f"merged reshapes '{inputs[0].node.name}' and '{node.name}'")
            return new.add_node("reshape", [inputs[0].node.inputs[0]], dict(node.attrs),
                                exact_name=node.name, scope=node.scope,
                                source=node.source).outputs
        if out is not None and same_type(out, node):
            report.append(f"removed {op} '{node.name}'")
            return [out]
        return None
    return rebuild(graph, transform)
