"""one_hot: int32 indices to vectors of on_value at the index, off_value elsewhere."""
from __future__ import annotations

import numpy as np

from ...errors import AttrError, ShapeError
from ...types import TensorType, as_dtype
from ..common import apply, int_attr
from ..registry import REQUIRED, OpDef, register
from .checks import (
    check_dtype_in,
    scalar_of,
)


def _one_hot_type(types, attrs):
    (t,) = types
    check_dtype_in(t.dtype, ("int32",), "indices")
    depth = attrs["depth"]
    if not isinstance(depth, int) or depth < 0:
        raise AttrError(f"depth must be an int >= 0, got {depth!r}")
    axis = attrs["axis"]
    if not -1 <= axis <= t.rank:
        raise ShapeError(f"axis {axis} is out of range for one_hot of rank-{t.rank} "
                         f"indices (use -1..{t.rank})")
    axis = t.rank if axis == -1 else axis
    return TensorType(t.shape[:axis] + (depth,) + t.shape[axis:], attrs["dtype"])


def _one_hot_ref(arrays, attrs):
    (ix,) = arrays
    axis = ix.ndim if attrs["axis"] == -1 else attrs["axis"]
    depth = attrs["depth"]
    hot = ix[..., None] == np.arange(depth)              # depth last
    hot = np.moveaxis(hot, -1, axis)
    dtype = np.dtype(attrs["dtype"])
    return np.where(hot, np.array(attrs["on_value"], dtype), np.array(attrs["off_value"], dtype))


register(OpDef("one_hot", "structure", _one_hot_type, _one_hot_ref,
               attrs={"depth": REQUIRED, "on_value": 1.0, "off_value": 0.0, "axis": -1,
                      "dtype": "float32"}, num_inputs=1, no_gradient="integer indices in",
                      tf="tf.one_hot"))


def one_hot(indices, depth, on_value=1, off_value=0, axis=-1, dtype="float32", name=None):
    dtype = as_dtype(dtype)
    return apply("one_hot", [indices], {
        "depth": int_attr(depth, "depth"), "on_value": scalar_of(on_value, dtype),
        "off_value": scalar_of(off_value, dtype), "axis": int(axis), "dtype": dtype}, name)
