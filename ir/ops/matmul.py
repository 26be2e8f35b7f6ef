"""matmul: a[..., M, K] @ b[..., K, N] with transpose_a/transpose_b and numpy
broadcasting of the batch dimensions. Both operands need rank >= 2 (TensorFlow's rule;
the frontend's @ promotes vectors like numpy does)."""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..types import TensorType, broadcast_shapes, format_shape, promote
from .common import apply, as_values
from .registry import OpDef, register


def matmul_dims(a_shape, b_shape, transpose_a, transpose_b):
    """(batch shape, M, K, N) for the operands as stored."""
    m, ka = (a_shape[-1], a_shape[-2]) if transpose_a else (a_shape[-2], a_shape[-1])
    kb, n = (b_shape[-1], b_shape[-2]) if transpose_b else (b_shape[-2], b_shape[-1])
    if ka is not None and kb is not None and ka != kb:
        raise ShapeError(f"inner dimensions differ: {format_shape(a_shape)}"
                         f"{'ᵀ' if transpose_a else ''} @ {format_shape(b_shape)}"
                         f"{'ᵀ' if transpose_b else ''} ({ka} vs {kb})")
    batch = broadcast_shapes(a_shape[:-2], b_shape[:-2])
    return batch, m, ka if ka is not None else kb, n


def _matmul_type(types, attrs):
    a, b = types
    if a.rank < 2 or b.rank < 2:
        raise ShapeError(f"needs operands of rank >= 2, got {format_shape(a.shape)} and "
                         f"{format_shape(b.shape)}")
    if "bool" in (a.dtype, b.dtype):
        raise DTypeError("does not accept bool inputs (accepts float32, int32); cast first")
    dtype = promote(a.dtype, b.dtype)
    batch, m, _, n = matmul_dims(a.shape, b.shape, attrs["transpose_a"], attrs["transpose_b"])
    return TensorType(batch + (m, n), dtype)


def _matmul_ref(arrays, attrs):
    a, b = arrays
    dtype = np.dtype(promote(a.dtype.name, b.dtype.name))
    a, b = a.astype(dtype), b.astype(dtype)
    if attrs["transpose_a"]:
        a = np.swapaxes(a, -1, -2)
    if attrs["transpose_b"]:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b).astype(dtype)


register(OpDef("matmul", "matmul", _matmul_type, _matmul_ref,
               attrs={"transpose_a": False, "transpose_b": False}, num_inputs=2,
               tf="tf.linalg.matmul"))


def matmul(a, b, transpose_a=False, transpose_b=False, name=None):
    a, b = as_values(a, b)
    return apply("matmul", [a, b], {"transpose_a": bool(transpose_a),
                                    "transpose_b": bool(transpose_b)}, name)
