"""Graphviz DOT text for a graph, and SVG through Graphviz's `dot` command when it is
installed (Debian: graphviz). Nodes are coloured by op family, edges labelled with the
types they carry, and groups of nodes (the nodes one fused kernel runs) outlined. A
control-flow node (while_loop, cond, scan) is drawn as a cluster holding the node and
a cluster per sub-graph (cond, body, true_branch...), nested loops nested; the nodes
inside have ids "<control node>:<sub-graph>:<name>" (names repeat across bodies)."""
from __future__ import annotations

import shutil
import subprocess

from .errors import FragflowError
from .ops.registry import get_op

# op family (ir/ops/<family>.py) -> fill colour; the HTML view uses the same
FAMILY_COLORS = {
    "state": "#e8e8e8",         # placeholders, variables, constants, assign
    "elementwise": "#cfe8ff",
    "fused": "#b9d7f7",
    "reduce": "#ffe2b3",
    "matmul": "#ffc9c9",
    "conv": "#f7c6e4",
    "shape": "#e6f5d0",
    "structure": "#d5f0e3",
    "autodiff_ops": "#e3d7f7",
    "image": "#fff3b0",
    "random": "#f0e0cc",
    "program": "#ffd59e",
    "control": "#f2d0a4",       # while_loop, cond, scan: their sub-graphs drawn inside
}
OTHER_COLOR = "#ffffff"
DOT_MISSING = ("the svg format needs Graphviz's `dot` command, which is not on PATH "
               "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz); "
               "--format dot writes the DOT text and --format html needs nothing")


def family_of(op: str) -> str:
    try:
        return get_op(op).family
    except FragflowError:
        return "other"


def _quote(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def graph_to_dot(graph, groups: dict | None = None, types: dict | None = None) -> str:
    """DOT text. groups: {label: [node names]} drawn as outlined clusters (a fused
    kernel's nodes); types: {value name: type text} shown on edges in place of the
    graph's own (the concrete shapes a compiled run used)."""
    types = types or {}
    lines = [f"digraph {_quote(graph.name)} {{",
             "  node [shape=box, style=\"rounded,filled\", fontname=monospace, "
             "fontsize=10];",
             "  edge [fontname=monospace, fontsize=9];"]
    grouped = {}
    for label, names in (groups or {}).items():
        members = [n for n in names if n in graph]
        if len(members) > 1:
            for name in members:
                grouped.setdefault(name, label)
    clusters = [0]
    for node in graph.nodes:
        if node.name in grouped:
            continue
        if subgraphs(node):
            lines += _control_cluster(node, node.name, types, clusters, "  ")
            continue
        lines.append("  " + _node_line(node, types))
    for index, (label, names) in enumerate((groups or {}).items()):
        members = [n for n in names if grouped.get(n) == label]
        if len(members) < 2:
            continue
        lines.append(f"  subgraph cluster_{index} {{")
        lines.append(f"    label={_quote(label)}; style=dashed; color=\"#3060c0\"; "
                     f"fontname=monospace; fontsize=10;")
        for name in members:
            lines.append("    " + _node_line(graph.node(name), types))
        lines.append("  }")
    nx_graph = graph.to_networkx()
    for src, dst, data in nx_graph.edges(data=True):
        label = types.get(data["value"], data["type"])
        lines.append(f"  {_quote(src)} -> {_quote(dst)} [label={_quote(label)}];")
    lines.append("}")
    return "\n".join(lines)


def _node_line(node, types, node_id=None) -> str:
    out = ", ".join(types.get(v.name, str(v.type)) for v in node.outputs)
    label = f"{node.name}\\n{node.op} : {out}"
    color = FAMILY_COLORS.get(family_of(node.op), OTHER_COLOR)
    tooltip = node.source or node.name
    return (f"{_quote(node_id or node.name)} [label=\"{label.replace(chr(34), chr(39))}\", "
            f"fillcolor=\"{color}\", tooltip={_quote(tooltip)}];")


def _control_cluster(node, node_id, types, clusters, indent) -> list:
    """A control node as a cluster: the node itself, then each sub-graph as a cluster
    of its own with its nodes and edges (ids prefixed by the node's id and the
    sub-graph's attr name), nested control nodes as clusters inside."""
    clusters[0] += 1
    lines = [f"{indent}subgraph cluster_cf{clusters[0]} {{",
             f"{indent}  label={_quote(f'{node.op} {node.name}')}; style=\"rounded,filled\"; "
             f"fillcolor=\"#fbf3e8\"; color=\"#b07020\"; fontname=monospace; "
             f"fontsize=10;",
             f"{indent}  " + _node_line(node, types, node_id)]
    for key, sub in subgraphs(node):
        clusters[0] += 1
        prefix = f"{node_id}:{key}:"
        lines += [f"{indent}  subgraph cluster_cf{clusters[0]} {{",
                  f"{indent}    label={_quote(key)}; style=\"rounded,filled\"; "
                  f"fillcolor=\"#ffffff\"; color=\"#b07020\"; fontname=monospace; "
                  f"fontsize=10;"]
        for inner in sub.nodes:
            if subgraphs(inner):
                lines += _control_cluster(inner, prefix + inner.name, {}, clusters,
                                          indent + "    ")
            else:
                lines.append(f"{indent}    " + _node_line(inner, {}, prefix + inner.name))
        for inner in sub.nodes:
            for v in inner.inputs:
                lines.append(f"{indent}    {_quote(prefix + v.node.name)} -> "
                             f"{_quote(prefix + inner.name)} [label={_quote(str(v.type))}];")
        lines.append(f"{indent}  }}")
    lines.append(f"{indent}}}")
    return lines


def subgraphs(node) -> list:
    """A node's sub-graphs by attr name (ir/ops/control.py's subgraphs)."""
    from .ops.control import subgraphs as of  # a cycle: ir/graph.py imports this module
    return of(node)


def dot_available() -> bool:
    return shutil.which("dot") is not None


def dot_to_svg(dot_text: str) -> str:
    """SVG from DOT text with Graphviz; FragflowError (saying what to install) without."""
    exe = shutil.which("dot")
    if exe is None:
        raise FragflowError(DOT_MISSING)
    result = subprocess.run([exe, "-Tsvg"], input=dot_text, capture_output=True,
                            text=True, timeout=120)
    if result.returncode != 0:
        raise FragflowError(f"Graphviz's dot failed: {result.stderr.strip()}")
    return result.stdout


def graph_to_svg(graph, groups: dict | None = None, types: dict | None = None) -> str:
    return dot_to_svg(graph_to_dot(graph, groups, types))
