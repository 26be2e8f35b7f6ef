"""The scheduling step between the passes and lowering: the facts about the whole
compiled graph that kernel choices depend on, worked out once and handed to every
strategy (codegen/strategy.py) instead of each family scanning the graph, or leaving
notes for another family's lowering, as it goes.

- `readers`: value name -> the nodes that read it, in graph order
- `fetched`: the names of the graph's outputs (read back; they need their own texture)
- `blocks`: value name -> how its producer leaves it in its render targets for its
  readers instead of stitching it into one texture (decided by the families'
  planners, e.g. codegen/conv.py's, from readers and the tuning); readers look here.
  A fetched value among them (a norm.rows LayerNorm's) is read back from the targets:
  lower() records it in LoweredGraph.fetched_blocks.

`schedule(graph, limits, tuning, planners)` computes them; lower() makes them `active()`.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from .active import Active


@dataclass(frozen=True)
class Facts:
    readers: Mapping = field(default_factory=dict)
    fetched: frozenset = frozenset()
    blocks: Mapping = field(default_factory=dict)

    def readers_of(self, value) -> tuple:
        """The nodes reading a value (a Value or its name)."""
        return self.readers.get(getattr(value, "name", value), ())

    def read_only_by(self, value, reads, fetched: bool = False) -> bool:
        """Whether reads(reader, value) holds for each of the value's readers and it has
        some, and is not fetched: the condition for leaving it in its producer's render
        targets. With `fetched`, a fetched value qualifies too, readers or none (its
        readback reads the targets: codegen/norm.py plan_blocks)."""
        name = getattr(value, "name", value)
        readers = self.readers_of(name)
        if name in self.fetched:
            return fetched and all(reads(n, value) for n in readers)
        return bool(readers) and all(reads(n, value) for n in readers)


def graph_facts(graph) -> Facts:
    """readers and fetched values of a graph (no planner decisions)."""
    readers: dict = {}
    for node in graph.nodes:
        seen = set()
        for v in node.inputs:
            if v.name not in seen:
                seen.add(v.name)
                readers.setdefault(v.name, []).append(node)
    return Facts(readers=MappingProxyType({k: tuple(v) for k, v in readers.items()}),
                 fetched=frozenset(v.name for v in graph.outputs))


def schedule(graph, limits, tuning, planners=()) -> Facts:
    """The graph's facts, with the decisions of `planners`: functions (graph, facts,
    limits, tuning) -> {value name: decision} (codegen/lower.py's PLANNERS), each
    seeing the decisions of those before it."""
    facts = graph_facts(graph)
    blocks: dict = {}
    for planner in planners:
        blocks.update(planner(graph, facts, limits, tuning))
        facts = Facts(facts.readers, facts.fetched, MappingProxyType(dict(blocks)))
    return facts


EMPTY = Facts()
_ACTIVE = Active("fragflow_facts", EMPTY)
active = _ACTIVE.get          # the value of the lowering in progress
facts_with = _ACTIVE.using    # lower() wraps itself in it

