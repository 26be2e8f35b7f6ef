"""Graphviz DOT text for a graph (networkx builds it; no graphviz install needed)."""
from __future__ import annotations


def graph_to_dot(graph) -> str:
    lines = [f'digraph "{graph.name}" {{', "  node [shape=box, fontname=monospace];"]
    for node in graph.nodes:
        label = f"{node.name}\\n{node.op} : " + ", ".join(str(v.type) for v in node.outputs)
        lines.append(f'  "{node.name}" [label="{label}"];')
    nx_graph = graph.to_networkx()
    for src, dst, data in nx_graph.edges(data=True):
        lines.append(f'  "{src}" -> "{dst}" [label="{data["type"]}"];')
    lines.append("}")
    return "\n".join(lines)
