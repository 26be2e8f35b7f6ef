"""The verifier: a graph's edges, names and types are consistent. Runs after every
pass under test (FRAGFLOW_VERIFY=1, set by the test suite)."""
from __future__ import annotations

from ..ir.errors import GraphError
from ..ir.graph import Graph
from ..ir.ops.registry import get_op


class VerificationError(GraphError):
    """A pass left the graph inconsistent: a fragflow bug."""


def verify(graph: Graph) -> Graph:
    seen_values, names = set(), set()
    for node in graph.nodes:
        where = node.where()
        if node.name in names:
            raise VerificationError(f"{where}: duplicate node name")
        names.add(node.name)
        if node.graph is not graph:
            raise VerificationError(f"{where}: belongs to another graph")
        for v in node.inputs:
            if v not in seen_values:
                raise VerificationError(f"{where}: input '{v.name}' is not defined before "
                                        f"it (dangling edge or cycle)")
        try:
            types = get_op(node.op).infer_types([v.type for v in node.inputs], node.attrs)
        except Exception as err:
            raise VerificationError(f"{where}: types no longer infer: {err}") from None
        if [str(t) for t in types] != [str(v.type) for v in node.outputs]:
            raise VerificationError(f"{where}: outputs typed "
                                    f"{[str(v.type) for v in node.outputs]} but its inputs "
                                    f"give {[str(t) for t in types]}")
        seen_values.update(node.outputs)
    for v in graph.outputs:
        if v not in seen_values:
            raise VerificationError(f"graph output '{v.name}' is not in the graph")
    return graph
