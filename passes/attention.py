"""fuse_attention: scaled dot-product attention as one fused_attention node.

The pattern, as torch, TensorFlow and Keras write it (batch and head dims in front):

    scores = matmul(q, k)              # transpose_b=True on k [..., Lk, D], or k as [..., D, Lk]
    scores = scores / c  (or * c)      # optional; c a constant of one element
    scores = scores + mask             # optional; mask broadcast to the scores (or
                                       # scores - mask, as Keras' Attention lowers them)
    p = softmax(scores, axis=-1)
    out = matmul(p, v)

is found from each softmax, walking back then forward one rule of PATTERN at a time.
Every value inside (the scores, each step after them, the probabilities) must have
that one consumer and not be fetched: fused, it never exists in memory. Every
softmax that does not become a fused_attention says why in the report. The kernel is
codegen/attention.py's (an online softmax over key tiles, one pass).

The Tuning's `matmul.attention_fuse` turns the pass off (where the graph keeps the
five ops and their kernels), and `matmul.attention_max_walk` bounds the walk the
kernel would take (batch x queries x keys x texels of a row of v): past it, the
unfused kernels were measured faster (docs/PERFORMANCE.md)."""
from __future__ import annotations

import numpy as np

from ..ir.ops.fused import heads_perm
from ..ir.ops.shape import transpose_perm
from .rewrite import consumers, rebuild


class Rejected(Exception):
    """A candidate that is not attention; its message says why."""


def _single_use(value, users, fetched, what):
    if value in fetched:
        raise Rejected(f"{what} '{value.node.name}' is fetched")
    readers = users.get(value, [])
    if len(readers) != 1:
        raise Rejected(f"{what} '{value.node.name}' has {len(readers)} consumers")


def _scalar_constant(value):
    """The float of a one-element float32 constant, else None."""
    node = value.node
    if node.op != "constant" or value.dtype != "float32" or value.type.size != 1:
        return None
    return float(np.asarray(node.attrs["value"]).reshape(()))


def _match(softmax, users, fetched, tuning=None) -> dict:
    """{q, k, v, mask, scale, divide, transpose_k, transpose_v, q_heads, k_heads,
    v_heads, out_heads, nodes} for the attention around this softmax; Rejected saying why not."""
    x = softmax.inputs[0]
    if softmax.attrs["axis"] not in (-1, x.type.rank - 1):
        raise Rejected(f"it is over axis {softmax.attrs['axis']}, not the last")
    if x.dtype != "float32" or not x.type.is_static:
        raise Rejected(f"its scores are {x.type}, not static float32")
    probs = softmax.outputs[0]
    _single_use(probs, users, fetched, "the probabilities")
    pv = users[probs][0]
    if pv.op != "matmul" or pv.inputs[0] is not probs or pv.attrs["transpose_a"]:
        raise Rejected(f"the probabilities go to {pv.op} '{pv.name}', not the left "
                       f"operand of a matmul")
    found = {"nodes": [softmax, pv], "mask": None, "scale": None, "divide": True,
             "subtract_mask": False,
             "v": pv.inputs[1], "transpose_v": pv.attrs["transpose_b"]}
    value = x
    if value.node.op in ("add", "sub"):              # the mask
        _single_use(value, users, fetched, "the masked scores")
        a, b = value.node.inputs
        # the scores: the operand of the add's shape that a scale or matmul computes
        # (scores - mask only: mask - scores is no mask)
        scores, mask = (b, a) if value.node.op == "add" and \
            b.node.op in ("div", "mul", "matmul") and \
            b.type.shape == value.type.shape else (a, b)
        found["subtract_mask"] = value.node.op == "sub"
        if scores.type.shape != value.type.shape or mask.dtype != "float32" \
                or mask.type.rank > value.type.rank or not mask.type.is_static:
            raise Rejected(f"{value.node.op} '{value.node.name}' is no mask added to the "
                           f"scores")
        found["mask"] = mask
        found["nodes"].insert(0, value.node)
        value = scores
    if value.node.op in ("div", "mul"):              # the scale
        _single_use(value, users, fetched, "the scaled scores")
        a, b = value.node.inputs
        if value.node.op == "mul" and _scalar_constant(a) is not None:
            a, b = b, a
        c = _scalar_constant(b)
        if c is None or a.type.shape != value.type.shape:
            raise Rejected(f"{value.node.op} '{value.node.name}' is not by a constant of "
                           f"one element")
        found.update(scale=c, divide=value.node.op == "div")
        found["nodes"].insert(0, value.node)
        value = a
    qk = value.node
    if qk.op != "matmul" or qk.attrs["transpose_a"]:
        raise Rejected(f"the scores come from {qk.op} '{qk.name}', not matmul(q, k)")
    _single_use(value, users, fetched, "the scores")
    q, k, v = qk.inputs[0], qk.inputs[1], found["v"]
    batch = q.type.shape[:-2]
    if any(t.type.shape[:-2] != batch or not t.type.is_static or t.dtype != "float32"
           for t in (q, k, v)):
        raise Rejected("q, k and v are not static float32 with the same batch dims "
                       f"({q.type}, {k.type}, {v.type})")
    found.update(q=q, k=k, transpose_k=qk.attrs["transpose_b"])
    found["nodes"].insert(0, qk)
    _fold_heads(found, users, fetched, tuning)
    return found


def _heads_transpose(node) -> bool:
    """Whether node swaps axes -3 and -2 of a value of rank 4 or more: [B, L, H, D] <->
    [B, H, L, D], the head split's transpose."""
    if node.op != "transpose" or node.inputs[0].type.rank < 4:
        return False
    rank = node.inputs[0].type.rank
    return transpose_perm(node.attrs, rank) == heads_perm(rank)


def _kt_heads_transpose(node) -> bool:
    """Whether node makes [B, L, H, D] into [B, H, D, L]: the head split and kᵀ in one."""
    if node.op != "transpose" or node.inputs[0].type.rank < 4:
        return False
    rank = node.inputs[0].type.rank
    return transpose_perm(node.attrs, rank) == \
        tuple(range(rank - 3)) + (rank - 2, rank - 1, rank - 3)


def _only_reader(value, users, fetched) -> bool:
    return value not in fetched and len(users.get(value, [])) == 1


def _fold_heads(found, users, fetched, tuning):
    """The head transposes of q, k, v (each read only by the attention) and the
    result's (its only reader) become the node's q_heads, k_heads, v_heads and
    out_heads: the kernels read q, k, v and write the result in [B, L, H, D] (Tuning
    matmul.attention_heads; q's and k's only where the scores are a product of their
    own, matmul.attention_qk_heads)."""
    found.update(q_heads=False, k_heads=False, v_heads=False, out_heads=False)
    if tuning is not None and not tuning.matmul.attention_heads:
        return
    q, k = found["q"], found["k"]
    if (tuning is None or tuning.matmul.attention_qk_heads) and q is not k:
        if _heads_transpose(q.node) and _only_reader(q, users, fetched):
            found.update(q=q.node.inputs[0], q_heads=True)
            found["nodes"].insert(0, q.node)
        if _only_reader(k, users, fetched) and (
                found["transpose_k"] and _heads_transpose(k.node) or
                not found["transpose_k"] and _kt_heads_transpose(k.node)):
            found.update(k=k.node.inputs[0], k_heads=True, transpose_k=True)
            found["nodes"].insert(0, k.node)
    v, pv = found["v"], found["nodes"][-1]
    if _heads_transpose(v.node) and not found["transpose_v"] and \
            _only_reader(v, users, fetched):
        found.update(v=v.node.inputs[0], v_heads=True)
        found["nodes"].insert(-1, v.node)
    out = pv.outputs[0]
    readers = users.get(out, [])
    if out not in fetched and len(readers) == 1 and _heads_transpose(readers[0]) and \
            readers[0].inputs[0] is out:
        found["out_heads"] = True
        found["nodes"].append(readers[0])


def _slice_columns(node):
    """(start, stop) where node slices a range of its input's last axis with step 1
    and keeps every other axis whole; else None."""
    if node.op != "strided_slice":
        return None
    spec, shape = node.attrs["spec"], node.inputs[0].type.shape
    if len(spec) != len(shape) or any(tuple(s) != ("range", None, None, 1)
                                      for s in spec[:-1]):
        return None
    kind, start, stop, step = spec[-1]
    width = shape[-1]
    if kind != "range" or step != 1 or width is None:
        return None
    start = 0 if start is None else start + width if start < 0 else start
    stop = width if stop is None else stop + width if stop < 0 else min(stop, width)
    return (start, stop) if 0 <= start < stop else None


def _fold_columns(found, users, fetched, tuning):
    """q, k or v in [B, L, H, D] (folded head transposes) made by a reshape of a slice
    of the last axis, each read only there: the node reads the sliced value itself,
    `<r>_columns` = (start, H, D) (a merged q, k, v projection, passes/merge_matmuls.py).
    Where the columns are whole texels (start and the row's width multiples of 4, as
    the kernels read them), and Tuning matmul.attention_columns."""
    found.update(q_columns=(), k_columns=(), v_columns=())
    if tuning is not None and not tuning.matmul.attention_columns:
        return
    for r in "qkv":
        value = found[r]
        if not found[f"{r}_heads"] or value.node.op != "reshape" or \
                not _only_reader(value, users, fetched):
            continue
        sliced = value.node.inputs[0]
        cut = _slice_columns(sliced.node)
        if cut is None or not _only_reader(sliced, users, fetched):
            continue
        x = sliced.node.inputs[0]
        heads, width = value.type.shape[-2:]
        if value.type.shape[:-2] != sliced.type.shape[:-1] or \
                heads * width != cut[1] - cut[0] or cut[0] % 4 or x.type.shape[-1] % 4:
            continue
        found.update({r: x, f"{r}_columns": (cut[0], heads, width)})
        found["nodes"][0:0] = [sliced.node, value.node]


def _check_walk(found, softmax, tuning):
    if tuning is None:             # no kernels to size (the numpy executor's pipeline)
        return
    scores = softmax.inputs[0].type
    dv = found["v"].type.shape[-2 if found["transpose_v"] else -1]
    walk = scores.size * (dv // 4 if dv % 4 == 0 else dv)
    if walk > tuning.matmul.attention_max_walk:
        raise Rejected(f"its walk ({walk} key steps) exceeds the Tuning's "
                       f"matmul.attention_max_walk ({tuning.matmul.attention_max_walk}), "
                       f"past which the unfused kernels are faster")


def _matches(graph, tuning, columns=False):
    """(softmax node, its match or the Rejected saying why not) per softmax of graph;
    with `columns`, q, k and v read as column slices where they can be."""
    users = consumers(graph)
    fetched = set(graph.outputs)
    for node in graph.nodes:
        if node.op != "softmax":
            continue
        try:
            found = _match(node, users, fetched, tuning)
            _check_walk(found, node, tuning)
            if columns:
                _fold_columns(found, users, fetched, tuning)
        except Rejected as why:
            yield node, why
            continue
        yield node, found


def heads_operands(graph, tuning=None) -> set:
    """The values fuse_attention would read as q, k or v in [B, L, H, D] (their head
    transposes folded): where passes/merge_matmuls.py's column slices are read in
    place."""
    return {found[r] for _, found in _matches(graph, tuning)
            if not isinstance(found, Rejected) for r in "qkv" if found[f"{r}_heads"]}


def fuse_attention(graph, report, tuning=None):
    """softmax(q kᵀ / c + mask) v → fused_attention where legal (see the module)."""
    if tuning is not None and not tuning.matmul.attention_fuse:
        report.append("fuse_attention is off (Tuning matmul.attention_fuse)")
        return graph
    matches: dict = {}             # the final matmul -> the match
    for node, found in _matches(graph, tuning, columns=True):
        if isinstance(found, Rejected):
            report.append(f"rejected softmax '{node.name}' for attention: {found}")
            continue
        matches[found["nodes"][-1]] = found
        report.append(f"fused attention '{found['nodes'][-1].name}': "
                      + ", ".join(f"{n.op} '{n.name}'" for n in found["nodes"]))

    def transform(node, inputs, new, mapping):
        found = matches.get(node)
        if found is None:
            return None
        operands = [mapping[found[r]] for r in ("q", "k", "v")]
        if found["mask"] is not None:
            operands.append(mapping[found["mask"]])
        attrs = {"scale": found["scale"], "divide": found["divide"],
                 "transpose_k": found["transpose_k"],
                 "transpose_v": found["transpose_v"],
                 "subtract_mask": found["subtract_mask"],
                 **{f"{r}_heads": found[f"{r}_heads"] for r in ("q", "k", "v", "out")},
                 **{f"{r}_columns": found[f"{r}_columns"] for r in "qkv"},
                 "nodes": tuple((m.name, m.op, m.source) for m in found["nodes"])}
        return new.add_node("fused_attention", operands, attrs, exact_name=node.name,
                            scope=node.scope, source=node.source).outputs

    skip = {n for found in matches.values() for n in found["nodes"][:-1]}
    return rebuild(graph, transform, skip)
