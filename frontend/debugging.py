"""Seeing what runs: debug mode (NaN/Inf checks after every kernel) and profiles."""
from __future__ import annotations

import logging
import time
from collections import defaultdict

import numpy as np

from ..ir.errors import NumericsError
from .shaders import plan_kernels, user_op, user_scope

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
    but for the few Python statements between them ("other").

    Inside a loop or branch (plan: a ControlFlowPlan), a kernel's row has the scope of
    the plan it runs in ("outer/loop.cond_and_body", nested "a.body > b.body") and is
    counted per call; loops: per loop's or branch's plan, its steps per run (the times
    its plan ran: a while_loop's condition tests) and its kernels' time per step."""

    def __init__(self, runs: int, compile_seconds: float, graph=None, plan=None):
        self.runs = runs
        # a plan with control flow: which loop's or branch's plan each kernel runs in
        self.plan = plan if hasattr(plan, "_controls") else None
        self._where_of: dict = {}            # id(kernel) -> (path, first of its part?)
        self._parts: dict = {}               # part key -> its row, in run order
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

    def _where(self, kernel) -> tuple:
        """(the loop/branch plans a kernel runs in, outermost first; whether it is the
        first kernel of the innermost's own), from the plan's sub-plans (built when
        first run: looked up again for a kernel not seen yet)."""
        if self.plan is None:
            return (), False
        found = self._where_of.get(id(kernel))
        if found is None:
            self._where_of, seen = {}, set()
            for path, k in plan_kernels(self.plan):
                key = tuple(id(p) for p in path)
                first = bool(path) and key not in seen
                seen.add(key)
                self._where_of[id(k)] = (path, first)
            found = self._where_of.setdefault(id(kernel), ((), False))
        return found

    def kernel(self, kernel, seconds, read):
        now = time.perf_counter()
        wall, self._mark = now - self._mark, now
        path, first = self._where(kernel)
        inside = " > ".join(p.label for p in path)
        key = (inside or user_scope(kernel), user_op(kernel))
        self._kernel_time[key] += seconds / self.runs
        self._kernel_wall[key] += wall / self.runs
        self._kernel_calls[key] += 1
        self._kernels.setdefault(key, set()).add(id(kernel))
        row = self._per_kernel.setdefault(id(kernel), {
            "kernel": f"{inside} > {kernel.name}" if inside else kernel.name,
            "scope": key[0] or "(root)", "op": key[1], "calls": 0,
            "seconds": 0.0, "wall_seconds": 0.0})
        row["calls"] += 1 / self.runs
        row["seconds"] += seconds / self.runs
        row["wall_seconds"] += wall / self.runs
        for depth in range(1, len(path) + 1):
            part = path[depth - 1]
            label = " > ".join(p.label for p in path[:depth])
            loop = self._parts.setdefault((label, part.types), {
                "part": label, "op": part.op, "node": part.node, "steps": 0.0,
                "kernels": set(), "seconds": 0.0, "wall_seconds": 0.0})
            loop["kernels"].add(id(kernel))
            loop["seconds"] += seconds / self.runs
            loop["wall_seconds"] += wall / self.runs
            if first and depth == len(path):
                loop["steps"] += 1 / self.runs

    @property
    def loops(self) -> list:
        """One row per loop's or branch's plan, in run order: part (its label, as the
        rows' scope), op, node, steps per run, kernels, GPU and wall seconds per run
        (its kernels', nested plans' included) and per step."""
        out = []
        for r in self._parts.values():
            steps = round(r["steps"], 6)
            out.append({**r, "steps": steps, "kernels": len(r["kernels"]),
                        "seconds_per_step": r["seconds"] / steps if steps else 0.0,
                        "wall_seconds_per_step": r["wall_seconds"] / steps if steps
                        else 0.0})
        return out

    @property
    def rows(self) -> list:
        rows = [{"scope": scope or "(root)", "op": op, "kernels": len(self._kernels[key]),
                 "calls": round(self._kernel_calls[key] / self.runs),
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
        counted = "calls" if by == "kernel" else "kernels"
        lines = [f"{first:<28} {'op':<28} {counted:>7} {'GPU ms':>9} {'wall ms':>9} "
                 f"{'share':>6}"]
        rows = self.kernel_rows if by == "kernel" else self.rows
        for r in rows:
            count = round(r["calls"]) if by == "kernel" else r["kernels"]
            # a kernel inside a loop: its name, at the end, is what must show
            label = r["kernel"] if by == "kernel" else r["scope"]
            label = _fit_left(label, 28) if by == "kernel" or " > " in label \
                else _fit(label, 28)
            lines.append(f"{label:<28} {_fit(r['op'], 28):<28} {count:>7} "
                         f"{r['seconds'] * 1e3:>9.3f} {r['wall_seconds'] * 1e3:>9.3f} "
                         f"{r['wall_seconds'] / total:>6.1%}")
        if self.loops:
            lines.append(f"{'inside loops and branches':<28} {'steps per run':>28} "
                         f"{'kernels':>7} {'GPU ms':>9} {'wall ms':>9}  (per step)")
            for r in self.loops:
                lines.append(f"{_fit_left(r['part'], 28):<28} {r['steps']:>28g} "
                             f"{r['kernels']:>7} {r['seconds_per_step'] * 1e3:>9.3f} "
                             f"{r['wall_seconds_per_step'] * 1e3:>9.3f}")
            lines.append("  (per step: the kernels of one run of that plan, its nested plans' "
                         "included; a while_loop's steps are its condition's tests)")
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


def _fit_left(text: str, width: int) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1):]


def timed_runs(run_observed, runs: int, profile: Profile):
    for _ in range(runs):
        start = time.perf_counter()
        profile.start_run()
        run_observed(profile)
        profile.total += (time.perf_counter() - start) / runs
    return profile
