"""Control flow: ops that hold sub-graphs (issue 25).

    while_loop(vars..., cond captures..., body captures...)   cond, body
    cond(pred, true captures..., false captures...)            true_branch, false_branch
    scan(carries..., elems..., captures...)                    body (JAX's lax.scan)

A sub-graph is an ir Graph of its own: its placeholders, in creation order, are its
parameters (a loop's variables or a scan's carries and element slices first, then the
outer values it reads, each captured into a placeholder: Graph.capture), and its
`outputs` are what it returns. The outer values are explicit inputs of the node, so
prune, CSE and serialisation see every edge; the sub-graphs themselves are attrs.

Type inference runs the sub-graphs' own inference with the node's input types (so a
feed of a concrete shape makes the loop's types concrete too), and checks that loop
variables keep their dtype and shape across iterations (a dim declared None in
shape_invariants may change). The references run the sub-graphs with the other ops'
numpy references (run_subgraph): `cond` runs only the branch taken.
"""
from __future__ import annotations

import numpy as np

from ..errors import AttrError, DTypeError, FragflowError, GraphError, ShapeError
from ..graph import Graph, Value
from ..types import TensorType, format_shape
from .registry import REQUIRED, OpDef, get_op, register

FAMILY = "control"
OPS = ("while_loop", "cond", "scan")


# -- sub-graphs ---------------------------------------------------------------------------
def params(graph: Graph) -> list:
    """A sub-graph's parameters: its placeholders, in creation order."""
    if not isinstance(graph, Graph):
        raise GraphError(f"a sub-graph attr must be a Graph, not {type(graph).__name__}")
    return [n.outputs[0] for n in graph.nodes if n.op == "placeholder"]


def subgraphs(node) -> list:
    """The sub-graphs a node holds (attrs that are Graphs), by attr name."""
    return [(k, v) for k, v in node.attrs.items() if isinstance(v, Graph)]


def _compatible(given: tuple, declared: tuple) -> bool:
    """given fits declared: same rank, and every dim declared known is that dim."""
    return len(given) == len(declared) and all(
        d is None or g is None or g == d for g, d in zip(given, declared))


def infer_subgraph(graph: Graph, types: list, what: str) -> list:
    """The types of graph's outputs when its parameters have `types`."""
    ps = params(graph)
    if len(ps) != len(types):
        raise GraphError(f"{what} takes {len(ps)} parameters, the node gives {len(types)}")
    cache = graph.__dict__.setdefault("_infer_cache", {})
    key = tuple(types)
    if key in cache:
        return cache[key]
    env: dict = {}
    for p, t in zip(ps, types):
        if p.dtype != t.dtype or not _compatible(t.shape, p.shape):
            raise ShapeError(f"{what}: parameter '{p.name}' is {p.type}, given {t}")
        env[p] = t
    for node in graph.nodes:
        if node.op == "placeholder":
            continue
        in_types = [env[v] for v in node.inputs]
        if all(t == v.type for t, v in zip(in_types, node.inputs)):
            out = [v.type for v in node.outputs]
        else:
            try:
                out = get_op(node.op).infer_types(in_types, node.attrs)
            except FragflowError as err:
                raise type(err)(f"{what}: {node.where()}: {err}") from None
        env.update(zip(node.outputs, out))
    result = [env[v] for v in graph.outputs]
    cache[key] = result
    return result


def float_dtype_of(arrays) -> type:
    """float64 where the executor computes float32 tensors in float64 (the
    finite-difference oracle), else float32."""
    return np.float64 if any(getattr(a, "dtype", None) == np.float64 for a in arrays) \
        else np.float32


def run_subgraph(graph: Graph, args: list, float_dtype=np.float32) -> list:
    """graph's outputs for its parameters' values args (numpy references)."""
    env: dict = {}
    ps = params(graph)
    for p, a in zip(ps, args):
        env[p] = a
    for node in graph.nodes:
        if node.op == "placeholder":
            continue
        if node.op == "constant":
            results = [node.attrs["value"]]
        else:
            try:
                results = get_op(node.op).run_reference([env[v] for v in node.inputs],
                                                        node.attrs)
            except FragflowError:
                raise
            except Exception as err:
                raise FragflowError(f"{node.where()}: {type(err).__name__}: {err}") from err
        for v, r in zip(node.outputs, results):
            dtype = float_dtype if v.dtype == "float32" else np.dtype(v.dtype)
            env[v] = np.asarray(r, dtype=dtype)
    return [env[v] for v in graph.outputs]


def inline(target: Graph, sub: Graph, args: list) -> list:
    """sub's outputs computed in target from args (values of target) for its
    parameters: sub's nodes copied in, under fresh names (gradient rules and the GL
    runtime build graphs of sub-graphs so)."""
    mapping = dict(zip(params(sub), args))
    for node in sub.nodes:
        if node.op == "placeholder":
            continue
        base = node.name.rsplit("/", 1)[-1]
        copy = target.add_node(node.op, [mapping[v] for v in node.inputs], dict(node.attrs),
                               name=base, source=node.source)
        mapping.update(zip(node.outputs, copy.outputs))
    return [mapping[v] for v in sub.outputs]


def has_control_flow(graph: Graph) -> bool:
    return any(get_op(n.op).family == FAMILY for n in graph.nodes)


def _names(attrs, n):
    names = attrs.get("names") or ()
    return [names[i] if i < len(names) else f"loop variable {i}" for i in range(n)]


def _check_carried(what, name, before: TensorType, after: TensorType, hint: str):
    if after.dtype != before.dtype:
        raise DTypeError(f"{what}: {name} is {before.dtype} before an iteration and "
                         f"{after.dtype} after it; a loop variable keeps its dtype")
    if len(after.shape) != len(before.shape) or any(
            b is not None and a is not None and a != b
            for a, b in zip(after.shape, before.shape)):
        raise ShapeError(f"{what}: {name} has shape {format_shape(before.shape)} before "
                         f"an iteration and {format_shape(after.shape)} after it{hint}")


def _check_runtime(what, names, invariant, arrays):
    for name, t, a in zip(names, invariant, arrays):
        if not _compatible(tuple(np.shape(a)), t.shape):
            raise ShapeError(f"{what}: {name} has shape {format_shape(np.shape(a))} after "
                             f"an iteration, not {format_shape(t.shape)}")


# -- while_loop ---------------------------------------------------------------------------
def _while_split(types, attrs):
    n = attrs["num_vars"]
    nc = len(params(attrs["cond"])) - n
    nb = len(params(attrs["body"])) - n
    if nc < 0 or nb < 0 or len(types) != n + nc + nb:
        raise GraphError(f"while_loop: {len(types)} inputs do not fit {n} loop variables, "
                         f"{nc} values the condition reads and {nb} the body reads")
    return types[:n], types[n:n + nc], types[n + nc:]


def loop_types(var_types, attrs) -> list:
    """The loop variables' types across iterations: shape_invariants where given, else
    the initial values' types."""
    invariants = attrs["shape_invariants"] or (None,) * len(var_types)
    names = _names(attrs, len(var_types))
    out = []
    for name, t, inv in zip(names, var_types, invariants):
        if inv is None:
            out.append(t)
            continue
        inv = tuple(inv)
        if not _compatible(t.shape, inv):
            raise ShapeError(f"{name}'s initial value has shape {format_shape(t.shape)}, "
                             f"which does not fit its shape invariant {format_shape(inv)}")
        out.append(TensorType(inv, t.dtype))
    return out


def _check_predicate(what, types):
    if len(types) != 1:
        raise GraphError(f"{what} must return one predicate, it returns {len(types)} values")
    (t,) = types
    if t.dtype != "bool":
        raise DTypeError(f"{what} must return a bool scalar, it returns {t}")
    if t.shape != ():
        raise ShapeError(f"{what} must return a scalar predicate, it returns shape "
                         f"{format_shape(t.shape)}")


def _while_infer(types, attrs):
    var_types, cond_caps, body_caps = _while_split(types, attrs)
    carried = loop_types(var_types, attrs)
    names = _names(attrs, len(carried))
    _check_predicate("its condition", infer_subgraph(attrs["cond"], carried + cond_caps,
                                                     "its condition"))
    after = infer_subgraph(attrs["body"], carried + body_caps, "its body")
    if len(after) != len(carried):
        raise GraphError(f"its body returns {len(after)} values for {len(carried)} loop "
                         f"variables")
    for name, before, now in zip(names, carried, after):
        _check_carried("its body", name, before, now,
                       "; declare the dims that change as None in shape_invariants")
    return carried


def _while_reference(arrays, attrs):
    n = attrs["num_vars"]
    fd = float_dtype_of(arrays)
    cond, body = attrs["cond"], attrs["body"]
    nc = len(params(cond)) - n
    vars_, cond_caps, body_caps = list(arrays[:n]), list(arrays[n:n + nc]), \
        list(arrays[n + nc:])
    invariant = [TensorType(tuple(p.shape), p.dtype) for p in params(body)[:n]]
    names = _names(attrs, n)
    limit = attrs["maximum_iterations"]
    count = 0
    while limit is None or count < limit:
        (pred,) = run_subgraph(cond, vars_ + cond_caps, fd)
        if not bool(pred):
            break
        vars_ = run_subgraph(body, vars_ + body_caps, fd)
        _check_runtime("while_loop's body", names, invariant, vars_)
        count += 1
    return vars_


register(OpDef(
    "while_loop", FAMILY, _while_infer, _while_reference,
    attrs={"cond": REQUIRED, "body": REQUIRED, "num_vars": REQUIRED,
           "shape_invariants": None, "maximum_iterations": None, "names": ()},
    tf="tf.while_loop", hidden_attrs=("names",),
    doc="Loop variables run through body while cond holds (at most maximum_iterations "
        "times); the sub-graphs' parameters are the variables, then captured values."))

register(OpDef(
    "cond", FAMILY,
    lambda types, attrs: _cond_infer(types, attrs),
    lambda arrays, attrs: _cond_reference(arrays, attrs),
    attrs={"true_branch": REQUIRED, "false_branch": REQUIRED}, tf="tf.cond",
    doc="The outputs of true_branch where pred holds, else of false_branch; only the "
        "branch taken runs."))

register(OpDef(
    "scan", FAMILY,
    lambda types, attrs: _scan_infer(types, attrs),
    lambda arrays, attrs: _scan_reference(arrays, attrs),
    attrs={"body": REQUIRED, "num_carry": REQUIRED, "num_elems": REQUIRED,
           "reverse": False, "length": None},
    tf="tf.scan",
    doc="JAX's lax.scan: body(carry..., slices of elems..., captured...) -> (carry..., "
        "ys...) along axis 0; outputs the last carry and the ys stacked."))


# -- cond ---------------------------------------------------------------------------------
def _cond_split(seq, attrs):
    nt = len(params(attrs["true_branch"]))
    nf = len(params(attrs["false_branch"]))
    if len(seq) != 1 + nt + nf:
        raise GraphError(f"cond: {len(seq)} inputs do not fit a predicate, {nt} values the "
                         f"true branch reads and {nf} the false branch reads")
    return seq[0], seq[1:1 + nt], seq[1 + nt:]


def _cond_infer(types, attrs):
    pred, tcaps, fcaps = _cond_split(types, attrs)
    if pred.dtype != "bool" or pred.shape != ():
        raise DTypeError(f"its predicate must be a bool scalar, got {pred}") \
            if pred.dtype != "bool" else \
            ShapeError(f"its predicate must be a scalar, got shape {format_shape(pred.shape)}")
    t_out = infer_subgraph(attrs["true_branch"], tcaps, "its true branch")
    f_out = infer_subgraph(attrs["false_branch"], fcaps, "its false branch")
    if len(t_out) != len(f_out):
        raise GraphError(f"its true branch returns {len(t_out)} values and its false "
                         f"branch {len(f_out)}")
    out = []
    for k, (a, b) in enumerate(zip(t_out, f_out)):
        if a.dtype != b.dtype:
            raise DTypeError(f"output {k}: the true branch returns {a.dtype} and the false "
                             f"branch {b.dtype}")
        if len(a.shape) != len(b.shape) or any(
                x is not None and y is not None and x != y for x, y in zip(a.shape, b.shape)):
            raise ShapeError(f"output {k}: the true branch returns shape "
                             f"{format_shape(a.shape)} and the false branch "
                             f"{format_shape(b.shape)}; both must return one shape")
        out.append(TensorType(tuple(x if x is not None else y
                                    for x, y in zip(a.shape, b.shape)), a.dtype))
    return out


def _cond_reference(arrays, attrs):
    pred, tcaps, fcaps = _cond_split(list(arrays), attrs)
    fd = float_dtype_of(arrays)
    if bool(pred):
        return run_subgraph(attrs["true_branch"], tcaps, fd)
    return run_subgraph(attrs["false_branch"], fcaps, fd)


# -- scan ---------------------------------------------------------------------------------
def _scan_split(seq, attrs):
    nc, ne = attrs["num_carry"], attrs["num_elems"]
    return seq[:nc], seq[nc:nc + ne], seq[nc + ne:]


def scan_length(elem_types, attrs):
    lengths = {t.shape[0] if t.shape else "scalar" for t in elem_types}
    if "scalar" in lengths:
        raise ShapeError("scan: elems must have a leading axis to scan along, got a scalar")
    known = {d for d in lengths if d is not None}
    if len(known) > 1:
        raise ShapeError(f"scan: elems of different lengths {sorted(known)} along axis 0")
    if attrs["length"] is not None:
        if known and known != {attrs["length"]}:
            raise ShapeError(f"scan: length={attrs['length']} but elems have length "
                             f"{known.pop()}")
        return attrs["length"]
    if not elem_types:
        raise AttrError("scan with no elems needs a length")
    return known.pop() if known else None


def _scan_infer(types, attrs):
    carry, elems, caps = _scan_split(types, attrs)
    length = scan_length(elems, attrs)
    slices = [TensorType(t.shape[1:], t.dtype) for t in elems]
    after = infer_subgraph(attrs["body"], list(carry) + slices + list(caps), "its body")
    if len(after) < len(carry):
        raise GraphError(f"its body returns {len(after)} values for {len(carry)} carried "
                         f"values")
    for k, (before, now) in enumerate(zip(carry, after)):
        _check_carried("its body", f"carried value {k}", before, now,
                       "; a scan's carry keeps its shape")
    ys = [TensorType((length,) + t.shape, t.dtype) for t in after[len(carry):]]
    return list(carry) + ys


def _scan_reference(arrays, attrs):
    carry, elems, caps = _scan_split(list(arrays), attrs)
    fd = float_dtype_of(arrays)
    body = attrs["body"]
    length = attrs["length"] if attrs["length"] is not None else len(elems[0])
    ys_types = [v for v in body.outputs[len(carry):]]
    steps = range(length - 1, -1, -1) if attrs["reverse"] else range(length)
    stacked = None
    for i in steps:
        out = run_subgraph(body, list(carry) + [e[i] for e in elems] + list(caps), fd)
        carry, ys = out[:len(carry)], out[len(carry):]
        for k, (a, before) in enumerate(zip(carry, arrays)):
            if np.shape(a) != np.shape(before):
                raise ShapeError(f"scan's body: carried value {k} has shape "
                                 f"{format_shape(np.shape(a))} after a step, not "
                                 f"{format_shape(np.shape(before))}")
        if stacked is None:
            stacked = [np.empty((length,) + np.shape(y), dtype=y.dtype) for y in ys]
        for s, y in zip(stacked, ys):
            s[i] = y
    if stacked is None:       # zero steps: the ys' shapes come from the body's types
        stacked = []
        for v in ys_types:
            shape = tuple(0 if d is None else d for d in v.shape)
            dtype = fd if v.dtype == "float32" else np.dtype(v.dtype)
            stacked.append(np.zeros((0,) + shape, dtype=dtype))
    return list(carry) + stacked


# -- builders -----------------------------------------------------------------------------
def while_loop(graph: Graph, loop_vars, cond: Graph, body: Graph, cond_captures,
               body_captures, shape_invariants=None, maximum_iterations=None,
               names=(), name=None):
    node = graph.add_node("while_loop", list(loop_vars) + list(cond_captures)
                          + list(body_captures),
                          {"cond": cond, "body": body, "num_vars": len(loop_vars),
                           "shape_invariants": shape_invariants,
                           "maximum_iterations": maximum_iterations, "names": tuple(names)},
                          name or "while")
    return list(node.outputs)


def cond_op(graph: Graph, pred: Value, true_branch: Graph, false_branch: Graph,
            true_captures, false_captures, name=None):
    node = graph.add_node("cond", [pred] + list(true_captures) + list(false_captures),
                          {"true_branch": true_branch, "false_branch": false_branch},
                          name or "cond")
    return list(node.outputs)


def scan(graph: Graph, body: Graph, carry, elems, captures, reverse=False, length=None,
         name=None):
    node = graph.add_node("scan", list(carry) + list(elems) + list(captures),
                          {"body": body, "num_carry": len(carry), "num_elems": len(elems),
                           "reverse": bool(reverse), "length": length}, name or "scan")
    return list(node.outputs)
