"""Sequences of tensors: SplitToSequence, SequenceAt and their kin.

torch.onnx.export(..., optimize=False) (the dynamo exporter without onnxscript's
optimizer) writes torch.split as SplitToSequence read back with SequenceAt
(nn.MultiheadAttention's packed q, k and v); the default, optimize=True, rewrites them
into Split. A sequence here is a Python tuple of the table's values (numpy arrays or
Tensors), never a graph value: rules read its elements at positions known at import;
any other reader gets an OnnxImportError naming the node that made it."""
from __future__ import annotations

import numpy as np

import fragflow.frontend as F

from .importer import Deferred


class TensorSequence(Deferred):
    def __init__(self, items, refusal):
        super().__init__(refusal)
        self.items = tuple(items)


def _made(ctx, items) -> TensorSequence:
    return TensorSequence(items, ctx.error(
        "a sequence of tensors: fragflow reads one only through SequenceAt, "
        "SequenceLength, ConcatFromSequence, SequenceInsert and SequenceErase"))


def _sequence(ctx, x) -> tuple:
    if not isinstance(x, TensorSequence):
        raise ctx.error("the input is not a sequence of tensors")
    return x.items


def _value(ctx, x):
    """x as a numpy array when known at import, else a Tensor (a weight: its Variable)."""
    return x if isinstance(x, np.ndarray) else ctx.tensor(x)


def _position(ctx, x, count: int, what: str, insert: bool = False) -> int:
    values = ctx.ints(x, what)
    if len(values) != 1:
        raise ctx.error(f"{what} must be one integer, got {len(values)}")
    k = values[0] + (count + (1 if insert else 0) if values[0] < 0 else 0)
    if not 0 <= k < count + (1 if insert else 0):
        raise ctx.error(f"{what} {values[0]} is out of range for a sequence of {count}")
    return k


def split_to_sequence(ctx, node, x, a):
    t = _value(ctx, x[0])
    rank = len(t.shape)
    axis = int(a.get("axis", 0))
    axis += rank if axis < 0 else 0
    if not 0 <= axis < rank:
        raise ctx.error(f"axis {a.get('axis', 0)} is out of range for rank {rank}")
    dim = t.shape[axis]
    if dim is None:
        raise ctx.error("SplitToSequence of an axis of unknown size")
    keepdims = bool(a.get("keepdims", 1))
    split = x[1] if len(x) > 1 else None
    if split is None:                        # pieces of one, squeezed unless keepdims
        sizes = [1] * dim
    else:
        given = np.asarray(ctx.static(split, "split"))
        keepdims = True
        if given.ndim == 0:                  # pieces of that size, the last what is left
            part = int(given)
            if part <= 0:
                raise ctx.error(f"split {part} must be positive")
            sizes = [part] * (dim // part) + ([dim % part] if dim % part else [])
        else:
            sizes = [int(v) for v in given.reshape(-1)]
            if any(v < 0 for v in sizes) or sum(sizes) != dim:
                raise ctx.error(f"split sizes {sizes[:40]} do not add up to the axis' "
                                f"{dim}")
    items, start = [], 0
    for size in sizes:
        key = [slice(None)] * rank
        key[axis] = slice(start, start + size) if keepdims else start
        items.append(t[tuple(key)])
        start += size
    return _made(ctx, items)


def construct(ctx, node, x, a):
    return _made(ctx, [v if isinstance(v, np.ndarray) else ctx.tensor(v) for v in x])


def empty(ctx, node, x, a):
    a.get("dtype")          # read: the elements' dtype, of none
    return _made(ctx, [])


def at(ctx, node, x, a):
    items = _sequence(ctx, x[0])
    return items[_position(ctx, x[1], len(items), "position")]


def length(ctx, node, x, a):
    return np.array(len(_sequence(ctx, x[0])), np.int64)


def insert(ctx, node, x, a):
    items = list(_sequence(ctx, x[0]))
    value = x[1] if isinstance(x[1], np.ndarray) else ctx.tensor(x[1])
    k = len(items) if len(x) < 3 or x[2] is None else \
        _position(ctx, x[2], len(items), "position", insert=True)
    items.insert(k, value)
    return _made(ctx, items)


def erase(ctx, node, x, a):
    items = list(_sequence(ctx, x[0]))
    if not items:
        raise ctx.error("SequenceErase of an empty sequence")
    k = len(items) - 1 if len(x) < 2 or x[1] is None else \
        _position(ctx, x[1], len(items), "position")
    del items[k]
    return _made(ctx, items)


def concat_from_sequence(ctx, node, x, a):
    items = _sequence(ctx, x[0])
    if not items:
        raise ctx.error("ConcatFromSequence of an empty sequence")
    new_axis = bool(a.get("new_axis", 0))
    rank = len(items[0].shape) + (1 if new_axis else 0)
    axis = int(a["axis"])
    axis += rank if axis < 0 else 0
    if not 0 <= axis < rank:
        raise ctx.error(f"axis {a['axis']} is out of range for rank {rank}")
    if all(isinstance(v, np.ndarray) for v in items):
        return (np.stack if new_axis else np.concatenate)(items, axis=axis)
    tensors = [ctx.tensor(v) for v in items]
    if new_axis:
        tensors = [F.expand_dims(t, axis) for t in tensors]
    return tensors[0] if len(tensors) == 1 else F.concat(tensors, axis=axis)


# ONNX op type -> its import rule (frontend/onnx/op_table.py registers them)
RULES = {"SplitToSequence": split_to_sequence, "SequenceConstruct": construct,
         "SequenceEmpty": empty, "SequenceAt": at, "SequenceLength": length,
         "SequenceInsert": insert, "SequenceErase": erase,
         "ConcatFromSequence": concat_from_sequence}
