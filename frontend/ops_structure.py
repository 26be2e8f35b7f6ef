"""User-facing functions of the structure family: joining, cutting, padding, repeating
and indexing tensors, with TensorFlow's names and arguments.

Ops of their own (ir/ops/structure.py): concat, pad, mirror_pad, tile, reverse,
broadcast_to, gather, gather_nd, unsorted_segment_sum, one_hot, dynamic_slice,
dynamic_update_slice (also slice with a begin the graph computes). Composites, built from
those and the shape ops (what TensorFlow.js does too, and the gradients come free):
stack (expand_dims + concat), unstack, split and slice (strided_slices),
strided_slice (TensorFlow's masks translated to the indexing op), top_k (two rank
kernels and a gather), space_to_batch_nd and batch_to_space_nd (pad/reshape/transpose).
"""
from __future__ import annotations

import builtins
from collections import namedtuple

import numpy as np

from ..ir.errors import AttrError, DTypeError, ShapeError
from ..ir.graph import get_default_graph
from ..ir.ops import elementwise as _ew, shape as _shape, state as _state, structure as _st
from ..ir.ops.common import apply, to_array
from ..ir.types import as_dtype
from . import ops_math as _math
from .operands import as_tensor, operands, scoped, static_shape
from .ops_graph import constant
from .tensor import Tensor, as_tensor_value, wrap

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _value(x, dtype=None):
    return as_tensor_value(x, dtype)


def _values(xs):
    """Tensors stay; arrays become constants of the first tensor's graph."""
    xs = list(xs)
    graph = next((x.graph for x in xs if isinstance(x, Tensor)), get_default_graph())
    return [x.value if isinstance(x, Tensor) else _state.constant(graph, x) for x in xs]


def _ints(v):
    if isinstance(v, Tensor):
        raise TypeError("this argument must be known when the graph is built: give a "
                        "Python list or numpy array, not a tensor")
    return [int(a) for a in np.asarray(v).reshape(-1)]


def _slice_spec(x, spec, name):
    """A strided_slice node; an invalid spec is reported by the node (with the user's
    line), as indexing does."""
    return apply("strided_slice", [x], {"spec": tuple(spec)}, name)


def _invalid(message):
    return (("invalid", message),)


def _known_dim(x, axis, what):
    rank = x.type.rank
    if not -rank <= axis < rank:
        return None, f"axis {axis} is out of range for a tensor of rank {rank}"
    axis %= rank
    if x.shape[axis] is None:
        return None, f"{what} needs the size of axis {axis}, which is unknown"
    return axis, None


@_export
def fill(dims, value, dtype=None, name=None):
    """A tensor of shape dims holding value everywhere."""
    return wrap(_ew.fill(get_default_graph(), dims, value, dtype, name=name))


@_export
def zeros(shape, dtype="float32", name=None):
    return fill(shape, 0, dtype, name=name)


@_export
def ones(shape, dtype="float32", name=None):
    return fill(shape, 1, dtype, name=name)


@_export
def reshape(x, shape, name=None):
    """Same elements, new shape (one dimension may be -1). No kernel runs."""
    return wrap(_shape.reshape(operands(x)[0], shape, name=name))


@_export
def transpose(x, perm=None, name=None):
    """Permute axes (default: reverse them)."""
    return wrap(_shape.transpose(operands(x)[0], perm, name=name))


@_export
def expand_dims(x, axis, name=None):
    return wrap(_shape.expand_dims(operands(x)[0], axis, name=name))


@_export
def squeeze(x, axis=None, name=None):
    return wrap(_shape.squeeze(operands(x)[0], axis, name=name))



# -- joining and cutting ----------------------------------------------------------------------
@_export
def concat(values, axis, name=None):
    """Join tensors along an existing axis (negative counts from the end). All
    dimensions but axis must match; longer lists are joined in groups of 8 (a kernel
    reads at most 8 textures).

    >>> import fragflow as ff, numpy as np
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.concat([np.ones((1, 2)), np.zeros((2, 2))], axis=0)
    >>> ff.Session(g, backend="numpy").run(y).shape
    (3, 2)
    """
    values = _values(values)
    if not values:
        raise ShapeError("concat needs at least one tensor")
    return wrap(_st.concat(values, axis, name=name))


@_export
def stack(values, axis=0, name=None):
    """Join tensors of one shape along a new axis (rank + 1 result). A composite:
    expand_dims of each, then concat (as TensorFlow.js builds it).

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     ff.stack([ff.zeros((2, 3)), ff.ones((2, 3))], axis=1).shape
    (2, 2, 3)
    """
    values = _values(values)
    if not values:
        raise ShapeError("stack needs at least one tensor")
    rank = values[0].type.rank
    if not -(rank + 1) <= axis <= rank:
        raise ShapeError(f"stack axis {axis} is out of range for tensors of rank {rank} "
                         f"(use {-(rank + 1)}..{rank})")
    axis %= rank + 1
    for i, v in enumerate(values[1:], 1):
        if v.shape != values[0].shape:
            raise ShapeError(f"stack: tensor {i} has shape {v.type} but tensor 0 has "
                             f"{values[0].type}; stacked tensors must have one shape")
    expanded = [_shape.expand_dims(v, axis) for v in values]
    if len(expanded) == 1:
        return wrap(expanded[0])
    return wrap(_st.concat(expanded, axis, name=name or "stack"))


@_export
def unstack(value, num=None, axis=0, name=None):
    """The slices of value along axis, as a list (rank - 1 each). A composite of
    strided_slices (a kernel each)."""
    x = _value(value)
    ax, err = _known_dim(x, axis, "unstack")
    if err:
        return [wrap(_slice_spec(x, _invalid(err), name or "unstack"))]
    dim = x.shape[ax]
    if num is not None and num != dim:
        return [wrap(_slice_spec(x, _invalid(f"num={num} but axis {ax} has size {dim}"),
                                  name or "unstack"))]
    out = []
    for i in range(dim):
        spec = [("range", None, None, 1)] * x.type.rank
        spec[ax] = ("index", i)
        out.append(wrap(_slice_spec(x, spec, name or "unstack")))
    return out


@_export
def split(value, num_or_size_splits, axis=0, num=None, name=None):
    """Cut value along axis into a list of tensors: num_or_size_splits is a count of
    equal parts (which must divide the axis) or a list of sizes (one may be -1: the
    rest). A composite of strided_slices.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     [t.shape for t in ff.split(ff.zeros((2, 7)), [2, -1, 1], axis=1)]
    [(2, 2), (2, 4), (2, 1)]
    """
    x = _value(value)
    name = name or "split"
    ax, err = _known_dim(x, axis, "split")
    if err:
        return [wrap(_slice_spec(x, _invalid(err), name))]
    dim = x.shape[ax]
    if isinstance(num_or_size_splits, (int, np.integer)):
        n = int(num_or_size_splits)
        if n <= 0 or dim % n:
            return [wrap(_slice_spec(x, _invalid(
                f"cannot split axis {ax} of size {dim} into {n} equal parts"), name))]
        sizes = [dim // n] * n
    else:
        sizes = _ints(num_or_size_splits)
        unknown = [i for i, s in enumerate(sizes) if s == -1]
        known = builtins.sum(s for s in sizes if s != -1)
        bad = None
        if len(unknown) > 1 or any(s < -1 for s in sizes):
            bad = f"size_splits {sizes} may hold one -1 and otherwise sizes >= 0"
        elif unknown and known > dim:
            bad = f"size_splits {sizes} add up to more than axis {ax}'s size {dim}"
        elif not unknown and known != dim:
            bad = (f"size_splits {sizes} add up to {known}, not to the size of axis "
                   f"{ax} ({dim})")
        if bad:
            return [wrap(_slice_spec(x, _invalid(bad), name))]
        if unknown:
            sizes[unknown[0]] = dim - known
    if num is not None and num != len(sizes):
        return [wrap(_slice_spec(x, _invalid(f"num={num} but the split makes "
                                              f"{len(sizes)} parts"), name))]
    out, start = [], 0
    for size in sizes:
        spec = [("range", None, None, 1)] * x.type.rank
        spec[ax] = ("range", start, start + size, 1)
        out.append(wrap(_slice_spec(x, spec, name)))
        start += size
    return out


@_export
def slice(input_, begin, size, name=None):
    """input_[begin[i] : begin[i] + size[i]] on every axis; size -1 means "to the
    end". begin must be >= 0 and the slice must fit (TensorFlow's rules). A begin the
    graph computes (an int32 tensor, or a list holding scalar tensors) needs a static
    size (no -1): it is a dynamic_slice, whose begins are clamped so that the slice fits
    (XLA's rule) where TensorFlow would raise."""
    x = _value(input_)
    if _has_tensor(begin):
        return _slice_at_tensor_begin(x, begin, size, name)
    begin, size = _ints(begin), _ints(size)
    rank = x.type.rank
    spec, bad = [], None
    if len(begin) != rank or len(size) != rank:
        bad = (f"begin {begin} and size {size} must each have one entry per axis "
               f"(rank {rank})")
    else:
        for a, (b, s, d) in enumerate(zip(begin, size, x.shape)):
            if b < 0 or s < -1:
                bad = f"begin {b} and size {s} at axis {a} must be >= 0 (size may be -1)"
            elif d is not None and (b > d or (s != -1 and b + s > d)):
                bad = (f"slice [{b}, {b + s if s != -1 else d}) at axis {a} does not fit "
                       f"in size {d}")
            spec.append(("range", b, None if s == -1 else b + s, 1))
    return wrap(_slice_spec(x, _invalid(bad) if bad else spec, name or "slice"))


def _has_tensor(v) -> bool:
    return isinstance(v, Tensor) or (isinstance(v, (list, tuple))
                                      and any(isinstance(b, Tensor) for b in v))


def _starts(starts):
    """Start indices for the ir builder: a tensor's value, or a list of values / ints."""
    if isinstance(starts, Tensor):
        return starts.value
    if isinstance(starts, (list, tuple)):
        return [b.value if isinstance(b, Tensor) else int(b) for b in starts]
    return [int(b) for b in np.asarray(starts).reshape(-1)]


def _slice_at_tensor_begin(x, begin, size, name):
    size = _ints(size)
    if any(s < 0 for s in size):
        raise ShapeError(f"slice with a begin the graph computes needs a static size; got "
                         f"{size} (-1, 'to the end', would depend on the begin)")
    return wrap(_st.dynamic_slice(x, _starts(begin), size, name=name or "slice"))


@_export
def dynamic_slice(operand, start_indices, slice_sizes, name=None):
    """JAX's lax.dynamic_slice: the block of static slice_sizes at start_indices (one
    int32 vector, or a list of int32 scalar tensors and ints, one per axis), which the
    graph may compute. Each start is clamped into [0, dim - size] as XLA does, so the
    block always fits. On GL one kernel reads the starts from their texture (no
    readback). Gradient: dy written into zeros at the block (dynamic_update_slice).

    >>> import fragflow as ff, numpy as np
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     i = ff.placeholder((), "int32", name="i")
    ...     y = ff.dynamic_slice(np.arange(6.0), [i], [2])
    >>> s = ff.Session(g, backend="numpy")
    >>> s.run(y, {i: 1}), s.run(y, {i: 9})
    (array([1., 2.], dtype=float32), array([4., 5.], dtype=float32))
    """
    x = _value(operand)
    return wrap(_st.dynamic_slice(x, _starts(start_indices), _ints(slice_sizes), name=name))


@_export
def dynamic_update_slice(operand, update, start_indices, name=None):
    """JAX's lax.dynamic_update_slice: operand with update written over the block at
    start_indices (as dynamic_slice's, clamped the same way so the update fits).
    Gradients: the operand's is dy with zeros over the block, the update's the block of
    dy; the starts get none."""
    x = _value(operand)
    u = _value(update, x.dtype)
    return wrap(_st.dynamic_update_slice(x, u, _starts(start_indices), name=name))


@_export
def strided_slice(input_, begin, end, strides=None, begin_mask=0, end_mask=0,
                  ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0, name=None):
    """TensorFlow's strided_slice: bit i of a mask applies to entry i of begin/end/
    strides. begin_mask/end_mask: ignore begin[i]/end[i] (the whole range);
    ellipsis_mask: entry i is `...`; new_axis_mask: a new axis of size 1;
    shrink_axis_mask: take index begin[i] and drop the axis. The same as Python
    indexing with the equivalent key (x[1:, ..., None, 3]), which is what it builds.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     ff.strided_slice(ff.zeros((4, 5, 6)), [1, 0, 2], [3, 0, 0], [1, 1, -1],
    ...                      end_mask=0b100, shrink_axis_mask=0b010).shape
    (2, 3)
    """
    x = _value(input_)
    begin, end = _ints(begin), _ints(end)
    strides = [1] * len(begin) if strides is None else _ints(strides)
    if not len(begin) == len(end) == len(strides):
        return wrap(_slice_spec(x, _invalid(
            f"begin, end and strides have {len(begin)}, {len(end)} and {len(strides)} "
            f"entries; they must have one length"), name or "strided_slice"))
    key = []
    for i, (b, e, s) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if ellipsis_mask & bit:
            key.append(Ellipsis)
        elif new_axis_mask & bit:
            key.append(None)
        elif shrink_axis_mask & bit:
            key.append(b)
        else:
            key.append(builtins.slice(None if begin_mask & bit else b,
                                      None if end_mask & bit else e, s))
    return wrap(_shape.strided_slice(x, tuple(key), name=name or "strided_slice"))


# -- padding, repeating, reversing -------------------------------------------------------------
@_export
def pad(tensor, paddings, mode="CONSTANT", constant_values=0, name=None):
    """Pad each axis by paddings[i] = (before, after) elements. mode CONSTANT fills
    with constant_values; REFLECT mirrors without repeating the edge (pads up to size
    - 1); SYMMETRIC mirrors repeating it (pads up to size)."""
    x = _value(tensor)
    mode = str(mode).upper()
    if mode == "CONSTANT":
        return wrap(_st.pad(x, paddings, constant_values, name=name))
    return wrap(_st.mirror_pad(x, paddings, mode, name=name))


@_export
def mirror_pad(input, paddings, mode, name=None):          # noqa: A002 (TF's name)
    """Pad by mirroring: mode REFLECT (edge not repeated) or SYMMETRIC (repeated)."""
    return wrap(_st.mirror_pad(_value(input), paddings, mode, name=name))


@_export
def tile(input, multiples, name=None):                     # noqa: A002
    """Repeat input multiples[i] times along axis i.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     ff.tile(ff.zeros((2, 3)), [2, 3]).shape
    (4, 9)
    """
    return wrap(_st.tile(_value(input), _ints(multiples), name=name))


@_export
def reverse(tensor, axis, name=None):
    """Reverse the order of elements along each axis in the list axis."""
    axis = [axis] if isinstance(axis, (int, np.integer)) else _ints(axis)
    return wrap(_st.reverse(_value(tensor), axis, name=name))


@_export
def broadcast_to(input, shape, name=None):                 # noqa: A002
    """input broadcast (numpy rules) to shape."""
    return wrap(_st.broadcast_to(_value(input), _ints(shape), name=name))


# -- indexing ---------------------------------------------------------------------------------
@_export
def gather(params, indices, validate_indices=None, axis=None, batch_dims=0, name=None):
    """params' slices at int32 indices along axis (default batch_dims): the result has
    shape params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:].
    With batch_dims = b the first b axes of params and indices are matched, not
    gathered. Indices outside [0, params.shape[axis]) read 0, as TensorFlow does on
    GPUs (on CPUs it raises); validate_indices is ignored, as in TensorFlow.

    >>> import fragflow as ff, numpy as np
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.gather(np.array([10., 20., 30.]), [2, 0, 5])
    >>> ff.Session(g, backend="numpy").run(y)
    array([30., 10.,  0.], dtype=float32)
    """
    p = _values([params])[0]
    axis = batch_dims if axis is None else axis
    ix = indices.value if isinstance(indices, Tensor) else _state.constant(p.graph, indices,
                                                                             "int32")
    return wrap(_st.gather(p, ix, axis, batch_dims, name=name))


@_export
def gather_nd(params, indices, batch_dims=0, name=None):
    """params at the index tuples in indices' last axis: the result has shape
    indices.shape[:-1] + params.shape[indices.shape[-1]:]. Out-of-range tuples read 0
    (TensorFlow on GPUs). batch_dims > 0 is not supported."""
    if batch_dims:
        raise NotImplementedError("gather_nd with batch_dims > 0 is not supported; "
                                  "fold the batch into the index tuples")
    p = _values([params])[0]
    ix = indices.value if isinstance(indices, Tensor) else _state.constant(p.graph, indices,
                                                                             "int32")
    return wrap(_st.gather_nd(p, ix, name=name))


@_export
def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """out[s] = the sum of data[j] over the j with segment_ids[j] == s, for s in
    range(num_segments); segment_ids' shape is a prefix of data's. Ids outside
    [0, num_segments) are dropped. Each output element loops over all ids: cost
    O(segment_ids.size) per element."""
    d = _values([data])[0]
    ids = segment_ids.value if isinstance(segment_ids, Tensor) else \
        _state.constant(d.graph, segment_ids, "int32")
    return wrap(_st.unsorted_segment_sum(d, ids, int(num_segments), name=name))


@_export
def one_hot(indices, depth, on_value=None, off_value=None, axis=None, dtype=None, name=None):
    """A new axis of size depth (last, or at axis) holding on_value where it equals the
    index and off_value elsewhere (indices outside [0, depth) give all off_value).
    dtype defaults to on_value's, else float32. No gradient (as in TensorFlow)."""
    ix = _value(indices, None if isinstance(indices, Tensor) else "int32")
    if dtype is None:
        given = on_value if on_value is not None else off_value
        dtype = "float32" if given is None else to_array(given).dtype.name
    dtype = as_dtype(dtype)
    return wrap(_st.one_hot(ix, depth, 1 if on_value is None else on_value,
                             0 if off_value is None else off_value,
                             -1 if axis is None else axis, dtype, name=name))


TopK = namedtuple("TopK", ["values", "indices"])


@_export
def top_k(input, k=1, sorted=True, name=None):             # noqa: A002
    """The k largest entries of the last axis and their int32 indices, largest first;
    equal values keep index order (lower index first) and NaN counts as the largest.
    Returns (values, indices). sorted=False is accepted (the result is sorted anyway).

    Built as two ops (each element's rank, then the index of each rank below k) that
    the pass select_top_k makes one top_k_select. On GL, where rows x n^2 is at most
    the Tuning's structure.top_k_rank_max_work, every element is ranked against its
    row (O(n^2), two draws); past it a radix select finds the k-th largest value (16
    counting passes over the rows, then O(k^2)). The values are a gather.

    >>> import fragflow as ff, numpy as np
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     values, indices = ff.top_k(np.array([1., 3., 2., 3.]), k=2)
    >>> ff.Session(g, backend="numpy").run([values, indices])
    [array([3., 3.], dtype=float32), array([1, 3], dtype=int32)]
    """
    del sorted
    x = _value(input)
    with x.graph.name_scope(name or "top_k"):
        ranks = _st.top_k_rank(x)
        indices = _st.top_k_indices(ranks, k)
        last = x.type.rank - 1
        values = _st.gather(x, indices, axis=last, batch_dims=last)
    return TopK(wrap(values), wrap(indices))


# -- space <-> batch ---------------------------------------------------------------------------
def _block_args(x, block_shape, pairs, what):
    block = _ints(block_shape)
    pairs = [tuple(p) for p in np.asarray(_ints(pairs)).reshape(len(block), 2).tolist()] \
        if len(block) else []
    m = len(block)
    if m < 1 or x.type.rank < m + 1:
        raise ShapeError(f"{what}: block_shape {block} needs an input of rank >= "
                         f"{m + 1}, got {x.type}")
    if any(b < 1 for b in block):
        raise ShapeError(f"{what}: block_shape {block} must be >= 1")
    if any(d is None for d in x.shape[1:m + 1]):
        raise ShapeError(f"{what} needs the spatial sizes of {x.type} to be known")
    return block, pairs, m


@_export
def space_to_batch_nd(input, block_shape, paddings, name=None):    # noqa: A002
    """Zero-pad the M spatial axes (1..M) by paddings, cut them into blocks of
    block_shape and move the position inside the block into the batch axis:
    [batch, *spatial, *rest] -> [batch * prod(block), *(padded / block), *rest].
    A composite of pad, reshape and transpose (as TensorFlow.js builds it); its
    gradient is batch_to_space_nd's computation."""
    x = _value(input)
    block, pads, m = _block_args(x, block_shape, paddings, "space_to_batch_nd")
    rest = list(x.shape[m + 1:])
    padded = [d + b + e for d, (b, e) in zip(x.shape[1:m + 1], pads)]
    for d, b in zip(padded, block):
        if d % b:
            raise ShapeError(f"space_to_batch_nd: padded spatial sizes {padded} are not "
                             f"multiples of block_shape {block}")
    with x.graph.name_scope(name or "space_to_batch_nd"):
        y = _st.pad(x, [(0, 0)] + pads + [(0, 0)] * len(rest))
        split = [-1]
        for d, b in zip(padded, block):
            split += [d // b, b]
        y = _shape.reshape(y, split + rest)
        perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] + \
            list(range(2 * m + 1, 2 * m + 1 + len(rest)))
        y = _shape.transpose(y, perm)
        y = _shape.reshape(y, [-1] + [d // b for d, b in zip(padded, block)] + rest)
    return wrap(y)


@_export
def batch_to_space_nd(input, block_shape, crops, name=None):   # noqa: A002
    """The inverse of space_to_batch_nd: move blocks of the batch axis back into the M
    spatial axes, then crop crops[i] = (start, end) from spatial axis i.
    [batch * prod(block), *spatial, *rest] -> [batch, *(spatial * block - crops), *rest].
    A composite of reshape, transpose and a slice."""
    x = _value(input)
    block, crops, m = _block_args(x, block_shape, crops, "batch_to_space_nd")
    rest = list(x.shape[m + 1:])
    spatial = list(x.shape[1:m + 1])
    if any(c < 0 for pair in crops for c in pair):
        raise ShapeError(f"batch_to_space_nd: crops {crops} must be >= 0")
    blocks = int(np.prod(block))
    if x.shape[0] is not None and x.shape[0] % blocks:
        raise ShapeError(f"batch_to_space_nd: batch size {x.shape[0]} is not a multiple "
                         f"of prod(block_shape) = {blocks}")
    for d, b, (s, e) in zip(spatial, block, crops):
        if s + e > d * b:
            raise ShapeError(f"batch_to_space_nd: crops {crops} remove more than the "
                             f"size {d * b}")
    with x.graph.name_scope(name or "batch_to_space_nd"):
        y = _shape.reshape(x, block + [-1] + spatial + rest)
        perm = [m]
        for i in range(m):
            perm += [m + 1 + i, i]
        perm += list(range(2 * m + 1, 2 * m + 1 + len(rest)))
        y = _shape.transpose(y, perm)
        y = _shape.reshape(y, [-1] + [d * b for d, b in zip(spatial, block)] + rest)
        spec = [("range", None, None, 1)]
        spec += [("range", s, -e if e else None, 1) for s, e in crops]
        spec += [("range", None, None, 1)] * len(rest)
        if any(s or e for s, e in crops):
            y = _slice_spec(y, spec, None)
    return wrap(y)


# -- compositions (see each docstring for the cost) ----------------------------------------
@_export
def meshgrid(*args, indexing="xy", name=None):
    """N-D coordinate grids from 1-D tensors, as tf.meshgrid (indexing "xy": the first
    two outputs' axes swapped, as numpy's default; "ij": matrix indexing)."""
    if indexing not in ("xy", "ij"):
        raise AttrError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    with scoped(name, "meshgrid"):
        xs = [as_tensor(a) for a in args]
        for x in xs:
            if x.ndim != 1:
                raise ShapeError(f"meshgrid needs 1-D tensors, got {x!r}")
        sizes = [static_shape(x, "meshgrid")[0] for x in xs]
        n = len(xs)
        if indexing == "xy" and n >= 2:
            sizes[0], sizes[1] = sizes[1], sizes[0]
        out = []
        for i, x in enumerate(xs):
            axis = i
            if indexing == "xy" and n >= 2 and i < 2:
                axis = 1 - i
            shape = [1] * n
            shape[axis] = -1
            out.append(reshape(x, shape) * ones(sizes, x.dtype)
                       if x.dtype != "bool" else
                       broadcast_to(reshape(x, shape), sizes))
        return out


def _block(x, block_size, what):
    if not (isinstance(block_size, (int, np.integer)) and block_size >= 2):
        raise AttrError(f"{what}: block_size must be an int >= 2, got {block_size!r}")
    if x.ndim != 4:
        raise ShapeError(f"{what} needs a 4-D NHWC input, got {x!r}")
    return int(block_size)


@_export
def depth_to_space(input, block_size, data_format="NHWC", name=None):  # noqa: A002
    """Moves depth into blocks of block_size x block_size pixels (NHWC, TensorFlow's
    DCR order): (N, H, W, C * b * b) -> (N, H * b, W * b, C)."""
    if data_format != "NHWC":
        raise AttrError(f"depth_to_space: data_format {data_format!r} is not supported")
    with scoped(name, "depth_to_space"):
        x = as_tensor(input)
        b = _block(x, block_size, "depth_to_space")
        n, h, w, c = x.shape
        if c is None or h is None or w is None or c % (b * b):
            raise ShapeError(f"depth_to_space: the depth {c} must be known and divisible "
                             f"by block_size**2 = {b * b}")
        y = reshape(x, (-1, h, w, b, b, c // (b * b)))
        y = transpose(y, (0, 1, 3, 2, 4, 5))
        return reshape(y, (-1, h * b, w * b, c // (b * b)))


@_export
def space_to_depth(input, block_size, data_format="NHWC", name=None):  # noqa: A002
    """Moves blocks of block_size x block_size pixels into depth (NHWC):
    (N, H, W, C) -> (N, H / b, W / b, C * b * b); the inverse of depth_to_space."""
    if data_format != "NHWC":
        raise AttrError(f"space_to_depth: data_format {data_format!r} is not supported")
    with scoped(name, "space_to_depth"):
        x = as_tensor(input)
        b = _block(x, block_size, "space_to_depth")
        n, h, w, c = x.shape
        if h is None or w is None or c is None or h % b or w % b:
            raise ShapeError(f"space_to_depth: height {h} and width {w} must be known "
                             f"and divisible by block_size {b}")
        y = reshape(x, (-1, h // b, b, w // b, b, c))
        y = transpose(y, (0, 1, 3, 2, 4, 5))
        return reshape(y, (-1, h // b, w // b, c * b * b))


def _linear_ids(indices, shape, what):
    """indices [..., K] into shape -> flat ids [...] into shape[:K] (-1 where any index
    is out of range: unsorted_segment_sum drops those)."""
    idx = as_tensor(indices)
    if idx.dtype != "int32" or idx.ndim < 1:
        raise DTypeError(f"{what}: indices must be int32 [..., K], got {idx!r}")
    k = static_shape(idx, what)[-1]
    if k > len(shape):
        raise ShapeError(f"{what}: indices index {k} axes of a shape of rank {len(shape)}")
    dims = np.int32(shape[:k])
    strides = np.int32([int(np.prod(shape[i + 1:k])) for i in range(k)])
    with idx.graph.as_default():
        linear = _math.reduce_sum(idx * constant(strides), axis=-1)
        inside = _math.reduce_all(_math.logical_and(_math.greater_equal(idx, 0),
                                                    _math.less(idx, constant(dims))), axis=-1)
    return _math.where(inside, linear, -1), k


@_export
def scatter_nd(indices, updates, shape, name=None):
    """A tensor of shape holding zeros, with updates added at indices (int32 [..., K],
    each picking a slice of shape[K:]), as tf.scatter_nd: duplicate indices add up; an
    index out of range is dropped (TensorFlow raises on CPU). Gradients flow to
    updates. Each output element loops over all indices (O(number of indices))."""
    shape = [int(d) for d in shape]
    with scoped(name, "scatter_nd"):
        ids, k = _linear_ids(indices, shape, "scatter_nd")
        u = as_tensor(updates)
        lead = tuple(ids.shape)
        if tuple(u.shape) != lead + tuple(shape[k:]):
            raise ShapeError(f"scatter_nd: updates must have shape "
                             f"{list(lead) + shape[k:]}, got {list(u.shape)}")
        count = int(np.prod(lead))
        flat_u = reshape(u, [count] + shape[k:])
        summed = unsorted_segment_sum(flat_u, reshape(ids, [count]),
                                      int(np.prod(shape[:k])))
        return reshape(summed, shape)


@_export
def tensor_scatter_nd_update(tensor, indices, updates, name=None):
    """tensor with the slices at indices replaced by updates, as
    tf.tensor_scatter_nd_update. Indices must be unique (duplicates add their updates;
    TensorFlow keeps one of them). Gradients flow to tensor (where not replaced) and
    to updates."""
    with scoped(name, "tensor_scatter_nd_update"):
        t, u = as_tensor(tensor), as_tensor(updates)
        shape = list(static_shape(t, "tensor_scatter_nd_update"))
        hits = scatter_nd(indices, _math.ones_like(u), shape)
        return _math.where(_math.greater(hits, 0), scatter_nd(indices, u, shape), t)


@_export
def tensor_scatter_nd_add(tensor, indices, updates, name=None):
    """tensor plus updates added at indices (duplicates add up), as
    tf.tensor_scatter_nd_add."""
    with scoped(name, "tensor_scatter_nd_add"):
        t = as_tensor(tensor)
        return t + scatter_nd(indices, updates, list(static_shape(t, "tensor_scatter_nd_add")))
