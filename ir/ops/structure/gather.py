"""gather and gather_nd (out-of-range indices read 0), their adjoints gather_grad and
gather_nd_grad, and unsorted_segment_sum (out-of-range indices dropped)."""
from __future__ import annotations

import numpy as np

from ...errors import AttrError, ShapeError
from ...types import TensorType, format_shape
from ..common import apply, int_attr
from ..registry import REQUIRED, OpDef, register
from .checks import (
    NUMERIC,
    axis_index,
    check_dtype_in,
    index_value,
)


def gather_dims(params_shape, indices_shape, axis, batch_dims):
    """Normalised (axis, batch_dims) of a gather; checks the batch dimensions agree."""
    batch_dims = int(batch_dims)
    if batch_dims < 0:
        batch_dims += len(indices_shape)
    if not 0 <= batch_dims <= len(indices_shape):
        raise ShapeError(f"batch_dims {batch_dims} is out of range for indices of rank "
                         f"{len(indices_shape)}")
    if len(params_shape) == 0:
        raise ShapeError("cannot gather from a scalar")
    axis = axis_index(axis, len(params_shape))
    if axis < batch_dims:
        raise ShapeError(f"axis {axis} must be >= batch_dims {batch_dims}")
    for a in range(batch_dims):
        p, i = params_shape[a], indices_shape[a]
        if p is not None and i is not None and p != i:
            raise ShapeError(f"batch dimension {a} is {p} in params "
                             f"{format_shape(params_shape)} but {i} in indices "
                             f"{format_shape(indices_shape)}")
    return axis, batch_dims


def gather_shape(params_shape, indices_shape, axis, batch_dims):
    return (tuple(params_shape[:axis]) + tuple(indices_shape[batch_dims:])
            + tuple(params_shape[axis + 1:]))


def _gather_type(types, attrs):
    params, indices = types
    check_dtype_in(indices.dtype, ("int32",), "indices")
    axis, batch_dims = gather_dims(params.shape, indices.shape, attrs["axis"],
                                   attrs["batch_dims"])
    return TensorType(gather_shape(params.shape, indices.shape, axis, batch_dims),
                      params.dtype)


def _gather_ref(arrays, attrs):
    params, indices = arrays
    axis, bd = gather_dims(params.shape, indices.shape, attrs["axis"], attrs["batch_dims"])
    out = np.zeros(gather_shape(params.shape, indices.shape, axis, bd), params.dtype)
    dim = params.shape[axis]
    for batch in np.ndindex(*params.shape[:bd]):
        p, ix = params[batch], indices[batch]           # per batch: a plain np.take
        valid = (ix >= 0) & (ix < dim)
        taken = np.take(p, np.where(valid, ix, 0), axis=axis - bd)
        mask = valid.reshape((1,) * (axis - bd) + valid.shape + (1,) * (p.ndim - axis + bd - 1))
        out[batch] = np.where(mask, taken, np.zeros((), params.dtype))
    return out


register(OpDef("gather", "structure", _gather_type, _gather_ref,
               attrs={"axis": 0, "batch_dims": 0}, num_inputs=2, tf="tf.gather"))


def _gather_grad_type(types, attrs):
    dy, indices, params = types
    check_dtype_in(indices.dtype, ("int32",), "indices")
    check_dtype_in(dy.dtype, NUMERIC, "the gradient")
    axis, bd = gather_dims(params.shape, indices.shape, attrs["axis"], attrs["batch_dims"])
    want = gather_shape(params.shape, indices.shape, axis, bd)
    if len(want) != dy.rank or any(a is not None and b is not None and a != b
                                   for a, b in zip(want, dy.shape)):
        raise ShapeError(f"gradient of shape {format_shape(dy.shape)} does not match the "
                         f"gather's output {format_shape(want)}")
    return TensorType(params.shape, dy.dtype)


def _gather_grad_ref(arrays, attrs):
    dy, indices, params = arrays
    axis, bd = gather_dims(params.shape, indices.shape, attrs["axis"], attrs["batch_dims"])
    out = np.zeros(params.shape, dy.dtype)
    dim = params.shape[axis]
    for batch in np.ndindex(*params.shape[:bd]):
        for pos in np.ndindex(*indices.shape[bd:]):
            k = indices[batch + pos]
            if 0 <= k < dim:
                src = (slice(None),) * (axis - bd) + pos
                dst = (slice(None),) * (axis - bd) + (k,)
                out[batch][dst] += dy[batch][src]
    return out


register(OpDef("gather_grad", "structure", _gather_grad_type, _gather_grad_ref,
               attrs={"axis": 0, "batch_dims": 0}, num_inputs=3, tf="— (IndexedSlices)"))


def _gather_nd_dims(params_shape, indices_shape):
    if len(indices_shape) == 0:
        raise ShapeError("gather_nd indices must have rank >= 1 (their last axis holds "
                         "index tuples)")
    k = indices_shape[-1]
    if k is None:
        raise ShapeError("the last dimension of gather_nd's indices must be known")
    if k > len(params_shape):
        raise ShapeError(f"index tuples of length {k} for params of rank "
                         f"{len(params_shape)}")
    return k


def _gather_nd_type(types, attrs):
    params, indices = types
    check_dtype_in(indices.dtype, ("int32",), "indices")
    k = _gather_nd_dims(params.shape, indices.shape)
    return TensorType(tuple(indices.shape[:-1]) + tuple(params.shape[k:]), params.dtype)


def _gather_nd_ref(arrays, attrs):
    params, indices = arrays
    k = indices.shape[-1]
    out = np.zeros(indices.shape[:-1] + params.shape[k:], params.dtype)
    for pos in np.ndindex(*indices.shape[:-1]):
        ix = tuple(int(v) for v in indices[pos])
        if all(0 <= v < d for v, d in zip(ix, params.shape)):
            out[pos] = params[ix]
    return out


register(OpDef("gather_nd", "structure", _gather_nd_type, _gather_nd_ref, num_inputs=2,
               tf="tf.gather_nd"))


def _gather_nd_grad_type(types, attrs):
    dy, indices, params = types
    check_dtype_in(indices.dtype, ("int32",), "indices")
    check_dtype_in(dy.dtype, NUMERIC, "the gradient")
    _gather_nd_dims(params.shape, indices.shape)
    return TensorType(params.shape, dy.dtype)


def _gather_nd_grad_ref(arrays, attrs):
    dy, indices, params = arrays
    out = np.zeros(params.shape, dy.dtype)
    for pos in np.ndindex(*indices.shape[:-1]):
        ix = tuple(int(v) for v in indices[pos])
        if all(0 <= v < d for v, d in zip(ix, params.shape)):
            out[ix] += dy[pos]
    return out


register(OpDef("gather_nd_grad", "structure", _gather_nd_grad_type, _gather_nd_grad_ref,
               num_inputs=3, tf="ScatterNd"))


def _segment_sum_type(types, attrs):
    data, ids = types
    check_dtype_in(ids.dtype, ("int32",), "segment_ids")
    check_dtype_in(data.dtype, NUMERIC, "data")
    n = attrs["num_segments"]
    if not isinstance(n, int) or n < 0:
        raise AttrError(f"num_segments must be an int >= 0, got {n!r}")
    if ids.rank > data.rank or any(a is not None and b is not None and a != b
                                   for a, b in zip(ids.shape, data.shape)):
        raise ShapeError(f"segment_ids' shape {format_shape(ids.shape)} must be a prefix "
                         f"of data's {format_shape(data.shape)}")
    return TensorType((n,) + tuple(data.shape[ids.rank:]), data.dtype)


def _segment_sum_ref(arrays, attrs):
    data, ids = arrays
    n = attrs["num_segments"]
    flat_ids = ids.reshape(-1)
    rows = data.reshape((flat_ids.size,) + data.shape[ids.ndim:])
    keep = (flat_ids >= 0) & (flat_ids < n)
    out = np.zeros((n,) + data.shape[ids.ndim:], data.dtype)
    np.add.at(out, flat_ids[keep], rows[keep])
    return out


register(OpDef("unsorted_segment_sum", "structure", _segment_sum_type, _segment_sum_ref,
               attrs={"num_segments": REQUIRED}, num_inputs=2,
               tf="tf.math.unsorted_segment_sum"))


def gather(params, indices, axis=0, batch_dims=0, name=None):
    indices = index_value(params.graph, indices)
    return apply("gather", [params, indices], {"axis": int_attr(axis, "axis"),
                                               "batch_dims": int_attr(batch_dims, "batch_dims")},
                 name)


def gather_grad(dy, indices, params, axis=0, batch_dims=0, name=None):
    return apply("gather_grad", [dy, indices, params],
                 {"axis": int(axis), "batch_dims": int(batch_dims)}, name)


def gather_nd(params, indices, name=None):
    return apply("gather_nd", [params, index_value(params.graph, indices)], None, name)


def gather_nd_grad(dy, indices, params, name=None):
    return apply("gather_nd_grad", [dy, indices, params], None, name)


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    ids = index_value(data.graph, segment_ids)
    return apply("unsorted_segment_sum", [data, ids], {"num_segments": int(num_segments)},
                 name)
