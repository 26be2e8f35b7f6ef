"""select_top_k: top_k_indices(top_k_rank(x), k) -> top_k_select(x) {k}.

ff.top_k builds the two ops (each element's rank, then the indices of ranks 0..k-1);
on GL ranking every element is quadratic in the row. One top_k_select lets the
lowering (codegen/top_k.py) choose how to find the k first places from x itself: the
two rank kernels for short rows, a radix select for long ones. The ranks stay where
something else reads them (a fetch, another op); otherwise they are dropped as dead."""
from __future__ import annotations

from .rewrite import rebuild


def select_top_k(graph, report):
    def transform(node, inputs, new, mapping):
        if node.op != "top_k_indices" or node.inputs[0].node.op != "top_k_rank":
            return None
        x = mapping[node.inputs[0].node.inputs[0]]
        report.append(f"top_k '{node.name}': top_k_select of k={node.attrs['k']} over "
                      f"{x.type}")
        return new.add_node("top_k_select", [x], {"k": node.attrs["k"]},
                            exact_name=node.name, scope=node.scope,
                            source=node.source).outputs
    return rebuild(graph, transform)
