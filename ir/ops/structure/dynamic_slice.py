"""dynamic_slice and dynamic_update_slice (JAX's lax.dynamic_slice and
lax.dynamic_update_slice, XLA's DynamicSlice / DynamicUpdateSlice): a block of static
sizes read from, or written into, a tensor at starts the graph computes (one int32
vector, an entry per axis).

Starts are clamped as XLA clamps them, so the block always fits: along axis a the
start is min(max(start, 0), dim - size). A negative start is 0 (not "from the end"),
one past the end is dim - size. Each op is linear in its data; the starts are integers
and get no gradient:

    dynamic_slice(x, s, sizes)         dx = dynamic_update_slice(zeros_like(x), dy, s)
    dynamic_update_slice(x, u, s)      dx = dynamic_update_slice(dy, zeros_like(u), s)
                                       du = dynamic_slice(dy, s, u.shape)
"""
from __future__ import annotations

import numpy as np

from ...errors import AttrError, DTypeError, ShapeError
from ...types import TensorType, format_shape
from ..common import apply, as_value
from ..registry import REQUIRED, OpDef, register
from ..shape import reshape
from .checks import check_dtype_in
from .concat import concat


def _check_starts(starts: TensorType, rank: int):
    check_dtype_in(starts.dtype, ("int32",), "the start indices")
    if starts.shape != (rank,):
        raise ShapeError(f"the start indices have shape {format_shape(starts.shape)}; give "
                         f"one int32 vector of {rank} entries (one per axis)")


def _check_sizes(sizes, shape, what="slice sizes"):
    if not isinstance(sizes, tuple) or not all(isinstance(s, int) for s in sizes):
        raise AttrError(f"{what} must be a tuple of ints, got {sizes!r}")
    if len(sizes) != len(shape):
        raise ShapeError(f"{what} {list(sizes)} must have one entry per axis of "
                         f"{format_shape(shape)}")
    for a, (s, d) in enumerate(zip(sizes, shape)):
        if s < 0 or (d is not None and s > d):
            raise ShapeError(f"{what} {list(sizes)}: {s} at axis {a} must be in "
                             f"[0, {d if d is not None else 'dim'}] for "
                             f"{format_shape(shape)}")


def clamped_starts(starts, shape, sizes) -> list:
    """XLA's clamp: each start into [0, dim - size] (also used by the references)."""
    return [min(max(int(s), 0), int(d) - int(k)) for s, d, k in zip(starts, shape, sizes)]


def _block(starts, shape, sizes):
    return tuple(slice(b, b + k) for b, k in zip(clamped_starts(starts, shape, sizes), sizes))


def _dynamic_slice_type(types, attrs):
    x, starts = types
    sizes = attrs["sizes"]
    _check_sizes(sizes, x.shape)
    _check_starts(starts, x.rank)
    return TensorType(tuple(sizes), x.dtype)


def _dynamic_slice_ref(arrays, attrs):
    x, starts = arrays
    return np.ascontiguousarray(x[_block(starts, x.shape, attrs["sizes"])])


register(OpDef("dynamic_slice", "structure", _dynamic_slice_type, _dynamic_slice_ref,
               attrs={"sizes": REQUIRED}, num_inputs=2, tf="tf.slice (tensor begin)",
               doc="A block of static sizes at starts the graph computes (JAX's "
                   "lax.dynamic_slice); starts clamped into [0, dim - size] as XLA does."))


def _dus_type(types, attrs):
    x, update, starts = types
    if update.dtype != x.dtype:
        raise DTypeError(f"the update is {update.dtype} but the operand is {x.dtype}")
    if update.rank != x.rank or any(d is None for d in update.shape):
        raise ShapeError(f"the update {format_shape(update.shape)} must have the operand's "
                         f"rank ({x.rank}) and a known shape")
    _check_sizes(tuple(update.shape), x.shape, "the update's shape")
    _check_starts(starts, x.rank)
    return TensorType(x.shape, x.dtype)


def _dus_ref(arrays, attrs):
    x, update, starts = arrays
    out = np.array(x, copy=True)
    out[_block(starts, x.shape, update.shape)] = update
    return out


register(OpDef("dynamic_update_slice", "structure", _dus_type, _dus_ref, num_inputs=3,
               tf="tf.tensor_scatter_nd_update (a block)",
               doc="The operand with update written over the block at starts the graph "
                   "computes (JAX's lax.dynamic_update_slice); starts clamped into "
                   "[0, dim - size] as XLA does."))


def start_vector(graph, starts, rank: int):
    """Start indices given as one int32 vector, or a list of int32 scalars / ints, as
    one int32 vector value of `rank` entries."""
    if not isinstance(starts, (list, tuple)):
        v = as_value(graph, starts, "int32")
        if v.dtype != "int32":
            raise DTypeError(f"the start indices must be int32, got {v.dtype}")
        return v if v.type.rank == 1 else reshape(v, [-1])
    if len(starts) != rank:
        raise ShapeError(f"{len(starts)} start indices for a tensor of rank {rank}; give "
                         f"one per axis")
    if not any(hasattr(s, "type") for s in starts):
        return as_value(graph, np.asarray([int(s) for s in starts], np.int32).reshape(rank),
                        "int32")
    parts = []
    for a, s in enumerate(starts):
        v = as_value(graph, s if hasattr(s, "type") else np.int32(int(s)), "int32")
        if v.dtype != "int32":
            raise DTypeError(f"start index {a} must be int32, got {v.dtype}")
        if v.type.rank != 0 and v.shape != (1,):
            raise ShapeError(f"start index {a} has shape {format_shape(v.shape)}; each "
                             f"must be a scalar")
        parts.append(reshape(v, [1]))
    return parts[0] if len(parts) == 1 else concat(parts, 0)


def dynamic_slice(x, starts, sizes, name=None):
    sizes = tuple(int(s) for s in np.asarray(sizes).reshape(-1))
    if x.type.rank == 0 and not sizes:
        return x
    return apply("dynamic_slice", [x, start_vector(x.graph, starts, x.type.rank)],
                 {"sizes": sizes}, name)


def dynamic_update_slice(x, update, starts, name=None):
    update = as_value(x.graph, update, x.dtype)
    if x.type.rank == 0 and update.type.rank == 0:
        return update
    return apply("dynamic_update_slice",
                 [x, update, start_vector(x.graph, starts, x.type.rank)], None, name)
