"""Reverse-mode differentiation as a graph transformation.

gradients(ys, xs) adds nodes to ys' graph that compute d(sum of ys)/dx for each x and
returns them as values: they can be fetched, pruned, fused and differentiated again.
Gradient nodes are named under 'gradients/<forward scope>' and carry the forward node's
source line."""
from __future__ import annotations

from ...ir.errors import GradientError, GraphError
from ...ir.graph import Value
from ...ir.ops import elementwise as _ew
from ...ir.ops.registry import get_op
from ...ir.types import format_shape
from .registry import rule_for

SCOPE = "gradients"


def _check(values, what):
    for v in values:
        if not isinstance(v, Value):
            raise GraphError(f"{what} must be graph tensors, got {v!r}")
    graphs = {v.graph for v in values}
    if len(graphs) > 1:
        raise GraphError(f"{what} come from different graphs")


def _between(ys, xs, stops, through_xs: bool = True) -> set:
    """Nodes on some path from an x to a y (not through a stop or a non-float value;
    through another x only when through_xs).

    Iterative on purpose: a graph's nodes are in creation order, which is a
    topological order, so one forward sweep finds what reaches an x and one explicit
    stack walks back from the ys; chains of any depth fit (no recursion limit)."""
    x_set = set(xs)
    reaches_x: dict = {}           # node -> some float path from an x into it

    def reaches(value) -> bool:
        if value in x_set:
            return True
        if value in stops or value.dtype != "float32":
            return False
        return reaches_x.get(value.node, False)

    graph = (ys or xs)[0].graph
    for node in graph.nodes:
        reaches_x[node] = get_op(node.op).differentiable and \
            any(reaches(v) for v in node.inputs)

    # An x may itself depend on another x (gradients(loss, [h, x]) with h = f(x)): the
    # walk goes on through it, so x gets the gradient through h too, as in TensorFlow.
    needed, stack = set(), list(ys)
    while stack:
        value = stack.pop()
        if value in stops or (value in x_set and not through_xs) or \
                (value not in x_set and value.dtype != "float32"):
            continue
        node = value.node
        if node in needed or not reaches_x.get(node, False):
            continue
        needed.add(node)
        stack.extend(node.inputs)
    return needed


def _sum(values):
    """Several paths into one tensor: their gradients add up."""
    return values[0] if len(values) == 1 else _ew.add_n(values)


def gradients(ys, xs, grad_ys=None, stop_gradients=(), unconnected="none",
              through_xs: bool = True):
    """One gradient per x of sum(ys) (weighted by grad_ys when given).

    through_xs=False: partial derivatives, each x held as an independent variable (a
    fused node's rule wants this: the engine that called it sends each input's
    gradient on to the inputs it depends on)."""
    ys, xs = list(ys), list(xs)
    _check(ys + xs, "ys and xs")
    if unconnected not in ("none", "zero"):
        raise GradientError(f"unconnected must be 'none' or 'zero', got {unconnected!r}")
    graph = ys[0].graph if ys else xs[0].graph
    for x in xs:
        if x.dtype != "float32":
            raise GradientError(f"cannot differentiate with respect to '{x.name}': it is "
                                f"{x.dtype}; only float32 tensors have gradients")
    grad_ys = list(grad_ys) if grad_ys is not None else [None] * len(ys)
    if len(grad_ys) != len(ys):
        raise GradientError(f"{len(grad_ys)} grad_ys for {len(ys)} ys")
    stops = set(stop_gradients or ())
    needed = _between(ys, xs, stops, through_xs)
    pending: dict = {}          # value -> [gradient contributions]
    for k, (y, dy) in enumerate(zip(ys, grad_ys)):
        if y.dtype != "float32":
            raise GradientError(f"cannot differentiate '{y.name}': it is {y.dtype}")
        if dy is not None and (dy.type.rank != y.type.rank or any(
                a is not None and b is not None and a != b
                for a, b in zip(dy.shape, y.shape))):
            raise GradientError(f"grad_ys[{k}] has shape {format_shape(dy.shape)} but "
                                f"ys[{k}] ('{y.name}') has shape {format_shape(y.shape)}")
        if dy is None:
            with graph.derived_from(y.node, SCOPE):
                dy = _ew.unary("ones_like", y)
        pending.setdefault(y, []).append(dy)
    for node in reversed(graph.nodes):
        if node not in needed:
            continue
        if not any(v in pending for v in node.outputs):
            continue
        rule = rule_for(node.op)
        if rule is None:
            fetch = next((y for y in ys if y.node is node), ys[0])
            raise GradientError(
                f"{node.op} '{node.name}' (scope '{node.scope}'"
                f"{', ' + node.source if node.source else ''}) has no gradient rule; "
                f"the gradient of '{fetch.name}' needs one")
        with graph.derived_from(node, SCOPE):
            dys = [_sum(pending[v]) if v in pending else None for v in node.outputs]
            if len(node.outputs) == 1:
                grads = rule(node, dys[0])
            else:
                grads = rule(node, [d if d is not None else _ew.unary("zeros_like", v)
                                    for d, v in zip(dys, node.outputs)])
        for value, grad in zip(node.inputs, grads):
            if grad is None or value.dtype != "float32":
                continue
            pending.setdefault(value, []).append(grad)
    results = []
    for x in xs:
        if x in pending:
            with graph.derived_from(x.node, SCOPE):
                results.append(_sum(pending[x]))
        elif unconnected == "zero":
            with graph.derived_from(x.node, SCOPE):
                results.append(_ew.unary("zeros_like", x))
        else:
            results.append(None)
    return results
