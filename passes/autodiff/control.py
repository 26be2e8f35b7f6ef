"""Gradient rules of the control-flow ops (ir/ops/control.py), built from the same ops,
so that gradients are graphs of loops and branches that can be fetched, serialised and
differentiated again.

    scan        a second scan that also stacks each step's carry (what the backward
                pass needs, as TensorFlow's stacks, JAX's scan residuals), then a scan
                the other way over those, its body the vector-Jacobian product of the
                forward body (the engine run on the body's own graph)
    while_loop  with maximum_iterations: the forward loop rewritten in place to also
                carry its trip count and a stack per variable (maximum_iterations
                rows, one written per iteration), as TF's while_v2 accumulators; the
                backward a while_loop of that trip count reading the stacks, its body
                the vector-Jacobian product of the forward body; variables of unknown
                shape, or stacks over MAX_STACK_ELEMENTS: the loop again as a masked
                scan of maximum_iterations steps.
                Without maximum_iterations no gradient (as TF2 under XLA; JAX's
                while_loop has no reverse mode either)
    cond        a cond of the two branches' vector-Jacobian products: the taken
                branch's gradient, zeros for what only the other branch reads
"""
from __future__ import annotations

from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from ...ir.errors import GradientError
from ...ir.graph import Graph, Value, freeze_attr
from ...ir.ops import control as _control, elementwise as _ew, structure as _st
from ...ir.ops.registry import get_op
from ...ir.ops.shape import reshape
from ...ir.ops.state import constant, placeholder
from ...ir.types import TensorType
from .engine import gradients
from .registry import gradient

_FLOAT = "float32"


_copy_into = _control.inline


def _new_graph(name: str, types: list, labels: list) -> tuple:
    g = Graph(name)
    ps = [placeholder(g, t.shape, t.dtype, name=label) for t, label in zip(types, labels)]
    return g, ps


def vjp_graph(sub: Graph, name: str) -> Graph:
    """The vector-Jacobian product of a sub-graph: parameters (sub's parameters...,
    a cotangent per float output...), outputs (a gradient per float parameter...),
    zeros where an output does not depend on a parameter."""
    ps = _control.params(sub)
    g, args = _new_graph(name, [p.type for p in ps], [f"p{k}" for k in range(len(ps))])
    outs = _copy_into(g, sub, args)
    float_outs = [(k, v) for k, v in enumerate(outs) if v.dtype == _FLOAT]
    cts = [placeholder(g, v.shape, v.dtype, name=f"ct{k}") for k, v in float_outs]
    xs = [a for a in args if a.dtype == _FLOAT]
    if float_outs and xs:
        with g.as_default():
            grads = gradients([v for _, v in float_outs], xs, grad_ys=cts,
                              unconnected="zero")
    else:
        grads = [_ew.unary("zeros_like", x) for x in xs]
    g.outputs = list(grads)
    return g


def _zeros(v):
    return _ew.unary("zeros_like", v)


def _as_list(dys) -> list:
    """The engine hands a one-output node's rule its gradient bare, else a list."""
    return list(dys) if isinstance(dys, (list, tuple)) else [dys]


# -- scan ---------------------------------------------------------------------------------
@gradient("scan")
def _scan(node, dys):
    dys = _as_list(dys)
    attrs = node.attrs
    nc, ne = attrs["num_carry"], attrs["num_elems"]
    body = attrs["body"]
    carry0, elems, caps = _control._scan_split(list(node.inputs), attrs)
    ny = len(node.outputs) - nc
    graph = node.graph
    # 1. the forward again, also stacking each step's incoming carry
    fwd = Graph(f"{body.name}.with_carries")
    fwd_params = _control.params(body)
    args = [placeholder(fwd, p.shape, p.dtype, name=f"p{k}")
            for k, p in enumerate(fwd_params)]
    fwd.outputs = _copy_into(fwd, body, args) + args[:nc]
    hist_outs = _control.scan(graph, fwd, carry0, elems, caps, reverse=attrs["reverse"],
                              length=attrs["length"], name="scan_carries")
    history = hist_outs[nc + ny:]                       # [L, ...] per carry
    # 2. backward: a scan the other way over (carries, elems, dys)
    vjp = vjp_graph(body, f"{body.name}.vjp")
    fc = [k for k in range(nc) if carry0[k].dtype == _FLOAT]
    fe = [k for k in range(ne) if elems[k].dtype == _FLOAT]
    fk = [k for k in range(len(caps)) if caps[k].dtype == _FLOAT]
    fy = [k for k in range(ny) if node.outputs[nc + k].dtype == _FLOAT]
    slice_t = [TensorType(tuple(v.shape[1:]), v.dtype) for v in history] + \
        [TensorType(tuple(v.shape[1:]), v.dtype) for v in elems] + \
        [TensorType(tuple(node.outputs[nc + k].shape[1:]), _FLOAT) for k in fy]
    carry_t = [carry0[k].type for k in fc] + [caps[k].type for k in fk]
    bwd, bp = _new_graph(f"{body.name}.backward", carry_t + slice_t + [c.type for c in caps],
                         [f"dc{k}" for k in fc] + [f"dk{k}" for k in fk]
                         + [f"c{k}" for k in range(nc)] + [f"x{k}" for k in range(ne)]
                         + [f"dy{k}" for k in fy] + [f"k{k}" for k in range(len(caps))])
    dcarry = bp[:len(fc)]
    dacc = bp[len(fc):len(fc) + len(fk)]
    rest = bp[len(fc) + len(fk):]
    c_k, x_k, dy_k, cap_k = (rest[:nc], rest[nc:nc + ne], rest[nc + ne:nc + ne + len(fy)],
                             rest[nc + ne + len(fy):])
    # the cotangent of each float output of the body: new carry's, then ys'
    by_carry = dict(zip(fc, dcarry))
    by_y = dict(zip(fy, dy_k))
    cts = []
    with bwd.as_default():
        for k in range(nc):
            if body.outputs[k].dtype == _FLOAT:
                cts.append(by_carry[k])
        for k in range(ny):
            if body.outputs[nc + k].dtype == _FLOAT:
                cts.append(by_y[k])
        grads = _copy_into(bwd, vjp, list(c_k) + list(x_k) + list(cap_k) + cts)
        ps = fwd_params
        float_params = [k for k, p in enumerate(ps) if p.dtype == _FLOAT]
        g_of = dict(zip(float_params, grads))
        new_dcarry = [g_of[k] for k in fc]
        new_dacc = [_ew.binary("add", a, g_of[nc + ne + k]) for a, k in zip(dacc, fk)]
        dx = [g_of[nc + k] for k in fe]
    bwd.outputs = new_dcarry + new_dacc + dx
    init = [dys[k] for k in fc] + [_zeros(caps[k]) for k in fk]
    seq = list(history) + list(elems) + [dys[nc + k] for k in fy]
    outs = _control.scan(graph, bwd, init, seq, caps, reverse=not attrs["reverse"],
                         length=attrs["length"], name="scan_grad")
    d_carry0 = dict(zip(fc, outs[:len(fc)]))
    d_caps = dict(zip(fk, outs[len(fc):len(fc) + len(fk)]))
    d_elems = dict(zip(fe, outs[len(fc) + len(fk):]))
    return ([d_carry0.get(k) for k in range(nc)] + [d_elems.get(k) for k in range(ne)]
            + [d_caps.get(k) for k in range(len(caps))])


# -- while_loop ---------------------------------------------------------------------------
# The recording body of a while_loop its gradient rewrote says what it records: the
# loop variables (the first n), and the condition and body over those before recording.
_RECORDING = "_fragflow_recording"
# the most elements a loop's stacks may hold (maximum_iterations x its variables'):
# each iteration writes its stacks whole (a loop variable's texture ping-pongs on GL:
# ~0.3 ms an iteration at this size on llvmpipe, about what a draw costs); a bigger
# loop is differentiated as a masked scan of maximum_iterations steps instead
MAX_STACK_ELEMENTS = 1 << 16


class _Recording(NamedTuple):
    n: int
    cond: Graph
    body: Graph


def _is_zero(dy) -> bool:
    return dy is None or dy.node.op == "zeros_like"


def _row_starts(index, rank: int) -> list:
    return [index] + [0] * rank


def _record(node) -> _Recording:
    """node, rewritten in place, also carries its trip count and a stack per loop
    variable of the value it had entering each iteration (maximum_iterations rows,
    written with dynamic_update_slice at the count): as TensorFlow's while_v2 gradient
    makes the forward While op output its accumulators, so the forward runs once and
    its consumers see the same values. The initial count and stacks are placed just
    before node in the graph's node list (creation order stays topological)."""
    attrs = node.attrs
    n, limit = attrs["num_vars"], int(attrs["maximum_iterations"])
    cond_g, body_g = attrs["cond"], attrs["body"]
    vars0, ccaps, bcaps = _control._while_split(list(node.inputs), attrs)
    carried = _control.loop_types([v.type for v in vars0], attrs)
    graph = node.graph
    stack_t = [TensorType((limit,) + tuple(t.shape), t.dtype) for t in carried]
    mark = len(graph.nodes)
    init = [constant(graph, np.int32(0), "int32")] + [
        _ew.fill(graph, t.shape, False if t.dtype == "bool" else 0, t.dtype)
        for t in stack_t]
    made = graph.nodes[mark:]
    del graph.nodes[mark:]
    at = graph.nodes.index(node)
    graph.nodes[at:at] = made
    extra_t = [TensorType((), "int32")] + stack_t
    extra_l = ["count"] + [f"stack{k}" for k in range(n)]
    cps, bps = _control.params(cond_g), _control.params(body_g)
    cond2, cp = _new_graph(f"{cond_g.name}.recording_cond",
                           [p.type for p in cps[:n]] + extra_t + [p.type for p in cps[n:]],
                           [f"v{k}" for k in range(n)] + extra_l
                           + [f"cc{k}" for k in range(len(cps) - n)])
    cond2.outputs = _copy_into(cond2, cond_g, list(cp[:n]) + list(cp[2 * n + 1:]))
    body2, bp = _new_graph(f"{body_g.name}.recording",
                           [p.type for p in bps[:n]] + extra_t + [p.type for p in bps[n:]],
                           [f"v{k}" for k in range(n)] + extra_l
                           + [f"bc{k}" for k in range(len(bps) - n)])
    vs, count, stacks = bp[:n], bp[n], bp[n + 1:2 * n + 1]
    with body2.as_default():
        new = _copy_into(body2, body_g, list(vs) + list(bp[2 * n + 1:]))
        rows = [_st.dynamic_update_slice(s, reshape(v, (1,) + tuple(t.shape)),
                                         _row_starts(count, len(t.shape)))
                for s, v, t in zip(stacks, vs, carried)]
        step = _ew.binary("add", count, constant(body2, np.int32(1), "int32"))
    body2.outputs = list(new) + [step] + rows
    rec = _Recording(n, cond_g, body_g)
    body2.__dict__[_RECORDING] = rec
    invariants = attrs["shape_invariants"]
    names = tuple(_control._names(attrs, n))
    new_attrs = dict(attrs, cond=cond2, body=body2, num_vars=2 * n + 1,
                     names=names + ("the trip count",)
                     + tuple(f"{name}'s stack" for name in names),
                     shape_invariants=None if invariants is None else
                     tuple(invariants) + tuple(t.shape for t in extra_t))
    inputs = list(vars0) + init + list(ccaps) + list(bcaps)
    opdef = get_op("while_loop")
    frozen = MappingProxyType({k: freeze_attr(v)
                               for k, v in opdef.check_attrs(new_attrs).items()})
    types = opdef.infer_types([v.type for v in inputs], frozen)
    node.inputs, node.attrs = tuple(inputs), frozen
    node.outputs = tuple(node.outputs) + tuple(Value(node, k, t) for k, t in
                                               enumerate(types) if k >= n)
    return rec


def _recording(node, dys) -> _Recording:
    """What node records for its gradient: its recording when it has one and nothing
    flows into what it records (a second ff.gradients of the same loop), else a new
    one of all its variables (a second-order gradient: the backward loop read the
    stacks, so they are differentiated as loop variables too)."""
    rec = node.attrs["body"].__dict__.get(_RECORDING)
    if rec is not None and all(_is_zero(dy) for dy, v in zip(dys[rec.n:],
                                                            node.outputs[rec.n:])
                               if v.dtype == _FLOAT):
        return rec
    return _record(node)


@gradient("while_loop")
def _while(node, dys):
    dys = _as_list(dys)
    attrs = node.attrs
    limit = attrs["maximum_iterations"]
    if limit is None:
        raise GradientError(
            f"{node.where()}: the gradient of a while_loop needs maximum_iterations (a "
            f"Python int: the most iterations the backward pass keeps values for, as "
            f"TensorFlow's XLA loops); give one, or use ff.fori_loop / ff.scan")
    vars0, _, _ = _control._while_split(list(node.inputs), attrs)
    carried = _control.loop_types([v.type for v in vars0], attrs)
    for v, t in zip(vars0, carried):
        if not t.is_static and t.shape != v.shape:
            raise GradientError(f"{node.where()}: the gradient of a while_loop needs its "
                                f"loop variables' shapes fixed (shape_invariants lets "
                                f"'{v.name}' change)")
    stacked = int(limit) * sum(int(np.prod(t.shape, dtype=np.int64)) for t in carried) \
        if all(t.is_static for t in carried) else None
    if stacked is None or stacked > MAX_STACK_ELEMENTS:
        return _while_by_scan(node, dys)
    if int(limit) == 0:             # no iteration: the variables pass through
        _, ccaps, bcaps = _control._while_split(list(node.inputs), attrs)
        return ([dys[k] if v.dtype == _FLOAT else None for k, v in enumerate(vars0)]
                + [None] * len(ccaps)
                + [_zeros(c) if c.dtype == _FLOAT else None for c in bcaps])
    rec = _recording(node, dys)
    return _backward(node, rec, dys)


def _backward(node, rec: _Recording, dys) -> list:
    """A while_loop running the forward's trip count down to 0, reading the variables'
    values entering each iteration from the stacks; its body the vector-Jacobian
    product of the forward body (the engine on the body's own graph). Its
    maximum_iterations is the forward's, so it has a gradient of its own."""
    attrs = node.attrs
    n, limit = rec.n, int(attrs["maximum_iterations"])
    vars_all, ccaps, bcaps = _control._while_split(list(node.inputs), attrs)
    vars0 = vars_all[:n]
    carried = [p.type for p in _control.params(rec.body)[:n]]
    count, stacks = node.outputs[n], node.outputs[n + 1:2 * n + 1]
    fv = [k for k in range(n) if vars0[k].dtype == _FLOAT]
    fk = [k for k in range(len(bcaps)) if bcaps[k].dtype == _FLOAT]
    vjp = vjp_graph(rec.body, f"{rec.body.name}.vjp")
    int_t = TensorType((), "int32")
    loop_t = [int_t] + [carried[k] for k in fv] + [bcaps[k].type for k in fk]
    loop_l = ["t"] + [f"dv{k}" for k in fv] + [f"dk{k}" for k in fk]
    bwd, bp = _new_graph(f"{rec.body.name}.backward",
                         loop_t + [s.type for s in stacks] + [c.type for c in bcaps],
                         loop_l + [f"stack{k}" for k in range(n)]
                         + [f"k{k}" for k in range(len(bcaps))])
    t, dv = bp[0], bp[1:1 + len(fv)]
    dk = bp[1 + len(fv):len(loop_t)]
    st, kc = bp[len(loop_t):len(loop_t) + n], bp[len(loop_t) + n:]
    with bwd.as_default():
        t1 = _ew.binary("sub", t, constant(bwd, np.int32(1), "int32"))
        entering = [reshape(_st.dynamic_slice(s, _row_starts(t1, len(c.shape)),
                                              (1,) + tuple(c.shape)), c.shape)
                    for s, c in zip(st, carried)]
        grads = _copy_into(bwd, vjp, entering + list(kc) + list(dv))
        new_dk = [_ew.binary("add", a, g) for a, g in zip(dk, grads[len(fv):])]
    bwd.outputs = [t1] + list(grads[:len(fv)]) + new_dk
    cond, cp = _new_graph(f"{rec.body.name}.backward_cond", loop_t, loop_l)
    with cond.as_default():
        cond.outputs = [_ew.binary("greater", cp[0], constant(cond, np.int32(0), "int32"))]
    init = [count] + [dys[k] for k in fv] + [_zeros(bcaps[k]) for k in fk]
    outs = _control.while_loop(node.graph, init, cond, bwd, [], list(stacks) + list(bcaps),
                               maximum_iterations=limit, names=tuple(loop_l),
                               name="while_grad")
    d_vars = dict(zip(fv, outs[1:1 + len(fv)]))
    d_caps = dict(zip(fk, outs[1 + len(fv):]))
    return ([d_vars.get(k) for k in range(len(vars_all))] + [None] * len(ccaps)
            + [d_caps.get(k) for k in range(len(bcaps))])


def _while_by_scan(node, dys):
    """Loop variables of unknown shape (no stack to keep them in) or stacks over
    MAX_STACK_ELEMENTS: the loop again as a scan of maximum_iterations steps whose body
    runs the original body under a cond while the loop is still active, then the scan
    rule (a scan writes each step's row alone)."""
    attrs = node.attrs
    limit = attrs["maximum_iterations"]
    n = attrs["num_vars"]
    cond_g, body_g = attrs["cond"], attrs["body"]
    vars0, ccaps, bcaps = _control._while_split(list(node.inputs), attrs)
    carried = _control.loop_types([v.type for v in vars0], attrs)
    graph = node.graph
    # the loop as a scan of `limit` steps: carry (vars..., active), captures (the
    # condition's, then the body's); a step runs the body under a cond while active
    step, sp = _new_graph(f"{body_g.name}.steps",
                          list(carried) + [TensorType((), "bool")]
                          + [v.type for v in ccaps] + [v.type for v in bcaps],
                          [f"v{k}" for k in range(n)] + ["active"]
                          + [f"cc{k}" for k in range(len(ccaps))]
                          + [f"bc{k}" for k in range(len(bcaps))])
    vs, active = sp[:n], sp[n]
    cc, bc = sp[n + 1:n + 1 + len(ccaps)], sp[n + 1 + len(ccaps):]
    with step.as_default():
        (pred,) = _copy_into(step, cond_g, list(vs) + list(cc))
        go = _ew.binary("logical_and", active, pred)
        keep, kp = _new_graph(f"{body_g.name}.keep", list(carried),
                              [f"v{k}" for k in range(n)])
        keep.outputs = list(kp)
        new = _control.cond_op(step, go, body_g, keep, list(vs) + list(bc), list(vs),
                               name="active")
    step.outputs = list(new) + [go]
    true = constant(graph, True, "bool")
    outs = _control.scan(graph, step, list(vars0) + [true], [], list(ccaps) + list(bcaps),
                         length=int(limit), name="while_as_scan")
    grads = _scan(outs[0].node, list(dys) + [None])     # no gradient for `active`
    return grads[:n] + grads[n + 1:]



# -- cond ---------------------------------------------------------------------------------
@gradient("cond")
def _cond(node, dys):
    dys = _as_list(dys)
    attrs = node.attrs
    t_g, f_g = attrs["true_branch"], attrs["false_branch"]
    pred, tcaps, fcaps = _control._cond_split(list(node.inputs), attrs)
    fo = [k for k, v in enumerate(node.outputs) if v.dtype == _FLOAT]
    cts = [dys[k] for k in fo]
    ft = [k for k, v in enumerate(tcaps) if v.dtype == _FLOAT]
    ff = [k for k, v in enumerate(fcaps) if v.dtype == _FLOAT]
    operands = list(tcaps) + list(fcaps) + cts
    types = [v.type for v in operands]
    labels = ([f"t{k}" for k in range(len(tcaps))] + [f"f{k}" for k in range(len(fcaps))]
              + [f"ct{k}" for k in fo])
    branches = []
    for own, sub in ((0, t_g), (1, f_g)):
        vjp = vjp_graph(sub, f"{sub.name}.vjp")
        g, ps = _new_graph(f"{sub.name}.grad", types, labels)
        tp, fp, cp = (ps[:len(tcaps)], ps[len(tcaps):len(tcaps) + len(fcaps)],
                      ps[len(tcaps) + len(fcaps):])
        with g.as_default():
            mine = tp if own == 0 else fp
            # the branch's float outputs are the node's float outputs
            grads = _copy_into(g, vjp, list(mine) + list(cp))
            zeros_t = [_zeros(tp[k]) for k in ft]
            zeros_f = [_zeros(fp[k]) for k in ff]
            g.outputs = (list(grads) + zeros_f) if own == 0 else (zeros_t + list(grads))
        branches.append(g)
    outs = _control.cond_op(node.graph, pred, branches[0], branches[1], operands, operands,
                            name="cond_grad")
    d_t = dict(zip(ft, outs[:len(ft)]))
    d_f = dict(zip(ff, outs[len(ft):]))
    return [None] + [d_t.get(k) for k in range(len(tcaps))] + \
        [d_f.get(k) for k in range(len(fcaps))]
