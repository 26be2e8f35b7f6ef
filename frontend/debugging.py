"""Seeing what runs: debug mode (NaN/Inf checks after every kernel) and profiles."""
from __future__ import annotations

import logging
import time
from collections import defaultdict

import numpy as np

from ..ir.errors import NumericsError
from .shaders import user_op, user_scope

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
        log.info("ran %s (%s) in scope '%s' at %s", kernel.name, kernel.op,
                 kernel.scope or "(root)", where)
        array = np.asarray(read())
        bad = _bad(array)
        if bad:
            names = kernel.nodes or (kernel.name,)
            node = self.graph.node(names[-1]) if names[-1] in self.graph else None
            op = node.op if node is not None else kernel.op
            if op == "gpgpu_program":
                op = f"gpgpu_program '{kernel.op}'"
            mask = np.isnan(array) if bad == "NaN" else np.isinf(array)
            first = [int(i) for i in np.unravel_index(int(np.argmax(mask)), array.shape)]
            raise NumericsError(
                f"{op} '{names[-1]}' (scope '{kernel.scope or '(root)'}', {where}) produced "
                f"{bad} in {int(mask.sum())} of {array.size} elements (first at {first}) "
                f"from inputs without NaN or Inf"
                + (f"; the kernel also computes {', '.join(names[:-1])}"
                   if len(names) > 1 else ""))


class Profile:
    """Where a run's time goes, by the user's op and scope.

    rows: one per (scope, op) — the ops the user wrote (a fused kernel's ops joined by
    "+", a gpgpu_program by its name), not the internal kernel's — with the kernels,
    calls, GPU seconds (GL timer queries, or the synchronised draw where a driver has
    none) and wall seconds (from the end of the previous step to the end of this one,
    waiting for the GPU: launch overhead included) per run; kernel_rows: the same per
    kernel, in run order; phases: upload and readback seconds per run; compile_seconds:
    building the plan (passes, codegen, shader compiles) the first time; total: wall
    seconds per profiled run. The rows' wall times, upload and readback add up to total
    but for the few Python statements between them ("other")."""

    def __init__(self, runs: int, compile_seconds: float, graph=None):
        self.runs = runs
        self.graph = graph      # the compiled graph: names a numpy backend's fused nodes
        self.compile_seconds = compile_seconds
        self._kernel_time = defaultdict(float)
        self._kernel_wall = defaultdict(float)
        self._kernel_calls = defaultdict(int)
        self._kernels: dict = {}
        self._per_kernel: dict = {}          # kernel name -> row, in run order
        self.phases = defaultdict(float)
        self.total = 0.0
        self._mark = time.perf_counter()

    # observer protocol
    def start_run(self):
        self._mark = time.perf_counter()

    def input(self, name, read):
        pass

    def phase(self, name, seconds):
        self.phases[name] += seconds / self.runs
        self._mark = time.perf_counter()

    def kernel(self, kernel, seconds, read):
        now = time.perf_counter()
        wall, self._mark = now - self._mark, now
        key = (user_scope(kernel), user_op(kernel))
        self._kernel_time[key] += seconds / self.runs
        self._kernel_wall[key] += wall / self.runs
        self._kernel_calls[key] += 1
        self._kernels.setdefault(key, set()).add(kernel.name)
        row = self._per_kernel.setdefault(kernel.name, {
            "kernel": kernel.name, "scope": key[0] or "(root)", "op": key[1],
            "seconds": 0.0, "wall_seconds": 0.0})
        row["seconds"] += seconds / self.runs
        row["wall_seconds"] += wall / self.runs

    @property
    def rows(self) -> list:
        rows = [{"scope": scope or "(root)", "op": op, "kernels": len(self._kernels[key]),
                 "calls": self._kernel_calls[key] // self.runs,
                 "seconds": self._kernel_time[key], "wall_seconds": self._kernel_wall[key]}
                for key in self._kernel_time for scope, op in [key]]
        return sorted(rows, key=lambda r: (-r["wall_seconds"], r["scope"], r["op"]))

    @property
    def kernel_rows(self) -> list:
        return list(self._per_kernel.values())

    @property
    def kernel_seconds(self) -> float:
        """GPU seconds per run, all kernels."""
        return sum(self._kernel_time.values())

    @property
    def kernel_wall_seconds(self) -> float:
        return sum(self._kernel_wall.values())

    @property
    def other_seconds(self) -> float:
        """What no row accounts for: Python between the steps, the variables' swaps."""
        return self.total - self.kernel_wall_seconds - sum(self.phases.values())

    def table(self, by: str = "op") -> str:
        """The table str() prints; by="kernel" lists each kernel in run order instead."""
        total = self.total or 1e-12
        first = "kernel" if by == "kernel" else "scope"
        lines = [f"{first:<28} {'op':<28} {'kernels':>7} {'GPU ms':>9} {'wall ms':>9} "
                 f"{'share':>6}"]
        rows = self.kernel_rows if by == "kernel" else self.rows
        for r in rows:
            count = 1 if by == "kernel" else r["kernels"]
            label = r["kernel"] if by == "kernel" else r["scope"]
            lines.append(f"{_fit(label, 28):<28} {_fit(r['op'], 28):<28} {count:>7} "
                         f"{r['seconds'] * 1e3:>9.3f} {r['wall_seconds'] * 1e3:>9.3f} "
                         f"{r['wall_seconds'] / total:>6.1%}")
        for name in ("upload", "readback"):
            seconds = self.phases.get(name, 0.0)
            lines.append(f"{'(' + name + ')':<28} {'':<28} {'':>7} {'':>9} "
                         f"{seconds * 1e3:>9.3f} {seconds / total:>6.1%}")
        other = self.other_seconds
        lines.append(f"{'(other: Python between steps)':<57} {'':>7} {'':>9} "
                     f"{other * 1e3:>9.3f} {other / total:>6.1%}")
        lines.append(f"{'total per run':<28} {'':<28} {'':>7} "
                     f"{self.kernel_seconds * 1e3:>9.3f} {self.total * 1e3:>9.3f}")
        lines.append(f"compile (first run only): {self.compile_seconds * 1e3:.1f} ms; "
                     f"averaged over {self.runs} runs; GPU ms from GL timer queries "
                     f"(synchronised wall time where the driver has none)")
        return "\n".join(lines)

    def __str__(self):
        return self.table()


def _fit(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def timed_runs(run_observed, runs: int, profile: Profile):
    for _ in range(runs):
        start = time.perf_counter()
        profile.start_run()
        run_observed(profile)
        profile.total += (time.perf_counter() - start) / runs
    return profile
