"""concat: inputs joined along an axis (a tree of concats beyond
MAX_CONCAT_INPUTS, the samplers one kernel reads)."""
from __future__ import annotations

import numpy as np

from ...errors import AttrError, DTypeError, ShapeError
from ...types import TensorType, format_shape
from ..common import apply, graph_of, int_attr
from ..registry import REQUIRED, OpDef, register
from .checks import (
    axis_index,
)

MAX_CONCAT_INPUTS = 8     # samplers per kernel; longer concats become a tree


def _concat_type(types, attrs):
    if not types:
        raise AttrError("concat needs at least one input")
    first = types[0]
    if first.rank == 0:
        raise ShapeError("cannot concatenate scalars (rank 0); use stack")
    axis = axis_index(attrs["axis"], first.rank)
    for i, t in enumerate(types[1:], 1):
        if t.dtype != first.dtype:
            raise DTypeError(f"input {i} is {t.dtype} but input 0 is {first.dtype}; "
                             f"concat inputs must share a dtype")
        if t.rank != first.rank:
            raise ShapeError(f"input {i} has shape {format_shape(t.shape)} (rank {t.rank}) "
                             f"but input 0 has shape {format_shape(first.shape)} "
                             f"(rank {first.rank})")
        for a, (d0, d) in enumerate(zip(first.shape, t.shape)):
            if a != axis and d0 is not None and d is not None and d0 != d:
                raise ShapeError(f"input {i} has shape {format_shape(t.shape)} but input 0 "
                                 f"has shape {format_shape(first.shape)}: all dimensions "
                                 f"but axis {axis} must match (they differ at axis {a})")
    dims = [t.shape[axis] for t in types]
    shape = list(first.shape)
    for a in range(first.rank):
        if a != axis and shape[a] is None:
            shape[a] = next((t.shape[a] for t in types if t.shape[a] is not None), None)
    shape[axis] = None if any(d is None for d in dims) else sum(dims)
    return TensorType(tuple(shape), first.dtype)


register(OpDef("concat", "structure", _concat_type,
               lambda arrays, attrs: np.concatenate(arrays, axis=attrs["axis"]),
               attrs={"axis": REQUIRED}, num_inputs=None, tf="tf.concat"))

def concat(values, axis, name=None):
    values = list(values)
    if len(values) > MAX_CONCAT_INPUTS:
        # a kernel reads at most MAX_CONCAT_INPUTS textures: concatenate in groups
        groups = [values[i:i + MAX_CONCAT_INPUTS]
                  for i in range(0, len(values), MAX_CONCAT_INPUTS)]
        values = [g[0] if len(g) == 1 else concat(g, axis) for g in groups]
        return concat(values, axis, name)
    return apply("concat", values, {"axis": int_attr(axis, "axis")}, name,
                 graph=graph_of(*values) if values else None)
