"""The compile driver: a graph, its fetches and the types of its feeds, to a `Compiled`
record whose plan a backend runs (Session, the `fragflow` command and the WebGL export
compile through here). Its stages: prune (passes/prune.py), the pass pipeline
(passes/manager.py), lower (codegen/lower.py: the scheduling step, then each node's
strategy table; only for a backend with limits, GL) and backend.build_plan (GL: the
LoweredGraph; numpy: the compiled graph). docs/ARCHITECTURE.md, "Stages".

>>> import fragflow as ff, numpy as np
>>> from fragflow.runtime.driver import compile
>>> g = ff.Graph()
>>> with g.as_default():
...     x = ff.placeholder((2,), "float32", name="x")
...     y = ff.relu(x - 1.0)
>>> c = compile(g, [y.value], {x.value: x.value.type}, "numpy")
>>> c.plan.run({c.feed_names[x.value]: np.array([0., 3.], np.float32),
...             "run_counter": np.array(0, np.int32)})
[array([0., 2.], dtype=float32)]
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

from ..codegen.kernel import LoweredGraph
from ..codegen.lower import lower
from ..codegen.tuning import Tuning
from ..ir.graph import Graph
from ..passes import PassManager, prune
from . import plan_cache
from .backend import get_backend
from .control_flow import ControlFlowPlan, has_control_flow


@dataclass
class Optimized:
    """A graph after prune and the pass pipeline."""
    graph: Graph            # the compiled graph, after every pass
    feed_names: dict        # each fed Value of the user's graph -> its name in `graph`
    fusion_report: list     # what fusion did and every candidate it turned down


@dataclass
class Compiled:
    """What compile() made: the plan and what a caller needs to feed it and explain it.

    graph is the compiled graph (after every pass); for a plan the plan cache gave,
    which skipped the passes, it is made when first asked for (debug mode, profiles,
    fn.graph)."""
    plan: object            # the backend's plan (runtime/backend.py): run, kernels, ...
    feed_names: dict        # each fed Value of the user's graph -> the plan's feed name
    fusion_report: list     # what fusion did and every candidate it turned down
    variables: object       # the store the plan's variables live in
    lowered: LoweredGraph | None = None    # what a GL plan runs; None for numpy's
    _graph: Graph | None = field(default=None, repr=False)
    _make_graph: Callable | None = field(default=None, repr=False)

    @property
    def graph(self) -> Graph:
        if self._graph is None and self._make_graph is not None:
            self._graph = self._make_graph()
        return self._graph

    @property
    def kernels(self) -> list:
        """The plan's kernels in run order (none for the numpy backend)."""
        return self.plan.kernels


def optimize(graph: Graph, fetches, feed_types: dict, passes=None, disable=(),
             dump_dir: str | None = None, max_texture_units: int | None = None,
             max_draw_buffers: int | None = None, tuning: Tuning | None = None) -> Optimized:
    """prune to what the fetches (Values of graph) need with the feeds' types
    ({Value: TensorType}), then the pass pipeline (passes: names, None for the default
    one; disable: names left out; dump_dir: as FRAGFLOW_DUMP_PASSES; tuning: the knobs
    the passes read, codegen/tuning; None: llvmpipe's defaults, Tuning())."""
    compiled, mapping = prune(graph, list(fetches), feed_types)
    manager = PassManager(passes=passes, disable=disable, dump_dir=dump_dir,
                          max_texture_units=max_texture_units,
                          max_draw_buffers=max_draw_buffers,
                          tuning=Tuning() if tuning is None else tuning)
    compiled = manager.run(compiled)
    names = {v: mapping[v].name for v in feed_types if v in mapping}
    return Optimized(compiled, names, manager.fusion_report)


def compile(graph: Graph, fetches, feed_types: dict, backend="gl", variables=None,
            passes=None, disable=(), dump_dir: str | None = None,
            tuning=None) -> Compiled:
    """The Compiled record of a plan computing fetches (Values of graph) from feeds of
    the given types.

    backend: a backend of runtime/backend.py or its name ("gl", "numpy"). variables: the
    store the plan's variables live in (a Session's, across its plans); None: a new one
    of the backend's, which the caller releases (compiled.variables.release()). The
    plan's feeds are keyed by compiled.feed_names[value] (and "run_counter", the run's
    index, which random ops draw from); give it back with
    backend.release_plan(compiled.plan). tuning: the knobs kernel choice follows
    (codegen/tuning; None: the backend's, the device's profile)."""
    if isinstance(backend, str):
        backend = get_backend(backend)
    fetches = list(fetches)         # read by the plan cache's key, then by prune
    with backend.lock:
        if variables is None:
            variables = backend.variables()
        # every variable's initial value: a fed variable that is also assigned is a
        # placeholder in the compiled graph, but its texture is made on first use
        initial = {n.name: n.attrs["initial_value"] for n in graph.nodes
                   if n.op == "variable"}
        if tuning is None:
            tuning = backend.tuning
        key = _plan_cache_key(graph, fetches, feed_types, backend, passes, disable,
                              dump_dir, tuning)
        entry = plan_cache.load(key) if key else None
        if entry is not None:
            try:
                return _cached(entry, graph, fetches, feed_types, backend, variables,
                               initial, tuning)
            except Exception as exc:    # noqa: BLE001 - a bad entry is only a miss
                warnings.warn(f"fragflow: the plan cache's entry {key} did not build "
                              f"({type(exc).__name__}: {exc}); compiling again",
                              stacklevel=2)
        optimized = optimize(graph, fetches, feed_types, passes, disable, dump_dir,
                             backend.max_texture_units, backend.max_draw_buffers, tuning)
        if backend.limits is not None and has_control_flow(optimized.graph):
            # while_loop, cond, scan: their sub-graphs run as plans of their own
            plan = ControlFlowPlan(backend, optimized.graph, variables, initial, tuning)
            if key:
                plan_cache.store_graph(key, optimized.graph,
                                       _feed_entries(graph, optimized.feed_names),
                                       optimized.fusion_report)
            return Compiled(plan, optimized.feed_names, optimized.fusion_report,
                            variables, None, optimized.graph)
        lowered = None
        if backend.limits is not None:        # a backend whose plans run kernels
            lowered = lower(optimized.graph, backend.limits, tuning=tuning)
        plan = backend.build_plan(optimized.graph if lowered is None else lowered,
                                  variables, initial)
        if key:
            plan_cache.store(key, lowered, _feed_entries(graph, optimized.feed_names),
                             optimized.fusion_report)
        return Compiled(plan, optimized.feed_names, optimized.fusion_report, variables,
                        lowered, optimized.graph)


def _plan_cache_key(graph, fetches, feed_types, backend, passes, disable, dump_dir,
                    tuning=None):
    """The plan cache's key for this compile, or None where the cache is not used: off
    (FRAGFLOW_PLAN_CACHE), a backend that runs no kernels (numpy), a pipeline of the
    caller's, passes being dumped, or a graph the key cannot describe."""
    if (not plan_cache.enabled() or backend.limits is None or passes is not None
            or disable or dump_dir or os.environ.get("FRAGFLOW_DUMP_PASSES")):
        return None
    try:
        return plan_cache.plan_key(graph, fetches, feed_types, backend.limits, tuning)
    except plan_cache.Uncacheable:
        return None


def _feed_entries(graph, feed_names: dict) -> list:
    """The plan cache's form of feed names: (node index, output index, name)."""
    numbers = {node: i for i, node in enumerate(graph.nodes)}
    return [(numbers[v.node], v.index, name) for v, name in feed_names.items()]


def _cached(entry, graph, fetches, feed_types, backend, variables, initial,
            tuning) -> Compiled:
    """The record of a plan from the plan cache's entry: the passes run only if someone
    asks for the compiled graph (Compiled.graph). A control-flow entry holds the
    compiled graph itself: its ControlFlowPlan is made from it (its sub-plans still
    compile, at the first run)."""
    lowered, feed_names, report = entry
    names = {graph.nodes[i].outputs[j]: name for i, j, name in feed_names}
    if isinstance(lowered, Graph):
        plan_cache.check_graph(lowered, graph, fetches, feed_types, feed_names, initial)
        plan = ControlFlowPlan(backend, lowered, variables, initial, tuning)
        return Compiled(plan, names, report, variables, None, lowered)
    plan_cache.check_user_code(lowered, graph)
    plan = backend.build_plan(lowered, variables, initial)
    return Compiled(
        plan, names, report, variables, lowered,
        _make_graph=lambda: optimize(graph, fetches, feed_types,
                                     max_texture_units=backend.max_texture_units,
                                     max_draw_buffers=backend.max_draw_buffers,
                                     tuning=tuning).graph)
