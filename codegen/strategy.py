"""Kernel choice as data: each family lowers a node by the first strategy of its table
that applies.

A `Strategy` is a name ("conv.direct"), `applies(site, facts, tuning) -> params | None`
(None: not this one) and `emit(params) -> Kernel | [Kernel]`. `site` is the node being
lowered and where (its layouts, its kernels' name prefix, a fused node's epilogue),
`facts` what the scheduling step worked out about the whole graph before lowering
(codegen/schedule.py: readers, fetched values, which producers leave their results in
their render targets), `tuning` the active Tuning (codegen/tuning). `params` carries
everything `emit` needs, so a strategy's choice and its kernels can be looked at apart.
Every kernel a strategy emits names it (`Kernel.strategy`).

`choose(table, site)` tries `tuning.prefer` first, skips `tuning.exclude`, and returns
the first that applies; `applicable(table, site)` lists every one that does (a test
runs each against the reference).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..ir.errors import FragflowError
from . import schedule, tuning as _tuning


@dataclass(frozen=True)
class Site:
    """A node being lowered: the layouts known so far (every graph value's; read them,
    do not write them), the prefix its kernels' names start with, and for a node a
    fused kernel wraps, the epilogue, its extra operands, the op and nodes to name."""
    node: Any
    layouts: Mapping
    prefix: str
    extra: tuple = ()
    epilogue: Any = None
    kernel_op: str | None = None
    nodes: tuple | None = None

    @property
    def op(self) -> str:
        return self.kernel_op or self.node.op

    @property
    def named_nodes(self) -> list:
        return list(self.nodes) if self.nodes else [self.node]


@dataclass(frozen=True)
class Strategy:
    name: str                                   # "<family>.<kind>"
    applies: Callable                           # (site, facts, tuning) -> params | None
    emit: Callable                              # (params) -> Kernel | list of Kernels
    doc: str = field(default="", compare=False)


class NoStrategyError(FragflowError):
    """No strategy of a family's table takes a node (or none the tuning allows)."""


def _ordered(table, tuning) -> list:
    first = [s for name in tuning.prefer for s in table if s.name == name]
    rest = [s for s in table if s not in first]
    return [s for s in first + rest if s.name not in tuning.exclude]


def applicable(table, site: Site, facts=None, tuning=None) -> list:
    """Every (strategy, params) of `table` that takes the site, in the order tried."""
    facts = schedule.active() if facts is None else facts
    tuning = _tuning.active() if tuning is None else tuning
    out = []
    for strategy in _ordered(table, tuning):
        params = strategy.applies(site, facts, tuning)
        if params is not None:
            out.append((strategy, params))
    return out


def choose(table, site: Site, facts=None, tuning=None):
    """The first (strategy, params) that takes the site; NoStrategyError where none."""
    facts = schedule.active() if facts is None else facts
    tuning = _tuning.active() if tuning is None else tuning
    for strategy in _ordered(table, tuning):
        params = strategy.applies(site, facts, tuning)
        if params is not None:
            return strategy, params
    raise NoStrategyError(f"{site.node.where()}: no kernel of "
                          f"{', '.join(s.name for s in table)} takes it"
                          + (f" (excluded: {', '.join(tuning.exclude)})"
                             if tuning.exclude else ""))


def lower_with(table, site: Site, facts=None, tuning=None):
    """The kernels of the chosen strategy, each naming it."""
    strategy, params = choose(table, site, facts, tuning)
    return named(strategy.emit(params), strategy.name)


def named(kernels, name: str):
    """kernels (one Kernel or a list) with Kernel.strategy set to name."""
    if isinstance(kernels, list):
        return [k.with_strategy(name) for k in kernels]
    return kernels.with_strategy(name)
