"""The dtypes elementwise ops accept and their type rules (numpy broadcasting)."""
from __future__ import annotations

import numpy as np

from ...errors import DTypeError
from ...types import TensorType, broadcast_shapes, promote

NUMERIC = ("float32", "int32")
FLOAT = ("float32",)
BOOL = ("bool",)
ANY = ("float32", "int32", "bool")


def check_dtype(dtype, allowed, what="inputs"):
    if dtype not in allowed:
        raise DTypeError(f"does not accept {dtype} {what} (accepts {', '.join(allowed)}); "
                         f"cast first")


def unary_rule(allowed, out=None):
    def infer(types, attrs):
        (t,) = types
        check_dtype(t.dtype, allowed)
        return TensorType(t.shape, out or t.dtype)
    return infer


def binary_rule(allowed, out=None):
    def infer(types, attrs):
        a, b = types
        dtype = promote(a.dtype, b.dtype)
        check_dtype(dtype, allowed)
        return TensorType(broadcast_shapes(a.shape, b.shape), out or dtype)
    return infer


def promoted(a, b):
    """Two arrays converted to their promoted dtype."""
    dtype = np.dtype(promote(a.dtype.name, b.dtype.name))
    return a.astype(dtype, copy=False), b.astype(dtype, copy=False)
