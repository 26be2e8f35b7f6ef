"""The pass pipeline: passes registered by name, run in a declared order, each
optionally dumped (FRAGFLOW_DUMP_PASSES=dir) and verified (FRAGFLOW_VERIFY=1)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

from ..ir.errors import FragflowError
from ..ir.graph import Graph
from ..ir.printer import format_graph
from .verify import verify


@dataclass(frozen=True)
class Pass:
    name: str
    run: Callable          # Graph -> Graph
    doc: str = ""


PASSES: dict = {}


def register_pass(name: str, doc: str = ""):
    def decorator(fn):
        PASSES[name] = Pass(name, fn, doc)
        return fn
    return decorator


register_pass("verify", "check edges, names and types")(verify)

# The order a Session runs them in, after prune (which always runs first: it is what
# turns a user's graph and fetches into a compiled graph).
DEFAULT_PIPELINE = ("verify",)


class PassManager:
    def __init__(self, passes=None, disable=(), dump_dir: str | None = None,
                 verify_each: bool | None = None):
        names = list(DEFAULT_PIPELINE if passes is None else passes)
        unknown = [n for n in list(names) + list(disable) if n not in PASSES]
        if unknown:
            raise FragflowError(f"unknown pass(es) {unknown}; known: {sorted(PASSES)}")
        self.passes = [PASSES[n] for n in names if n not in set(disable)]
        self.dump_dir = dump_dir if dump_dir is not None else \
            os.environ.get("FRAGFLOW_DUMP_PASSES") or None
        self.verify_each = bool(os.environ.get("FRAGFLOW_VERIFY")) if verify_each is None \
            else verify_each
        self.log: list = []      # (pass name, nodes before, nodes after)

    def run(self, graph: Graph) -> Graph:
        self._dump(0, "prune", graph, None)
        for index, p in enumerate(self.passes, 1):
            before = len(graph.nodes)
            graph = p.run(graph)
            self.log.append((p.name, before, len(graph.nodes)))
            if self.verify_each and p.name != "verify":
                verify(graph)
            self._dump(index, p.name, graph, before)
        return graph

    def _dump(self, index: int, name: str, graph: Graph, before) -> None:
        if not self.dump_dir:
            return
        os.makedirs(self.dump_dir, exist_ok=True)
        path = os.path.join(self.dump_dir, f"{graph.name}.{index:02d}.{name}.txt")
        stats = f"// after {name}: {len(graph.nodes)} nodes" + \
            (f" (before: {before})" if before is not None else "")
        with open(path, "w", encoding="utf-8") as f:
            f.write(stats + "\n" + format_graph(graph) + "\n")
