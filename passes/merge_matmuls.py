"""merge_matmuls: sibling matmuls of one operand as one matmul over their weights side
by side (a transformer layer's q, k and v projections).

    q = x @ wq + bq;  k = x @ wk + bk;  v = x @ wv + bv

becomes

    qkv = x @ concat([wq, wk, wv], -1) + concat([bq, bk, bv])
    q = qkv[..., :Nq];  k = qkv[..., Nq:Nq + Nk];  v = qkv[..., Nq + Nk:]

so that one product (one blocked kernel and its stitch: more blocks, fewer draws)
computes all three, and fuse_epilogues makes the bias its epilogue. Siblings are
`matmul` nodes reading the same A (not transposed) with B a weight of equal K: a
rank-2 float32 constant or variable (or a view of one), not transposed. Constants
(an import with trainable=False) are concatenated here, one constant and no kernel;
otherwise the weights' concat reads only those: on GL it is a hoisted kernel, run once
per plan and again only when a variable changes (docs/RUNTIME.md "Hoisted kernels").
A variable the graph assigns (a training step's) would make it a kernel every run:
such a sibling is left alone, and the report says so (the merge would still compute
the same values: the matmul, concat and slices are ordinary ops, and gradients flow
through them). The bias (an `add` of a rank-1 weight of N elements, read only there) is merged where
every sibling has one; siblings with and without a bias are not merged together.

The slices are `strided_slice` nodes taking the names of the values they replace.
Merged only where fused_attention will read each slice in place (`q_columns`, ...,
passes/attention.py `heads_operands`): every sibling's value read only by a reshape
into heads that the attention reads as q, k or v, widths multiples of 4; a slice read
otherwise would be a kernel of its own, as many as the products saved. Every group
left alone says why. Tuning `matmul.merge_siblings` turns the pass off."""
from __future__ import annotations

import numpy as np

from ..ir.graph import Graph
from ..ir.ops.registry import get_op
from .attention import heads_operands
from .rewrite import FreshNames, consumers, without_dead_nodes


def _static(value) -> bool:
    """A constant or variable, or a view of one: what a hoisted kernel may read."""
    node = value.node
    if node.op in ("constant", "variable"):
        return True
    return get_op(node.op).kind == "view" and len(node.inputs) == 1 and \
        _static(node.inputs[0])


def _weight(value):
    """The variable node a static value reads, else None (a constant)."""
    node = value.node
    while node.op != "variable" and node.inputs:
        node = node.inputs[0].node
    return node if node.op == "variable" else None


def _bias(node, users, fetched):
    """The add of a rank-1 weight of N elements after matmul node, its only reader
    (None where there is none); (add node, bias value)."""
    out = node.outputs[0]
    readers = users.get(out, [])
    if out in fetched or len(readers) != 1 or readers[0].op != "add":
        return None
    add = readers[0]
    a, b = add.inputs
    bias = b if a is out else a
    if bias is out or bias.type.shape != (out.type.shape[-1],) or \
            bias.dtype != "float32" or not _static(bias) or \
            add.outputs[0].type.shape != out.type.shape:
        return None
    return add, bias


def _read_in_place(node, users, fetched, heads):
    """Why a slice of node's value would not be read in place (a string), or None:
    it must be read only by a reshape splitting its last axis into heads that the
    attention reads as q, k or v (passes/attention.py heads_operands), its width a
    multiple of 4."""
    out = node.outputs[0]
    readers = users.get(out, [])
    if out in fetched or len(readers) != 1 or readers[0].op != "reshape":
        return f"'{node.name}' is not read only by a reshape into heads"
    split = readers[0].outputs[0]
    if split not in heads or split.type.shape[:-2] != out.type.shape[:-1]:
        return f"'{readers[0].name}' is no q, k or v of a fused attention"
    if out.type.shape[-1] % 4:
        return f"'{node.name}' is {out.type.shape[-1]} wide, not a multiple of 4"
    return None


def _candidate(node, assigned):
    """Why node is no sibling (a string), or None."""
    if node.op != "matmul" or node.attrs["transpose_a"] or node.attrs["transpose_b"]:
        return "not a matmul of an untransposed weight"
    a, b = node.inputs
    if a is b or b.type.rank != 2 or not b.type.is_static or b.dtype != "float32" or \
            a.dtype != "float32" or not _static(b):
        return "its B is no rank-2 float32 weight (a constant or variable)"
    var = _weight(b)
    if var is not None and var in assigned:
        return f"its weight '{var.name}' is assigned in this graph (trained)"
    return None


def merge_matmuls(graph, report, tuning=None):
    """Sibling matmuls → one matmul over concatenated weights + slices (see module)."""
    if tuning is not None and not tuning.matmul.merge_siblings:
        report.append("merge_matmuls is off (Tuning matmul.merge_siblings)")
        return graph
    users = consumers(graph)
    fetched = set(graph.outputs)
    assigned = {_weight(n.inputs[0]) for n in graph.nodes if n.op == "assign"}
    groups: dict = {}              # (A, K, has bias) -> [(matmul, add or None, bias)]
    for node in graph.nodes:
        if node.op != "matmul":
            continue
        why = _candidate(node, assigned)
        if why is not None:
            if sum(r.op == "matmul" for r in users.get(node.inputs[0], [])) > 1:
                report.append(f"matmul '{node.name}' not merged: {why}")
            continue
        found = _bias(node, users, fetched)
        add, bias = found if found else (None, None)
        key = (node.inputs[0], node.inputs[1].type.shape[0], add is not None)
        groups.setdefault(key, []).append((node, add, bias))
    # only where the attention reads each slice in place (its q, k or v in [B, L, H,
    # D], columns of whole texels): slices read otherwise would be kernels of their own
    heads = heads_operands(graph, tuning)
    merges = {}
    for key, members in groups.items():
        if len(members) < 2:
            continue
        why = next((w for w in (_read_in_place(add or mm, users, fetched, heads)
                                for mm, add, _ in members) if w), None)
        if why is None:
            merges[key] = members
        else:
            report.append(f"matmuls of '{key[0].node.name}' not merged ("
                          + ", ".join(f"'{(add or mm).name}'" for mm, add, _ in members)
                          + f"): {why}")
    if not merges:
        return graph
    replaced: dict = {}            # the node whose value a slice replaces -> (key, index)
    skip = set()
    for key, members in merges.items():
        for i, (mm, add, _) in enumerate(members):
            replaced[add or mm] = (key, i)
            if add is not None:
                skip.add(mm)
        report.append(f"merged {len(members)} matmuls of '{key[0].node.name}': "
                      + ", ".join(f"'{(add or mm).name}'" for mm, add, _ in members))

    names = FreshNames(graph)
    new = Graph(graph.name)
    new.custom_gradients = graph.custom_gradients
    mapping: dict = {}
    made: dict = {}                # key -> [slice values]

    def copy(node):
        outputs = new.add_copy(node, [mapping[v] for v in node.inputs]).outputs
        mapping.update(zip(node.outputs, outputs))

    # the weights first: every sibling's are then copied when the first one is met
    early = [n for n in graph.nodes if n.outputs and all(_static(v) for v in n.outputs)
             and all(_static(v) for v in n.inputs)]
    for node in early:
        copy(node)
    early = set(early)

    def merged(key, first):
        members = merges[key]
        where = dict(scope=first.scope, source=first.source)

        def add_node(op, inputs, attrs, base):
            if op == "concat" and all(v.node.op == "constant" for v in inputs):
                # constants (an inference import): the merged weights are one constant,
                # no kernel, and the parts' own constants go with their last reader
                value = np.concatenate([v.node.attrs["value"] for v in inputs],
                                       axis=attrs["axis"])
                op, inputs, attrs = "constant", [], {"value": value}
            return new.add_node(op, inputs, attrs, exact_name=names.fresh(new, base),
                                **where).outputs[0]
        stem = f"{members[0][0].name}/merged"
        weights = add_node("concat", [mapping[mm.inputs[1]] for mm, _, _ in members],
                           {"axis": 1}, f"{stem}_weights")
        value = add_node("matmul", [mapping[key[0]], weights],
                         {"transpose_a": False, "transpose_b": False}, stem)
        if key[2]:
            biases = add_node("concat", [mapping[b] for _, _, b in members], {"axis": 0},
                              f"{stem}_biases")
            value = add_node("add", [value, biases], None, f"{stem}_bias")
        slices, start = [], 0
        rank = value.type.rank
        for mm, add, _ in members:
            n = mm.inputs[1].type.shape[1]
            spec = tuple(("range", None, None, 1) for _ in range(rank - 1)) + \
                (("range", start, start + n, 1),)
            target = add or mm
            slices.append(new.add_node("strided_slice", [value], {"spec": spec},
                                       exact_name=target.name, scope=target.scope,
                                       source=target.source).outputs[0])
            start += n
        return slices

    for node in graph.nodes:
        if node in early or node in skip:
            continue
        if node in replaced:
            key, i = replaced[node]
            if key not in made:
                made[key] = merged(key, node)
            mapping[node.outputs[0]] = made[key][i]
            continue
        copy(node)
    new.outputs = [mapping[v] for v in graph.outputs]
    return without_dead_nodes(new)
