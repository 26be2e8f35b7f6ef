"""The compile driver: a graph, its fetches and the types of its feeds, to a plan that a
backend runs. Session (and its CompiledFunction) and the `fragflow` command compile
through here.

    prune(graph, fetches, feed types)       passes/prune.py: what the fetches need
    PassManager(...).run                    the pipeline (passes/manager.py)
    backend.build_plan(compiled graph, ...) GL: lower() to kernels, then GLPlan and its
                                            memory plan; numpy: NumpyPlan

>>> import fragflow as ff, numpy as np
>>> from fragflow.runtime.driver import compile
>>> g = ff.Graph()
>>> with g.as_default():
...     x = ff.placeholder((2,), "float32", name="x")
...     y = ff.relu(x - 1.0)
>>> plan = compile(g, [y.value], {x.value: x.value.type}, "numpy")
>>> plan.run({plan.feed_names[x.value]: np.array([0., 3.], np.float32),
...           "run_counter": np.array(0, np.int32)})
[array([0., 2.], dtype=float32)]
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

from ..ir.graph import Graph
from ..passes import PassManager, prune
from . import plan_cache
from .backend import get_backend


@dataclass
class Optimized:
    """A graph after prune and the pass pipeline."""
    graph: Graph            # the compiled graph, after every pass
    feed_names: dict        # each fed Value of the user's graph -> its name in `graph`
    fusion_report: list     # what fusion did and every candidate it turned down


def optimize(graph: Graph, fetches, feed_types: dict, passes=None, disable=(),
             dump_dir: str | None = None, max_texture_units: int | None = None,
             max_draw_buffers: int | None = None) -> Optimized:
    """prune to what the fetches (Values of graph) need with the feeds' types
    ({Value: TensorType}), then the pass pipeline (passes: names, None for the default
    one; disable: names left out; dump_dir: as FRAGFLOW_DUMP_PASSES)."""
    compiled, mapping = prune(graph, list(fetches), feed_types)
    manager = PassManager(passes=passes, disable=disable, dump_dir=dump_dir,
                          max_texture_units=max_texture_units,
                          max_draw_buffers=max_draw_buffers)
    compiled = manager.run(compiled)
    names = {v: mapping[v].name for v in feed_types if v in mapping}
    return Optimized(compiled, names, manager.fusion_report)


def compile(graph: Graph, fetches, feed_types: dict, backend="gl", variables=None,
            passes=None, disable=(), dump_dir: str | None = None, tuning=None):
    """A plan computing fetches (Values of graph) from feeds of the given types.

    backend: a backend of runtime/backend.py or its name ("gl", "numpy"). variables: the
    store the plan's variables live in (a Session's, across its plans); None: a new one
    of the backend's, which the caller releases (plan.variables.release()). The plan's
    feeds are keyed by plan.feed_names[value] (and "run_counter", the run's index, which
    random ops draw from); give it back with backend.release_plan(plan). tuning: the
    knobs the GL backend's kernel choice follows (codegen/tuning; None: the device's)."""
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
            tuning = getattr(backend, "tuning", None)   # the device's (GL)
        key = _plan_cache_key(graph, fetches, feed_types, backend, passes, disable,
                              dump_dir, tuning)
        entry = plan_cache.load(key) if key else None
        if entry is not None:
            try:
                return _cached_plan(entry, graph, fetches, feed_types, backend,
                                    variables, initial)
            except Exception as exc:    # noqa: BLE001 - a bad entry is only a miss
                warnings.warn(f"fragflow: the plan cache's entry {key} did not build "
                              f"({type(exc).__name__}: {exc}); compiling again",
                              stacklevel=2)
        optimized = optimize(graph, fetches, feed_types, passes, disable, dump_dir,
                             backend.max_texture_units, backend.max_draw_buffers)
        plan = backend.build_plan(optimized.graph, variables, initial,
                                  **({"tuning": tuning} if backend.name == "gl" else {}))
        if key:
            numbers = {node: i for i, node in enumerate(graph.nodes)}
            plan_cache.store(key, plan.lowered_graph,
                             [(numbers[v.node], v.index, name)
                              for v, name in optimized.feed_names.items()],
                             optimized.fusion_report)
        plan.graph = optimized.graph
        plan.fusion_report = optimized.fusion_report
        plan.feed_names = optimized.feed_names
        plan.variables = variables
        return plan


def _plan_cache_key(graph, fetches, feed_types, backend, passes, disable, dump_dir,
                    tuning=None):
    """The plan cache's key for this compile, or None where the cache is not used: off
    (FRAGFLOW_PLAN_CACHE), the numpy backend, a pipeline of the caller's, passes being
    dumped, or a graph the key cannot describe."""
    if (not plan_cache.enabled() or backend.name != "gl" or passes is not None
            or disable or dump_dir or os.environ.get("FRAGFLOW_DUMP_PASSES")):
        return None
    try:
        return plan_cache.plan_key(graph, fetches, feed_types, backend.limits, tuning)
    except plan_cache.Uncacheable:
        return None


def _cached_plan(entry, graph, fetches, feed_types, backend, variables, initial):
    """A plan from the plan cache's entry: the passes run only if someone asks for the
    compiled graph (plan.graph)."""
    lowered, feed_names, report = entry
    plan_cache.check_user_code(lowered, graph)
    plan = backend.build_plan(None, variables, initial, lowered_graph=lowered)
    plan.compile_graph = lambda: optimize(
        graph, fetches, feed_types, max_texture_units=backend.max_texture_units,
        max_draw_buffers=backend.max_draw_buffers).graph
    plan.fusion_report = report
    plan.feed_names = {graph.nodes[i].outputs[j]: name for i, j, name in feed_names}
    plan.variables = variables
    return plan
