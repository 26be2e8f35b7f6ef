"""Seeing what runs: debug mode (NaN/Inf checks after every kernel) and profiles."""
from __future__ import annotations

import logging
import time
from collections import defaultdict

import numpy as np

from ..ir.errors import NumericsError

log = logging.getLogger("fragflow")


def _bad(array) -> str | None:
    array = np.asarray(array)
    if array.dtype.kind != "f" or array.size == 0:
        return None
    if np.isnan(array).any():
        return "NaN"
    if np.isinf(array).any():
        return "Inf"
    return None


class DebugObserver:
    """Checks every feed and every kernel's output; the first NaN or Inf raises,
    naming the node that produced it, its scope and the user's line."""

    def __init__(self, graph):
        self.graph = graph

    def input(self, name, read):
        bad = _bad(read())
        if bad:
            raise NumericsError(f"the feed for '{name}' contains {bad}")

    def phase(self, name, seconds):
        pass

    def kernel(self, kernel, seconds, read):
        where = kernel.location or "?"
        log.info("ran %s (%s) in scope '%s' at %s", kernel.name, kernel.op, kernel.scope,
                 where)
        bad = _bad(read())
        if bad:
            names = kernel.nodes or (kernel.name,)
            node = self.graph.node(names[-1]) if names[-1] in self.graph else None
            op = node.op if node is not None else kernel.op
            raise NumericsError(
                f"{op} '{names[-1]}' (scope '{kernel.scope}', {where}) produced {bad}"
                + (f"; the kernel also computes {', '.join(names[:-1])}"
                   if len(names) > 1 else ""))


class Profile:
    """Where a run's time goes, by the user's op and scope.

    rows: one per (scope, op) with the kernels, calls and GPU seconds per run; phases:
    upload and readback seconds per run; compile_seconds: building the plan (passes,
    codegen, shader compiles) the first time; total: wall seconds per profiled run."""

    def __init__(self, runs: int, compile_seconds: float):
        self.runs = runs
        self.compile_seconds = compile_seconds
        self._kernel_time = defaultdict(float)
        self._kernel_calls = defaultdict(int)
        self._kernels: dict = {}
        self.phases = defaultdict(float)
        self.total = 0.0

    # observer protocol
    def input(self, name, read):
        pass

    def phase(self, name, seconds):
        self.phases[name] += seconds / self.runs

    def kernel(self, kernel, seconds, read):
        key = (kernel.scope, _user_op(kernel))
        self._kernel_time[key] += seconds / self.runs
        self._kernel_calls[key] += 1
        self._kernels.setdefault(key, set()).add(kernel.name)

    @property
    def rows(self) -> list:
        rows = [{"scope": scope or "(root)", "op": op, "kernels": len(self._kernels[key]),
                 "calls": self._kernel_calls[key] // self.runs,
                 "seconds": self._kernel_time[key]}
                for key in self._kernel_time for scope, op in [key]]
        return sorted(rows, key=lambda r: -r["seconds"])

    @property
    def kernel_seconds(self) -> float:
        return sum(self._kernel_time.values())

    def __str__(self):
        lines = [f"{'scope':<28} {'op':<28} {'kernels':>7} {'ms/run':>10} {'share':>6}"]
        total = self.total or 1e-12
        for r in self.rows:
            lines.append(f"{r['scope'][:28]:<28} {r['op'][:28]:<28} {r['kernels']:>7} "
                         f"{r['seconds'] * 1e3:>10.3f} {r['seconds'] / total:>6.1%}")
        for name in ("upload", "readback"):
            seconds = self.phases.get(name, 0.0)
            lines.append(f"{'(' + name + ')':<28} {'':<28} {'':>7} {seconds * 1e3:>10.3f} "
                         f"{seconds / total:>6.1%}")
        other = self.total - self.kernel_seconds - sum(self.phases.values())
        lines.append(f"{'(other: CPU, sync)':<28} {'':<28} {'':>7} {other * 1e3:>10.3f} "
                     f"{other / total:>6.1%}")
        lines.append(f"{'total per run':<28} {'':<28} {'':>7} {self.total * 1e3:>10.3f}")
        lines.append(f"compile (first run only): {self.compile_seconds * 1e3:.1f} ms; "
                     f"averaged over {self.runs} runs")
        return "\n".join(lines)


def _user_op(kernel) -> str:
    """The ops the user wrote that a kernel runs (its fused ops by their own names)."""
    op = kernel.op
    if op.startswith("fused(") or op == "fused_matmul":
        return op
    return op


def timed_runs(run_observed, runs: int, profile: Profile):
    for _ in range(runs):
        start = time.perf_counter()
        run_observed(profile)
        profile.total += (time.perf_counter() - start) / runs
    return profile
