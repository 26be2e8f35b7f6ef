"""Removing layout transposes: the ones an ONNX import puts around every convolution
(NCHW -> NHWC -> conv -> NCHW), and any others that cancel.

Rules, applied until nothing changes:
- transpose(transpose(x)): one transpose, or none when the two cancel;
- a transpose that moves only axes of size 1: a reshape (a view: no kernel runs);
- an elementwise op whose inputs are transposed by the same permutation P:
  op(T_P(a), T_P(b)) = T_P(op(a, b)). Its other inputs must cost nothing to permute the
  other way: constants (permuted here), scalars, and tensors for which the inverse
  permutation only moves axes of size 1 (a per-channel (C, 1, 1) vector: a reshape);
- sum/mean/max/min/prod of T_P(x): the reduction of x over the matching axes, then T;
- concat of inputs all transposed by P: the concat of the inputs, then T_P;
- pad (or mirror_pad) of T_P(x): x padded on the matching axes, then T_P (an ONNX
  model's NCHW pad between two convolutions, which fold_pads then folds into the
  second's padding).
A transpose is pushed down only when every reader of it is one of those (so the
original transpose dies), which keeps a pass from adding kernels. After it, the
transposes between two convolutions of an imported CNN meet and cancel. Every rewrite
is reported (fusion_report, `fragflow dump --after`).
"""
from __future__ import annotations

import numpy as np

from ..ir.ops.registry import ops_where
from ..ir.ops.shape import transpose_perm
from .rewrite import FreshNames, consumers, rebuild

MAX_ROUNDS = 16
# the ops a transpose moves past: pointwise ones (OpDef.pointwise), and the reductions
# over `axis` (with keepdims) that combine their elements unshifted (OpDef.reduction: sum,
# mean, max, min, prod), whose reduction of T_P(x) is x's over the axes P moves them to.
# (the shifted logsumexp and variance would commute too; the pass leaves them out.)
POINTWISE = ops_where(lambda opdef: opdef.pointwise)
REDUCTIONS = ops_where(lambda opdef: opdef.reduction is not None
                       and "keepdims" in opdef.attrs and not opdef.reduction.shift)


def _pointwise(op: str) -> bool:
    return op in POINTWISE


def _inverse(perm):
    return tuple(int(i) for i in np.argsort(perm))


def _only_unit_axes_move(shape, perm) -> bool:
    """A transpose of shape by perm keeps every axis longer than 1 in its order."""
    moved = [p for p in perm if shape[p] != 1]
    return moved == sorted(moved)


def _transpose_perm(value):
    node = value.node
    return transpose_perm(node.attrs, value.type.rank) if node.op == "transpose" else None


PADS = ("pad", "mirror_pad")


def _reader_ok(node) -> bool:
    return node.op in ("transpose", "concat") or node.op in PADS or \
        _pointwise(node.op) or node.op in REDUCTIONS


def _one_round(graph, report):
    readers = consumers(graph)
    fetched = set(graph.outputs)
    names = FreshNames(graph)

    def dies(value) -> bool:
        """value (of the graph being rewritten: its copy in the new graph is the
        transpose) is read only by nodes this pass rewrites, and not fetched."""
        return value not in fetched and all(_reader_ok(r) for r in readers.get(value, ()))

    def add(new, op, inputs, attrs, node, base=None):
        return new.add_node(op, inputs, attrs,
                            exact_name=base or names.fresh(new, node.name, "layout"),
                            scope=node.scope, source=node.source).outputs[0]

    def transform(node, inputs, new, mapping):
        op = node.op
        if op == "transpose":
            return _transpose_rule(node, inputs, new, add, report)
        if _pointwise(op) and len(node.outputs) == 1:
            return _pointwise_rule(node, inputs, new, add, report, dies, names)
        if op in REDUCTIONS:
            return _reduce_rule(node, inputs, new, add, report, dies, names)
        if op == "concat":
            return _concat_rule(node, inputs, new, add, report, dies, names)
        if op in PADS:
            return _pad_rule(node, inputs, new, add, report, dies, names)
        return None

    return rebuild(graph, transform)


def _transpose_rule(node, inputs, new, add, report):
    x = inputs[0]
    rank = x.type.rank
    perm = transpose_perm(node.attrs, rank)
    inner = _transpose_perm(x)
    if inner is not None:
        source = x.node.inputs[0]
        merged = tuple(inner[p] for p in perm)
        if merged == tuple(range(rank)):
            report.append(f"cancelled transposes '{x.node.name}' and '{node.name}'")
            return [source]
        report.append(f"merged transposes '{x.node.name}' and '{node.name}'")
        x, perm = source, merged
        return [add(new, "transpose", [x], {"perm": perm}, node, base=node.name)]
    if perm == tuple(range(rank)):
        report.append(f"removed identity transpose '{node.name}'")
        return [x]
    if x.type.is_static and _only_unit_axes_move(x.shape, perm):
        out_shape = tuple(x.shape[p] for p in perm)
        report.append(f"transpose '{node.name}' moves only axes of size 1: a reshape")
        return [add(new, "reshape", [x], {"shape": out_shape}, node, base=node.name)]
    return None


def _permuted_operand(value, out_rank, inverse, new, add, node):
    """value (not transposed) permuted by inverse, when that is free; else None."""
    shape = (1,) * (out_rank - value.type.rank) + tuple(value.shape)
    if value.type.rank == 0:
        return value
    if value.node.op == "constant":
        array = np.asarray(value.node.attrs["value"]).reshape(shape).transpose(inverse)
        return add(new, "constant", [], {"value": np.ascontiguousarray(array)}, node)
    if any(d is None for d in shape) or not _only_unit_axes_move(shape, inverse):
        return None
    return add(new, "reshape", [value], {"shape": tuple(shape[p] for p in inverse)}, node)


def _below(node, new_inputs, attrs, perm, new, add, report, names):
    """node's op on the untransposed inputs (a fresh name), then the transpose by perm
    under node's name."""
    inner = new.add_node(node.op, new_inputs, attrs,
                         exact_name=names.fresh(new, node.name, "nhwc"),
                         scope=node.scope, source=node.source).outputs[0]
    report.append(f"moved a transpose below {node.op} '{node.name}'")
    return [add(new, "transpose", [inner], {"perm": perm}, node, base=node.name)]


def _pointwise_rule(node, inputs, new, add, report, dies, names):
    out_rank = node.outputs[0].type.rank
    perms = {_transpose_perm(v) for v in inputs if _transpose_perm(v) is not None
             and v.type.rank == out_rank}
    if len(perms) != 1:
        return None
    perm = perms.pop()
    if not all(dies(old) for old, v in zip(node.inputs, inputs)
               if _transpose_perm(v) == perm):
        return None
    inverse = _inverse(perm)
    new_inputs = []
    for v in inputs:
        if _transpose_perm(v) == perm and v.type.rank == out_rank:
            new_inputs.append(v.node.inputs[0])
            continue
        permuted = _permuted_operand(v, out_rank, inverse, new, add, node)
        if permuted is None:
            return None
        new_inputs.append(permuted)
    return _below(node, new_inputs, dict(node.attrs), perm, new, add, report, names)


def _reduce_rule(node, inputs, new, add, report, dies, names):
    x = inputs[0]
    perm = _transpose_perm(x)
    if perm is None or not dies(node.inputs[0]):
        return None
    rank = x.type.rank
    axes = node.attrs["axis"]
    axes = tuple(range(rank)) if axes is None else \
        tuple(sorted(a % rank for a in ((axes,) if isinstance(axes, int) else axes)))
    source_axes = tuple(sorted(perm[a] for a in axes))
    attrs = dict(node.attrs)
    attrs["axis"] = source_axes
    inner = new.add_node(node.op, [x.node.inputs[0]], attrs,
                         exact_name=names.fresh(new, node.name, "nhwc"),
                         scope=node.scope, source=node.source).outputs[0]
    if attrs["keepdims"]:
        out_perm = perm
    else:
        kept = [p for i, p in enumerate(perm) if i not in axes]
        out_perm = tuple(int(r) for r in np.argsort(np.argsort(kept)))
    report.append(f"moved a transpose below {node.op} '{node.name}'")
    if out_perm == tuple(range(len(out_perm))):
        return [new.add_node("identity", [inner], {}, exact_name=node.name,
                             scope=node.scope, source=node.source).outputs[0]]
    return [add(new, "transpose", [inner], {"perm": out_perm}, node, base=node.name)]


def _concat_rule(node, inputs, new, add, report, dies, names):
    """concat(T_P(a), T_P(b), axis) = T_P(concat(a, b, axis=P[axis])) (SqueezeNet's
    fire modules, Inception's branches)."""
    perms = {_transpose_perm(v) for v in inputs}
    if len(perms) != 1 or None in perms or not all(dies(v) for v in node.inputs):
        return None
    perm = perms.pop()
    rank = len(perm)
    attrs = dict(node.attrs)
    attrs["axis"] = perm[attrs["axis"] % rank]
    return _below(node, [v.node.inputs[0] for v in inputs], attrs, perm, new, add, report,
                  names)


def _pad_rule(node, inputs, new, add, report, dies, names):
    """pad(T_P(x), paddings) = T_P(pad(x, paddings')), paddings'[P[i]] = paddings[i]."""
    x = inputs[0]
    perm = _transpose_perm(x)
    if perm is None or not dies(node.inputs[0]):
        return None
    paddings = node.attrs["paddings"]
    source = [None] * len(perm)
    for i, p in enumerate(perm):
        source[p] = tuple(paddings[i])
    return _below(node, [x.node.inputs[0]], dict(node.attrs, paddings=tuple(source)), perm,
                  new, add, report, names)


def remove_layout_transposes(graph, report):
    """Cancel, merge and sink transposes (see the module docstring) until none moves."""
    for _ in range(MAX_ROUNDS):
        before = len(report)
        graph = _one_round(graph, report)
        if len(report) == before:
            break
    return graph
