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
- scan: the body's kernels read each element slice and write each step's ys in
  place, at offsets set per draw (windows, below); the carry ping-pongs. What a kernel
  cannot read or write in place is copied on the GPU (a small draw, the offset a
  uniform): nothing uploaded or read back per step.
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
from ..codegen.lower import VIEW_OPS as lower_views
from ..codegen.tuning import Tuning
from ..codegen.windows import unsafe_windows
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

    def __init__(self, owner, graph: Graph, feed_values: list, fetches: list,
                 windows: dict | None = None):
        """windows: {("param", k) or ("output", j): (width, height, uniform)}, the
        parameters and outputs to read and write inside larger textures (a scan's,
        _ScanWindows); `self.windows` keeps those every kernel honours."""
        from .driver import optimize  # a cycle: the driver builds ControlFlowPlans
        backend = owner.backend
        types = dict(feed_values)
        optimized = optimize(graph, fetches, types,
                             max_texture_units=backend.max_texture_units,
                             max_draw_buffers=backend.max_draw_buffers, tuning=owner.tuning)
        self.names = [optimized.feed_names.get(v) for v in types]
        self.windows: dict = {}
        if has_control_flow(optimized.graph):
            self.plan = ControlFlowPlan(backend, optimized.graph, owner.variables,
                                        owner.initial, owner.tuning)
        else:
            lowered, self.windows = self._lower(optimized.graph, backend.limits,
                                                owner.tuning, windows or {})
            self.plan = backend.build_plan(lowered, owner.variables, owner.initial)
        self.backend = backend
        self._owned: dict = {}          # purpose -> [Texture, ...]
        self.windowed = False           # a scan step's _WindowedScan (None: cannot), once

    def _lower(self, graph, limits, tuning, wanted: dict) -> tuple:
        """(lowered graph, windows kept): lowered again without the windows a kernel
        does not honour (codegen/windows.py) or that no kernel writes."""
        outputs = []
        for v in graph.outputs:         # a view's window is its source's
            while v.node.op in lower_views and v.node.inputs:
                v = v.node.inputs[0]
            outputs.append(v.name)
        # its fetches are handed on (bound as textures, swapped with loop variables,
        # copied, written into windows): none is left in render targets to read back
        tuning = (tuning or Tuning()).with_({"reduce.norm_rows_fetched": False})
        names, kinds = {}, {}
        for (kind, k), window in sorted(wanted.items(), key=lambda kw: kw[0][0] != "param"):
            name = self.names[k] if kind == "param" else outputs[k]
            if name is not None and name not in names:
                names[name], kinds[name] = window, kind
        while True:
            lowered = lower(graph, limits, tuning=tuning,
                            windows={n: w[:3] for n, w in names.items()})
            bad = set()
            written = {}
            for s in lowered.steps:
                if s[0] == "kernel":
                    bad |= unsafe_windows(s[1])
                    for b in s[1].outputs:
                        written[b.value] = written.get(b.value, 0) + 1
            feeds = set(lowered.feeds)
            bad |= {w[2] for name, w in names.items()
                    if (name not in feeds if kinds[name] == "param"
                        else written.get(name) != 1)}
            # a carry read inside the stacked result of an output no longer windowed
            alive = {w[2] for w in names.values()} - bad
            bad |= {w[2] for w in names.values() if w[3] is not None
                    and wanted[("output", w[3])][2] not in alive}
            if not bad:
                break
            names = {n: w for n, w in names.items() if w[2] not in bad}
        kept = {w[2] for w in names.values()}
        return lowered, {key: w for key, w in wanted.items() if w[2] in kept}

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


def stage_graph(graph: Graph) -> tuple:
    """graph with each control node's outputs made placeholders: (the staged graph,
    [(control node, its output placeholders)], each control node's inputs there, the
    graph's outputs there). The WebGL export stages graphs the same way."""
    staged = Graph(graph.name)
    mapping: dict = {}
    controls = []
    for node in graph.nodes:
        if get_op(node.op).family == _control.FAMILY:
            outs = [placeholder(staged, v.shape, v.dtype,
                                name=f"{node.name.replace('/', '.')}.out{k}")
                    for k, v in enumerate(node.outputs)]
            controls.append((node, outs))
        else:
            outs = staged.add_copy(node, [mapping[v] for v in node.inputs]).outputs
        mapping.update(zip(node.outputs, outs))
    return (staged, controls, [[mapping[v] for v in node.inputs] for node, _ in controls],
            [mapping[v] for v in graph.outputs])


def stage_fetches(staged: Graph, controls, inputs_of, results) -> list:
    """Per stage (one before each control node, and the last), what it computes that a
    later stage, its control node or the outputs read: a value belongs to the first
    stage that can compute it (after the control nodes whose outputs it reads)."""
    level: dict = {}     # value -> its stage; -1: a parameter; None: a source (any stage)
    for k, (_, outs) in enumerate(controls):
        level.update((v, k + 1) for v in outs)
    for node in staged.nodes:
        if node.outputs and node.outputs[0] in level:
            continue
        here = -1 if node.op == "placeholder" else None if not node.inputs else \
            max([level[v] for v in node.inputs if level[v] is not None] + [0])
        level.update((v, here) for v in node.outputs)
    last = len(controls)
    fetches: list = [[] for _ in range(last + 1)]
    control_outs = {v for _, outs in controls for v in outs}

    def need(value, stage):         # stage (or its control node) reads value
        at = level[value]
        if at == -1 or value in control_outs:       # in hand: a parameter, a result
            return
        at = stage if at is None else at
        if value not in fetches[at]:
            fetches[at].append(value)
    for node in staged.nodes:
        at = level[node.outputs[0]] if node.outputs else None
        if at is not None and at >= 0:
            for v in node.inputs:
                if level[v] is not None and 0 <= level[v] < at:
                    need(v, at)
    for k, inputs in enumerate(inputs_of):
        for v in inputs:
            need(v, k)
    for v in results:                   # an output an earlier stage computes: fetched there
        if level[v] is not None and level[v] < last:
            need(v, last)
    fetches[last] = list(results)
    return fetches


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
        staged, self._controls, self._inputs, self._outputs = stage_graph(graph)
        self._staged = staged
        control_outs = {v for _, outs in self._controls for v in outs}
        self._user_feeds = [n.outputs[0] for n in staged.nodes if n.op == "placeholder"
                            and n.outputs[0] not in control_outs]
        self._stage_fetches = stage_fetches(staged, self._controls, self._inputs,
                                            self._outputs)

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

    def _sub(self, purpose, node, build, types, keep: bool = True,
             windows=None) -> _SubPlan:
        """The plan of the graph build(types) makes for parameters of these types;
        windows(fetches): the windows to try (_SubPlan)."""
        types = list(types)

        def make():
            graph, params, fetches = build(types)
            return _SubPlan(self, graph, list(zip(params, types)), fetches,
                            windows(fetches) if windows else None)
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
        # the body's plan with what windows its kernels honour; run whole (with an
        # observer) its windows start at texel 0, which is right for a plan's own feeds
        windowed = (self.tuning or Tuning()).scan_windows
        step = self._sub("scan", node, build, types, windows=windowed and (
            lambda outs: _scan_windows(outs, types, elem_types, nc, length,
                                       self.backend.device.max_texture_size)))
        if observer is None and step.windows:
            if step.windowed is False:
                step.windowed = _WindowedScan.of(step, nc, len(elems))
            run = step.windowed
            if run is not None:
                return run(types, carry, elems, caps, steps)
            step = self._sub("scan.copies", node, build, types)
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


# -- a scan's slices and outputs read and written in place -----------------------------------
# Windows (codegen/windows.py): the body's kernels read each element slice inside the
# elements' texture and write each step's ys inside the stacked result, at texel offsets
# set per draw: no copy per step. A y that is also carried (an RNN's h) is read back by
# the next step, and a texture cannot be read while it is drawn into: such a y goes to
# two stacked textures by turns and one draw merges them when the scan ends. Whatever a
# kernel cannot read or write in place (codegen/windows.py) is copied as before.
# Tuning.scan_windows=False copies everything (tests compare the two).


def _scan_windows(outs: list, types: list, elem_types: list, nc: int, length: int,
                  max_texture_size: int) -> dict:
    """The windows to try for a scan body whose fetches are outs (carry..., ys...):
    {("param", k) | ("output", k): (width, height, uniform, linked output or None)}."""
    windows = {}

    def add(key, stacked: TensorType, link=None):
        lay = layout_for(stacked, max_texture_size)
        windows[key] = (lay.width, lay.height, f"ff_window{len(windows)}", link)
    for k, t in enumerate(elem_types):
        if t.size and (t.size // t.shape[0]) % 4 == 0:
            add(("param", nc + k), t)
    for j in range(nc, len(outs)):
        y = outs[j].type
        if y.size and y.size % 4 == 0 and not any(outs[j] is outs[m] for m in range(nc, j)):
            add(("output", j), TensorType((length,) + tuple(y.shape), y.dtype))
    for c in range(nc):
        linked = [j for j in range(nc, len(outs)) if outs[j] is outs[c]
                  and ("output", j) in windows]
        if linked and types[c] == outs[c].type:
            w = windows[("output", linked[0])]
            windows[("param", c)] = (w[0], w[1], f"ff_window{len(windows)}", linked[0])
    return windows


class _WindowedScan:
    """A scan run with windows (above). Per carry, how its value gets to the next
    step: "linked" (it is a windowed y: read inside that y's pair, or copied out of it
    where its reader cannot), "same" (the body returns its parameter), "swap" (its
    result texture and its parameter's swap), "copy" (copied on the GPU)."""

    def __init__(self, step, nc, ne, feeds, launches, kinds):
        self.step, self.nc, self.ne, self.plan = step, nc, ne, step.plan
        self.feeds, self.launches, self.kinds = feeds, launches, kinds
        self.copier = _copier(step.backend.device)

    @classmethod
    def of(cls, step, nc, ne):
        """None where the plan is not a GLPlan or reads feeds besides its parameters."""
        plan, windows = step.plan, step.windows
        if not all(hasattr(plan, a) for a in ("_uploads", "_launches", "_readbacks",
                                              "_launch_info")):
            return None
        by_name = {name: (slot, layout) for name, slot, layout, _ in plan._uploads}
        if set(by_name) - set(step.names):
            return None
        feeds = [by_name.get(n) if n is not None else None for n in step.names]
        outs = plan._readbacks
        feed_slots = {id(f[0]) for f in feeds if f is not None}
        kinds = []
        for c in range(nc):
            slot = outs[c][0]
            linked = next((j for j in range(nc, len(outs)) if outs[j][0] is slot
                           and ("output", j) in windows), None)
            if linked is not None:
                kinds.append(("linked", linked))
            elif feeds[c] is not None and slot is feeds[c][0]:
                kinds.append(("same", None))
            elif feeds[c] is None:
                kinds.append(("none", None))
            elif id(slot) in feed_slots or any(outs[m][0] is slot for m in range(nc)
                                               if m != c) or \
                    slot.texture.key != feeds[c][0].texture.key:
                kinds.append(("copy", None))
            else:
                kinds.append(("swap", None))
        from .gl_resources import GL  # imports OpenGL: only once a context exists
        launches = []
        with step.backend.device.gl:
            for launch, (kernel, _) in zip(plan._launches, plan._launch_info):
                names = {b.layout.window for b in kernel.inputs if b.layout.window}
                out = kernel.output.layout.window
                names |= {out} if out else set()
                where = [(GL.glGetUniformLocation(launch[0], n), n) for n in sorted(names)]
                layout = kernel.output.layout          # (width, texels) of a window
                launches.append((launch, where, out or None,
                                 (layout.width, -(-layout.size // 4))))
        return cls(step, nc, ne, feeds, launches, kinds)

    def __call__(self, types, carry, elems, caps, steps) -> list:
        with self.step.backend.device.gl:
            self.plan.ready()               # its hoisted kernels (gl_plan.GLPlan.ready)
            restore = []                    # (slot, its own texture)
            try:
                return self._run(types, carry, elems, caps, steps, restore)
            finally:
                for slot, texture in reversed(restore):
                    slot.texture = texture
                self._reset()

    def _reset(self) -> None:
        """Every window back at texel 0 (a program keeps its uniforms: a run of the
        plan whole, as an observer's, then reads its own textures from their start)."""
        GL = self.copier.gl
        for launch, located, _, _ in self.launches:
            if located:
                GL.glUseProgram(launch[0])
                for location, _ in located:
                    GL.glUniform1i(location, 0)
        _bound().forget()

    def _run(self, types, carry, elems, caps, steps, restore) -> list:
        step, nc, ne, plan, copier = self.step, self.nc, self.ne, self.plan, self.copier
        windows, feeds, outs = step.windows, self.feeds, plan._readbacks
        from .gl_plan import draw, draw_rows  # imports OpenGL: only with a context
        BOUND, GL = _bound(), copier.gl
        length, ny = len(steps), len(outs) - nc
        sizes_out = [o[1].size for o in outs]
        size_of = sizes_out.__getitem__          # an output's elements

        def point(slot, texture):
            restore.append((slot, slot.texture))
            slot.texture = texture

        def fill(slot, layout, value):
            """a parameter's own texture = value (at texel 0 of a window)"""
            if _is_resident(value) and value.layout.texture_key == layout.texture_key \
                    and not layout.window:
                copier.whole(value, slot.texture)
            elif _is_resident(value):
                copier.slice(value, slot.texture, 0, value.layout.size)
            else:
                slot.texture.upload(_texels(value, layout))
        for k, value in enumerate(list(carry) + [None] * ne + list(caps)):
            if feeds[k] is None or value is None:
                continue
            slot, layout = feeds[k]
            if k >= nc + ne and _is_resident(value) and \
                    value.layout.texture_key == layout.texture_key:
                point(slot, value.texture)          # a capture: read where it is
            else:
                fill(slot, layout, value)
        held = []                                   # the elements, in standard layouts
        for k, e in enumerate(elems):
            lay = layout_for(_type(e), step.backend.device.max_texture_size)
            if not (_is_resident(e) and e.layout == lay):
                ((texture, lay),) = step.owned(("elems", k), [_type(e)])
                if _is_resident(e):
                    copier.slice(e, texture, 0, e.layout.size)
                else:
                    texture.upload(_texels(e, lay))
                e = _resident(texture, lay)
            held.append(e)
            if ("param", nc + k) in windows and feeds[nc + k] is not None:
                point(feeds[nc + k][0], e.texture)
        sizes = [types[nc + k].size for k in range(ne)]
        y_types = [TensorType((length,) + tuple(outs[j][1].shape), outs[j][1].dtype)
                   for j in range(nc, nc + ny)]
        stacked = [_resident(t, lay) for t, lay in step.owned("ys", y_types)]
        pairs = {w[3]: tuple(step.owned(("ys.pair", w[3], half), [y_types[w[3] - nc]])[0][0]
                             for half in (0, 1))
                 for w in windows.values() if w[3] is not None}
        for j in range(nc, nc + ny):
            if ("output", j) in windows:
                point(outs[j][0], stacked[j - nc].texture)
        # where a value is now: its slot's texture, at its window's start this step
        window_of = {id(feeds[k][0] if kind == "param" else outs[k][0]): w[2]
                     for (kind, k), w in windows.items()
                     if kind == "output" or feeds[k] is not None}
        # a y not windowed whose slot a windowed y writes: the same values
        windowed_y = {id(outs[m][0]): m for m in reversed(range(nc, nc + ny))
                      if ("output", m) in windows}
        shared = {j: windowed_y[id(outs[j][0])] for j in range(nc, nc + ny)
                  if ("output", j) not in windows and id(outs[j][0]) in windowed_y}

        def where(slot) -> tuple:
            return slot.texture, 4 * bases.get(window_of.get(id(slot)), 0)
        for c in range(nc):
            if ("param", c) in windows:
                point(feeds[c][0], feeds[c][0].texture)     # restored when done
        BOUND.forget()
        bases, previous = {}, None
        for n, i in enumerate(steps):
            for k in range(ne):
                if feeds[nc + k] is None:
                    continue
                w = windows.get(("param", nc + k))
                if w is not None:
                    bases[w[2]] = i * sizes[k] // 4
                else:
                    copier.slice(held[k], feeds[nc + k][0].texture, i, sizes[k],
                                 fresh=False)
            for j in range(nc, nc + ny):
                w = windows.get(("output", j))
                if w is not None:
                    bases[w[2]] = i * size_of(j) // 4
                    if j in pairs:
                        outs[j][0].texture = pairs[j][n % 2]
            for c in range(nc):
                w = windows.get(("param", c))
                if w is not None and n > 0:
                    feeds[c][0].texture = pairs[w[3]][(n - 1) % 2]
                    bases[w[2]] = previous * size_of(w[3]) // 4
                elif w is not None:
                    bases[w[2]] = 0
            for launch, located, out, out_layout in self.launches:
                if not located:
                    draw(*launch)
                    continue
                if BOUND.shader != launch[0]:
                    GL.glUseProgram(launch[0])
                    BOUND.shader = launch[0]
                for location, name in located:
                    GL.glUniform1i(location, bases[name])
                if out is None:
                    draw(*launch)
                else:
                    base, width = bases[out], out_layout[0]
                    row0 = base // width
                    draw_rows(launch, row0, (base + out_layout[1] - 1) // width - row0 + 1)
            for j in range(nc, nc + ny):
                if ("output", j) not in windows and j not in shared:
                    texture, offset = where(outs[j][0])
                    copier.copy(texture, offset, stacked[j - nc].texture, i * size_of(j),
                                size_of(j))
            for c, (kind, _) in enumerate(self.kinds):
                if kind == "swap":
                    feed, out = feeds[c][0], outs[c][0]
                    feed.texture, out.texture = out.texture, feed.texture
                elif kind == "copy" or kind == "linked" and feeds[c] is not None and \
                        ("param", c) not in windows:
                    texture, offset = where(outs[c][0])
                    copier.load(texture, offset, feeds[c][0].texture, size_of(c))
            previous = i
        finals = []
        for c, ((texture, lay), (kind, _)) in enumerate(
                zip(step.owned("carry", types[:nc]), self.kinds)):
            if lay.size:
                src = feeds[c][0] if kind in ("swap", "same", "copy") else outs[c][0]
                copier.load(*where(src), texture, lay.size)
            finals.append(_resident(texture, lay))
        for j, (even, odd) in pairs.items():
            copier.merge(even, odd, stacked[j - nc].texture, size_of(j) // 4, length,
                         steps[0] != 0)
        for j, source in shared.items():        # the same values: the same texture
            stacked[j - nc] = _resident(stacked[source - nc].texture, stacked[j - nc].layout)
        return finals + stacked


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
        ready = getattr(self.plan, "ready", None)   # its hoisted kernels, if not run yet
        if ready is not None:
            ready()
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


# A windowed scan's y that is also carried went to two textures by turns (step n to
# src0 where n is even); their geometry is the stacked result's, so a texel is where
# it is in both.
_MERGE_GLSL = """{version}
{precision}
// fragflow: a scan's stacked result from the two textures its steps wrote by turns
uniform highp {prefix}sampler2D src0;
uniform highp {prefix}sampler2D src1;
uniform int dst_width;
uniform int step_texels;
uniform int last;
uniform int reverse;
out {vec} result;

void main() {{
    ivec2 p = ivec2(gl_FragCoord.xy);
    int i = (p.y * dst_width + p.x) / step_texels;
    int n = reverse != 0 ? last - i : i;
    result = (n & 1) == 0 ? texelFetch(src0, p, 0) : texelFetch(src1, p, 0);
}}
"""

_MERGE_UNIFORMS = ("dst_width", "step_texels", "last", "reverse")


class _CopyShader:
    """What LinkedShaderCache.get links: a hand-written kernel record."""

    def __init__(self, source: str, name: str, inputs=("src",)):
        self.compiled_source = self.source = source
        self.name, self.user_code = name, None
        self.compiled_user_code = None
        self.inputs = tuple(Binding(n, "", None) for n in inputs)
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
            source = _MERGE_GLSL.format(version=limits.version_line,
                                        precision="\n".join(limits.precision),
                                        prefix=prefix, vec=vec)
            self.kernels["merge", fmt] = _CopyShader(source, f"control_flow_merge_{fmt}",
                                                     ("src0", "src1"))

    def _shader(self, fmt, uniforms=_UNIFORMS) -> tuple:
        """The linked shader, its uniforms' locations and the values they hold;
        linked (and pinned: four shaders for the process's life) again if the cache
        let it go."""
        kernel = self.kernels[fmt]
        shader = self.device.shaders.get(kernel)
        known = self.linked.get(fmt)
        if known is None or known[0] != shader:
            _bound().forget()              # linking it used glUseProgram
            self.device.shaders.pin([kernel])
            known = self.linked[fmt] = (shader, {u: self.gl.glGetUniformLocation(shader, u)
                                                 for u in uniforms}, {})
        return known

    def merge(self, even, odd, dst, step_texels: int, length: int, reverse: bool) -> None:
        """dst = even's texels where the step they hold was drawn at an even turn, else
        odd's (a windowed scan's carried y, _WindowedScan); the three of one geometry."""
        BOUND, GL = _bound(), self.gl
        with self.device.gl:
            BOUND.forget()
            shader, where, _ = self._shader(("merge", dst.format), _MERGE_UNIFORMS)
            GL.glUseProgram(shader)
            for name, value in zip(_MERGE_UNIFORMS, (dst.width, step_texels, length - 1,
                                                     int(reverse))):
                GL.glUniform1i(where[name], int(value))
            for unit, texture in enumerate((even, odd)):
                GL.glActiveTexture(GL.GL_TEXTURE0 + unit)
                GL.glBindTexture(GL.GL_TEXTURE_2D, texture.id)
            GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, dst.fbo)
            GL.glViewport(0, 0, dst.width, dst.height)
            GL.glDrawArrays(GL.GL_TRIANGLES, 0, 3)
            BOUND.forget()

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
            # bound again even where BOUND says it is: measured on llvmpipe, a texture
            # drawn into and sampled by one copy read as zeros in the next copy that
            # sampled it without binding it again
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

    def load(self, src, offset: int, dst, n: int) -> None:
        """dst (a texture) = src's (a texture's) elements [offset, offset + n), the rest
        of dst zeroed as an upload pads it; binds through BOUND as _draw(fresh=False)."""
        self._draw(_resident(src, None), dst, 0, n, offset,
                   [(0, dst.width * dst.height, (True,) * 4)], fresh=False)

    def copy(self, src, offset: int, dst, at: int, n: int) -> None:
        """dst's elements [at, at + n) = src's [offset, offset + n) (textures); the rest
        of dst is left as it is."""
        if n:
            self._draw(_resident(src, None), dst, at, at + n, offset - at,
                       _texel_draws(at, at + n), fresh=False)

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
