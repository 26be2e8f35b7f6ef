"""Rewriting graphs by copying: the one mechanism every pass uses.

rebuild(graph, transform, skip) copies graph node by node; transform(node, inputs,
new_graph, mapping) may return the values that replace node's outputs (from nodes it
made in new_graph, or values already there), or None to copy node as it is; mapping
takes any already copied value of graph to its copy. Nodes in skip are not copied
(a fused group's members: only what the group computes is used outside it). Copies
keep names, scopes and source lines. A node a transform makes takes the name of the
node it replaces, so names stay unique and a dump still says where everything came
from. Dead nodes are dropped."""
from __future__ import annotations

from ..ir.graph import Graph
from .prune import needed_nodes


def copy_node(node, inputs, graph: Graph):
    return graph.add_copy(node, inputs).outputs


def rebuild(graph: Graph, transform=None, skip=()) -> Graph:
    new = Graph(graph.name)
    new.custom_gradients = graph.custom_gradients
    mapping: dict = {}
    for node in graph.nodes:
        if node in skip:
            continue
        # None for values computed inside a fused group (only its root reads them)
        inputs = [mapping.get(v) for v in node.inputs]
        outputs = transform(node, inputs, new, mapping) if transform else None
        if outputs is None:
            outputs = copy_node(node, inputs, new)
        mapping.update(zip(node.outputs, outputs))
    new.outputs = [mapping[v] for v in graph.outputs]
    return without_dead_nodes(new)


def without_dead_nodes(graph: Graph) -> Graph:
    """The nodes the outputs need (all of them, when the graph has no outputs)."""
    if not graph.outputs:
        return graph
    live = needed_nodes(graph, graph.outputs, set())
    if len(live) == len(graph.nodes):
        return graph
    new = Graph(graph.name)
    new.custom_gradients = graph.custom_gradients
    mapping: dict = {}
    for node in graph.nodes:
        if node in live:
            outputs = copy_node(node, [mapping[v] for v in node.inputs], new)
            mapping.update(zip(node.outputs, outputs))
    new.outputs = [mapping[v] for v in graph.outputs]
    return new


class FreshNames:
    """Fresh node names for a rewrite: in neither the graph being rewritten (rebuild
    copies its later nodes under their own names) nor the new one."""

    def __init__(self, graph: Graph):
        self.taken = {n.name for n in graph.nodes}

    def fresh(self, new: Graph, base: str, suffix: str = "") -> str:
        """base (base/suffix with a suffix), else with _1, _2, ... appended."""
        stem = f"{base}/{suffix}" if suffix else base
        k = 0
        while True:
            name = stem + (f"_{k}" if k else "")
            if name not in self.taken and name not in new:
                self.taken.add(name)
                return name
            k += 1


def consumers(graph: Graph) -> dict:
    """{value: [consuming nodes]} (a node consuming a value twice is listed once)."""
    users: dict = {}
    for node in graph.nodes:
        for v in dict.fromkeys(node.inputs):
            users.setdefault(v, []).append(node)
    return users
