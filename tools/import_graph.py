"""fragflow's modules and their imports: the cycles among top-level imports, and the
imports inside functions, each with the reason on its line.

A top-level import is one that runs when its module is imported (module level, class
bodies, `try`/`if` blocks; not `if TYPE_CHECKING:`). `from . import x` names the
submodule x where one exists, else the package; importing a module also imports the
packages above it that are not above the importer. A function-level import is allowed
where a comment on its line gives the reason: PyOpenGL binds its platform at the first
`import OpenGL`, so those wait for a context; optional packages (onnx, torch, ray, ...)
are imported where they are needed, so fragflow imports without them.

    python -m fragflow.tools.import_graph            # the cycles, then the counts
    python -m fragflow.tools.import_graph --inside   # every function-level import
"""
from __future__ import annotations

import argparse
import ast
import os
import sys
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the package folders (pyproject.toml's [tool.setuptools.package-dir])
FOLDERS = {"fragflow": "fragflow", "frontend": "fragflow.frontend", "ir": "fragflow.ir",
           "passes": "fragflow.passes", "codegen": "fragflow.codegen",
           "runtime": "fragflow.runtime", "tools": "fragflow.tools",
           "distributed": "fragflow.distributed"}


@dataclass(frozen=True)
class Inside:
    """One import inside a function."""
    module: str           # the importing module
    path: str             # its file, relative to the repository root
    line: int
    imported: str         # the module it imports ("fragflow.codegen.lower", "onnx")
    reason: str           # the comment on its line, "" where there is none


def modules(root: str = ROOT) -> dict:
    """{module name: file path} of every fragflow module."""
    out = {}
    for folder, package in FOLDERS.items():
        base = os.path.join(root, folder)
        for path, dirs, files in os.walk(base):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            rel = os.path.relpath(path, base)
            prefix = package if rel == "." else f"{package}.{rel.replace(os.sep, '.')}"
            for name in sorted(files):
                if name.endswith(".py"):
                    out[prefix if name == "__init__.py" else
                        f"{prefix}.{name[:-3]}"] = os.path.join(path, name)
    return out


def _targets(node, module: str, is_package: bool, known: dict) -> list:
    """The modules an import statement names (fragflow's, or the outside top name)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        parts = module.split(".")
        base = parts if is_package else parts[:-1]
        base = base[:len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    out = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        out.append(sub if sub in known else target)
    return out


def _packages(module: str) -> set:
    """The packages above a module: fragflow.ir.ops.conv -> fragflow, fragflow.ir, ..."""
    parts = module.split(".")
    return {".".join(parts[:k]) for k in range(1, len(parts))}


def _reason(lines: list, number: int) -> str:
    """The comment on an import's first line, else the comment line just above it; a
    bare `noqa` is no reason."""
    line, above = lines[number - 1], lines[number - 2].strip() if number > 1 else ""
    comment = line.partition("#")[2].strip() if "#" in line else ""
    if not comment and above.startswith("#"):
        comment = above.lstrip("#").strip()
    return "" if comment.lower().startswith("noqa") and ")" not in comment else comment


def _type_checking(test) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def scan(root: str = ROOT):
    """({module: set of fragflow modules it imports at top level}, [Inside, ...])."""
    known = modules(root)
    graph, inside = {}, []
    for module, path in known.items():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        lines = text.splitlines()
        is_package = path.endswith("__init__.py")
        edges = graph.setdefault(module, set())

        def visit(node, in_function, module=module, path=path, lines=lines,
                  is_package=is_package, edges=edges):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets = _targets(node, module, is_package, known)
                if in_function:
                    reason = _reason(lines, node.lineno)
                    for target in dict.fromkeys(targets):
                        inside.append(Inside(module, os.path.relpath(path, root),
                                             node.lineno, target, reason))
                else:
                    edges.update(t for t in targets if t in known and t != module)
                    # importing a module runs its packages' __init__ first, those
                    # not already running for this module
                    edges.update(p for t in targets for p in _packages(t) - _packages(module)
                                 if p in known and p != module)
                return
            if isinstance(node, ast.If) and _type_checking(node.test):
                for child in node.orelse:
                    visit(child, in_function)
                return
            function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                         ast.Lambda))
            for child in ast.iter_child_nodes(node):
                visit(child, in_function or function)

        visit(ast.parse(text, path), False)
    return graph, inside


def cycles(graph: dict) -> list:
    """The import cycles: each strongly connected set of two or more modules, as one
    shortest cycle through its first module (sorted), so a cycle is named once."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def connect(v):                    # Tarjan's algorithm, iterative over successors
        work = [(v, iter(sorted(graph.get(v, ()))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, successors = work[-1]
            for w in successors:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    members = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        members.append(w)
                        if w == node:
                            break
                    if len(members) > 1:
                        out.append(sorted(members))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return sorted(_shortest_cycle(graph, members) for members in out)


def _shortest_cycle(graph: dict, members: list) -> list:
    """A shortest path from members[0] back to itself inside the set."""
    start, inside = members[0], set(members)
    previous, frontier = {start: None}, [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(graph.get(v, ())):
                if w == start:
                    path = [v]
                    while previous[path[-1]] is not None:
                        path.append(previous[path[-1]])
                    return list(reversed(path)) + [start]
                if w in inside and w not in previous:
                    previous[w] = v
                    nxt.append(w)
        frontier = nxt
    return members


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--inside", action="store_true",
                        help="list every import inside a function")
    args = parser.parse_args(argv)
    graph, inside = scan()
    found = cycles(graph)
    for cycle in found:
        print("cycle: " + " -> ".join(cycle))
    if args.inside:
        for item in inside:
            print(f"{item.path}:{item.line}: {item.imported}"
                  + (f"  # {item.reason}" if item.reason else "  (no reason)"))
    statements = {(item.path, item.line): item for item in inside}
    without = sum(1 for item in statements.values() if not item.reason)
    print(f"{len(found)} import cycles; {len(statements)} import statements inside "
          f"functions, {without} without a reason")
    return 0


if __name__ == "__main__":
    sys.exit(main())
