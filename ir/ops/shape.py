"""Ops that move elements without computing: reshape, transpose, expand_dims,
squeeze, strided_slice (what x[...] builds).

reshape, expand_dims and squeeze keep the row-major order, so the GL runtime runs them
as views of the same texture (no kernel)."""
from __future__ import annotations

import numpy as np

from ..errors import AttrError, ShapeError
from ..types import TensorType, format_shape, normalize_axes
from .common import apply, int_attr, ints_attr
from .registry import REQUIRED, OpDef, register


# -- reshape ------------------------------------------------------------------------
def resolve_reshape(in_shape, target):
    """The output shape of a reshape (None where it depends on an unknown dim)."""
    if sum(1 for d in target if d == -1) > 1:
        raise ShapeError(f"reshape target {format_shape(target)} has more than one -1")
    if any(d < -1 for d in target):
        raise ShapeError(f"invalid reshape target {format_shape(target)}")
    known = int(np.prod([d for d in target if d != -1], dtype=np.int64))
    if any(d is None for d in in_shape):
        return tuple(None if d == -1 else d for d in target)
    size = int(np.prod(in_shape, dtype=np.int64))
    if -1 in target:
        if known == 0 or size % known:
            raise ShapeError(f"cannot reshape {format_shape(in_shape)} ({size} elements) "
                             f"into {format_shape(target)}")
        return tuple(size // known if d == -1 else d for d in target)
    if known != size:
        raise ShapeError(f"cannot reshape {format_shape(in_shape)} ({size} elements) "
                         f"into {format_shape(target)} ({known} elements)")
    return tuple(target)


register(OpDef("reshape", "shape",
               lambda types, attrs: TensorType(resolve_reshape(types[0].shape, attrs["shape"]),
                                               types[0].dtype),
               lambda arrays, attrs: arrays[0].reshape(
                   resolve_reshape(arrays[0].shape, attrs["shape"])),
               attrs={"shape": REQUIRED}, num_inputs=1, tf="tf.reshape", kind="view"))


# -- transpose ----------------------------------------------------------------------
def transpose_perm(attrs, rank):
    """The permutation a transpose node applies: its perm attr with negative axes made
    positive, or the reversed axes for perm=None (AttrError if it is no permutation)."""
    perm = attrs["perm"]
    if perm is None:
        return tuple(reversed(range(rank)))
    perm = tuple(p % rank if -rank <= p < rank else p for p in perm)
    if sorted(perm) != list(range(rank)):
        raise AttrError(f"perm {attrs['perm']} is not a permutation of {rank} axes")
    return perm


def _transpose_type(types, attrs):
    (t,) = types
    return TensorType(tuple(t.shape[p] for p in transpose_perm(attrs, t.rank)), t.dtype)


register(OpDef("transpose", "shape", _transpose_type,
               lambda arrays, attrs: np.ascontiguousarray(
                   np.transpose(arrays[0], transpose_perm(attrs, arrays[0].ndim))),
               attrs={"perm": None}, num_inputs=1, tf="tf.transpose"))


# -- expand_dims / squeeze ----------------------------------------------------------
def _expand_shape(shape, axis):
    rank = len(shape) + 1
    if not -rank <= axis < rank:
        raise ShapeError(f"axis {axis} is out of range for expand_dims of rank "
                         f"{len(shape)}")
    axis %= rank
    return shape[:axis] + (1,) + shape[axis:]


register(OpDef("expand_dims", "shape",
               lambda types, attrs: TensorType(_expand_shape(types[0].shape, attrs["axis"]),
                                               types[0].dtype),
               lambda arrays, attrs: arrays[0].reshape(
                   _expand_shape(arrays[0].shape, attrs["axis"])),
               attrs={"axis": REQUIRED}, num_inputs=1, tf="tf.expand_dims", kind="view"))


def _squeeze_shape(shape, axis):
    if axis is None:
        return tuple(d for d in shape if d != 1)
    axes = normalize_axes(axis, len(shape))
    for a in axes:
        if shape[a] not in (1, None):
            raise ShapeError(f"cannot squeeze axis {a} of size {shape[a]} "
                             f"in {format_shape(shape)}")
    return tuple(d for i, d in enumerate(shape) if i not in axes)


register(OpDef("squeeze", "shape",
               lambda types, attrs: TensorType(_squeeze_shape(types[0].shape, attrs["axis"]),
                                               types[0].dtype),
               lambda arrays, attrs: arrays[0].reshape(
                   _squeeze_shape(arrays[0].shape, attrs["axis"])),
               attrs={"axis": None}, num_inputs=1, tf="tf.squeeze", kind="view"))


# -- strided_slice ------------------------------------------------------------------
# spec: one entry per input axis, in order, with new axes interleaved:
#   ("range", start, stop, step)  start/stop may be None (Python slice semantics)
#   ("index", i)                  picks one element and drops the axis
#   ("new",)                      inserts an axis of size 1
def check_slice_spec(spec, rank):
    """ShapeError unless a strided_slice spec fits a tensor of this rank."""
    for e in spec:
        if e[0] == "invalid":          # an index the builder could not read (see below)
            raise ShapeError(e[1])
    consumed = sum(1 for e in spec if e[0] != "new")
    if consumed != rank:
        raise ShapeError(f"slice covers {consumed} axes of a rank-{rank} tensor")
    for e in spec:
        if e[0] == "range" and e[3] == 0:
            raise ShapeError("slice step cannot be zero")


def slice_plan(shape, spec):
    """Per input axis: (start, step, count) for ranges or (index, 0, None) for indices,
    with concrete shapes; and the output shape."""
    plan, out, axis = [], [], 0
    for e in spec:
        if e[0] == "new":
            out.append(1)
            continue
        dim = shape[axis]
        if e[0] == "index":
            i = e[1]
            if dim is not None and not -dim <= i < dim:
                raise ShapeError(f"index {i} is out of bounds for axis {axis} of size {dim}")
            plan.append((i % dim if dim else i, 0, None))
        else:
            if dim is None:
                plan.append(None)
                out.append(None)
            else:
                start, stop, step = slice(e[1], e[2], e[3]).indices(dim)
                count = len(range(start, stop, step))
                plan.append((start, step, count))
                out.append(count)
        axis += 1
    return plan, tuple(out)


def _slice_type(types, attrs):
    (t,) = types
    check_slice_spec(attrs["spec"], t.rank)
    return TensorType(slice_plan(t.shape, attrs["spec"])[1], t.dtype)


def _slice_ref(arrays, attrs):
    (x,) = arrays
    index = []
    for e in attrs["spec"]:
        index.append(None if e[0] == "new" else e[1] if e[0] == "index"
                     else slice(e[1], e[2], e[3]))
    return np.ascontiguousarray(x[tuple(index)])


register(OpDef("strided_slice", "shape", _slice_type, _slice_ref,
               attrs={"spec": REQUIRED}, num_inputs=1, tf="tf.strided_slice"))


# -- builders -------------------------------------------------------------------------
def reshape(x, shape, name=None):
    return apply("reshape", [x], {"shape": tuple(int(d) for d in shape)}, name)


def transpose(x, perm=None, name=None):
    return apply("transpose", [x], {"perm": None if perm is None else ints_attr(perm, "perm")},
                 name)


def expand_dims(x, axis, name=None):
    return apply("expand_dims", [x], {"axis": int_attr(axis, "axis")}, name)


def squeeze(x, axis=None, name=None):
    if axis is not None and not isinstance(axis, (int, np.integer)):
        axis = tuple(int(a) for a in axis)
    return apply("squeeze", [x], {"axis": axis}, name)


def index_spec(key, rank):
    """Python indexing (ints, slices, None, Ellipsis) → a strided_slice spec."""
    key = key if isinstance(key, tuple) else (key,)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise ShapeError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > rank:
        raise ShapeError(f"too many indices ({used}) for a tensor of rank {rank}")
    spec = []
    for k in key:
        if k is Ellipsis:
            spec.extend([("range", None, None, 1)] * (rank - used))
        elif k is None:
            spec.append(("new",))
        elif isinstance(k, slice):
            spec.append(("range", _int_or_none(k.start), _int_or_none(k.stop),
                         1 if k.step is None else int(k.step)))
        elif isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
            spec.append(("index", int(k)))
        else:
            raise ShapeError(f"unsupported index {k!r}: use ints, slices, None and ..."
                             f" (gather takes tensors of indices)")
    if not any(k is Ellipsis for k in key):
        spec.extend([("range", None, None, 1)] * (rank - used))
    return tuple(spec)


def _int_or_none(v):
    return None if v is None else int(v)


def strided_slice(x, key, name=None):
    try:
        spec = index_spec(key, x.type.rank)
    except ShapeError as err:
        # Raised from type inference instead, so the error names the node and the
        # user's line like every other build-time error (no node is added).
        spec = (("invalid", str(err)),)
    return apply("strided_slice", [x], {"spec": spec}, name)
