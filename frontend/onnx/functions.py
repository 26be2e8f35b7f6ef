"""ONNX local functions (ModelProto.functions) inlined before the import.

torch.onnx.export(..., dynamo=False, export_modules_as_functions=...) writes each
chosen module as a function called from the graph (a node whose domain and op type
name it); the rules read only ONNX's ops, so the calls are replaced by the functions'
bodies (onnx.inliner) before the walk. A model is untrusted: the node count the
inlining makes is computed first and held to MAX_NODES (a function calling another
twice, ten deep, is 1024 copies), and a function that calls itself is refused."""
from __future__ import annotations

from ..interop.limits import MAX_NODES
from .errors import OnnxImportError


def _graphs(node):
    """The subgraphs a node holds (If's branches, Loop's and Scan's bodies)."""
    for a in node.attribute:
        if a.HasField("g"):
            yield a.g
        yield from a.graphs


def inlined_node_count(model) -> int:
    """The nodes of the model's graphs once every call of a local function is replaced
    by its body; OnnxImportError for a function that calls itself."""
    functions = {(f.domain, f.name): f for f in model.functions}
    sizes: dict = {}

    def nodes(node_list, stack) -> int:
        total = 0
        for node in node_list:
            key = (node.domain, node.op_type)
            if key in functions:
                total += size(key, stack)
            else:
                total += 1 + sum(nodes(g.node, stack) for g in _graphs(node))
        return total

    def size(key, stack) -> int:
        if key in stack:
            raise OnnxImportError(f"local function '{key[1]}' (domain '{key[0]}') calls "
                                  f"itself: it cannot be inlined")
        if key not in sizes:
            sizes[key] = nodes(functions[key].node, stack | {key})
        return sizes[key]

    return nodes(model.graph.node, frozenset())


def inline_functions(onnx, model, max_nodes: int = MAX_NODES):
    """The model with its local functions inlined (the model itself when it has none)."""
    if not model.functions:
        return model
    count = inlined_node_count(model)
    if count > max_nodes:
        raise OnnxImportError(f"inlining the model's {len(model.functions)} local "
                              f"functions would make {count} nodes, more than {max_nodes}")
    from onnx import inliner  # optional: onnx (the caller has it)
    try:
        return inliner.inline_local_functions(model)
    except Exception as err:         # noqa: BLE001 -- a malformed function, never a traceback
        raise OnnxImportError(f"the model's local functions cannot be inlined: "
                              f"{type(err).__name__}: {str(err)[:300]}") from err
