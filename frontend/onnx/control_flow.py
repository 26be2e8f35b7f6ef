"""ONNX's control flow, Loop, If and Scan, imported as fragflow's while_loop, cond and
scan (ir/ops/control.py); docs/ONNX.md "Control flow" says what maps to what.

A sub-graph attribute (Loop's body, If's branches, Scan's body) is imported by the
same rules as the model, inside the function that frontend/control_flow.py traces:
its inputs are the loop's parameters, and a name it reads from an enclosing graph is
that graph's value, captured as an input of the loop's node. Values known at import
stay static inside bodies too; float initializers become Variables of the outer graph.

- If: the taken branch only where the predicate is known at import, else ff.cond.
- Loop: a while_loop on (iteration, cond, v...) stopping at the trip count M or when
  cond turns false; with scan outputs, a scan of M steps (M known at import).
- Scan (opset 9+): a scan over axis 0, other axes and directions by transposes and
  reverses around it; opset 8's (batch axis 0, optional sequence_lens): one scan per
  batch row, stacked.

Sub-graphs nest at most MAX_DEPTH deep.
"""
from __future__ import annotations

import numpy as np

import fragflow.frontend as F
from fragflow.frontend.tensor import wrap

from ...ir.graph import get_default_graph
from ..control_flow import _scan_core, flatten
from ..interop.dtypes import INT32_MAX
from .importer import Init
from .op_table import RULES, rule

MAX_DEPTH = 8


def run_body(ctx, body, args, what: str) -> list:
    """body's outputs (tensors or static arrays) with its inputs bound to args, its
    nodes imported by the rules into the graph being traced."""
    depth = getattr(ctx, "_subgraph_depth", 0)
    if depth >= MAX_DEPTH:
        raise ctx.error(f"{what}: sub-graphs nest deeper than {MAX_DEPTH} levels")
    if len(body.input) != len(args):
        raise ctx.error(f"{what} takes {len(body.input)} inputs, the node gives "
                        f"{len(args)}")
    saved = (ctx.values, ctx.graph, ctx.node, ctx.index)
    ctx._subgraph_depth = depth + 1
    try:
        ctx.values = dict(ctx.values)
        for vi, arg in zip(body.input, args):
            ctx.values[vi.name] = arg
        for t in body.initializer:
            ctx.values[t.name] = ctx._initializer(t)
        ctx.graph = get_default_graph()
        for index, node in enumerate(body.node):
            ctx.node, ctx.index = node, index
            ctx._import_node_guarded(node, RULES)
        outs = []
        for vi in body.output:
            if vi.name not in ctx.values:
                raise ctx.error(f"{what}'s output '{vi.name}' is not computed by any node")
            outs.append(ctx.values[vi.name])
        return outs
    finally:
        ctx.values, ctx.graph, ctx.node, ctx.index = saved
        ctx._subgraph_depth = depth


def _tensors(ctx, values) -> list:
    return [ctx.tensor(v) for v in values]


def _bool(ctx, value):
    t = ctx.tensor(value)
    return t if t.dtype == "bool" else F.cast(t, "bool")


def _scalar(t):
    """A (1,)-shaped or scalar value as a scalar (ONNX allows either for cond)."""
    return F.reshape(t, []) if len(t.shape) else t


# -- If -------------------------------------------------------------------------------------
@rule("If")
def if_(ctx, node, x, a):
    """ff.cond on the predicate (or, known at import, the taken branch alone)."""
    then_g, else_g = a["then_branch"], a["else_branch"]
    label = f"If '{node.name or node.output[0]}'"
    if ctx.is_static(x[0]) or isinstance(x[0], Init):
        taken = then_g if bool(np.asarray(ctx.static(x[0], "cond")).reshape(-1)[0]) \
            else else_g
        return run_body(ctx, taken, [], f"{label}'s branch")
    pred = _scalar(_bool(ctx, x[0]))
    n_out = len(then_g.output)
    if len(else_g.output) != n_out:
        raise ctx.error(f"{label}: then_branch gives {n_out} outputs, else_branch "
                        f"{len(else_g.output)}")
    outs = F.cond(pred,
                  lambda: _tensors(ctx, run_body(ctx, then_g, [], f"{label}'s then_branch")),
                  lambda: _tensors(ctx, run_body(ctx, else_g, [], f"{label}'s else_branch")),
                  name=node.name or None)
    return [outs] if isinstance(outs, F.Tensor) else list(outs)


# -- Loop -----------------------------------------------------------------------------------
def _trip_count(ctx, m):
    """M as a Python int when known at import (None when absent or 'infinite'), else
    the int32 scalar tensor."""
    if m is None:
        return None
    if ctx.is_static(m):
        value = int(np.asarray(m).reshape(-1)[0])
        return None if value > INT32_MAX else max(value, 0)
    t = ctx.tensor(m)
    return _scalar(t if t.dtype == "int32" else F.cast(t, "int32"))


def _cond_passes_through(body) -> bool:
    """The body's cond output is its cond input (directly or through Identity), or a
    constant true: the loop then runs exactly its trip count."""
    cond_in, cond_out = body.input[1].name, body.output[0].name
    producers = {o: n for n in body.node for o in n.output}
    while True:
        if cond_out == cond_in:
            return True
        node = producers.get(cond_out)
        if node is None:
            return False
        if node.op_type == "Identity":
            cond_out = node.input[0]
            continue
        if node.op_type == "Constant":
            from onnx import numpy_helper  # optional package: onnx, only on import
            value = [numpy_helper.to_array(t.t) for t in node.attribute if t.name == "value"]
            return bool(value) and bool(np.all(value[0]))
        return False


@rule("Loop")
def loop(ctx, node, x, a):
    body = a["body"]
    label = f"Loop '{node.name or node.output[0]}'"
    m = _trip_count(ctx, x[0] if x else None)
    cond0 = x[1] if len(x) > 1 else None
    v0 = list(x[2:])
    n_v = len(v0)
    n_scan = len(body.output) - 1 - n_v
    if len(body.input) != 2 + n_v or n_scan < 0:
        raise ctx.error(f"{label}: its body takes {len(body.input)} inputs and gives "
                        f"{len(body.output)} outputs for {n_v} loop-carried values")
    if m is None and cond0 is None:
        raise ctx.error(f"{label} has neither a trip count M nor a cond: it would never "
                        f"end")
    start_cond = np.True_ if cond0 is None else cond0
    if ctx.is_static(start_cond) and not bool(np.asarray(start_cond).reshape(-1)[0]) \
            or m == 0:
        if n_scan:
            raise ctx.error(f"{label} with scan outputs never runs (cond false or M 0): "
                            f"its empty stacked outputs have no shape fragflow can give "
                            f"them")
        return list(v0)
    carried = _tensors(ctx, v0)

    def step(i, c, vs):
        outs = run_body(ctx, body, [i, c, *vs], f"{label}'s body")
        c_out = _scalar(_bool(ctx, outs[0]))
        return c_out, _tensors(ctx, outs[1:1 + n_v]), _tensors(ctx, outs[1 + n_v:])

    if n_scan == 0:
        limit = m if isinstance(m, F.Tensor) else None

        def keep_going(i, c, *vs):
            return c if limit is None else F.logical_and(F.less(i, limit), c)

        def body_fn(i, c, *vs):
            c_out, v_out, _ = step(i, c, list(vs))
            return (i + 1, c_out, *v_out)
        init = (F.constant(np.int32(0)), _scalar(_bool(ctx, start_cond)), *carried)
        result = F.while_loop(keep_going, body_fn, init,
                              maximum_iterations=m if isinstance(m, int) else None,
                              name=node.name or None)
        return list(result[2:])
    if isinstance(m, F.Tensor) and _cond_passes_through(body):
        m = _trip_count(ctx, ctx.static(x[0], "M (a Loop with scan outputs)"))
    if isinstance(m, int) and cond0 is not None and not ctx.is_static(cond0) and \
            _cond_passes_through(body):
        if not bool(np.asarray(ctx.static(cond0, "cond (a Loop with scan outputs)"))
                    .reshape(-1)[0]):
            raise ctx.error(f"{label} with scan outputs never runs (cond false)")
    if not isinstance(m, int) or not _cond_passes_through(body):
        raise ctx.error(f"{label} has scan outputs and may stop early (a trip count not "
                        f"known at import, or a cond the body computes): the number of "
                        f"stacked rows would depend on the data, which fragflow's "
                        f"static shapes cannot hold")
    leaves = [F.constant(np.int32(0)), *carried]
    _, tree = flatten(list(leaves))

    def scan_body(carry, _x):
        i, vs = carry[0], carry[1:]
        _, v_out, ys = step(i, F.constant(True), vs)
        return [i + 1, *v_out], ys
    final, _, ys = _scan_core(scan_body, tree, [t.value for t in leaves], None, [], False,
                              m, node.name or "loop", label, "onnx", carry_is_y=False)
    return [wrap(v) for v in final[1:]] + [wrap(y) for y in ys]


# -- Scan -----------------------------------------------------------------------------------
def _scan_run(ctx, body, label, name, states, elems, n_state, keep=None):
    """ff scan of body over elems (axis 0) from states: (final states, stacked outputs).
    keep(t): a bool scalar, the step's states and outputs kept where true (states
    passed on, outputs zero where false: opset 8's shorter sequences)."""
    lead = [F.constant(np.int32(0))] if keep is not None else []
    _, ctree = flatten(lead + list(states))
    _, etree = flatten(list(elems))

    def scan_body(carry, xs):
        vs = carry[len(lead):]
        outs = _tensors(ctx, run_body(ctx, body, [*vs, *xs], f"{label}'s body"))
        new, ys = outs[:n_state], outs[n_state:]
        if keep is None:
            return new, ys
        on = keep(carry[0])
        new = [F.where(on, n, v) for n, v in zip(new, vs)]
        ys = [F.where(on, y, F.zeros_like(y)) for y in ys]
        return [carry[0] + 1, *new], ys
    final, _, ys = _scan_core(scan_body, ctree, [t.value for t in lead + list(states)],
                              etree, [t.value for t in elems], False, None, name, label,
                              "onnx", carry_is_y=False)
    return [wrap(v) for v in final[len(lead):]], [wrap(y) for y in ys]


def _scan8(ctx, node, x, a, label):
    """Opset 8: batch axis 0, sequence axis 1, an optional sequence_lens [batch]. One
    ff scan per batch row (the batch must be known at import), stacked. Lengths known
    at import cut each row's inputs to its length (a reversed input then starts at its
    last valid step, as ONNX's); fed lengths mask the steps past them (forward inputs
    only). Outputs past a row's length are 0."""
    body = a["body"]
    n_in = int(a["num_scan_inputs"])
    lens, rest = (x[0] if x else None), list(x[1:])
    n_state = len(rest) - n_in
    n_out = len(body.output) - n_state
    dirs = [int(d) for d in a.get("directions", [0] * n_in)]
    if n_state < 0 or n_out < 0 or len(body.input) != n_state + n_in or len(dirs) != n_in:
        raise ctx.error(f"{label}: {len(x)} inputs, num_scan_inputs={n_in}, a body of "
                        f"{len(body.input)} inputs and {len(body.output)} outputs do not "
                        f"agree")
    if not n_in:
        raise ctx.error(f"{label} has no scan inputs")
    states, elems = _tensors(ctx, rest[:n_state]), _tensors(ctx, rest[n_state:])
    batch = elems[0].shape[0] if elems[0].shape else None
    steps = elems[0].shape[1] if len(elems[0].shape) > 1 else None
    if batch is None:
        raise ctx.error(f"{label}: opset 8's Scan needs the batch size (axis 0) known at "
                        f"import")
    fed = lens is not None and not (ctx.is_static(lens) or isinstance(lens, Init))
    if lens is None or fed:
        lengths = [steps] * batch
    else:
        lengths = ctx.ints(lens, "sequence_lens")
        if len(lengths) != batch:
            raise ctx.error(f"{label}: sequence_lens has {len(lengths)} entries for a "
                            f"batch of {batch}")
        if steps is None or any(not 0 < n <= steps for n in lengths):
            raise ctx.error(f"{label}: sequence_lens {lengths} must be in [1, "
                            f"{steps}] (the sequence axis)")
    if fed:
        if any(dirs):
            raise ctx.error(f"{label}: fed sequence_lens with a reversed scan input (give "
                            f"the lengths at import)")
        lens_t = ctx.tensor(lens)
        lens_t = lens_t if lens_t.dtype == "int32" else F.cast(lens_t, "int32")
    finals, stacked = [], []
    for b in range(batch):
        n = lengths[b]
        rows = []
        for t, direction in zip(elems, dirs):
            r = t[b] if n is None or n == steps else t[b, :n]
            rows.append(F.reverse(r, [0]) if direction else r)
        keep = None
        if fed:
            def keep(step, b=b):
                return F.less(step, lens_t[b])
        final, ys = _scan_run(ctx, body, label, f"{node.name or 'scan'}_{b}",
                              [s[b] for s in states], rows, n_state, keep)
        if n is not None and steps is not None and n < steps:
            ys = [F.pad(y, [[0, steps - n]] + [[0, 0]] * (len(y.shape) - 1)) for y in ys]
        finals.append(final)
        stacked.append(ys)
    outs = [F.stack([f[k] for f in finals], 0) for k in range(n_state)]
    return outs + [F.stack([y[k] for y in stacked], 0) for k in range(n_out)]


@rule("Scan")
def scan(ctx, node, x, a):
    label = f"Scan '{node.name or node.output[0]}'"
    if ctx.opset < 9:
        return _scan8(ctx, node, x, a, label)
    body = a["body"]
    n_in = int(a["num_scan_inputs"])
    n_state = len(x) - n_in
    n_out = len(body.output) - n_state
    in_axes = list(a.get("scan_input_axes", [0] * n_in))
    in_dirs = list(a.get("scan_input_directions", [0] * n_in))
    out_axes = list(a.get("scan_output_axes", [0] * n_out))
    out_dirs = list(a.get("scan_output_directions", [0] * n_out))
    if n_state < 0 or n_out < 0 or len(body.input) != n_state + n_in:
        raise ctx.error(f"{label}: {len(x)} inputs, num_scan_inputs={n_in}, a body of "
                        f"{len(body.input)} inputs and {len(body.output)} outputs do not "
                        f"agree")
    states = _tensors(ctx, x[:n_state])
    elems = []
    for t, axis, direction in zip(_tensors(ctx, x[n_state:]), in_axes, in_dirs):
        rank = len(t.shape)
        axis = int(axis) + rank if int(axis) < 0 else int(axis)
        if axis:
            t = F.transpose(t, [axis] + [d for d in range(rank) if d != axis])
        if int(direction):
            t = F.reverse(t, [0])
        elems.append(t)
    if not elems:
        raise ctx.error(f"{label} has no scan inputs")
    final, ys = _scan_run(ctx, body, label, node.name or "scan", states, elems, n_state)
    outs = []
    for y, axis, direction in zip(ys, out_axes, out_dirs):
        if int(direction):
            y = F.reverse(y, [0])
        rank = len(y.shape)
        axis = int(axis) + rank if int(axis) < 0 else int(axis)
        if axis:
            perm = list(range(1, rank))
            perm.insert(axis, 0)
            y = F.transpose(y, perm)
        outs.append(y)
    return final + outs
