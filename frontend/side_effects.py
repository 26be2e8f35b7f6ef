"""What a fetch does besides computing values: TensorFlow 1's control dependencies,
tf.print / tf.Print, and tf.summary's serialized results. fragflow graphs have data
edges only (docs/ARCHITECTURE.md): these three TF1 idioms are kept beside the graph,
per graph, by the frontend, and the Session applies them:
before a run it adds to the fetches what the fetched nodes depend on by control
(`with ff.control_dependencies([...])`), what prints need and what summaries read;
after the run it prints, and gives each fetched summary as the bytes of a
`Summary` protocol buffer (what `FileWriter.add_summary` takes). A graph without any of
them costs a dictionary lookup per run.

>>> import fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     v = ff.Variable(0.0, name="v")
...     bump = ff.assign_add(v, 1.0)
...     with ff.control_dependencies([bump]):
...         out = ff.constant(5.0) * 2.0
>>> sess = ff.Session(g, backend="numpy")
>>> float(sess.run(out)), float(sess.run(v))
(10.0, 1.0)
"""
from __future__ import annotations

import contextlib
import sys
import threading

import numpy as np

from ..ir.errors import FragflowError
from ..ir.graph import Node, Value, get_default_graph
from .tensor import Tensor


def graph_table(graph, name: str, factory=dict):
    """A table the frontend keeps for one graph, held by the graph itself (so that it
    lives and dies with it: a table keyed by graph whose values hold the graph's values
    would keep every graph alive)."""
    tables = graph.__dict__.setdefault("_frontend_tables", {})
    if name not in tables:
        tables[name] = factory()
    return tables[name]


# Per graph: "control" {node: tuple of Values it depends on by control}; "effects"
# {Value: Effect} (prints and summaries, keyed by the value a user fetches); "version"
# [n], bumped by every registration; "expanded" expand's cache.


class Effect:
    """What fetching one value also does: `needs` are fetched with it; `finish(arrays)`
    (the needs' values) gives what the user gets for it (None: the value itself) and
    may print."""

    def __init__(self, needs, finish):
        self.needs = tuple(needs)
        self.finish = finish


def _bump(graph) -> None:
    graph_table(graph, "version", lambda: [0])[0] += 1


def version(graph) -> int:
    return graph_table(graph, "version", lambda: [0])[0]


def register_effect(value: Value, effect: Effect) -> None:
    graph_table(value.graph, "effects")[value] = effect
    _bump(value.graph)


def as_values(items, what) -> list:
    """Tensors, ir Values, Nodes (TF's x.op) and nested lists of them, as Values."""
    out = []
    for item in items:
        if item is None:
            continue
        if isinstance(item, (list, tuple)):
            out.extend(as_values(item, what))
        elif isinstance(item, Tensor):
            out.append(item.value)
        elif isinstance(item, Value):
            out.append(item)
        elif isinstance(item, Node):
            out.extend(item.outputs[:1])
        else:
            raise FragflowError(f"{what}: {item!r} is not a tensor or an op")
    return out


class _Open(threading.local):
    def __init__(self):
        self.blocks: list = []        # (graph, start index, values) of open blocks


_OPEN = _Open()


@contextlib.contextmanager
def control_dependencies(control_inputs):
    """Ops made inside run only together with control_inputs: fetching any of them (or
    anything computed from them) also runs every tensor and op in control_inputs, as
    TensorFlow 1's tf.control_dependencies. Variables read inside still see the value
    they had when the run began (every assign applies when a run ends).

    control_inputs=None clears nothing here (blocks only add dependencies)."""
    values = as_values(control_inputs or [], "control_dependencies")
    graph = get_default_graph()
    for v in values:
        if v.graph is not graph:
            raise FragflowError(f"control_dependencies: '{v.name}' belongs to graph "
                                f"'{v.graph.name}', not to '{graph.name}'")
    start = len(graph.nodes)
    _OPEN.blocks.append((graph, values))
    try:
        yield
    finally:
        _OPEN.blocks.pop()
        if values:
            made = [n for n in graph.nodes[start:]
                    if n.op not in ("variable", "placeholder")]
            table = graph_table(graph, "control")
            for node in made:
                table[node] = table.get(node, ()) + tuple(values)
            _bump(graph)


def open_dependencies(graph) -> list:
    """The control inputs of the blocks open on this thread for graph (innermost last)."""
    return [v for g, values in _OPEN.blocks if g is graph for v in values]


def expand(graph, values: list) -> tuple[list, list]:
    """(values plus what they need by control, prints and summaries; [(position in the
    result or None, Effect)] for each value with an effect that the run computes)."""
    tables = graph.__dict__.get("_frontend_tables")
    if not tables or not (tables.get("control") or tables.get("effects")):
        return values, []
    control, effects = tables.get("control"), tables.get("effects")
    key = (tuple(values), len(graph.nodes), version(graph))
    cache = graph_table(graph, "expanded")
    if key not in cache:
        if len(cache) >= 64:           # fetch sets of a training loop: a handful
            cache.clear()
        cache[key] = _expand(graph, values, control or {}, effects or {})
    out, found = cache[key]
    return list(out), list(found)


def _expand(graph, values, control, effects):
    out = list(values)
    present = {v: i for i, v in enumerate(out)}
    seen: set = set()
    stack = list(values)
    triggered, found = [], set()         # effects of nodes that run, in discovery order
    while stack:
        value = stack.pop()
        node = value.node
        if value in effects and value not in found:
            found.add(value)
            triggered.append(value)
            for need in effects[value].needs:
                if need not in present:
                    present[need] = len(out)
                    out.append(need)
                stack.append(need)
        if node in seen:
            continue
        seen.add(node)
        for dep in control.get(node, ()):
            if dep not in present:
                present[dep] = len(out)
                out.append(dep)
            stack.append(dep)
        stack.extend(node.inputs)
    order = {n: i for i, n in enumerate(graph.nodes)}
    triggered.sort(key=lambda v: order.get(v.node, 0))
    return out, [(present.get(v), effects[v]) for v in triggered]


def finish(results: list, effects: list, values: list) -> list:
    """Apply the effects (prints, in graph order) and put each fetched summary's bytes in
    place of its value."""
    index = {v: i for i, v in enumerate(values)}
    out = list(results)
    for position, effect in effects:
        arrays = [results[index[n]] for n in effect.needs]
        replaced = effect.finish(arrays)
        if replaced is not None and position is not None:
            out[position] = replaced
    return out


# -- tf.print / tf.Print ----------------------------------------------------------------
def format_value(array, summarize) -> str:
    """An array as TensorFlow prints one: numbers as %g, rows in brackets, the first and
    last `summarize` entries of a long axis around '...' (summarize None or < 0: all)."""
    array = np.asarray(array)

    def number(v):
        if array.dtype.kind == "f":
            return f"{float(v):.6g}"
        return str(v.item() if hasattr(v, "item") else v)

    def rows(a, depth):
        if a.ndim == 0:
            return number(a)
        n = a.shape[0]
        keep = n if summarize is None or summarize < 0 or n <= 2 * summarize else summarize
        parts = [rows(a[i], depth + 1) for i in range(keep)]
        if keep < n:
            parts += ["..."] + [rows(a[i], depth + 1) for i in range(n - keep, n)]
        sep = " " if a.ndim == 1 else "\n" + " " * (depth + 1)
        return "[" + sep.join(parts) + "]"
    return rows(array, 0)


def printer(items, needs, output_stream, sep, end, summarize):
    """The finish function of a print: items are strings or indices into needs."""
    def finish(arrays):
        parts = [item if isinstance(item, str) else format_value(arrays[item], summarize)
                 for item in items]
        stream = output_stream
        if stream == "stdout" or stream is None:
            stream = sys.stdout
        elif stream == "stderr":
            stream = sys.stderr
        stream.write(sep.join(parts) + end)
        if hasattr(stream, "flush"):
            stream.flush()
        return None
    return finish
