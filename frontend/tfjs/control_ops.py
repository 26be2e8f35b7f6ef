"""Rules for TF1 control flow, TensorArrays, TensorLists and the ops whose output shape
depends on the data (docs/TFJS.md, "Staged models").

These run in a staged import (staged.py): a Switch's predicate is known (at import, or
as a guard of the plan) and routes its value to one output, the other one dead; Merge
(importer.import_with) takes its live input; a TF1 loop is unrolled by the importer
(Importer.run_loop), so a TensorArray's or TensorList's index is known in each
iteration and the array is a Python list of the graph's tensors (staged.TensorSeq).
NonMaxSuppression and Where run on the host, as TF.js runs them (staged.py's
non_max_suppression and where), their results the next stage's placeholders.
"""
from __future__ import annotations

import numpy as np

import fragflow.frontend as F

from .importer import TF_DTYPES
from .op_table import rule
from .staged import DEAD, TensorSeq, non_max_suppression, where

FLOW = np.zeros((), np.float32)       # a TensorArray's flow: only orders its reads and writes


def _dtype(a, key):
    value = a.get(key)
    return TF_DTYPES.get(value[1], "float32") if isinstance(value, tuple) else "float32"


def _pred(ctx, x, what):
    value = ctx.concrete(x, what)
    if np.size(value) != 1:
        raise ctx.error(f"{what} has {np.size(value)} values (one bool expected)")
    return bool(np.asarray(value).reshape(-1)[0])


@rule("Enter")
def enter(ctx, node, x, a):
    a.get("frame_name")
    a.get("is_constant")
    a.get("parallel_iterations")
    return [x[0]]


@rule("Exit", "NextIteration")
def exit_(ctx, node, x, a):
    return [x[0]]


@rule("Switch")
def switch(ctx, node, x, a):
    """Output 0 carries the value where the predicate is false, output 1 where true."""
    if _pred(ctx, x[1], "the Switch's predicate"):
        return [DEAD, x[0]]
    return [x[0], DEAD]


@rule("Merge", "LoopCond")
def not_here(ctx, node, x, a):      # the importer handles them (import_with, run_loop)
    raise ctx.error(f"a {node.op} outside the structure TF1 control flow gives it")


def _seq(ctx, x, what="the TensorArray or TensorList"):
    if not isinstance(x, TensorSeq):
        raise ctx.error(f"{what} input is not a TensorArray or TensorList")
    return x


def _index(ctx, seq, x):
    i = int(ctx.concrete(x, "the index").reshape(-1)[0])
    if not 0 <= i < len(seq.items):
        raise ctx.error(f"index {i} is outside the {len(seq.items)} elements")
    return i


def _elements(ctx, v):
    if isinstance(v, np.ndarray):
        return list(v)
    v = ctx.tensor(v)
    if v.shape[0] is None:
        raise ctx.error("the tensor's first dim must be known to split it into elements")
    return list(F.unstack(v, num=v.shape[0], axis=0)) if v.shape[0] else []


def _stack(ctx, seq, indices, element_shape):
    items = []
    for i in indices:
        if not 0 <= i < len(seq.items):
            raise ctx.error(f"index {i} is outside the {len(seq.items)} elements")
        if seq.items[i] is None:
            raise ctx.error(f"element {i} is read before it is written")
        items.append(seq.items[i])
    if not items:
        if element_shape is None or None in element_shape:
            raise ctx.error("stacking no elements needs a known element_shape")
        return np.zeros((0, *element_shape), seq.dtype)
    if all(isinstance(v, np.ndarray) for v in items):
        return np.stack(items)
    return F.stack([ctx.tensor(v) for v in items], axis=0)


def _shape_attr(a, key="element_shape"):
    value = a.get(key)
    return value[1] if isinstance(value, tuple) and value[0] == "shape" else None


@rule("TensorArrayV3")
def tensor_array(ctx, node, x, a):
    for key in ("dynamic_size", "clear_after_read", "identical_element_shapes",
                "tensor_array_name"):
        a.get(key)
    _shape_attr(a)
    if a.get("dynamic_size"):
        raise ctx.error("a TensorArray of dynamic_size is not imported")
    size = ctx.ints(x[0], "size")[0]
    ctx.check_elements((size,), "the TensorArray")
    return [TensorSeq([None] * size, _dtype(a, "dtype"), "array"), FLOW]


@rule("TensorArrayScatterV3")
def tensor_array_scatter(ctx, node, x, a):
    seq = _seq(ctx, x[0])
    indices = ctx.ints(x[1], "the indices")
    elements = _elements(ctx, x[2])
    if len(elements) != len(indices):
        raise ctx.error(f"{len(indices)} indices for {len(elements)} elements")
    for i, v in zip(indices, elements):
        seq.items[_index(ctx, seq, np.asarray(i, np.int32))] = v
    return [FLOW]


@rule("TensorArrayReadV3")
def tensor_array_read(ctx, node, x, a):
    a.get("dtype")
    seq = _seq(ctx, x[0])
    i = _index(ctx, seq, x[1])
    if seq.items[i] is None:
        raise ctx.error(f"element {i} is read before it is written")
    return [seq.items[i]]


@rule("TensorArrayWriteV3")
def tensor_array_write(ctx, node, x, a):
    seq = _seq(ctx, x[0])
    seq.items[_index(ctx, seq, x[1])] = x[2]
    return [FLOW]


@rule("TensorArrayGatherV3")
def tensor_array_gather(ctx, node, x, a):
    a.get("dtype")
    seq = _seq(ctx, x[0])
    return [_stack(ctx, seq, ctx.ints(x[1], "the indices"), _shape_attr(a))]


@rule("TensorArraySizeV3")
def tensor_array_size(ctx, node, x, a):
    return [np.asarray(len(_seq(ctx, x[0]).items), np.int32)]


@rule("TensorListReserve")
def tensor_list_reserve(ctx, node, x, a):
    a.get("shape_type")
    n = ctx.ints(x[1], "num_elements")[0]
    if n < 0:
        raise ctx.error("a TensorList of unknown length (num_elements -1) is not imported")
    ctx.check_elements((n,), "the TensorList")
    return [TensorSeq([None] * n, _dtype(a, "element_dtype"), "list")]


@rule("TensorListFromTensor")
def tensor_list_from_tensor(ctx, node, x, a):
    a.get("shape_type")
    return [TensorSeq(_elements(ctx, x[0]), _dtype(a, "element_dtype"), "list")]


@rule("TensorListGetItem")
def tensor_list_get_item(ctx, node, x, a):
    a.get("element_dtype")
    seq = _seq(ctx, x[0])
    i = _index(ctx, seq, x[1])
    if seq.items[i] is None:
        raise ctx.error(f"element {i} is read before it is set")
    return [seq.items[i]]


@rule("TensorListSetItem")
def tensor_list_set_item(ctx, node, x, a):
    a.get("element_dtype")
    if a.get("resize_if_index_out_of_bounds"):
        raise ctx.error("resize_if_index_out_of_bounds is not imported")
    seq = _seq(ctx, x[0]).copy()
    seq.items[_index(ctx, seq, x[1])] = x[2]
    return [seq]


@rule("TensorListStack")
def tensor_list_stack(ctx, node, x, a):
    a.get("element_dtype")
    seq = _seq(ctx, x[0])
    n = a.get("num_elements", -1)
    if n not in (-1, None) and n != len(seq.items):
        raise ctx.error(f"num_elements={n}, the list has {len(seq.items)}")
    shape = None
    if isinstance(x[1], np.ndarray) and x[1].ndim == 1 and (x[1] >= 0).all():
        shape = tuple(int(d) for d in x[1])
    return [_stack(ctx, seq, range(len(seq.items)), shape)]


def _scalar(ctx, x, what):
    return float(np.asarray(ctx.static(x, what), np.float32).reshape(-1)[0])


@rule("NonMaxSuppressionV2", "NonMaxSuppressionV3", "NonMaxSuppressionV4",
      "NonMaxSuppressionV5")
def nms(ctx, node, x, a):
    """On the host as TF.js 4.22 does it (staged.non_max_suppression): the selected
    indices (a boundary: their count is the next stage's shape), V5's scores, V4's and
    V5's valid count. pad_to_max_output_size (V4) pads to max_output_size with zeros."""
    op = node.op
    max_size = int(_scalar(ctx, x[2], "max_output_size"))
    iou = _scalar(ctx, x[3], "iou_threshold")
    score = _scalar(ctx, x[4], "score_threshold") if op != "NonMaxSuppressionV2" \
        else -np.inf
    sigma = _scalar(ctx, x[5], "soft_nms_sigma") if op == "NonMaxSuppressionV5" else 0.0
    pad = bool(a.get("pad_to_max_output_size", False)) if op in (
        "NonMaxSuppressionV4", "NonMaxSuppressionV5") else False
    if pad and op == "NonMaxSuppressionV5":
        raise ctx.error("pad_to_max_output_size=true on NonMaxSuppressionV5 (TF.js ignores "
                        "it, TF pads): not imported; re-export with it false")
    if not 0 <= iou <= 1 or not 0 <= sigma <= 1:
        raise ctx.error(f"iou_threshold {iou} and soft_nms_sigma {sigma} must be in [0, 1]")
    if max_size < 0:
        raise ctx.error(f"max_output_size {max_size} is negative")
    boxes, scores = x[0], x[1]
    for v, rank, what in ((boxes, 2, "boxes"), (scores, 1, "scores")):
        if len(np.shape(v) if isinstance(v, np.ndarray) else ctx.tensor(v).shape) != rank:
            raise ctx.error(f"{what} must have rank {rank}")

    def run(b, s):
        indices, kept = non_max_suppression(b, s, max_size, iou, score, sigma)
        valid = np.asarray(len(indices), np.int32)
        if pad:
            size = min(max_size, b.shape[0])
            indices = np.concatenate([indices, np.zeros(size - len(indices), np.int32)])
            kept = np.concatenate([kept, np.zeros(size - len(kept), np.float32)])
        return indices, kept, valid

    def host(b, s):
        indices, kept, _ = run(b, s)
        return indices, kept

    if pad:     # the shapes are static; the valid count is a value, not a shape
        indices, kept, valid = ctx.host_op([boxes, scores], run,
                                           ["int32", "float32", "int32"], op)
    else:
        indices, kept = ctx.host_op([boxes, scores], host, ["int32", "float32"], op)
        valid = np.asarray(indices.shape[0], np.int32)
    if op in ("NonMaxSuppressionV2", "NonMaxSuppressionV3"):
        return [indices]
    if op == "NonMaxSuppressionV4":
        return [indices, valid]
    return [indices, kept, valid]


@rule("Where")
def where_(ctx, node, x, a):
    """The coordinates of the true entries, [count, rank] int32, on the host (a
    boundary: count is the next stage's shape)."""
    return ctx.host_op([x[0]], lambda c: (where(c),), ["int32"], "Where")
