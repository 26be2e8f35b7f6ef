"""Control flow on GL (issue 25): a compiled graph holding while_loop, cond or scan
nodes (ir/ops/control.py) runs as a ControlFlowPlan. Values stay on the GPU between
its parts (gl_plan.Resident: a texture and its layout); docs/RUNTIME.md "Control flow
on GL" has the whole scheme and its costs.

- Stages: each node outside the control nodes runs in the first stage that can
  compute it; stages hand their textures on (GLPlan.run_resident), so every value is
  computed once per run and nothing crosses the host between stages.
- while_loop: condition and body compiled once as one plan, replayed per iteration;
  the predicate read back (the only per-iteration sync); the body's result textures
  swap places with the loop variables' (ping-pong).
- scan: the carry ping-pongs; each step's element slice and its ys are copied on the
  GPU (a small copy draw each, the offset a uniform): nothing uploaded or read back.
- cond: its predicate read back; only the taken branch's plan runs.

Where the textures cannot swap (a body returning a loop variable as it is, a body
holding control flow) results are copied on the GPU into loop-owned pairs; only a
shape changing under shape_invariants, and a run with an observer (profile, debug),
take the host's path.
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

from ..codegen import lower
from ..codegen.kernel import Binding
from ..codegen.layout import layout_for
from ..ir.errors import NumericsError
from ..ir.graph import Graph
from ..ir.ops import control as _control
from ..ir.ops.registry import get_op
from ..ir.ops.state import placeholder
from ..ir.types import TensorType

has_control_flow = _control.has_control_flow

# sub-plans kept per ControlFlowPlan (one per stage and per loop, and one more per
# shape a loop variable takes under shape_invariants): the least recently used beyond
# this are released (never one the run in progress uses: its textures are handed on)
MAX_SUB_PLANS = 32


def _type_of(array) -> TensorType:
    dtype = np.asarray(array).dtype
    name = "float32" if dtype.kind == "f" else "bool" if dtype.kind == "b" else "int32"
    return TensorType(tuple(np.shape(array)), name)


def _is_resident(value) -> bool:
    return hasattr(value, "texture") and hasattr(value, "layout")


def _type(value) -> TensorType:
    """The type of a value held on the host (an array) or on the GPU (a Resident)."""
    return value.type if _is_resident(value) else _type_of(value)


def _array(value):
    """The value on the host: a Resident is read back."""
    return value.read() if _is_resident(value) else value


class _SubPlan:
    """A graph's plan for feeds of given types: its plan, its feed names in the order
    of the graph's parameters, and the textures its loop owns (released with it)."""

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
        self._owned: dict = {}          # purpose -> [Texture, ...]

    def run(self, values: list, extra: dict | None = None, observer=None,
            resident: bool = False) -> list:
        """The plan's fetches from values (arrays or Residents, one per parameter):
        Residents where resident and the plan can leave them on the GPU."""
        feeds = dict(extra or {})
        feeds.update((n, a) for n, a in zip(self.names, values) if n is not None)
        if observer is None and hasattr(self.plan, "run_resident"):
            out = self.plan.run_resident(feeds)
            return out if resident else [_array(v) for v in out]
        return self.plan.run_observed({k: _array(v) for k, v in feeds.items()}, observer)

    def owned(self, purpose, types: list) -> list:
        """Textures of this sub-plan's loop, one per type (their layouts), the same
        ones on every run: (Texture, Layout) pairs."""
        device = self.backend.device
        layouts = [layout_for(t, device.max_texture_size) for t in types]
        textures = self._owned.get(purpose)
        if textures is None or [t.key for t in textures] != \
                [lay.texture_key for lay in layouts]:
            for t in textures or ():
                device.pool.release(t)
            textures = self._owned[purpose] = [device.pool.acquire(lay.texture_key)
                                               for lay in layouts]
        return list(zip(textures, layouts))

    def textures(self) -> list:
        return list(self.plan.textures()) + [t for ts in self._owned.values() for t in ts]

    def release(self) -> None:
        for textures in self._owned.values():
            for t in textures:
                self.backend.device.pool.release(t)
        self._owned.clear()
        self.backend.release_plan(self.plan)


def _param_graph(name: str, types: list) -> tuple:
    g = Graph(name)
    return g, [placeholder(g, t.shape, t.dtype, name=f"p{k}") for k, t in enumerate(types)]


class ControlFlowPlan:
    """A GL plan for a compiled graph with control-flow nodes (see the module
    docstring). It has the plan interface (runtime/backend.py): run, run_observed,
    kernels (none of its own: its sub-plans pin theirs), textures, release; and
    run_resident, as GLPlan's, so that it can be a loop's body."""

    kernels: list = []

    def __init__(self, backend, graph: Graph, variables, initial: dict, tuning=None):
        self.backend, self.variables, self.initial, self.tuning = \
            backend, variables, initial, tuning
        self.graph = graph
        self._plans: OrderedDict = OrderedDict()   # (purpose, node, types) -> _SubPlan
        self._in_use: set = set()       # keys of the sub-plans this run has used
        staged = Graph(graph.name)
        mapping: dict = {}
        self._controls = []              # (control node, its outputs in `staged`)
        for node in graph.nodes:
            if get_op(node.op).family == _control.FAMILY:
                outs = [placeholder(staged, v.shape, v.dtype,
                                    name=f"{node.name.replace('/', '.')}.out{k}")
                        for k, v in enumerate(node.outputs)]
                self._controls.append((node, outs))
            else:
                outs = staged.add_copy(node, [mapping[v] for v in node.inputs]).outputs
            mapping.update(zip(node.outputs, outs))
        self._staged = staged
        self._inputs = [[mapping[v] for v in node.inputs] for node, _ in self._controls]
        self._outputs = [mapping[v] for v in graph.outputs]
        control_outs = {v for _, outs in self._controls for v in outs}
        self._user_feeds = [n.outputs[0] for n in staged.nodes if n.op == "placeholder"
                            and n.outputs[0] not in control_outs]
        self._stage_fetches = self._stages(staged, control_outs)

    def _stages(self, staged: Graph, control_outs: set) -> list:
        """Per stage (one before each control node, and the last), the values it
        computes that a later stage, a control node or the fetches need."""
        level: dict = {}        # value -> its stage; None: a source each stage reads
        for k, (_, outs) in enumerate(self._controls):
            level.update((v, k + 1) for v in outs)
        for node in staged.nodes:
            if node.outputs and node.outputs[0] in level:
                continue
            if node.op == "placeholder":
                here = -1                        # the user's feeds: in hand from the start
            elif not node.inputs:
                here = None
            else:
                here = max([level[v] for v in node.inputs if level[v] is not None],
                           default=0)
                here = max(here, 0)
            level.update((v, here) for v in node.outputs)
        last = len(self._controls)
        fetches = [[] for _ in range(last + 1)]

        def need(value, stage):      # a value stage `stage` or a control there reads
            at = level[value]
            if value in control_outs or at == -1:
                return
            at = stage if at is None else at
            if at < stage or (at == stage and stage < last):
                if value not in fetches[at]:
                    fetches[at].append(value)
        for node in staged.nodes:
            at = level[node.outputs[0]] if node.outputs else None
            if at is not None and at >= 0:
                for v in node.inputs:
                    if level[v] is not None and level[v] < at:
                        need(v, at)
        for k, inputs in enumerate(self._inputs):
            for v in inputs:
                need(v, k)
        for v in self._outputs:
            if level[v] is not None and level[v] < last:
                need(v, last)
        fetches[last] = list(self._outputs)
        return fetches

    # -- the plan interface -------------------------------------------------------------
    def run(self, feeds: dict) -> list:
        return self.run_observed(feeds, None)

    def run_observed(self, feeds: dict, observer) -> list:
        return self._run(feeds, observer, resident=False)

    def run_resident(self, feeds: dict) -> list:
        """run() with feeds that may be Residents and fetches left on the GPU."""
        return self._run(feeds, None, resident=True)

    def _run(self, feeds: dict, observer, resident: bool) -> list:
        with self.backend.lock:
            outermost = not self._in_use
            try:
                return self._run_stages(feeds, observer, resident)
            finally:
                if outermost:       # what this run returns may be in its sub-plans' textures
                    self._evict()
                    self._in_use.clear()

    def _run_stages(self, feeds: dict, observer, resident: bool) -> list:
        extra = {k: v for k, v in feeds.items() if k == "run_counter"}
        env = {v: feeds[v.node.name] for v in self._user_feeds if v.node.name in feeds}
        last = len(self._controls)
        for stage, fetches in enumerate(self._stage_fetches):
            if fetches:
                types = [(v, self._feed_type(v, a)) for v, a in env.items()]
                sub = self._plan(("stage", stage), self._staged, types, fetches)
                values = sub.run([env[v] for v, _ in types], extra, observer,
                                 resident=resident or stage < last)
                if stage == last:
                    return values
                env.update(zip(fetches, values))
            node, outs = self._controls[stage]
            results = self._run_control(node, [env[v] for v in self._inputs[stage]],
                                        extra, observer)
            env.update(zip(outs, results))
        raise AssertionError("the last stage returns")

    @staticmethod
    def _feed_type(value, held) -> TensorType:
        """A value's static type, or where its values decide its shape (unknown dims,
        shape_invariants) the shape it has in this run."""
        t = value.type
        return t if t.is_static else _type(held)

    def textures(self) -> list:
        return [t for p in self._plans.values() for t in p.textures()]

    def release(self) -> None:
        for p in self._plans.values():
            p.release()
        self._plans.clear()

    # -- sub-plans ----------------------------------------------------------------------
    def _plan(self, key, graph, feed_types: list, fetches: list) -> _SubPlan:
        key = key + (tuple(t for _, t in feed_types),)
        return self._cached(key, lambda: _SubPlan(self, graph, feed_types, fetches))

    def _cached(self, key, make, keep: bool = True) -> _SubPlan:
        """The sub-plan of key, made if missing; keep: its results may be handed on
        (Residents in its textures), so it stays until this run ends."""
        plan = self._plans.get(key)
        made = plan is None
        if made:
            plan = self._plans[key] = make()
        self._plans.move_to_end(key)
        if keep:
            self._in_use.add(key)
        if made:
            self._evict(but=key)
        return plan

    def _evict(self, but=None) -> None:
        for key in list(self._plans):
            if len(self._plans) <= MAX_SUB_PLANS:
                break
            if key not in self._in_use and key != but:
                self._plans.pop(key).release()

    def _sub(self, purpose, node, build, types, keep: bool = True) -> _SubPlan:
        """The plan of the graph build(types) makes for parameters of these types."""
        types = list(types)

        def make():
            graph, params, fetches = build(types)
            return _SubPlan(self, graph, list(zip(params, types)), fetches)
        return self._cached((purpose, node.name, tuple(types)), make, keep)

    def _run_control(self, node, values: list, extra: dict, observer=None) -> list:
        """An observer (profile, debug mode) sees every kernel of every iteration: the
        loops then run their plans whole each iteration (uploads and readbacks), and a
        NaN or Inf found inside says in which iteration it first appeared."""
        if node.op == "cond":
            return self._cond(node, values, extra, observer)
        if node.op == "while_loop":
            return self._while(node, values, extra, observer)
        return self._scan(node, values, extra, observer)

    # -- cond -----------------------------------------------------------------------------
    def _cond(self, node, values, extra, observer=None):
        pred, tcaps, fcaps = _control._cond_split(list(values), node.attrs)
        key, sub, args = (("true", node.attrs["true_branch"], tcaps)
                          if bool(_array(pred)) else
                          ("false", node.attrs["false_branch"], fcaps))

        def build(types, sub=sub):
            g, ps = _param_graph(f"{node.name}.{key}", types)
            g.outputs = _control.inline(g, sub, ps)
            return g, ps, g.outputs
        plan = self._sub(key, node, build, [_type(a) for a in args])
        return plan.run(args, extra, observer, resident=True)

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
        types = [_type(a) for a in args]
        step = self._sub("while", node, build, types)
        kept = _control.infer_subgraph(body_g, types[:n] + types[n + len(ccaps):],
                                       "its body") == types[:n]
        if kept and observer is None:
            swap = _Swapper.of(step, carried=list(range(n)), outputs=list(range(1, n + 1)))
            if swap is not None:
                swap.load(args)
                try:
                    count = 0
                    while limit is None or count < limit:
                        swap.launch()
                        if not bool(swap.read(0)):
                            break
                        swap.swap()
                        count += 1
                    return swap.carried()
                finally:
                    swap.unbind()
            loop = _OwnedLoop(step, types[:n], args[:n])
            caps = _held(step, args[n:])
            count = 0
            while limit is None or count < limit:
                outs = step.run(loop.current() + caps, extra, resident=True)
                if not bool(_array(outs[0])):
                    break
                loop.advance(outs[1:n + 1])
                count += 1
            return loop.current()
        args = [_array(a) for a in args]           # the host's round trip, any shapes
        vars_ = args[:n]
        count = 0
        while limit is None or count < limit:
            outs = _observed(node, count, step, args, extra, observer)
            if not bool(outs[0]):
                break
            vars_ = outs[1:]
            args = list(vars_) + args[n:]
            step = self._sub("while", node, build, [_type(a) for a in args], keep=False)
            count += 1
        return vars_

    # -- scan -------------------------------------------------------------------------------
    def _scan(self, node, values, extra, observer=None):
        attrs = node.attrs
        nc = attrs["num_carry"]
        carry, elems, caps = _control._scan_split(list(values), attrs)
        body_g = attrs["body"]
        elem_types = [_type(e) for e in elems]
        length = attrs["length"] if attrs["length"] is not None else elem_types[0].shape[0]

        def build(types):
            g, ps = _param_graph(f"{node.name}.step", types)
            g.outputs = _control.inline(g, body_g, ps)
            return g, ps, g.outputs
        steps = range(length - 1, -1, -1) if attrs["reverse"] else range(length)
        if length == 0:
            stacked = [np.zeros(v.shape, np.float32 if v.dtype == "float32" else v.dtype)
                       for v in node.outputs[nc:]]
            return list(carry) + stacked
        slice_types = [TensorType(t.shape[1:], t.dtype) for t in elem_types]
        types = [_type(c) for c in carry] + slice_types + [_type(c) for c in caps]
        step = self._sub("scan", node, build, types)
        if observer is None:
            return self._scan_on_gpu(step, types, carry, elems, caps, steps, extra)
        carry, caps = [_array(c) for c in carry], [_array(c) for c in caps]
        elems = [_array(e) for e in elems]
        ny = len(node.outputs) - nc
        stacked = [None] * ny
        for i in steps:
            args = list(carry) + [e[i] for e in elems] + list(caps)
            outs = _observed(node, i, step, args, extra, observer)
            carry = outs[:nc]
            for k in range(ny):
                if stacked[k] is None:
                    stacked[k] = np.zeros((length,) + np.shape(outs[nc + k]),
                                          np.asarray(outs[nc + k]).dtype)
                stacked[k][i] = outs[nc + k]
        return list(carry) + stacked

    def _scan_on_gpu(self, step, types, carry, elems, caps, steps, extra):
        """The scan with every step's slices and ys copied on the GPU (module
        docstring): nothing uploaded or read back per step."""
        nc, ne = len(carry), len(elems)
        length = len(steps)
        copier = _copier(self.backend.device)
        # the elems on the GPU: a stage's textures, or the feeds uploaded once
        held = step.owned("elems", [_type(e) for e in elems if not _is_resident(e)])
        held_elems, it = [], iter(held)
        for e in elems:
            if _is_resident(e):
                held_elems.append(e)
            else:
                texture, layout = next(it)
                texture.upload(_texels(e, layout))
                held_elems.append(_resident(texture, layout))
        sizes = [t.size for t in types[nc:nc + ne]]
        swap = _Swapper.of(step, carried=list(range(nc)), outputs=list(range(nc)))
        stacked = None

        def stack(ys):
            nonlocal stacked
            if stacked is None:
                ys_types = [TensorType((length,) + _type(y).shape, _type(y).dtype)
                            for y in ys]
                stacked = [_resident(t, lay) for t, lay in step.owned("ys", ys_types)]
            return stacked
        if swap is not None:
            swap.load(list(carry) + [None] * ne + list(caps))
            stack([swap.output(k) for k in range(nc, len(swap.outputs))])
            _bound().forget()          # the uploads and the textures made bound things
            try:
                for i in steps:
                    for k in range(ne):
                        slot = swap.slot(nc + k)
                        if slot is not None:
                            copier.slice(held_elems[k], slot.texture, i, sizes[k],
                                         fresh=False)
                    swap.launch(forget=False)
                    ys = [swap.output(nc + k) for k in range(len(swap.outputs) - nc)]
                    for y, into in zip(ys, stack(ys)):
                        copier.place(y, into, i, fresh=False)
                    swap.swap()
                return swap.carried() + (stacked or [])
            finally:
                swap.unbind()
        loop = _OwnedLoop(step, types[:nc], list(carry))
        caps = _held(step, caps)
        slices = [_resident(t, lay) for t, lay in step.owned("slices", types[nc:nc + ne])]
        for i in steps:
            for k in range(ne):
                copier.slice(held_elems[k], slices[k].texture, i, sizes[k])
            outs = step.run(loop.current() + slices + list(caps), extra, resident=True)
            ys = [_on_gpu(step, ("y", k), y) for k, y in enumerate(outs[nc:])]
            for y, into in zip(ys, stack(ys)):
                copier.place(y, into, i)
            loop.advance(outs[:nc])
        return loop.current() + (stacked or [])


def _bound():
    from .gl_plan import BOUND  # imports OpenGL: only once a context exists
    return BOUND


def _resident(texture, layout):
    from .gl_plan import Resident  # imports OpenGL: only once a context exists
    return Resident(texture, layout)


def _texels(array, layout):
    from .gl_plan import to_texels  # imports OpenGL: only once a context exists
    return to_texels(np.asarray(array), layout)


def _on_gpu(step: _SubPlan, purpose, value):
    """value as a Resident: an array (a plan's result in an array texture) uploaded
    into a texture of the step's own."""
    if _is_resident(value):
        return value
    ((texture, layout),) = step.owned(purpose, [_type(value)])
    texture.upload(_texels(value, layout))
    return _resident(texture, layout)


def _held(step: _SubPlan, values: list) -> list:
    """values on the GPU for a loop's iterations: arrays uploaded once, into textures
    of the step's own."""
    return [_on_gpu(step, ("held", k), v) for k, v in enumerate(values)]


class _OwnedLoop:
    """Loop variables in textures of the loop's own, two per variable: the body's plan
    reads one of each pair and its results are copied on the GPU into the other (the
    body's result textures are its plan's, which the next iteration overwrites)."""

    def __init__(self, step: _SubPlan, types: list, initial: list):
        self.copier = _copier(step.backend.device)
        self.now = [_resident(t, lay) for t, lay in step.owned("vars", types)]
        self.next = [_resident(t, lay) for t, lay in step.owned("vars.next", types)]
        self._write(self.now, initial)

    def _write(self, into: list, values: list) -> None:
        for target, value in zip(into, values):
            if _is_resident(value) and \
                    value.layout.texture_key == target.layout.texture_key:
                self.copier.whole(value, target.texture)
            else:
                target.texture.upload(_texels(_array(value), target.layout))

    def current(self) -> list:
        return list(self.now)

    def advance(self, values: list) -> None:
        self._write(self.next, values)
        self.now, self.next = self.next, self.now


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
        self._bound: list = []          # (slot, its own texture) while another is bound
        self._carried = {id(p[0]) for p in carried_pairs}

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
        feed = self.feeds[k]
        if feed is not None:
            slot, layout, staging = feed
            from .gl_plan import to_texels  # imports OpenGL: only once a context exists
            slot.texture.upload(to_texels(np.asarray(array), layout, staging))

    def load(self, values):
        """The parameters' values (arrays or Residents; None: set later): a carried
        value is copied (on the GPU) or uploaded into the parameter's own texture, which
        the loop then writes; any other Resident's texture is bound in its place until
        unbind()."""
        for k, value in enumerate(values):
            feed = self.feeds[k]
            if feed is None or value is None:
                continue
            slot, layout, _ = feed
            if _is_resident(value) and value.layout.texture_key == layout.texture_key:
                if id(slot) in self._carried:
                    _copier(self.plan.device).whole(value, slot.texture)
                else:
                    self._bound.append((slot, slot.texture))
                    slot.texture = value.texture
            else:
                self.upload_one(k, _array(value))

    def unbind(self) -> None:
        for slot, texture in reversed(self._bound):
            slot.texture = texture
        self._bound.clear()

    def slot(self, k):
        """The k-th parameter's slot (None where the plan does not read it)."""
        feed = self.feeds[k]
        return None if feed is None else feed[0]

    def launch(self, forget: bool = True):
        """The plan's kernels, drawn; forget=False where only draws bound anything
        since the last launch (no upload or readback: gl_plan.BoundState)."""
        from .gl_plan import BOUND, draw  # imports OpenGL: only once a context exists
        if forget:
            BOUND.forget()
        for launch in self.plan._launches:
            draw(*launch)

    def read(self, k):
        from .gl_plan import from_texels  # imports OpenGL: only once a context exists
        slot, layout = self.outputs[k]
        return from_texels(slot.texture.readback(), layout)

    def output(self, k):
        """The k-th output where it is now, as a Resident (valid until the next launch)."""
        slot, layout = self.outputs[k]
        return _resident(slot.texture, layout)

    def swap(self):
        for feed_slot, out_slot, _ in self.pairs:
            feed_slot.texture, out_slot.texture = out_slot.texture, feed_slot.texture

    def carried(self) -> list:
        """The loop variables where they are now, as Residents (in the plan's textures:
        valid until the plan runs again)."""
        return [_resident(feed_slot.texture, layout) for feed_slot, _, layout in self.pairs]

    def read_carried(self) -> list:
        return [v.read() for v in self.carried()]


# -- copies on the GPU ----------------------------------------------------------------------
_COPY_GLSL = """{version}
{precision}
// fragflow: elements [lo, hi) of the target = elements [lo + delta, hi + delta) of src,
// in the target's texels [tlo, thi) (others discarded); elements outside [lo, hi) in
// a texel drawn are 0 (a draw that must keep them masks their components)
uniform highp {prefix}sampler2D src;
uniform int src_width;
uniform int dst_width;
uniform int lo;
uniform int hi;
uniform int delta;
uniform int tlo;
uniform int thi;
out {vec} result;

{vec} texel_at(int t) {{
    return texelFetch(src, ivec2(t % src_width, t / src_width), 0);
}}

void main() {{
    int t = int(gl_FragCoord.y) * dst_width + int(gl_FragCoord.x);
    if (t < tlo || t >= thi) discard;
    int o = 4 * t;
    if (o >= lo && o + 4 <= hi && ((o + delta) & 3) == 0) {{
        result = texel_at((o + delta) >> 2);
        return;
    }}
    {vec} r = {vec}(0);
    for (int c = 0; c < 4; c++) {{
        int e = o + c;
        if (e >= lo && e < hi) {{
            int s = e + delta;
            r[c] = texel_at(s >> 2)[s & 3];
        }}
    }}
    result = r;
}}
"""

_UNIFORMS = ("src_width", "dst_width", "lo", "hi", "delta", "tlo", "thi")


class _CopyShader:
    """What LinkedShaderCache.get links: a hand-written kernel record."""

    def __init__(self, source: str, name: str):
        self.compiled_source = self.source = source
        self.name, self.user_code = name, None
        self.inputs = (Binding("src", "", None),)
        self.uniforms: dict = {}


class _GPUCopy:
    """Copies of element ranges between textures, drawn with a small linked shader of
    fragflow's own (one for RGBA32F textures, one for RGBA32I)."""

    def __init__(self, device):
        from .gl_resources import GL  # imports OpenGL: only once a context exists
        self.gl, self.device = GL, device
        limits = device.limits
        self.kernels, self.linked = {}, {}
        for fmt, prefix, vec in (("rgba32f", "", "vec4"), ("rgba32i", "i", "ivec4")):
            source = _COPY_GLSL.format(version=limits.version_line,
                                       precision="\n".join(limits.precision),
                                       prefix=prefix, vec=vec)
            self.kernels[fmt] = _CopyShader(source, f"control_flow_copy_{fmt}")

    def _shader(self, fmt: str) -> tuple:
        """The linked shader, its uniforms' locations and the values they hold;
        linked (and pinned: two shaders for the process's life) again if the cache
        let it go."""
        kernel = self.kernels[fmt]
        shader = self.device.shaders.get(kernel)
        known = self.linked.get(fmt)
        if known is None or known[0] != shader:
            _bound().forget()              # linking it used glUseProgram
            self.device.shaders.pin([kernel])
            known = self.linked[fmt] = (shader, {u: self.gl.glGetUniformLocation(shader, u)
                                                 for u in _UNIFORMS}, {})
        return known

    def _draw(self, src, dst, lo, hi, delta, draws, fresh=True) -> None:
        """draws: (texel lo, texel hi, color mask) per draw into dst. Binds through
        gl_plan.BOUND (what is bound already is not bound again; a scan's step is a
        few such copies between its kernels) and sets only the uniforms that change.
        fresh=False: only draws bound anything since BOUND was last forgotten (no
        upload, readback or link: gl_plan.BoundState)."""
        BOUND, GL = _bound(), self.gl
        with self.device.gl:
            if fresh:
                BOUND.forget()
            shader, where, values = self._shader(dst.format)
            if BOUND.shader != shader:
                GL.glUseProgram(shader)
                BOUND.shader = shader

            def uniform(name, value):
                if values.get(name) != value:
                    GL.glUniform1i(where[name], value)
                    values[name] = value
            for name, value in zip(_UNIFORMS, (src.texture.width, dst.width, lo, hi,
                                               delta)):
                uniform(name, int(value))
            texture_id = src.texture.id
            if BOUND.textures.get(0) != texture_id:
                if BOUND.active_unit != 0:
                    GL.glActiveTexture(GL.GL_TEXTURE0)
                    BOUND.active_unit = 0
                GL.glBindTexture(GL.GL_TEXTURE_2D, texture_id)
                BOUND.textures[0] = texture_id
            if BOUND.framebuffer != dst.fbo:
                GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, dst.fbo)
                BOUND.framebuffer = dst.fbo
            texels = dst.width * dst.height
            for tlo, thi, mask in draws:
                uniform("tlo", int(tlo))
                uniform("thi", int(thi))
                if tlo == 0 and thi == texels:
                    if BOUND.width != dst.width or BOUND.height != dst.height:
                        GL.glViewport(0, 0, dst.width, dst.height)
                        BOUND.width, BOUND.height = dst.width, dst.height
                else:       # the triangle covers only the rows drawn (llvmpipe bins less)
                    first, end = tlo // dst.width, (thi - 1) // dst.width + 1
                    if end - first == 1:
                        GL.glViewport(tlo % dst.width, first, thi - tlo, 1)
                    else:
                        GL.glViewport(0, first, dst.width, end - first)
                    BOUND.width = BOUND.height = None       # kernels set (0, 0, w, h)
                masked = not all(mask)
                if masked:
                    GL.glColorMask(*mask)
                GL.glDrawArrays(GL.GL_TRIANGLES, 0, 3)
                if masked:
                    GL.glColorMask(True, True, True, True)

    def whole(self, src, dst) -> None:
        """dst (a texture of src's size and format) = src, every texel."""
        texels = dst.width * dst.height
        self._draw(src, dst, 0, 4 * texels, 0, [(0, texels, (True,) * 4)])

    def slice(self, src, dst, index: int, size: int, fresh=True) -> None:
        """dst = src's elements [index*size, (index+1)*size) (a scan's element slice;
        the rest of dst is zeroed, as an upload pads it)."""
        texels = dst.width * dst.height
        self._draw(src, dst, 0, size, index * size, [(0, texels, (True,) * 4)], fresh)

    def place(self, src, dst, index: int, fresh=True) -> None:
        """dst.texture's elements [index*n, (index+1)*n) = src's n elements (a scan's
        ys into its stacked result); the rest of dst is left as it is."""
        n = src.layout.size
        lo, hi = index * n, (index + 1) * n
        if n == 0:
            return
        self._draw(src, dst.texture, lo, hi, -lo, _texel_draws(lo, hi), fresh)


def _texel_draws(lo: int, hi: int) -> list:
    """Draws covering elements [lo, hi): whole texels at once, a texel shared with a
    neighbouring range with only its components in [lo, hi) unmasked."""
    first, last = lo // 4, (hi - 1) // 4
    if first == last:
        return [(first, first + 1, tuple(lo <= 4 * first + c < hi for c in range(4)))]
    draws = []
    whole_lo, whole_hi = -(-lo // 4), hi // 4
    if lo % 4:
        draws.append((first, first + 1, tuple(c >= lo % 4 for c in range(4))))
    if whole_lo < whole_hi:
        draws.append((whole_lo, whole_hi, (True,) * 4))
    if hi % 4:
        draws.append((last, last + 1, tuple(c < hi % 4 for c in range(4))))
    return draws


_COPIERS: dict = {}


def _copier(device) -> _GPUCopy:
    copier = _COPIERS.get(id(device))
    if copier is None or copier.device is not device:
        copier = _COPIERS[id(device)] = _GPUCopy(device)
    return copier
