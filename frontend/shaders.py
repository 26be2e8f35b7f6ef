"""Generated shaders as files a person (or a second compiler) can read.

Each kernel becomes one `.frag` file, numbered in run order (`03_k3_dense_relu.frag`),
holding exactly `kernel.source`: the GLSL with the header comment rendered from the
kernel's record (codegen/kernel.py) — the kernel and the graph nodes it implements
(every node a fusion folded in, with its scope and the user's file:line), each input's
and output's shape and texture layout, and the uniforms with the values each launch
sets. The file compiles exactly as the kernel does.

    fn = sess.compile([loss], feeds=[x]); fn(xb)
    fn.dump_shaders("shaders/")        # -> ["shaders/00_k0_dense_matmul.frag", ...]

A plan with control flow (runtime/control_flow.py) runs its kernels in parts: the
stages before each while_loop, cond or scan and after the last, and each loop's or
branch's plan of its own. Those plans' kernels go in a folder each, numbered in run
order with the stages' files (`01_loop.cond_and_body/`: a while_loop's condition and
body, compiled as one plan and replayed each iteration; `.body/` a scan's;
`.true_branch/`, `.false_branch/` a cond's), a nested loop's in a folder inside;
each folder's index.txt names the control node, its source line, what the plan runs
and its files. A branch that has not been taken yet has no plan: index.txt says so.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ..ir.errors import FragflowError


def user_op(kernel) -> str:
    """The op(s) the user wrote that a kernel runs: "relu", "matmul+add+relu", or a
    gpgpu_program's name — never an internal kernel op such as "fused_matmul"."""
    ops = [n.user_op for n in kernel.node_records]
    return "+".join(ops) if ops else kernel.op


def user_scope(kernel) -> str:
    """The name scope(s) of a kernel's nodes ("" is the root), distinct, in order."""
    scopes = []
    for n in kernel.node_records:
        if n.scope not in scopes:
            scopes.append(n.scope)
    return ", ".join(s or "(root)" for s in scopes) if scopes else (kernel.scope or "")


def shader_text(kernel) -> str:
    """The text of a kernel's .frag file: its source, header included."""
    return kernel.source


def file_name(index: int, kernel) -> str:
    return f"{index:02d}_{re.sub(r'[^A-Za-z0-9_.-]', '_', kernel.name)}.frag"


def select(kernels, wanted: str | None) -> list:
    """(index, kernel) pairs; wanted matches a kernel's name, its op, a program's name or
    the name of a node it implements. An unknown name raises, listing the kernels."""
    pairs = list(enumerate(kernels))
    if wanted is None:
        return pairs
    chosen = [(i, k) for i, k in pairs
              if wanted in (k.name, k.op) or wanted in (getattr(k, "nodes", ()) or ())]
    if not chosen:
        raise FragflowError(f"no kernel named {wanted!r} (nor one implementing a node or "
                            f"op of that name); the kernels are: "
                            f"{', '.join(k.name for k in kernels) or 'none'}")
    return chosen


def write_shaders(kernels, directory: str, only: str | None = None) -> list:
    """One .frag file per kernel (or per kernel `only` selects) in directory, which is
    created; returns the paths in run order."""
    os.makedirs(directory, exist_ok=True)
    paths = []
    for index, kernel in select(kernels, only):
        path = os.path.join(directory, file_name(index, kernel))
        with open(path, "w", encoding="utf-8") as f:
            f.write(shader_text(kernel))
        paths.append(path)
    return paths


# -- plans with control flow -------------------------------------------------------------
# what a sub-plan's purpose (runtime/control_flow.py's keys) holds, and its folder's name
ROLES = {"while": ("cond_and_body", "its condition and body compiled as one plan, run "
                   "once per iteration; the predicate is read back after each"),
         "scan": ("body", "its body, run once per step"),
         "true": ("true_branch", "the branch taken where the predicate holds"),
         "false": ("false_branch", "the branch taken where the predicate does not hold")}
_BRANCHES = {"cond": ("true", "false")}


@dataclass
class PlanPart:
    """The kernels of one loop's or branch's plan: node (the control node's name in
    the graph its plan runs), op, role (ROLES), types (its parameters'), entries
    (its kernels and its own parts, in run order) and source (the user's file:line)."""
    node: str
    op: str
    role: str
    about: str
    types: tuple = ()
    source: str = ""
    entries: list = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.node}.{self.role}"


def plan_entries(plan) -> list:
    """A plan's kernels in run order, with each loop's or branch's plan a PlanPart
    among them (a plan without control flow: its kernels). A ControlFlowPlan builds
    its loops' plans when they first run: run it once before asking."""
    controls = getattr(plan, "_controls", None)
    plans = getattr(plan, "_plans", None)
    if controls is None or plans is None:
        return list(plan.kernels)
    entries: list = []

    def stage(k, node=None):
        # the stage before control node k (the last: the fetches'), keyed by its
        # number or by the control node's name
        return [e for key, sub in plans.items()
                if (key[0] == "stage" and key[1] in (k, getattr(node, "name", None)))
                or (node is None and key[0] == "final") for e in plan_entries(sub.plan)]
    for k, (node, _) in enumerate(controls):
        entries += stage(k, node)
        for purpose in _BRANCHES.get(node.op, ("while" if node.op == "while_loop"
                                               else "scan",)):
            subs = [(key, sub) for key, sub in plans.items()
                    if key[:2] == (purpose, node.name)]
            role, about = ROLES[purpose]
            if not subs:
                entries.append(PlanPart(node.name, node.op, role, "not compiled: not run "
                                        "yet", source=node.source or ""))
            for key, sub in subs:
                entries.append(PlanPart(node.name, node.op, role, about,
                                        tuple(key[2]) if len(key) > 2 else (),
                                        node.source or "", plan_entries(sub.plan)))
    return entries + stage(len(controls))


def plan_kernels(plan) -> list:
    """[(PlanPart path, kernel)]: every kernel of a plan, parts' too, in run order;
    the path is () for the plan's own."""
    out = []

    def walk(entries, path):
        for e in entries:
            if isinstance(e, PlanPart):
                walk(e.entries, path + (e,))
            else:
                out.append((path, e))
    walk(plan_entries(plan), ())
    return out


def _matches(kernel, wanted) -> bool:
    return wanted is None or wanted in (kernel.name, kernel.op) or \
        wanted in (getattr(kernel, "nodes", ()) or ())


def write_plan_shaders(plan, directory: str, only: str | None = None) -> list:
    """write_shaders for a plan: its kernels' .frag files, each loop's or branch's
    plan in a folder of its own (see the module docstring); returns the paths of the
    .frag files in run order. Without control flow, exactly write_shaders."""
    entries = plan_entries(plan)
    if not any(isinstance(e, PlanPart) for e in entries):
        return write_shaders(entries, directory, only)
    every = [k for _, k in plan_kernels(plan)]
    if only is not None and not any(_matches(k, only) for k in every):
        select(every, only)          # raises, listing the kernels
    paths: list = []
    _write_entries(entries, directory, only, paths, None)
    return paths


def _kernels_in(entries) -> list:
    return [k for e in entries
            for k in (_kernels_in(e.entries) if isinstance(e, PlanPart) else [e])]


def _write_entries(entries, directory, only, paths, part) -> None:
    os.makedirs(directory, exist_ok=True)
    index = []
    if part is None:
        index.append("the kernels in run order; each loop's or branch's plan in a folder "
                     "of its own")
    else:
        index.append(f"{part.op} '{part.node}'" + (f" ({part.source})" if part.source
                                                   else "") + f": {part.about}")
        if part.types:
            index.append("parameters: " + ", ".join(str(t) for t in part.types))
    index.append("")
    seen: dict = {}
    for number, e in enumerate(entries):
        if isinstance(e, PlanPart):
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", e.label)
            seen[name] = seen.get(name, 0) + 1
            name = f"{number:02d}_{name}" + (f".{seen[name] - 1}" if seen[name] > 1 else "")
            index.append(f"{name + '/':<40} {e.op} '{e.node}': {e.about}")
            if e.entries and any(_matches(k, only) for k in _kernels_in(e.entries)):
                _write_entries(e.entries, os.path.join(directory, name), only, paths, e)
            continue
        if not _matches(e, only):
            continue
        path = os.path.join(directory, file_name(number, e))
        with open(path, "w", encoding="utf-8") as f:
            f.write(shader_text(e))
        paths.append(path)
        index.append(f"{os.path.basename(path):<40} {user_op(e)}  ({', '.join(e.nodes)})")
    with open(os.path.join(directory, "index.txt"), "w", encoding="utf-8") as f:
        f.write("\n".join(index) + "\n")
