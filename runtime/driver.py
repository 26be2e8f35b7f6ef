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

from dataclasses import dataclass

from ..ir.graph import Graph
from ..passes import PassManager, prune
from .backend import get_backend


@dataclass
class Optimized:
    """A graph after prune and the pass pipeline."""
    graph: Graph            # the compiled graph, after every pass
    feed_names: dict        # each fed Value of the user's graph -> its name in `graph`
    fusion_report: list     # what fusion did and every candidate it turned down


def optimize(graph: Graph, fetches, feed_types: dict, passes=None, disable=(),
             dump_dir: str | None = None, max_texture_units: int | None = None) -> Optimized:
    """prune to what the fetches (Values of graph) need with the feeds' types
    ({Value: TensorType}), then the pass pipeline (passes: names, None for the default
    one; disable: names left out; dump_dir: as FRAGFLOW_DUMP_PASSES)."""
    compiled, mapping = prune(graph, list(fetches), feed_types)
    manager = PassManager(passes=passes, disable=disable, dump_dir=dump_dir,
                          max_texture_units=max_texture_units)
    compiled = manager.run(compiled)
    names = {v: mapping[v].name for v in feed_types if v in mapping}
    return Optimized(compiled, names, manager.fusion_report)


def compile(graph: Graph, fetches, feed_types: dict, backend="gl", variables=None,
            passes=None, disable=(), dump_dir: str | None = None):
    """A plan computing fetches (Values of graph) from feeds of the given types.

    backend: a backend of runtime/backend.py or its name ("gl", "numpy"). variables: the
    store the plan's variables live in (a Session's, across its plans); None: a new one
    of the backend's, which the caller releases (plan.variables.release()). The plan's
    feeds are keyed by plan.feed_names[value] (and "run_counter", the run's index, which
    random ops draw from); give it back with backend.release_plan(plan)."""
    if isinstance(backend, str):
        backend = get_backend(backend)
    with backend.lock:
        if variables is None:
            variables = backend.variables()
        optimized = optimize(graph, fetches, feed_types, passes, disable, dump_dir,
                             backend.max_texture_units)
        # every variable's initial value: a fed variable that is also assigned is a
        # placeholder in the compiled graph, but its texture is made on first use
        initial = {n.name: n.attrs["initial_value"] for n in graph.nodes
                   if n.op == "variable"}
        plan = backend.build_plan(optimized.graph, variables, initial)
        plan.graph = optimized.graph
        plan.fusion_report = optimized.fusion_report
        plan.feed_names = optimized.feed_names
        plan.variables = variables
        return plan
