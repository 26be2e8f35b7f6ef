"""The structure family: ops that assemble, cut, pad, repeat and index tensors.

    concat {axis}                       inputs joined along axis
    pad {paddings, constant_value}      constant padding
    mirror_pad {paddings, mode}         REFLECT or SYMMETRIC padding
    mirror_pad_grad {paddings, mode}    the mirrored border folded back (mirror_pad's
                                        gradient; its own gradient is mirror_pad)
    tile {multiples}, reverse {axis}, broadcast_to {shape}
    gather {axis, batch_dims}           params, int32 indices
    gather_grad {axis, batch_dims}      dy, indices, params: dy summed into params' shape
    gather_nd, gather_nd_grad           the same for index tuples
    unsorted_segment_sum {num_segments} data, int32 segment_ids
    one_hot {depth, on_value, off_value, axis, dtype}
    top_k_rank                          each element's place in its last axis, sorted
                                        descending (ties: lower index first)
    top_k_indices {k}                   the indices of places 0..k-1 (from top_k_rank)

Composites in frontend/ops_structure.py build stack, unstack, split, slice, TF's
strided_slice, top_k, space_to_batch_nd and batch_to_space_nd from these and the shape
ops.

Out-of-range indices (gather, gather_nd; negative ones too) read 0, as TensorFlow does
on GPUs (its CPU kernels raise); the scatter-like ops (gather_grad, gather_nd_grad,
unsorted_segment_sum) drop them, which keeps each the adjoint of its gather.
"""
from __future__ import annotations

import numpy as np

from ..errors import AttrError, DTypeError, ShapeError
from ..types import TensorType, as_dtype, format_shape, normalize_axes
from .common import apply, as_value, graph_of, int_attr
from .registry import REQUIRED, OpDef, register

NUMERIC = ("float32", "int32")
MAX_CONCAT_INPUTS = 8     # samplers per kernel; longer concats become a tree


def _axis(axis, rank, what="axis"):
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, (bool, np.bool_)):
        raise AttrError(f"{what} must be an int, got {axis!r}")
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} is out of range for a tensor of rank {rank}")
    return int(axis) % rank


def _dtype_in(dtype, allowed, what):
    if dtype not in allowed:
        raise DTypeError(f"{what} must be {' or '.join(allowed)}, got {dtype}")


# -- concat ---------------------------------------------------------------------------
def _concat_type(types, attrs):
    if not types:
        raise AttrError("concat needs at least one input")
    first = types[0]
    if first.rank == 0:
        raise ShapeError("cannot concatenate scalars (rank 0); use stack")
    axis = _axis(attrs["axis"], first.rank)
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


# -- pad, mirror_pad, mirror_pad_grad ---------------------------------------------------
MIRROR_MODES = ("REFLECT", "SYMMETRIC")


def _check_paddings(paddings, rank):
    if len(paddings) != rank:
        raise ShapeError(f"paddings has {len(paddings)} rows for a tensor of rank {rank}; "
                         f"give one (before, after) pair per axis")
    for a, pair in enumerate(paddings):
        if len(pair) != 2:
            raise ShapeError(f"paddings row {a} is {pair}: give (before, after)")
        if pair[0] < 0 or pair[1] < 0:
            raise ShapeError(f"negative padding {tuple(pair)} at axis {a}; pad amounts "
                             f"must be >= 0 (use slice to cut)")


def _padded(shape, paddings):
    return tuple(None if d is None else d + b + e for d, (b, e) in zip(shape, paddings))


def _pad_type(types, attrs):
    (t,) = types
    _check_paddings(attrs["paddings"], t.rank)
    return TensorType(_padded(t.shape, attrs["paddings"]), t.dtype)


register(OpDef("pad", "structure", _pad_type,
               lambda arrays, attrs: np.pad(arrays[0], attrs["paddings"], mode="constant",
                                            constant_values=attrs["constant_value"]),
               attrs={"paddings": REQUIRED, "constant_value": 0}, num_inputs=1, tf="tf.pad"))


def _check_mirror(shape, paddings, mode):
    if mode not in MIRROR_MODES:
        raise AttrError(f"mode must be REFLECT or SYMMETRIC, got {mode!r}")
    for a, (d, (b, e)) in enumerate(zip(shape, paddings)):
        limit = None if d is None else d - 1 if mode == "REFLECT" else d
        if limit is not None and max(b, e) > limit:
            raise ShapeError(f"{mode} padding {(b, e)} at axis {a} is larger than the "
                             f"axis allows ({limit} for size {d})")


def _mirror_pad_type(types, attrs):
    (t,) = types
    _check_paddings(attrs["paddings"], t.rank)
    _check_mirror(t.shape, attrs["paddings"], attrs["mode"])
    return TensorType(_padded(t.shape, attrs["paddings"]), t.dtype)


register(OpDef("mirror_pad", "structure", _mirror_pad_type,
               lambda arrays, attrs: np.pad(arrays[0], attrs["paddings"],
                                            mode=attrs["mode"].lower()),
               attrs={"paddings": REQUIRED, "mode": "REFLECT"}, num_inputs=1,
               tf="tf.pad (REFLECT/SYMMETRIC)"))


def mirror_source(o, before, dim, mode):
    """The input coordinate padded position o reads (also used by the reference)."""
    s = o - before
    if s < 0:
        return -s if mode == "REFLECT" else -s - 1
    if s >= dim:
        return 2 * (dim - 1) - s if mode == "REFLECT" else 2 * dim - 1 - s
    return s


def _mirror_pad_grad_type(types, attrs):
    (t,) = types
    _check_paddings(attrs["paddings"], t.rank)
    shape = tuple(None if d is None else d - b - e for d, (b, e) in zip(t.shape, attrs["paddings"]))
    if any(d is not None and d < 0 for d in shape):
        raise ShapeError(f"paddings {attrs['paddings']} are larger than "
                         f"{format_shape(t.shape)}")
    _check_mirror(shape, attrs["paddings"], attrs["mode"])
    return TensorType(shape, t.dtype)


def _mirror_pad_grad_ref(arrays, attrs):
    # Fold one axis at a time: every padded position adds into the input position
    # it was copied from.
    g = arrays[0]
    for axis, (b, e) in enumerate(attrs["paddings"]):
        dim = g.shape[axis] - b - e
        src = [mirror_source(o, b, dim, attrs["mode"]) for o in range(g.shape[axis])]
        moved = np.moveaxis(g, axis, 0)
        out = np.zeros((dim,) + moved.shape[1:], g.dtype)
        np.add.at(out, np.array(src, np.int64), moved)
        g = np.moveaxis(out, 0, axis)
    return np.ascontiguousarray(g)


register(OpDef("mirror_pad_grad", "structure", _mirror_pad_grad_type, _mirror_pad_grad_ref,
               attrs={"paddings": REQUIRED, "mode": "REFLECT"}, num_inputs=1,
               tf="MirrorPadGrad"))


# -- tile, reverse, broadcast_to --------------------------------------------------------
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


# -- gather and its adjoint ---------------------------------------------------------------
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
    axis = _axis(axis, len(params_shape))
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
    _dtype_in(indices.dtype, ("int32",), "indices")
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
    _dtype_in(indices.dtype, ("int32",), "indices")
    _dtype_in(dy.dtype, NUMERIC, "the gradient")
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
    _dtype_in(indices.dtype, ("int32",), "indices")
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
    _dtype_in(indices.dtype, ("int32",), "indices")
    _dtype_in(dy.dtype, NUMERIC, "the gradient")
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
    _dtype_in(ids.dtype, ("int32",), "segment_ids")
    _dtype_in(data.dtype, NUMERIC, "data")
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


# -- one_hot ------------------------------------------------------------------------------
def _one_hot_type(types, attrs):
    (t,) = types
    _dtype_in(t.dtype, ("int32",), "indices")
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


# -- top_k: ranks, then the indices of the first k ranks ------------------------------------
def _top_k_rank_type(types, attrs):
    (t,) = types
    _dtype_in(t.dtype, NUMERIC, "top_k's input")
    if t.rank == 0:
        raise ShapeError("top_k needs a tensor of rank >= 1")
    return TensorType(t.shape, "int32")


def _top_k_rank_ref(arrays, attrs):
    (x,) = arrays
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    rank = np.zeros(rows.shape, np.int32)
    index = np.arange(n)
    for r, row in enumerate(rows):
        nan = np.isnan(row) if row.dtype.kind == "f" else np.zeros(n, bool)
        value = np.where(nan, 0, row)
        # NaN first, then larger values, then lower indices (lexsort: last key primary)
        order = np.lexsort((index, -value, ~nan))
        rank[r, order] = index
    return rank.reshape(x.shape)


register(OpDef("top_k_rank", "structure", _top_k_rank_type, _top_k_rank_ref,
               num_inputs=1, no_gradient="integer ranks", tf="tf.math.top_k"))


def _top_k_indices_type(types, attrs):
    (t,) = types
    _dtype_in(t.dtype, ("int32",), "ranks")
    k, n = attrs["k"], t.shape[-1]
    if not isinstance(k, int) or k < 0:
        raise AttrError(f"k must be an int >= 0, got {k!r}")
    if n is not None and k > n:
        raise ShapeError(f"k = {k} is larger than the last axis ({n})")
    return TensorType(t.shape[:-1] + (k,), "int32")


register(OpDef("top_k_indices", "structure", _top_k_indices_type,
               lambda arrays, attrs: np.argsort(arrays[0], axis=-1, kind="stable")
               [..., :attrs["k"]].astype(np.int32),
               attrs={"k": REQUIRED}, num_inputs=1, no_gradient="integer indices",
               tf="tf.math.top_k"))


# -- builders ---------------------------------------------------------------------------
def _ints(values, what):
    try:
        return tuple(int(v) for v in np.asarray(values).reshape(-1))
    except (TypeError, ValueError):
        raise AttrError(f"{what} must be a list of ints, got {values!r}") from None


def _pairs(paddings):
    arr = np.asarray(paddings)
    if arr.ndim != 2 or arr.shape[1:] != (2,):
        raise ShapeError(f"paddings must be a list of (before, after) pairs, got "
                         f"{paddings!r}")
    return tuple((int(b), int(e)) for b, e in arr)


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


def _scalar_of(value, dtype):
    return {"float32": float, "int32": int, "bool": bool}[dtype](value)


def pad(x, paddings, constant_value=0, name=None):
    return apply("pad", [x], {"paddings": _pairs(paddings),
                              "constant_value": _scalar_of(constant_value, x.dtype)}, name)


def mirror_pad(x, paddings, mode="REFLECT", name=None):
    return apply("mirror_pad", [x], {"paddings": _pairs(paddings), "mode": str(mode).upper()},
                 name)


def mirror_pad_grad(dy, paddings, mode="REFLECT", name=None):
    return apply("mirror_pad_grad", [dy], {"paddings": _pairs(paddings),
                                           "mode": str(mode).upper()}, name)


def tile(x, multiples, name=None):
    return apply("tile", [x], {"multiples": _ints(multiples, "multiples")}, name)


def reverse(x, axis, name=None):
    return apply("reverse", [x], {"axis": _ints(axis, "axis")}, name)


def broadcast_to(x, shape, name=None):
    return apply("broadcast_to", [x], {"shape": _ints(shape, "shape")}, name)


def _index_value(graph, indices):
    """Indices given as Python lists or arrays become int32 constants."""
    return as_value(graph, indices, "int32")


def gather(params, indices, axis=0, batch_dims=0, name=None):
    indices = _index_value(params.graph, indices)
    return apply("gather", [params, indices], {"axis": int_attr(axis, "axis"),
                                               "batch_dims": int_attr(batch_dims, "batch_dims")},
                 name)


def gather_grad(dy, indices, params, axis=0, batch_dims=0, name=None):
    return apply("gather_grad", [dy, indices, params],
                 {"axis": int(axis), "batch_dims": int(batch_dims)}, name)


def gather_nd(params, indices, name=None):
    return apply("gather_nd", [params, _index_value(params.graph, indices)], None, name)


def gather_nd_grad(dy, indices, params, name=None):
    return apply("gather_nd_grad", [dy, indices, params], None, name)


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    ids = _index_value(data.graph, segment_ids)
    return apply("unsorted_segment_sum", [data, ids], {"num_segments": int(num_segments)},
                 name)


def one_hot(indices, depth, on_value=1, off_value=0, axis=-1, dtype="float32", name=None):
    dtype = as_dtype(dtype)
    return apply("one_hot", [indices], {
        "depth": int_attr(depth, "depth"), "on_value": _scalar_of(on_value, dtype),
        "off_value": _scalar_of(off_value, dtype), "axis": int(axis), "dtype": dtype}, name)


def top_k_rank(x, name=None):
    return apply("top_k_rank", [x], None, name)


def top_k_indices(rank, k, name=None):
    return apply("top_k_indices", [rank], {"k": int(k)}, name)
