"""Reductions: sum, mean, max, min, prod over axis (None, an int or a tuple), with
keepdims; argmax and argmin over one axis (int32 indices, the first on ties, NaN
counts as the largest/smallest like NumPy).

An empty reduction gives the identity: 0 for sum and mean, 1 for prod, -inf / int32's
minimum for max and +inf / int32's maximum for min (TensorFlow's values). mean of an int32
tensor is the wrapped int32 sum divided by the count, truncated (TensorFlow's).
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..types import TensorType, normalize_axes
from .common import apply
from .registry import OpDef, register

NUMERIC = ("float32", "int32")


def identity_of(op: str, dtype: str):
    big = np.inf if dtype == "float32" else np.iinfo(np.int32).max
    return {"sum": 0, "mean": 0, "prod": 1, "max": -big if dtype == "float32"
            else np.iinfo(np.int32).min, "min": big}[op]


def reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_type(types, attrs):
    (t,) = types
    if t.dtype not in NUMERIC:
        raise DTypeError(f"does not accept {t.dtype} inputs (accepts float32, int32); "
                         f"cast first")
    axes = normalize_axes(attrs["axis"], t.rank)
    return TensorType(reduced_shape(t.shape, axes, attrs["keepdims"]), t.dtype)


def _reduce_ref(op):
    def ref(arrays, attrs):
        (x,) = arrays
        axes = normalize_axes(attrs["axis"], x.ndim)
        keep = attrs["keepdims"]
        out_shape = reduced_shape(x.shape, axes, keep)
        if x.size == 0 or any(x.shape[a] == 0 for a in axes):
            return np.full(out_shape, identity_of(op, x.dtype.name), x.dtype)
        if op == "mean" and x.dtype == np.int32:
            total = np.sum(x, axis=axes, keepdims=keep, dtype=np.int32)
            count = int(np.prod([x.shape[a] for a in axes]))
            return (np.sign(total) * (np.abs(total.astype(np.int64)) // count)).astype(np.int32)
        fn = {"sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max,
              "min": np.min}[op]
        kwargs = {"dtype": x.dtype} if op in ("sum", "mean", "prod") else {}
        return np.asarray(fn(x, axis=axes, keepdims=keep, **kwargs)).astype(x.dtype)
    return ref


for _op in ("sum", "mean", "max", "min", "prod"):
    register(OpDef(_op, "reduce", _reduce_type, _reduce_ref(_op),
                   attrs={"axis": None, "keepdims": False}, num_inputs=1))


def _arg_type(types, attrs):
    (t,) = types
    if t.dtype not in NUMERIC:
        raise DTypeError(f"does not accept {t.dtype} inputs (accepts float32, int32)")
    (axis,) = normalize_axes(attrs["axis"], t.rank)
    if t.shape[axis] == 0:
        raise ShapeError(f"cannot take the arg-extremum of an empty axis {axis}")
    return TensorType(reduced_shape(t.shape, (axis,), False), "int32")


def _arg_ref(fn):
    def ref(arrays, attrs):
        (x,) = arrays
        (axis,) = normalize_axes(attrs["axis"], x.ndim)
        return fn(x, axis=axis).astype(np.int32)
    return ref


register(OpDef("argmax", "reduce", _arg_type, _arg_ref(np.argmax), attrs={"axis": 0},
               num_inputs=1, differentiable=False))
register(OpDef("argmin", "reduce", _arg_type, _arg_ref(np.argmin), attrs={"axis": 0},
               num_inputs=1, differentiable=False))


def _axis_attr(axis):
    if axis is None or isinstance(axis, (int, np.integer)):
        return None if axis is None else int(axis)
    return tuple(int(a) for a in axis)


def reduce(op: str, x, axis=None, keepdims=False, name=None):
    return apply(op, [x], {"axis": _axis_attr(axis), "keepdims": bool(keepdims)}, name)


def arg_reduce(op: str, x, axis=0, name=None):
    if not isinstance(axis, (int, np.integer)):
        raise ShapeError(f"{op} takes a single axis, got {axis!r}")
    return apply(op, [x], {"axis": int(axis)}, name)
