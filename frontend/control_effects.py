"""Side effects inside control flow (issue 31): assigns, random draws and prints in cond
branches and while_loop / scan / map_fn bodies, made plain data flow.

The ir control-flow ops stay pure functions of their inputs (their references run
sub-graphs as functions, GL replays plans, every pass rewrites them freely), so when
the outermost control-flow node of a graph is built, the frontend rebuilds its
sub-graphs (and those nested in them) with the effects as values:

- assigns: a variable assigned in a body is carried as one more loop variable (a scan
  carry); a cond returns each variable either branch assigns (the other branch its
  value as read). A read later in the same iteration sees the new value (TensorFlow 2's
  resource variables); gradients flow to the variable through such a read and never
  into the assigned value (an assign has no gradient). The node's final values are
  assigned in the root graph, as every assign, when the run ends; fetching anything
  computed from the node runs them (a control dependency of the node). A later
  control-flow node reads a variable an earlier one assigned from the earlier one's
  result (program order, as TF2's automatic control dependencies), so two loops
  incrementing one variable both count; a plain read in the root graph still sees the
  value from the run's start, as for every assign.
- random draws: a random op in a body reads the pair (run counter, draw) instead of the
  run counter; draw numbers the iteration (nested loops mix the outer draw in), the
  fourth word of the Philox counter (ir/ops/random.py): a fresh draw per iteration and
  per run, the same for a seed in every session.
- prints (tf.print, tf.Print): the printed values become outputs of the node (a scan's
  ys, a growing accumulator of a while_loop, a cond's outputs with zeros from the branch
  not taken) and one Effect of the root graph (frontend/side_effects.py) prints them
  after the run, in order: once per iteration, and only for the branch taken.

What cannot be done is refused when the node is built: summaries in a body, side
effects in a while_loop's condition, a printed value of unknown shape in a loop or
branch.
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import FragflowError
from ..ir.graph import Graph
from ..ir.ops import control as _control
from ..ir.ops.registry import get_op
from ..ir.ops.state import run_counter
from . import side_effects as _effects

# draw of iteration i (from 0) of a loop whose enclosing draw is d: d * MIX + i + 1
# (int32, wrapping): Fibonacci hashing spreads the iterations of nested loops apart
MIX = np.int32(-1640531535)          # 0x9E3779B1 as an int32


class ControlEffectError(FragflowError, ValueError):
    """A side effect inside a loop or branch that fragflow cannot make happen."""


# -- what the log of prints holds ---------------------------------------------------------
class _Print:
    """One print: effect.finish(values)."""

    def __init__(self, effect, values):
        self.effect, self.values = effect, list(values)

    def refs(self):
        return list(self.values)

    def remap(self, m):
        return _Print(self.effect, [m[v] for v in self.values])


class _Loop:
    """The items of a body, once per iteration: every value has a leading axis of
    iterations, tick's rows count them (reverse: the iterations ran from the last
    row)."""

    def __init__(self, tick, items, reverse=False):
        self.tick, self.items, self.reverse = tick, items, reverse

    def refs(self):
        return [self.tick] + [v for item in self.items for v in item.refs()]

    def remap(self, m):
        return _Loop(m[self.tick], [item.remap(m) for item in self.items], self.reverse)


class _Cond:
    """The items of the branch taken."""

    def __init__(self, pred, true_items, false_items):
        self.pred, self.true_items, self.false_items = pred, true_items, false_items

    def refs(self):
        return [self.pred] + [v for item in self.true_items + self.false_items
                              for v in item.refs()]

    def remap(self, m):
        return _Cond(m[self.pred], [i.remap(m) for i in self.true_items],
                     [i.remap(m) for i in self.false_items])


def _replay(items, arrays: dict) -> None:
    for item in items:
        if isinstance(item, _Print):
            item.effect.finish([arrays[v] for v in item.values])
        elif isinstance(item, _Cond):
            _replay(item.true_items if bool(arrays[item.pred]) else item.false_items, arrays)
        else:
            refs = item.refs()
            n = len(arrays[item.tick])
            for i in (range(n - 1, -1, -1) if item.reverse else range(n)):
                _replay(item.items, {v: arrays[v][i] for v in refs})


# -- one graph being rebuilt ---------------------------------------------------------------
class _Ctx:
    """A graph being rebuilt into `new`: env maps old values to new ones, var_of the old
    values that read a variable to the variable (its value in the root graph), state
    each variable's current value in new; items are the prints, in order."""

    def __init__(self, new: Graph, root: bool):
        self.new, self.root = new, root
        self.env: dict = {}
        self.var_of: dict = {}
        self.state: dict = {}
        self.assigned: list = []
        self.items: list = []
        self._pair = None          # (run counter, draw) here, once needed

    def var(self, value):
        if self.root:
            return value if value.node.op == "variable" else None
        return self.var_of.get(value)

    def read(self, value):
        var = self.var(value)
        if var is not None:
            return self.current(var)
        if self.root:
            return value
        out = self.env[value]
        if out is _RUN:
            raise ControlEffectError(f"{value.node.where()}: the run counter is read "
                                     f"inside a loop or branch by something other than a "
                                     f"random op")
        return out

    def current(self, var):
        """var's value here now."""
        return self.state.get(var, var) if self.root else self.state[var]

    def pair(self):
        """(run counter, draw) here: made in the root graph on first use."""
        if self._pair is None:
            run = run_counter(self.new)
            self._pair = _node(self.new, "concat", [_node(self.new, "expand_dims", [run],
                                                          axis=0),
                                                    _const(self.new, np.zeros(1, np.int32))],
                               axis=0)
        return self._pair

    def note_assign(self, var, value):
        self.state[var] = value
        if var not in self.assigned:
            self.assigned.append(var)


_NUMPY = {"float32": np.float32, "int32": np.int32, "bool": np.bool_}
_RUN = object()          # the env's value for a sub-graph's run_counter node


def _node(graph, op, inputs, name=None, **attrs):
    return graph.add_node(op, inputs, attrs, name or op, scope="", source="",
                          _here=True).outputs[0]


def _const(graph, array, name="constant"):
    return _node(graph, "constant", [], name, value=np.asarray(array))


def _placeholder(graph, t, name, scope="", source=""):
    return graph.add_node("placeholder", [], {"shape": t.shape, "dtype": t.dtype},
                          exact_name=graph._unique_name_at_root(name), scope=scope,
                          source=source, _here=True).outputs[0]


def _copy_param(graph, p):
    return graph.add_node("placeholder", [], {"shape": p.shape, "dtype": p.dtype},
                          exact_name=p.node.name, scope=p.node.scope, source=p.node.source,
                          _here=True).outputs[0]


def _var_label(var) -> str:
    return f"variable '{var.node.name}'"


# -- what a sub-graph holds ---------------------------------------------------------------
def _parts(node):
    """[(sub-graph, number of leading params, the node inputs its captures read)]."""
    a, ins = node.attrs, list(node.inputs)
    if node.op == "while_loop":
        n = a["num_vars"]
        nc = len(_control.params(a["cond"])) - n
        return [(a["cond"], n, ins[n:n + nc]), (a["body"], n, ins[n + nc:])]
    if node.op == "cond":
        nt = len(_control.params(a["true_branch"]))
        return [(a["true_branch"], 0, ins[1:1 + nt]), (a["false_branch"], 0, ins[1 + nt:])]
    nc, ne = a["num_carry"], a["num_elems"]
    return [(a["body"], nc + ne, ins[nc + ne:])]


def _tables(graph) -> dict:
    return graph.__dict__.get("_frontend_tables") or {}


def has_effects(graph: Graph) -> bool:
    """Whether graph (a sub-graph) or one nested in it holds an assign, a random op or
    a print: what functionalize must rebuild."""
    t = _tables(graph)
    if t.get("effects") or t.get("summary_parts"):
        return True
    for node in graph.nodes:
        opdef = get_op(node.op)
        if node.op in ("assign", "run_counter") or opdef.family == "random":
            return True
        if opdef.family == _control.FAMILY and any(
                has_effects(sub) for sub, _, _ in _parts(node)):
            return True
    return False


def _needs_pair(graph: Graph) -> bool:
    for node in graph.nodes:
        if get_op(node.op).family == "random":
            return True
        if get_op(node.op).family == _control.FAMILY and any(
                _needs_pair(sub) for sub, _, _ in _parts(node)):
            return True
    return False


def _assigned(graph: Graph, var_of: dict) -> list:
    """The variables graph (or a graph nested in it) assigns, in order; var_of: its
    params that read a variable."""
    out: list = []
    for node in graph.nodes:
        if node.op == "assign":
            var = var_of.get(node.inputs[0])
            if var is None:
                raise ControlEffectError(f"{node.where()}: assign inside a loop or branch "
                                         f"needs a variable")
            if var not in out:
                out.append(var)
        elif get_op(node.op).family == _control.FAMILY:
            for sub, lead, caps in _parts(node):
                inner = {p: var_of[c] for p, c in zip(_control.params(sub)[lead:], caps)
                         if c in var_of}
                out += [v for v in _assigned(sub, inner) if v not in out]
    return out


def _refuse(graph: Graph, what: str) -> None:
    """Side effects where fragflow cannot make them happen: a while_loop's condition."""
    if not has_effects(graph):
        return
    for node in graph.nodes:
        family = get_op(node.op).family
        if node.op == "assign" or family == "random" or (
                family == _control.FAMILY and any(has_effects(s) for s, _, _ in _parts(node))):
            raise ControlEffectError(f"{node.where()}: {node.op} inside {what} is not "
                                     f"supported (a side effect in a condition); move it "
                                     f"into the body")
    raise ControlEffectError(f"a tf.print, tf.Print or tf.summary inside {what} is not "
                             f"supported; print in the body")


# -- rebuilding a sub-graph ------------------------------------------------------------------
def _open_sub(old: Graph, outer: _Ctx, lead: int, caps: list, split: int, carried: list,
              counted: bool, pair: bool):
    """A new graph for old, its parameters: old's first `split`, one per carried
    variable, the iteration count (counted), old's params split..lead, then the captures
    (without the carried variables), then the outer (run, draw) pair (pair). Returns
    (ctx, capture inputs, placeholders of the carried vars, iteration placeholder)."""
    new = Graph(old.name)
    new.custom_gradients.update(old.custom_gradients)
    ctx = _Ctx(new, root=False)
    ps = _control.params(old)
    for p in ps[:split]:
        ctx.env[p] = _copy_param(new, p)
    var_params = []
    for var in carried:
        vp = _placeholder(new, var.type, f"carried_{var.node.name.rsplit('/', 1)[-1]}")
        ctx.state[var] = vp
        var_params.append(vp)
    iteration = _placeholder(new, _control.TensorType((), "int32"), "iteration") \
        if counted else None
    for p in ps[split:lead]:
        ctx.env[p] = _copy_param(new, p)
    inputs = []
    for p, c in zip(ps[lead:], caps):
        var = outer.var(c)
        if var is not None:
            ctx.var_of[p] = var
            if var in carried:
                continue
            if var in ctx.state:            # one variable captured twice: one param
                continue
        q = _copy_param(new, p)
        inputs.append(outer.read(c))
        if var is not None:
            ctx.state[var] = q
        else:
            ctx.env[p] = q
    if pair:
        outer_pair = _placeholder(new, _control.TensorType((2,), "int32"), "run_and_draw")
        inputs.append(outer.pair())
        if counted:
            step = _node(new, "concat", [_const(new, np.zeros(1, np.int32)),
                                         _node(new, "expand_dims", [_node(
                                             new, "add", [iteration,
                                                          _const(new, np.int32(1))])],
                                               axis=0)], axis=0)
            mixed = _node(new, "mul", [outer_pair, _const(new, np.array([1, MIX], np.int32))])
            ctx._pair = _node(new, "add", [mixed, step])
        else:
            ctx._pair = outer_pair
    return ctx, inputs, var_params, iteration


def _copy_nodes(old: Graph, ctx: _Ctx) -> None:
    effects = _tables(old).get("effects") or {}
    if _tables(old).get("summary_parts"):
        raise ControlEffectError(f"a tf.summary inside a loop or branch ('{old.name}') is "
                                 f"not supported (TensorFlow 1 cannot fetch or merge one "
                                 f"made there either): return the value and summarize it "
                                 f"outside")
    printed = {v.node: e for v, e in effects.items()}
    new = ctx.new
    for node in old.nodes:
        op = node.op
        family = get_op(op).family
        if op == "placeholder":
            continue
        if op == "run_counter":
            ctx.env[node.outputs[0]] = _RUN
            continue
        if op == "assign":
            var = ctx.var(node.inputs[0])
            value = ctx.read(node.inputs[1])
            out = _after_assign(new, ctx.state[var], value)
            ctx.note_assign(var, out)
            ctx.env[node.outputs[0]] = out
        elif family == "random":
            if ctx.env.get(node.inputs[-1]) is not _RUN:
                raise ControlEffectError(f"{node.where()}: a random op's last input must be "
                                         f"the run counter")
            inputs = [ctx.read(v) for v in node.inputs[:-1]] + [ctx.pair()]
            copy = new.add_node(op, inputs, dict(node.attrs), exact_name=node.name,
                                scope=node.scope, source=node.source, _here=True)
            ctx.env.update(zip(node.outputs, copy.outputs))
        elif family == _control.FAMILY:
            outs = _rebuild(node, ctx)
            ctx.env.update(zip(node.outputs, outs))
        else:
            copy = new.add_copy(node, [ctx.read(v) for v in node.inputs])
            ctx.env.update(zip(node.outputs, copy.outputs))
        if node in printed:
            effect = printed[node]
            ctx.items.append(_Print(effect, [ctx.read(v) for v in effect.needs]))


def _after_assign(graph, current, value):
    """The variable's value after an assign of value: value itself, but for gradients a
    read of the variable (TensorFlow: an assign has no gradient, a read passes its
    gradient to the variable)."""
    if value.dtype != "float32":
        return value
    held = _node(graph, "stop_gradient", [value])
    through = _node(graph, "add", [held, _node(graph, "sub", [
        current, _node(graph, "stop_gradient", [current])])])
    # current - current is nan for an infinite current: then value as it is
    return _node(graph, "where", [_node(graph, "is_finite", [current]), through, held])


def _zeros(graph, value, what):
    if not value.type.is_static:
        raise ControlEffectError(f"{what}: a printed value of unknown shape "
                                 f"{value.type} inside a branch is not supported")
    return _const(graph, np.zeros(value.shape, _NUMPY[value.dtype]))


def _close(ctx: _Ctx, old: Graph, extra: list, order: list | None = None) -> None:
    ctx.new.outputs = [ctx.read(v) for v in old.outputs] + extra
    if order is not None:      # placeholders made late move up to where they belong
        rest = [n for n in ctx.new.nodes if n.op != "placeholder"]
        ctx.new.nodes[:] = [v.node for v in order] + rest


def _rebuild(node, ctx: _Ctx) -> list:
    """node (of the graph ctx rebuilds) rebuilt in ctx.new with its effects as values;
    returns the new values of node's outputs and updates ctx's variables and prints."""
    if node.op == "cond":
        return _rebuild_cond(node, ctx)
    if node.op == "while_loop":
        return _rebuild_while(node, ctx)
    return _rebuild_scan(node, ctx)


def _var_map(ctx: _Ctx, sub, lead, caps) -> dict:
    return {p: ctx.var(c) for p, c in zip(_control.params(sub)[lead:], caps)
            if ctx.var(c) is not None}


def _add(ctx: _Ctx, node, op, inputs, attrs) -> list:
    copy = ctx.new.add_node(op, inputs, attrs, exact_name=node.name, scope=node.scope,
                            source=node.source, _here=True)
    return list(copy.outputs)


def _rebuild_cond(node, ctx: _Ctx) -> list:
    (t_old, _, t_caps), (f_old, _, f_caps) = _parts(node)
    carried = _assigned(t_old, _var_map(ctx, t_old, 0, t_caps))
    carried += [v for v in _assigned(f_old, _var_map(ctx, f_old, 0, f_caps))
                if v not in carried]
    pair = _needs_pair(t_old) or _needs_pair(f_old)
    branches = []
    for old, caps in ((t_old, t_caps), (f_old, f_caps)):
        sub, inputs, _, _ = _open_sub(old, ctx, 0, caps, 0, carried, False, pair)
        _copy_nodes(old, sub)
        branches.append((old, sub, inputs))
    (_, t, t_in), (_, f, f_in) = branches
    current = [ctx.current(v) for v in carried]     # a branch not assigning one returns it
    t_refs = [v for item in t.items for v in item.refs()]
    f_refs = [v for item in f.items for v in item.refs()]
    what = f"{node.where()}"
    _close(t, t_old, [t.state[v] for v in carried] + t_refs
           + [_zeros(t.new, v, what) for v in f_refs])
    _close(f, f_old, [f.state[v] for v in carried]
           + [_zeros(f.new, v, what) for v in t_refs] + f_refs)
    pred = ctx.read(node.inputs[0])
    outs = _add(ctx, node, "cond", [pred] + current + t_in + current + f_in,
                {"true_branch": t.new, "false_branch": f.new})
    n = len(node.outputs)
    for var, out in zip(carried, outs[n:]):
        ctx.note_assign(var, out)
    logs = outs[n + len(carried):]
    m = dict(zip(t_refs, logs[:len(t_refs)]))
    m.update(zip(f_refs, logs[len(t_refs):]))
    if t.items or f.items:
        m[pred] = pred
        ctx.items.append(_Cond(pred, [i.remap(m) for i in t.items],
                               [i.remap(m) for i in f.items]))
    return outs[:n]


def _static_prints(node, refs) -> None:
    """A loop keeps each iteration's printed values in a row: they need one shape."""
    for v in refs:
        if not v.type.is_static:
            raise ControlEffectError(
                f"{node.where()}: its body prints a value of shape {v.type.shape} unknown "
                f"when the graph is built (a tf.print of such a value, or one inside a "
                f"while_loop nested in this loop), which is not supported; print it "
                f"outside the inner while_loop, or use a scan")


def _log_refs(body: _Ctx) -> list:
    """What a body's prints read, after a tick (True) that counts the iterations; none
    where it prints nothing."""
    if not body.items:
        return []
    return [_const(body.new, np.bool_(True), "tick")] + \
        [v for item in body.items for v in item.refs()]


def _rebuild_while(node, ctx: _Ctx) -> list:
    (c_old, n, c_caps), (b_old, _, b_caps) = _parts(node)
    a = node.attrs
    _refuse(c_old, f"while_loop '{node.name}''s condition")
    carried = _assigned(b_old, _var_map(ctx, b_old, n, b_caps))
    pair = _needs_pair(b_old)
    body, b_in, b_vars, b_iter = _open_sub(b_old, ctx, n, b_caps, n, carried, pair, pair)
    _copy_nodes(b_old, body)
    refs = _log_refs(body)
    _static_prints(node, refs)
    accs = [_placeholder(body.new, _control.TensorType((None,) + v.shape, v.dtype),
                         "printed") for v in refs]
    grown = [_node(body.new, "concat", [acc, _node(body.new, "expand_dims", [v], axis=0)],
                   axis=0) for acc, v in zip(accs, refs)]
    nxt = [_node(body.new, "add", [b_iter, _const(body.new, np.int32(1))])] if pair else []
    b_params = _control.params(b_old)
    lead = [body.env[p] for p in b_params[:n]] + b_vars + ([b_iter] if pair else []) + accs
    _close(body, b_old, [body.state[v] for v in carried] + nxt + grown,
           lead + [v for v in _control.params(body.new) if v not in lead])
    cond, c_in, c_vars, c_iter = _open_sub(c_old, ctx, n, c_caps, n, carried, pair, False)
    c_accs = [_placeholder(cond.new, a.type, "printed") for a in accs]
    _copy_nodes(c_old, cond)
    c_lead = [cond.env[p] for p in _control.params(c_old)[:n]] + c_vars + \
        ([c_iter] if pair else []) + c_accs
    _close(cond, c_old, [], c_lead + [v for v in _control.params(cond.new)
                                      if v not in c_lead])
    init = [ctx.read(v) for v in node.inputs[:n]] + [ctx.current(v) for v in carried]
    if pair:
        init.append(_const(ctx.new, np.int32(0)))
    init += [_const(ctx.new, np.zeros((0,) + v.shape, _NUMPY[v.dtype])) for v in refs]
    invariants = tuple(a["shape_invariants"] or (None,) * n) + (None,) * len(carried) + \
        ((None,) if pair else ()) + tuple((None,) + v.shape for v in refs)
    names = tuple(a["names"] or ()) + tuple(_var_label(v) for v in carried) + \
        (("the iteration count",) if pair else ()) + ("a printed value",) * len(refs)
    if not a["names"]:
        names = tuple(f"loop variable {i}" for i in range(n)) + names
    outs = _add(ctx, node, "while_loop", init + c_in + b_in,
                {"cond": cond.new, "body": body.new, "num_vars": len(init),
                 "shape_invariants": invariants if any(x is not None for x in invariants)
                 else None, "maximum_iterations": a["maximum_iterations"], "names": names})
    for var, out in zip(carried, outs[n:]):
        ctx.note_assign(var, out)
    logs = outs[n + len(carried) + (1 if pair else 0):]
    if body.items:
        ctx.items.append(_Loop(logs[0], [i.remap(dict(zip(refs, logs))) for i in body.items]))
    return outs[:n]


def _rebuild_scan(node, ctx: _Ctx) -> list:
    ((b_old, lead, caps),) = _parts(node)
    a = node.attrs
    nc, ne = a["num_carry"], a["num_elems"]
    carried = _assigned(b_old, _var_map(ctx, b_old, lead, caps))
    pair = _needs_pair(b_old)
    body, b_in, b_vars, b_iter = _open_sub(b_old, ctx, lead, caps, nc, carried, pair, pair)
    _copy_nodes(b_old, body)
    refs = _log_refs(body)
    _static_prints(node, refs)
    old_out = [body.read(v) for v in b_old.outputs]
    nxt = [_node(body.new, "add", [b_iter, _const(body.new, np.int32(1))])] if pair else []
    body.new.outputs = old_out[:nc] + [body.state[v] for v in carried] + nxt + \
        old_out[nc:] + refs
    ins = list(node.inputs)
    init = ins[:nc]
    init = [ctx.read(v) for v in init] + [ctx.current(v) for v in carried]
    if pair:
        init.append(_const(ctx.new, np.int32(0)))
    elems = [ctx.read(v) for v in ins[nc:nc + ne]]
    outs = _add(ctx, node, "scan", init + elems + b_in,
                {"body": body.new, "num_carry": len(init), "num_elems": ne,
                 "reverse": a["reverse"], "length": a["length"]})
    k = len(init)
    for var, out in zip(carried, outs[nc:]):
        ctx.note_assign(var, out)
    ys = outs[k:]
    n_ys = len(node.outputs) - nc
    if body.items:
        logs = ys[n_ys:]
        ctx.items.append(_Loop(logs[0], [i.remap(dict(zip(refs, logs))) for i in body.items],
                               reverse=a["reverse"]))
    return outs[:nc] + ys[:n_ys]


# -- the root --------------------------------------------------------------------------------
def functionalize(graph: Graph, node) -> list:
    """node, a control-flow node just added to the root graph, replaced by one holding
    its sub-graphs' side effects as values (the module's docstring); returns the values
    to use for node's outputs. A node without side effects is kept as it is."""
    if graph.parent is not None:
        return list(node.outputs)
    # control-flow nodes see one another's assigns in the order they are made (TF2's
    # automatic control dependencies): a variable an earlier one assigned is read from it
    chain = _effects.graph_table(graph, "assigned_in_control_flow")
    if not any(has_effects(sub) for sub, _, _ in _parts(node)) and \
            not any(v in chain for v in node.inputs):
        return list(node.outputs)
    graph.drop_last(node)
    ctx = _Ctx(graph, root=True)
    ctx.state.update(chain)
    outs = _rebuild(node, ctx)
    new_node = outs[0].node if outs else graph.nodes[-1]
    deps = []
    for var in ctx.assigned:
        chain[var] = ctx.state[var]
        deps.append(graph.add_node("assign", [var, ctx.state[var]], None,
                                   f"{node.name}_assign", scope=node.scope,
                                   source=node.source, _here=True).outputs[0])
    if ctx.items:
        items = list(ctx.items)
        needs = [v for item in items for v in item.refs()]
        marker = needs[0]
        _effects.register_effect(marker, _effects.Effect(
            needs, lambda arrays: _replay(items, dict(zip(needs, arrays)))))
        deps.append(marker)
    if deps:
        table = _effects.graph_table(graph, "control")
        table[new_node] = table.get(new_node, ()) + tuple(deps)
        _effects._bump(graph)
    return outs

