"""Elementwise ops of several inputs: where, clip_by_value and add_n (numpy
broadcasting; add_n's inputs share one shape)."""
from __future__ import annotations

import numpy as np

from ...errors import DTypeError, ShapeError
from ...types import TensorType, broadcast_shapes, format_shape, promote
from ..registry import OpDef, register
from .builders import binary, unbroadcast, where
from .type_rules import BOOL, NUMERIC, check_dtype, promoted


def _where_type(types, attrs):
    cond, x, y = types
    check_dtype(cond.dtype, BOOL, "as the condition")
    return TensorType(broadcast_shapes(cond.shape, x.shape, y.shape),
                      promote(x.dtype, y.dtype))


def _where_ref(arrays, attrs):
    cond, x, y = arrays
    x, y = promoted(x, y)
    return np.where(cond, x, y)


def _where_gradient(node, dy):
    c, a, b = node.inputs
    return [None, unbroadcast(where(c, dy, 0.0), a), unbroadcast(where(c, 0.0, dy), b)]


register(OpDef("where", "elementwise", _where_type, _where_ref, num_inputs=3,
               gradient=_where_gradient, tf="tf.where", pointwise=True,
               doc="x where cond is true, else y, broadcasting all three."))

def _add_n_type(types, attrs):
    if not types:
        raise ShapeError("needs at least one input")
    first = types[0]
    for t in types[1:]:
        if t.dtype != first.dtype:
            raise DTypeError(f"inputs must share a dtype, got {first.dtype} and {t.dtype}")
        if t.rank != first.rank or any(a is not None and b is not None and a != b
                                       for a, b in zip(t.shape, first.shape)):
            raise ShapeError(f"inputs must share a shape, got {format_shape(first.shape)} "
                             f"and {format_shape(t.shape)}")
    check_dtype(first.dtype, NUMERIC)
    shape = tuple(next((d for d in dims if d is not None), None)
                  for dims in zip(*(t.shape for t in types)))
    return TensorType(shape, first.dtype)


def _add_n_ref(arrays, attrs):
    total = arrays[0].copy()
    for a in arrays[1:]:
        total = total + a
    return total


register(OpDef("add_n", "elementwise", _add_n_type, _add_n_ref, tf="tf.math.add_n",
               pointwise=True,
               gradient=lambda node, dy: [unbroadcast(dy, x) for x in node.inputs],
               doc="The sum of several tensors of one shape (TensorFlow's add_n)."))


# -- clip_by_value ---------------------------------------------------------------------
def _clip_type(types, attrs):
    x, lo, hi = types
    dtype = promote(x.dtype, lo.dtype, hi.dtype)
    check_dtype(dtype, NUMERIC)
    shape = broadcast_shapes(x.shape, lo.shape, hi.shape)
    if len(shape) != x.rank or any(a is not None and b is not None and a != b
                                   for a, b in zip(shape, x.shape)):
        # TensorFlow: the bounds broadcast to t's shape, never the other way round
        raise ShapeError(f"the bounds ({format_shape(lo.shape)} and "
                         f"{format_shape(hi.shape)}) must broadcast to t's shape "
                         f"{format_shape(x.shape)}, not enlarge it to {format_shape(shape)}")
    return TensorType(x.shape, dtype)


def _clip_ref(arrays, attrs):
    x, lo, hi = arrays
    dtype = np.dtype(promote(x.dtype.name, lo.dtype.name, hi.dtype.name))
    x, lo, hi = (a.astype(dtype, copy=False) for a in (x, lo, hi))
    # minimum then maximum, as TensorFlow composes it (min > max gives min)
    return np.broadcast_to(np.maximum(np.minimum(x, hi), lo), x.shape)


def _clip_by_value_gradient(node, dy):
    """TensorFlow's: t's gradient passes where min <= t <= max; the rest goes to the
    bound that was taken, summed back to the bound's shape."""
    x, lo, hi = node.inputs
    below = binary("less", x, lo)
    above = binary("greater", x, hi)
    return [unbroadcast(where(binary("logical_or", below, above), 0.0, dy), x),
            unbroadcast(where(below, dy, 0.0), lo),
            unbroadcast(where(above, dy, 0.0), hi)]


register(OpDef("clip_by_value", "elementwise", _clip_type, _clip_ref, num_inputs=3,
               gradient=_clip_by_value_gradient, tf="tf.clip_by_value", pointwise=True,
               doc="min(max(t, clip_value_min), clip_value_max), as TensorFlow: "
                   "maximum(minimum(t, max), min)."))
