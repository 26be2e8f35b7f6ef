"""tile, reverse and broadcast_to: each output element is one input element."""
from __future__ import annotations

import numpy as np

from ...errors import ShapeError
from ...types import TensorType, format_shape, normalize_axes
from ..common import apply
from ..registry import REQUIRED, OpDef, register
from .checks import (
    int_tuple,
)


def _tile_type(types, attrs):
    (t,) = types
    multiples = attrs["multiples"]
    if len(multiples) != t.rank:
        raise ShapeError(f"multiples {tuple(multiples)} has {len(multiples)} entries for a "
                         f"tensor of rank {t.rank}")
    if any(m < 0 for m in multiples):
        raise ShapeError(f"multiples {tuple(multiples)} must be >= 0")
    return TensorType(tuple(None if d is None else d * m for d, m in zip(t.shape, multiples)),
                      t.dtype)


register(OpDef("tile", "structure", _tile_type,
               lambda arrays, attrs: np.tile(arrays[0], attrs["multiples"]),
               attrs={"multiples": REQUIRED}, num_inputs=1, tf="tf.tile"))


def _reverse_type(types, attrs):
    (t,) = types
    normalize_axes(attrs["axis"], t.rank)
    return t


register(OpDef("reverse", "structure", _reverse_type,
               lambda arrays, attrs: np.ascontiguousarray(np.flip(
                   arrays[0], normalize_axes(attrs["axis"], arrays[0].ndim))),
               attrs={"axis": REQUIRED}, num_inputs=1, tf="tf.reverse"))


def _broadcast_to_type(types, attrs):
    (t,) = types
    shape = tuple(attrs["shape"])
    if any(d < 0 for d in shape):
        raise ShapeError(f"invalid target shape {format_shape(shape)}")
    if t.rank > len(shape):
        raise ShapeError(f"cannot broadcast {format_shape(t.shape)} to the lower-rank "
                         f"{format_shape(shape)}")
    for d, s in zip(t.shape, shape[len(shape) - t.rank:]):
        if d not in (1, s, None):
            raise ShapeError(f"cannot broadcast {format_shape(t.shape)} to "
                             f"{format_shape(shape)}")
    return TensorType(shape, t.dtype)


register(OpDef("broadcast_to", "structure", _broadcast_to_type,
               lambda arrays, attrs: np.array(np.broadcast_to(arrays[0], attrs["shape"])),
               attrs={"shape": REQUIRED}, num_inputs=1, tf="tf.broadcast_to"))


def tile(x, multiples, name=None):
    return apply("tile", [x], {"multiples": int_tuple(multiples, "multiples")}, name)


def reverse(x, axis, name=None):
    return apply("reverse", [x], {"axis": int_tuple(axis, "axis")}, name)


def broadcast_to(x, shape, name=None):
    return apply("broadcast_to", [x], {"shape": int_tuple(shape, "shape")}, name)
