"""Gradient rules of the control-flow ops (ir/ops/control.py), built from the same ops,
so that gradients are graphs of loops and branches that can be fetched, serialised and
differentiated again.

    scan        a second scan that also stacks each step's carry (what the backward
                pass needs, as TensorFlow's stacks, JAX's scan residuals), then a scan
                the other way over those, its body the vector-Jacobian product of the
                forward body (the engine run on the body's own graph)
    while_loop  with maximum_iterations: the loop as a scan of that many steps whose
                body runs the original body under a cond while the loop is still
                active (so a finished loop's steps compute nothing), then the scan
                rule; without maximum_iterations no gradient (as TF2 under XLA; JAX's
                while_loop has no reverse mode either)
    cond        a cond of the two branches' vector-Jacobian products: the taken
                branch's gradient, zeros for what only the other branch reads
"""
from __future__ import annotations

from ...ir.errors import GradientError
from ...ir.graph import Graph
from ...ir.ops import control as _control, elementwise as _ew
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
    n = attrs["num_vars"]
    cond_g, body_g = attrs["cond"], attrs["body"]
    vars0, ccaps, bcaps = _control._while_split(list(node.inputs), attrs)
    carried = _control.loop_types([v.type for v in vars0], attrs)
    for v, t in zip(vars0, carried):
        if not t.is_static and t.shape != v.shape:
            raise GradientError(f"{node.where()}: the gradient of a while_loop needs its "
                                f"loop variables' shapes fixed (shape_invariants lets "
                                f"'{v.name}' change)")
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
