"""Control flow on GL (issue 25): a compiled graph holding while_loop, cond or scan
nodes (ir/ops/control.py) runs as a ControlFlowPlan.

The simplest correct scheme:

- **Stages.** The graph with each control node's outputs made placeholders is
  compiled once per control node (fetching that node's inputs) and once for the
  fetches; the stages run in order, each control node between them, its inputs and
  outputs passing through the host.
- **while_loop.** Its condition and body are compiled once as one plan of the loop
  variables and captured values (the predicate and the body's results); per
  iteration the plan's kernels are replayed, the predicate is read back (one value:
  the only per-iteration sync) and, while it holds, the body's result textures swap
  places with the loop variables' (ping-pong: nothing uploaded, read back or
  allocated per iteration). The body's result of the last, false test is discarded.
- **scan.** Its body is compiled once; the carry ping-pongs the same way, each
  step's element slices are uploaded and its ys read back (a counted loop,
  ff.fori_loop, has neither: it reads nothing back until it ends).
- **cond.** Its predicate is already on the host (a stage computed it): only the
  taken branch's plan runs.

Where the textures cannot swap (a body returning a loop variable as it is, a shape
that changes under shape_invariants, a body that itself holds control flow), the
loop runs its plan with uploads and readbacks each iteration instead: slower, the
same results.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ..codegen import lower
from ..ir.errors import NumericsError
from ..ir.graph import Graph
from ..ir.ops import control as _control
from ..ir.ops.registry import get_op
from ..ir.ops.state import placeholder
from ..ir.types import TensorType

has_control_flow = _control.has_control_flow

# sub-plans kept per ControlFlowPlan (one per stage and per loop, and one more per
# shape a loop variable takes under shape_invariants): the least recently used beyond
# this are released
MAX_SUB_PLANS = 32


def _type_of(array) -> TensorType:
    dtype = np.asarray(array).dtype
    name = "float32" if dtype.kind == "f" else "bool" if dtype.kind == "b" else "int32"
    return TensorType(tuple(np.shape(array)), name)


class _SubPlan:
    """A graph's plan for feeds of given types: its plan, and its feed names in the
    order of the graph's parameters."""

    def __init__(self, owner, graph: Graph, feed_values: list, fetches: list):
        from .driver import optimize  # a cycle: the driver builds ControlFlowPlans
        backend = owner.backend
        types = dict(feed_values)
        optimized = optimize(graph, fetches, types,
                             max_texture_units=backend.max_texture_units,
                             max_draw_buffers=backend.max_draw_buffers)
        self.names = [optimized.feed_names.get(v) for v in types]
        if has_control_flow(optimized.graph):
            self.plan = ControlFlowPlan(backend, optimized.graph, owner.variables,
                                        owner.initial, owner.tuning)
        else:
            lowered = lower(optimized.graph, backend.limits, tuning=owner.tuning)
            self.plan = backend.build_plan(lowered, owner.variables, owner.initial)
        self.backend = backend

    def run(self, arrays: list, extra: dict | None = None, observer=None) -> list:
        feeds = dict(extra or {})
        feeds.update((n, a) for n, a in zip(self.names, arrays) if n is not None)
        return self.plan.run_observed(feeds, observer)

    def release(self) -> None:
        self.backend.release_plan(self.plan)


def _param_graph(name: str, types: list) -> tuple:
    g = Graph(name)
    return g, [placeholder(g, t.shape, t.dtype, name=f"p{k}") for k, t in enumerate(types)]


class ControlFlowPlan:
    """A GL plan for a compiled graph with control-flow nodes (see the module
    docstring). It has the plan interface (runtime/backend.py): run, run_observed,
    kernels (none of its own: its sub-plans pin theirs), textures, release."""

    kernels: list = []

    def __init__(self, backend, graph: Graph, variables, initial: dict, tuning=None):
        self.backend, self.variables, self.initial, self.tuning = \
            backend, variables, initial, tuning
        self.graph = graph
        self._plans: OrderedDict = OrderedDict()   # (purpose, node, types) -> _SubPlan
        staged = Graph(graph.name)
        mapping: dict = {}
        self._controls = []              # (control node, its outputs' feed names)
        for node in graph.nodes:
            if get_op(node.op).family == _control.FAMILY:
                outs = [placeholder(staged, v.shape, v.dtype,
                                    name=f"{node.name.replace('/', '.')}.out{k}")
                        for k, v in enumerate(node.outputs)]
                self._controls.append((node, [o.node.name for o in outs]))
            else:
                outs = staged.add_copy(node, [mapping[v] for v in node.inputs]).outputs
            mapping.update(zip(node.outputs, outs))
        self._staged = staged
        self._inputs = [[mapping[v] for v in node.inputs] for node, _ in self._controls]
        self._outputs = [mapping[v] for v in graph.outputs]
        self._feed_types = {n.outputs[0]: n.outputs[0].type for n in staged.nodes
                            if n.op == "placeholder"}

    # -- the plan interface -------------------------------------------------------------
    def run(self, feeds: dict) -> list:
        return self.run_observed(feeds, None)

    def run_observed(self, feeds: dict, observer) -> list:
        with self.backend.lock:
            env = dict(feeds)
            for (node, names), inputs in zip(self._controls, self._inputs):
                stage = self._plan(("stage", node.name), self._staged,
                                   self._types(env), inputs)
                values = stage.plan.run_observed(env, observer)
                outs = self._run_control(node, values, env, observer)
                env.update(zip(names, outs))
            final = self._plan(("final",), self._staged, self._types(env), self._outputs)
            return final.plan.run_observed(env, observer)

    def _types(self, env: dict) -> list:
        """The staged graph's feed types; a loop's output whose shape its values decide
        (shape_invariants) takes the shape it has in this run."""
        return [(v, t if t.is_static or v.node.name not in env
                 else _type_of(env[v.node.name])) for v, t in self._feed_types.items()]

    def textures(self) -> list:
        return [t for p in self._plans.values() for t in p.plan.textures()]

    def release(self) -> None:
        for p in self._plans.values():
            p.release()
        self._plans.clear()

    # -- sub-plans ----------------------------------------------------------------------
    def _plan(self, key, graph, feed_types: list, fetches: list) -> _SubPlan:
        key = key + (tuple(t for _, t in feed_types),)
        return self._cached(key, lambda: _SubPlan(self, graph, feed_types, fetches))

    def _cached(self, key, make) -> _SubPlan:
        plan = self._plans.get(key)
        if plan is None:
            plan = self._plans[key] = make()
            while len(self._plans) > MAX_SUB_PLANS:
                _, old = self._plans.popitem(last=False)
                old.release()
        self._plans.move_to_end(key)
        return plan

    def _sub(self, purpose, node, build, arrays) -> _SubPlan:
        """The plan of the graph build(types) makes for these arrays' types."""
        types = [_type_of(a) for a in arrays]

        def make():
            graph, params, fetches = build(types)
            return _SubPlan(self, graph, list(zip(params, types)), fetches)
        return self._cached((purpose, node.name, tuple(types)), make)

    def _run_control(self, node, values: list, env: dict, observer=None) -> list:
        """An observer (profile, debug mode) sees every kernel of every iteration: the
        loops then run their plans whole each iteration (uploads and readbacks), and a
        NaN or Inf found inside says in which iteration it first appeared."""
        extra = {k: v for k, v in env.items() if k == "run_counter"}
        if node.op == "cond":
            return self._cond(node, values, extra, observer)
        if node.op == "while_loop":
            return self._while(node, values, extra, observer)
        return self._scan(node, values, extra, observer)

    # -- cond -----------------------------------------------------------------------------
    def _cond(self, node, values, extra, observer=None):
        pred, tcaps, fcaps = _control._cond_split(list(values), node.attrs)
        key, sub, args = (("true", node.attrs["true_branch"], tcaps) if bool(pred) else
                          ("false", node.attrs["false_branch"], fcaps))

        def build(types, sub=sub):
            g, ps = _param_graph(f"{node.name}.{key}", types)
            g.outputs = _control.inline(g, sub, ps)
            return g, ps, g.outputs
        return self._sub(key, node, build, args).run(args, extra, observer)

    # -- while_loop -------------------------------------------------------------------------
    def _while(self, node, values, extra, observer=None):
        attrs = node.attrs
        n = attrs["num_vars"]
        cond_g, body_g = attrs["cond"], attrs["body"]
        vars_, ccaps, bcaps = _control._while_split(list(values), attrs)
        limit = attrs["maximum_iterations"]

        def build(types):
            g, ps = _param_graph(f"{node.name}.step", types)
            vs, cc, bc = ps[:n], ps[n:n + len(ccaps)], ps[n + len(ccaps):]
            (pred,) = _control.inline(g, cond_g, list(vs) + list(cc))
            body = _control.inline(g, body_g, list(vs) + list(bc))
            g.outputs = [pred] + list(body)
            return g, ps, g.outputs
        args = list(vars_) + list(ccaps) + list(bcaps)
        step = self._sub("while", node, build, args)
        types = [_type_of(a) for a in args]
        kept = _control.infer_subgraph(body_g, types[:n] + types[n + len(ccaps):],
                                       "its body") == types[:n]
        swap = _Swapper.of(step, carried=list(range(n)), outputs=list(range(1, n + 1))) \
            if kept and observer is None else None
        if swap is not None:
            swap.upload(args)
            count = 0
            while limit is None or count < limit:
                swap.launch()
                if not bool(swap.read(0)):
                    break
                swap.swap()
                count += 1
            return swap.read_carried()
        count = 0
        while limit is None or count < limit:      # the host's round trip, any shapes
            outs = _observed(node, count, step, args, extra, observer)
            if not bool(outs[0]):
                break
            vars_ = outs[1:]
            args = list(vars_) + list(ccaps) + list(bcaps)
            step = self._sub("while", node, build, args)
            count += 1
        return vars_

    # -- scan -------------------------------------------------------------------------------
    def _scan(self, node, values, extra, observer=None):
        attrs = node.attrs
        nc, ne = attrs["num_carry"], attrs["num_elems"]
        carry, elems, caps = _control._scan_split(list(values), attrs)
        body_g = attrs["body"]
        length = attrs["length"] if attrs["length"] is not None else len(elems[0])
        ys_types = node.outputs[nc:]

        def build(types):
            g, ps = _param_graph(f"{node.name}.step", types)
            g.outputs = _control.inline(g, body_g, ps)
            return g, ps, g.outputs
        steps = range(length - 1, -1, -1) if attrs["reverse"] else range(length)
        stacked = [np.zeros(v.shape, np.float32 if v.dtype == "float32" else v.dtype)
                   for v in ys_types]
        if length == 0:
            return list(carry) + stacked
        first = steps[0]
        args = list(carry) + [e[first] for e in elems] + list(caps)
        step = self._sub("scan", node, build, args)
        ny = len(ys_types)
        swap = _Swapper.of(step, carried=list(range(nc)), outputs=list(range(nc))) \
            if observer is None else None
        if swap is not None:
            swap.upload(args)
            for i in steps:
                for k in range(ne):
                    swap.upload_one(nc + k, elems[k][i])
                swap.launch()
                for k in range(ny):
                    stacked[k][i] = swap.read(nc + k)
                swap.swap()
            return swap.read_carried() + stacked
        for i in steps:
            args = list(carry) + [e[i] for e in elems] + list(caps)
            outs = _observed(node, i, step, args, extra, observer)
            carry = outs[:nc]
            for k in range(ny):
                stacked[k][i] = outs[nc + k]
        return list(carry) + stacked


def _observed(node, iteration, step, args, extra, observer):
    """One iteration's run; a NaN or Inf debug mode finds in it is said to be in this
    iteration (counted from 0)."""
    try:
        return step.run(args, extra, observer)
    except NumericsError as err:
        raise NumericsError(f"{node.where()}, iteration {iteration} (counted from 0, the "
                            f"first with NaN or Inf): {err}") from None


class _Swapper:
    """A GLPlan replayed with its loop-carried values kept on the GPU: the textures of
    the carried outputs and of the parameters they feed swap after each step. None
    where that cannot be done (a plan that is not a GLPlan, an output that is a
    parameter's texture or another carried output's, layouts that differ)."""

    def __init__(self, plan, feeds, outputs, carried_pairs):
        self.plan, self.feeds, self.outputs, self.pairs = plan, feeds, outputs, carried_pairs

    @classmethod
    def of(cls, sub: _SubPlan, carried: list, outputs: list):
        plan = sub.plan
        if not all(hasattr(plan, a) for a in ("_uploads", "_launches", "_readbacks",
                                              "lowered_graph")):
            return None
        by_name = {name: (slot, layout, staging)
                   for name, slot, layout, staging in plan._uploads}
        feeds = [by_name.get(n) if n is not None else None for n in sub.names]
        outs = plan._readbacks
        feed_slots = {id(f[0]) for f in feeds if f is not None}
        pairs = []
        seen = set()
        for p, o in zip(carried, outputs):
            if feeds[p] is None:
                return None
            slot, layout = outs[o]
            if id(slot) in feed_slots or id(slot) in seen or \
                    layout.texture_key != feeds[p][1].texture_key:
                return None
            seen.add(id(slot))
            pairs.append((feeds[p][0], slot, layout))
        return cls(plan, feeds, outs, pairs)

    def upload(self, arrays):
        for k, a in enumerate(arrays):
            self.upload_one(k, a)

    def upload_one(self, k, array):
        from .gl_plan import to_texels  # imports OpenGL: only once a context exists
        feed = self.feeds[k]
        if feed is not None:
            slot, layout, staging = feed
            slot.texture.upload(to_texels(np.asarray(array), layout, staging))

    def launch(self):
        from .gl_plan import BOUND, draw  # imports OpenGL: only once a context exists
        BOUND.forget()
        for launch in self.plan._launches:
            draw(*launch)

    def read(self, k):
        from .gl_plan import from_texels  # imports OpenGL: only once a context exists
        slot, layout = self.outputs[k]
        return from_texels(slot.texture.readback(), layout)

    def swap(self):
        for feed_slot, out_slot, _ in self.pairs:
            feed_slot.texture, out_slot.texture = out_slot.texture, feed_slot.texture

    def read_carried(self) -> list:
        from .gl_plan import from_texels  # imports OpenGL: only once a context exists
        return [from_texels(feed_slot.texture.readback(), layout)
                for feed_slot, _, layout in self.pairs]
