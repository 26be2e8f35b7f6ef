"""Constant folding, common-subexpression elimination and algebraic simplification.

Each pass first looks for something to do on the graph as it is and returns it
unchanged when there is nothing: a rebuild infers every node's type again, which is
most of a pass's time (MobileNet: 20-40 ms a pass), and most graphs give cse and
simplify nothing to do. Whether a rule fires depends only on a node and its inputs, so
no rule can fire in a rebuild when none fires on the graph as it is."""
from __future__ import annotations

import numpy as np

from ..ir.ops.registry import get_op
from ..ir.ops.shape import transpose_perm
from .rewrite import consumers, rebuild

FOLD_LIMIT = 1 << 16          # elements: bigger results stay computed on the GPU


def _constant(value):
    node = value.node
    return node.attrs["value"] if node.op == "constant" else None


def _foldable(node, inputs) -> bool:
    """Whether node becomes a constant: its inputs are all constants, or it is
    zeros_like/ones_like (only the shape matters), and its result is static and small.
    Stateful ops (feeds, variables, assign, the random ops) never are."""
    opdef = get_op(node.op)
    if (opdef.stateful or len(node.outputs) != 1
            or not node.outputs[0].type.is_static
            or node.outputs[0].type.size > FOLD_LIMIT):
        return False
    return node.op in ("zeros_like", "ones_like") or \
        (bool(inputs) and all(v.node.op == "constant" for v in inputs))


def _folded(node, inputs, new, report):
    """node as a constant when _foldable (its value from the numpy reference); else
    None."""
    if not _foldable(node, inputs):
        return None
    opdef = get_op(node.op)
    out = node.outputs[0]
    if node.op in ("zeros_like", "ones_like"):
        # the gradients' seeds and accumulators: no kernel, and x + 0, x * 1 go away
        value = np.full(out.shape, 0 if node.op == "zeros_like" else 1,
                        dtype=np.dtype(out.dtype))
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
    if not any(_foldable(node, node.inputs) for node in graph.nodes):
        return graph
    return rebuild(graph, lambda node, inputs, new, mapping:
                   _folded(node, inputs, new, report))


def _attr_key(value):
    if isinstance(value, np.ndarray):
        return ("array", value.dtype.name, value.shape, value.tobytes())
    if isinstance(value, tuple):
        return tuple(_attr_key(v) for v in value)
    return value


def _cse_key(node, inputs):
    """What makes two nodes compute the same value (None: never merged)."""
    opdef = get_op(node.op)
    if opdef.stateful or opdef.family == "random" or node.op == "custom_gradient":
        return None
    return (node.op, tuple(id(v) for v in inputs),
            tuple(sorted((k, _attr_key(v)) for k, v in node.attrs.items())))


def _has_duplicates(graph) -> bool:
    """Whether two nodes of graph compute the same value."""
    seen: set = set()
    for node in graph.nodes:          # (chains of duplicates start with a duplicate)
        key = _cse_key(node, node.inputs)
        if key in seen:
            return True
        if key is not None:
            seen.add(key)
    return False


def eliminate_common_subexpressions(graph, report):
    """Two nodes with the same op, inputs and attrs compute the same value once."""
    if not _has_duplicates(graph):
        return graph
    seen: dict = {}

    def transform(node, inputs, new, mapping):
        key = _cse_key(node, inputs)
        if key is None:
            return None
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


def _relu_mask_of_max_pool_grad(node, inputs, users):
    """where(x > 0, max_pool_grad(x, max_pool(x), dy), 0) (a ReLU's gradient after a
    max pool's) is max_pool_grad(x, y, where(y > 0, dy, 0)), y = max_pool(x): dy[w]
    goes to an element of window w equal to y[w], so masking it by that element's sign
    before the routing is masking it after. The mask then runs at the pooled size and
    joins the kernel that computes dy (an epilogue, passes/fusion.py) instead of a
    kernel of its own. Only where nothing else uses the max_pool_grad (it would run
    twice) and the zeros are scalars."""
    if node.op != "where" or node.outputs[0].type != inputs[1].type:
        return None
    cond, routed, zero = inputs
    pool_grad = routed.node
    if cond.node.op != "greater" or pool_grad.op != "max_pool_grad" or \
            users.get(node.inputs[1], []) != [node]:
        return None
    x, threshold = cond.node.inputs
    pool = pool_grad.inputs[1].node
    if pool_grad.inputs[0] is not x or pool.op != "max_pool" or pool.inputs[0] is not x \
            or dict(pool.attrs) != dict(pool_grad.attrs):
        return None
    if not (_scalar(threshold) == 0.0 and _scalar(zero) == 0.0):
        return None
    pooled, dy = pool_grad.inputs[1], pool_grad.inputs[2]

    def build(new):
        where = dict(scope=node.scope, source=node.source)
        mask = new.add_node("greater", [pooled, threshold], {},
                            exact_name=f"{node.name}/pooled_mask", **where)
        masked = new.add_node("where", [mask.outputs[0], dy, zero], {},
                              exact_name=f"{node.name}/pooled", **where)
        return new.add_node("max_pool_grad", [x, pooled, masked.outputs[0]],
                            dict(pool_grad.attrs), exact_name=node.name, **where).outputs
    return ("build", build, f"ReLU mask '{node.name}' applied to max_pool_grad "
                            f"'{pool_grad.name}''s dy, at the pooled size")


def _decide(node, inputs, users):
    """What simplify makes of node, given its (rewritten) inputs and the graph's
    consumers (of the values as they were): None (it stays), ("fold",), ("value", v)
    — an existing value replaces it —, ("node", op, inputs, attrs, report line) — a
    cheaper node replaces it —, or ("build", build(new graph) -> outputs, report
    line) — cheaper nodes replace it."""
    op = node.op
    result = node.outputs[0].type if len(node.outputs) == 1 else None
    out = None
    if (any(v.node.op == "constant" for v in inputs) or op in ("zeros_like", "ones_like")) \
            and _foldable(node, inputs):       # constants this pass made
        return ("fold",)
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
            _scalar(inputs[1]) in POWERS and inputs[0].type == result:
        # small integer and half powers without exp2(log2): x**2 is exactly x*x
        unary = POWERS[_scalar(inputs[1])]
        return ("node", unary, [inputs[0]], {},
                f"pow '{node.name}' by {_scalar(inputs[1]):g} runs as {unary}")
    elif op == "neg" and inputs[0].node.op == "neg":
        out = inputs[0].node.inputs[0]
    elif op == "cast" and inputs[0].dtype == node.attrs["dtype"]:
        out = inputs[0]
    elif op == "transpose" and inputs[0].node.op == "transpose":
        inner = inputs[0].node
        rank = inputs[0].type.rank
        p_in, p_out = transpose_perm(inner.attrs, rank), transpose_perm(node.attrs, rank)
        perm = tuple(p_in[p] for p in p_out)
        if perm == tuple(range(rank)):
            out = inner.inputs[0]
        else:
            return ("node", "transpose", [inner.inputs[0]], {"perm": perm},
                    f"merged transposes '{inner.name}' and '{node.name}'")
    elif op == "reshape" and inputs[0].node.op == "reshape":
        return ("node", "reshape", [inputs[0].node.inputs[0]], dict(node.attrs),
                f"merged reshapes '{inputs[0].node.name}' and '{node.name}'")
    elif op == "where":
        return _relu_mask_of_max_pool_grad(node, inputs, users)
    if out is not None and out.type == result:
        return ("value", out)
    return None


def simplify(graph, report):
    """x*1, 1*x, x+0, 0+x, x-0, -(-x), cast to the same dtype, transpose of a transpose
    and reshape of a reshape — only where the result keeps the node's type (a
    broadcasting 1 or 0 changes the shape and stays); and the gradients' sum_like(g, x)
    and g + zeros_like(x) where g already has the result's shape; a ReLU's gradient
    mask after a max pool's gradient applied before it, at the pooled size
    (_relu_mask_of_max_pool_grad); a node left with constant inputs only
    (zeros_like/ones_like became constants here) is folded."""
    users = consumers(graph)
    for value in graph.outputs:            # a fetch is a use too
        users.setdefault(value, []).append(None)
    if not any(_decide(node, node.inputs, users) for node in graph.nodes):
        return graph

    def transform(node, inputs, new, mapping):
        decision = _decide(node, inputs, users)
        if decision is None:
            return None
        if decision[0] == "fold":
            return _folded(node, inputs, new, report)
        if decision[0] == "value":
            report.append(f"removed {node.op} '{node.name}'")
            return [decision[1]]
        if decision[0] == "build":
            report.append(decision[2])
            return decision[1](new)
        _, op, operands, attrs, line = decision
        report.append(line)
        return new.add_node(op, operands, attrs, exact_name=node.name, scope=node.scope,
                            source=node.source).outputs
    return rebuild(graph, transform)
