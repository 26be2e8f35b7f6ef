"""What the structure ops share: attr checks and conversions."""
from __future__ import annotations

import numpy as np

from ...errors import AttrError, DTypeError, ShapeError
from ..common import as_value

NUMERIC = ("float32", "int32")


def axis_index(axis, rank, what="axis"):
    """axis (negative from the end) as an index in [0, rank)."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, (bool, np.bool_)):
        raise AttrError(f"{what} must be an int, got {axis!r}")
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} is out of range for a tensor of rank {rank}")
    return int(axis) % rank


def check_dtype_in(dtype, allowed, what):
    if dtype not in allowed:
        raise DTypeError(f"{what} must be {' or '.join(allowed)}, got {dtype}")


def int_tuple(values, what):
    try:
        return tuple(int(v) for v in np.asarray(values).reshape(-1))
    except (TypeError, ValueError):
        raise AttrError(f"{what} must be a list of ints, got {values!r}") from None


def padding_pairs(paddings):
    arr = np.asarray(paddings)
    if arr.ndim != 2 or arr.shape[1:] != (2,):
        raise ShapeError(f"paddings must be a list of (before, after) pairs, got "
                         f"{paddings!r}")
    return tuple((int(b), int(e)) for b, e in arr)


def scalar_of(value, dtype):
    return {"float32": float, "int32": int, "bool": bool}[dtype](value)


def index_value(graph, indices):
    """Indices given as Python lists or arrays become int32 constants."""
    return as_value(graph, indices, "int32")
