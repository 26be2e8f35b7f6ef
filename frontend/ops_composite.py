"""TensorFlow functions built from fragflow's ops (no kernel of their own): their numpy
reference is the references of the ops they are made of, their GLSL the fusion of
those ops' kernels, and their gradients follow from the ops' rules. Names and arguments
are TensorFlow's (tf.math.divide_no_nan, tf.nn.l2_normalize, tf.clip_by_norm, ...).

Where the plain composition would give NaN gradients (a division by a zero that a
`where` then discards), the composition divides by a safe value instead, as TensorFlow's
own Python implementations do.

>>> import fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     q = ff.divide_no_nan(ff.constant([1.0, 2.0]), ff.constant([0.0, 4.0]))
>>> ff.Session(g, backend="numpy").run(q).tolist()
[0.0, 0.5]
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import AttrError, DTypeError, ShapeError
from . import ops as _ops
from . import ops_math as _math
from . import ops_nn as _nn
from .ops import _operands
from .tensor import Tensor, _wrap

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _tensor(x, dtype=None) -> Tensor:
    if isinstance(x, Tensor):
        return x
    return _wrap(_operands(x if dtype is None else np.asarray(x, dtype))[0])


def _static(x, what) -> tuple:
    if any(d is None for d in x.shape):
        raise ShapeError(f"{what} needs a static shape, got {list(x.shape)} (feed a "
                         f"placeholder of known shape)")
    return tuple(x.shape)


def _scoped(name, default):
    return _ops.name_scope(name or default)


# -- math --------------------------------------------------------------------------------
@_export
def divide_no_nan(x, y, name=None):
    """x / y, and 0 where y is 0 (even for x = 0, inf or NaN), as tf.math.divide_no_nan.
    Gradients are 0 where y is 0."""
    with _scoped(name, "divide_no_nan"):
        x, y = _tensor(x), _tensor(y)
        zero = _ops.equal(y, 0.0)
        safe = _ops.where(zero, 1.0, y)
        return _ops.where(zero, 0.0, _ops.div(x, safe))


@_export
def logical_xor(x, y, name=None):
    """x != y for bools: (x or y) and not (x and y), as tf.math.logical_xor."""
    with _scoped(name, "logical_xor"):
        return _ops.logical_and(_ops.logical_or(x, y),
                                _ops.logical_not(_ops.logical_and(x, y)))


def _bool_reduction(x, axis, keepdims, op, what):
    x = _tensor(x)
    if x.dtype != "bool":
        raise DTypeError(f"{what} needs a bool tensor, got {x.dtype} {x!r}")
    counted = op(_ops.cast(x, "int32"), axis=axis, keepdims=keepdims)
    return _ops.cast(counted, "bool")


@_export
def reduce_all(input_tensor, axis=None, keepdims=False, name=None):
    """True where every element along axis is true (bool in, bool out)."""
    with _scoped(name, "reduce_all"):
        return _bool_reduction(input_tensor, axis, keepdims, _ops.reduce_min, "reduce_all")


@_export
def reduce_any(input_tensor, axis=None, keepdims=False, name=None):
    """True where some element along axis is true (bool in, bool out)."""
    with _scoped(name, "reduce_any"):
        return _bool_reduction(input_tensor, axis, keepdims, _ops.reduce_max, "reduce_any")


@_export
def log_sigmoid(x, name=None):
    """log(sigmoid(x)) = -softplus(-x), without overflow for large |x|."""
    with _scoped(name, "log_sigmoid"):
        return -_math.softplus(-_tensor(x))


@_export
def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """The (population, divide by n) variance along axis, as tf.math.reduce_variance."""
    with _scoped(name, "reduce_variance"):
        x = _tensor(input_tensor)
        if x.dtype != "float32":
            raise DTypeError(f"reduce_variance needs float32, got {x.dtype}")
        centered = x - _ops.reduce_mean(x, axis=axis, keepdims=True)
        return _ops.reduce_mean(_ops.square(centered), axis=axis, keepdims=keepdims)


@_export
def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """The (population) standard deviation along axis, as tf.math.reduce_std."""
    with _scoped(name, "reduce_std"):
        return _ops.sqrt(reduce_variance(input_tensor, axis, keepdims))


@_export
def l2_normalize(x, axis=None, epsilon=1e-12, name=None):
    """x / sqrt(max(sum(x**2, axis), epsilon)), as tf.math.l2_normalize."""
    with _scoped(name, "l2_normalize"):
        x = _tensor(x)
        square_sum = _ops.reduce_sum(_ops.square(x), axis=axis, keepdims=True)
        return x * _ops.rsqrt(_ops.maximum(square_sum, float(epsilon)))


def _axes(axis, rank) -> tuple | None:
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(int(a) % rank for a in axes)


@_export
def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None):
    """The vector or matrix norm, as tf.norm. ord: "euclidean" / "fro" / 2 (the
    2-norm of the flattened axes), 1, np.inf, or a positive p. axis: None (all, as one
    vector), an int (vector norms) or a pair of ints (matrix norms: "fro"/"euclidean",
    1 (max column sum), np.inf (max row sum))."""
    with _scoped(name, "norm"):
        x = _tensor(tensor)
        keep = bool(keepdims)
        axes = _axes(axis, x.ndim)
        if axes is not None and len(axes) == 2 and ord in (1, np.inf):
            rows, cols = axes
            if ord == 1:    # max over columns of the column sums
                inner, outer = rows, cols
            else:
                inner, outer = cols, rows
            sums = _ops.reduce_sum(_ops.abs(x), axis=inner, keepdims=True)
            out = _ops.reduce_max(sums, axis=outer, keepdims=True)
            return out if keep else _ops.squeeze(out, axis=list(axes))
        if axes is not None and len(axes) > 2:
            raise AttrError(f"norm: axis must be None, an int or a pair, got {axis!r}")
        if axes is not None and len(axes) == 2 and ord not in ("euclidean", "fro"):
            raise AttrError(f"norm: matrix norm ord must be 'fro', 'euclidean', 1 or "
                            f"np.inf, got {ord!r}")
        if ord in ("euclidean", "fro", 2, 2.0):
            return _ops.sqrt(_ops.reduce_sum(_ops.square(x), axis=axes, keepdims=keep))
        if ord == 1:
            return _ops.reduce_sum(_ops.abs(x), axis=axes, keepdims=keep)
        if ord == np.inf:
            return _ops.reduce_max(_ops.abs(x), axis=axes, keepdims=keep)
        if isinstance(ord, (int, float)) and ord > 0:
            p = float(ord)
            return _ops.pow(_ops.reduce_sum(_ops.pow(_ops.abs(x), p), axis=axes,
                                            keepdims=keep), 1.0 / p)
        raise AttrError(f"norm: ord must be 'euclidean', 'fro', 1, 2, np.inf or a "
                        f"positive number, got {ord!r}")


@_export
def clip_by_norm(t, clip_norm, axes=None, name=None):
    """t * clip_norm / max(l2norm(t, axes), clip_norm), as tf.clip_by_norm: unchanged
    where its L2 norm is at most clip_norm. A zero t gives zero (and finite
    gradients)."""
    with _scoped(name, "clip_by_norm"):
        t = _tensor(t)
        l2sum = _ops.reduce_sum(_ops.square(t), axis=axes, keepdims=True)
        positive = _ops.greater(l2sum, 0.0)
        safe = _ops.where(positive, l2sum, 1.0)
        l2norm = _ops.where(positive, _ops.sqrt(safe), l2sum)
        return t * clip_norm / _ops.maximum(l2norm, clip_norm)


@_export
def global_norm(t_list, name=None):
    """sqrt(sum of the squares of every element of every tensor in t_list)."""
    with _scoped(name, "global_norm"):
        parts = [_ops.reduce_sum(_ops.square(_tensor(t))) for t in t_list if t is not None]
        if not parts:
            raise AttrError("global_norm needs at least one tensor")
        return _ops.sqrt(_ops.add_n(parts) if len(parts) > 1 else parts[0])


@_export
def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """(t_list scaled by clip_norm / max(global_norm, clip_norm), global_norm), as
    tf.clip_by_global_norm; None entries stay None."""
    with _scoped(name, "clip_by_global_norm"):
        norm_ = global_norm(t_list) if use_norm is None else _tensor(use_norm)
        scale = clip_norm * _ops.minimum(1.0 / norm_, 1.0 / clip_norm)
        return [None if t is None else _tensor(t) * scale for t in t_list], norm_


# -- structure ---------------------------------------------------------------------------
@_export
def meshgrid(*args, indexing="xy", name=None):
    """N-D coordinate grids from 1-D tensors, as tf.meshgrid (indexing "xy": the first
    two outputs' axes swapped, as numpy's default; "ij": matrix indexing)."""
    if indexing not in ("xy", "ij"):
        raise AttrError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    with _scoped(name, "meshgrid"):
        xs = [_tensor(a) for a in args]
        for x in xs:
            if x.ndim != 1:
                raise ShapeError(f"meshgrid needs 1-D tensors, got {x!r}")
        sizes = [_static(x, "meshgrid")[0] for x in xs]
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
            out.append(_ops.reshape(x, shape) * _ops.ones(sizes, x.dtype)
                       if x.dtype != "bool" else
                       _broadcast_bool(_ops.reshape(x, shape), sizes))
        return out


def _broadcast_bool(x, sizes):
    from .ops_structure import broadcast_to
    return broadcast_to(x, sizes)


@_export
def bias_add(value, bias, data_format=None, name=None):
    """value + bias along the channel axis: the last (NHWC, default) or axis 1
    ("NCHW" / "NC..."), as tf.nn.bias_add."""
    with _scoped(name, "bias_add"):
        value, bias = _tensor(value), _tensor(bias)
        if bias.ndim != 1:
            raise ShapeError(f"bias_add: bias must be 1-D, got shape {list(bias.shape)}")
        if data_format is None or data_format.startswith("N") and data_format.endswith("C"):
            return value + bias
        if data_format.startswith("NC"):
            return value + _ops.reshape(bias, [-1] + [1] * (value.ndim - 2))
        raise AttrError(f"bias_add: data_format {data_format!r} is not NHWC or NCHW")


@_export
def fused_batch_norm(x, scale, offset, mean=None, variance=None, epsilon=0.001,
                     data_format="NHWC", is_training=True, name=None,
                     exponential_avg_factor=1.0):
    """(y, batch_mean, batch_variance), as tf.compat.v1.nn.fused_batch_norm on NHWC
    images. Training: normalised by the batch's moments over N, H, W (the variance
    returned is the unbiased one, n / (n - 1) times the one used, as TensorFlow's);
    inference (is_training=False): by mean and variance."""
    if data_format != "NHWC":
        raise AttrError(f"fused_batch_norm: data_format {data_format!r} is not supported; "
                        f"fragflow uses NHWC (transpose first)")
    with _scoped(name, "fused_batch_norm"):
        x = _tensor(x)
        if x.ndim != 4:
            raise ShapeError(f"fused_batch_norm needs a 4-D NHWC input, got {x!r}")
        if is_training:
            batch_mean, batch_var = _nn.moments(x, axes=[0, 1, 2])
            y = _nn.batch_normalization(x, batch_mean, batch_var, offset, scale, epsilon)
            n = int(np.prod(_static(x, "fused_batch_norm")[:3]))
            unbiased = batch_var * (n / max(n - 1, 1))
            return y, batch_mean, unbiased
        if mean is None or variance is None:
            raise AttrError("fused_batch_norm with is_training=False needs mean and variance")
        y = _nn.batch_normalization(x, mean, variance, offset, scale, epsilon)
        return y, _tensor(mean), _tensor(variance)


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
    with _scoped(name, "depth_to_space"):
        x = _tensor(input)
        b = _block(x, block_size, "depth_to_space")
        n, h, w, c = x.shape
        if c is None or h is None or w is None or c % (b * b):
            raise ShapeError(f"depth_to_space: the depth {c} must be known and divisible "
                             f"by block_size**2 = {b * b}")
        y = _ops.reshape(x, (-1, h, w, b, b, c // (b * b)))
        y = _ops.transpose(y, (0, 1, 3, 2, 4, 5))
        return _ops.reshape(y, (-1, h * b, w * b, c // (b * b)))


@_export
def space_to_depth(input, block_size, data_format="NHWC", name=None):  # noqa: A002
    """Moves blocks of block_size x block_size pixels into depth (NHWC):
    (N, H, W, C) -> (N, H / b, W / b, C * b * b); the inverse of depth_to_space."""
    if data_format != "NHWC":
        raise AttrError(f"space_to_depth: data_format {data_format!r} is not supported")
    with _scoped(name, "space_to_depth"):
        x = _tensor(input)
        b = _block(x, block_size, "space_to_depth")
        n, h, w, c = x.shape
        if h is None or w is None or c is None or h % b or w % b:
            raise ShapeError(f"space_to_depth: height {h} and width {w} must be known "
                             f"and divisible by block_size {b}")
        y = _ops.reshape(x, (-1, h // b, b, w // b, b, c))
        y = _ops.transpose(y, (0, 1, 3, 2, 4, 5))
        return _ops.reshape(y, (-1, h // b, w // b, c * b * b))


# -- scans, searches, scatters (compositions; see each docstring for the cost) -------------
def _move_last(x, axis):
    axis = int(axis) % x.ndim
    perm = [i for i in range(x.ndim) if i != axis] + [axis]
    back = list(np.argsort(perm))
    return perm, back


@_export
def cumprod(x, axis=0, exclusive=False, reverse=False, name=None):
    """The cumulative product along axis, as tf.math.cumprod (exclusive: the first is
    1; reverse: from the end). Exact (a product per output over a triangular mask, no
    logarithms: zeros and signs are right) and differentiable through reduce_prod;
    costs O(n) per output element and an n x n intermediate (n the axis's static
    size)."""
    with _scoped(name, "cumprod"):
        x = _tensor(x)
        if x.dtype == "bool":
            raise DTypeError("cumprod needs float32 or int32, got bool")
        perm, back = _move_last(x, axis)
        moved = _ops.transpose(x, perm)
        n = _static(moved, "cumprod")[-1]
        i, j = np.arange(n)[:, None], np.arange(n)[None, :]
        if reverse:
            keep = j > i if exclusive else j >= i
        else:
            keep = j < i if exclusive else j <= i
        with x.graph.as_default():
            mask = _ops.constant(keep)
        one = 1 if x.dtype == "int32" else 1.0
        picked = _ops.where(mask, _ops.expand_dims(moved, -2), one)
        return _ops.transpose(_ops.reduce_prod(picked, axis=-1), back)


@_export
def in_top_k(predictions=None, targets=None, k=None, name=None):
    """True where targets[i]'s prediction is among the k largest of predictions[i]
    (predictions [batch, classes] float32, targets [batch] int32), as tf.nn.in_top_k:
    classes tied at the boundary all count as in the top k; a target out of range or
    whose prediction is not finite gives False. Either argument order (TF1's
    predictions first, TF2's targets first) is accepted. Not differentiable (bool)."""
    p, t = _tensor(predictions), _tensor(targets)
    if p.dtype == "int32" and t.dtype == "float32":
        p, t = t, p                                    # tf.math.in_top_k(targets, predictions)
    if p.ndim != 2 or t.ndim != 1 or t.dtype != "int32":
        raise ShapeError(f"in_top_k needs predictions [batch, classes] and int32 targets "
                         f"[batch], got {p!r} and {t!r}")
    if k is None:
        raise AttrError("in_top_k needs k")
    with _scoped(name, "in_top_k"):
        classes = _static(p, "in_top_k")[-1]
        with p.graph.as_default():
            hit = _ops.equal(_ops.expand_dims(t, -1),
                             _ops.constant(np.arange(classes, dtype=np.int32)))
        value = _ops.reduce_sum(_ops.where(hit, p, 0.0), axis=-1)
        valid = _ops.logical_and(reduce_any(hit, axis=-1), _math.is_finite(value))
        above = _ops.reduce_sum(_ops.cast(_ops.greater(p, _ops.expand_dims(value, -1)),
                                          "int32"), axis=-1)
        return _ops.logical_and(valid, _ops.less(above, int(k)))


@_export
def searchsorted(sorted_sequence, values, side="left", out_type="int32", name=None):
    """Where values would be inserted in sorted_sequence along the last axis to keep it
    sorted (leading axes are batches of equal size), as tf.searchsorted: side "left"
    gives the first such index, "right" the last. int32 results; compares every value
    with every element (O(n) per value). Not differentiable."""
    if side not in ("left", "right"):
        raise AttrError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if out_type not in ("int32", "int64", np.int32, np.int64):
        raise DTypeError(f"searchsorted: out_type {out_type!r} is not int32")
    with _scoped(name, "searchsorted"):
        seq, v = _tensor(sorted_sequence), _tensor(values)
        if seq.ndim != v.ndim or seq.ndim == 0:
            raise ShapeError(f"searchsorted: sorted_sequence {seq!r} and values {v!r} need "
                             f"the same rank (>= 1)")
        s = _ops.expand_dims(seq, -2)                  # [..., 1, n]
        w = _ops.expand_dims(v, -1)                    # [..., m, 1]
        if side == "left":       # lower_bound: the number of elements < v
            return _ops.reduce_sum(_ops.cast(_ops.less(s, w), "int32"), axis=-1)
        # upper_bound: n - the number of elements > v (n for a NaN value, as TF's)
        n = _static(seq, "searchsorted")[-1]
        return n - _ops.reduce_sum(_ops.cast(_ops.less(w, s), "int32"), axis=-1)


def _linear_ids(indices, shape, what):
    """indices [..., K] into shape -> flat ids [...] into shape[:K] (-1 where any index
    is out of range: unsorted_segment_sum drops those)."""
    idx = _tensor(indices)
    if idx.dtype != "int32" or idx.ndim < 1:
        raise DTypeError(f"{what}: indices must be int32 [..., K], got {idx!r}")
    k = _static(idx, what)[-1]
    if k > len(shape):
        raise ShapeError(f"{what}: indices index {k} axes of a shape of rank {len(shape)}")
    dims = np.int32(shape[:k])
    strides = np.int32([int(np.prod(shape[i + 1:k])) for i in range(k)])
    with idx.graph.as_default():
        linear = _ops.reduce_sum(idx * _ops.constant(strides), axis=-1)
        inside = reduce_all(_ops.logical_and(_ops.greater_equal(idx, 0),
                                             _ops.less(idx, _ops.constant(dims))), axis=-1)
    return _ops.where(inside, linear, -1), k


@_export
def scatter_nd(indices, updates, shape, name=None):
    """A tensor of shape holding zeros, with updates added at indices (int32 [..., K],
    each picking a slice of shape[K:]), as tf.scatter_nd: duplicate indices add up; an
    index out of range is dropped (TensorFlow raises on CPU). Gradients flow to
    updates. Each output element loops over all indices (O(number of indices))."""
    from .ops_structure import unsorted_segment_sum
    shape = [int(d) for d in shape]
    with _scoped(name, "scatter_nd"):
        ids, k = _linear_ids(indices, shape, "scatter_nd")
        u = _tensor(updates)
        lead = tuple(ids.shape)
        if tuple(u.shape) != lead + tuple(shape[k:]):
            raise ShapeError(f"scatter_nd: updates must have shape "
                             f"{list(lead) + shape[k:]}, got {list(u.shape)}")
        count = int(np.prod(lead))
        flat_u = _ops.reshape(u, [count] + shape[k:])
        summed = unsorted_segment_sum(flat_u, _ops.reshape(ids, [count]),
                                      int(np.prod(shape[:k])))
        return _ops.reshape(summed, shape)


@_export
def tensor_scatter_nd_update(tensor, indices, updates, name=None):
    """tensor with the slices at indices replaced by updates, as
    tf.tensor_scatter_nd_update. Indices must be unique (duplicates add their updates;
    TensorFlow keeps one of them). Gradients flow to tensor (where not replaced) and
    to updates."""
    with _scoped(name, "tensor_scatter_nd_update"):
        t, u = _tensor(tensor), _tensor(updates)
        shape = list(_static(t, "tensor_scatter_nd_update"))
        hits = scatter_nd(indices, _ops.ones_like(u), shape)
        return _ops.where(_ops.greater(hits, 0), scatter_nd(indices, u, shape), t)


@_export
def tensor_scatter_nd_add(tensor, indices, updates, name=None):
    """tensor plus updates added at indices (duplicates add up), as
    tf.tensor_scatter_nd_add."""
    with _scoped(name, "tensor_scatter_nd_add"):
        t = _tensor(tensor)
        return t + scatter_nd(indices, updates, list(_static(t, "tensor_scatter_nd_add")))


@_export
def bincount(arr, weights=None, minlength=None, maxlength=None, dtype="int32", name=None):
    """Counts of each value 0, 1, ... in arr (int32), or the sums of weights there, as
    tf.math.bincount. The length must be known when the graph is built: maxlength, or
    minlength, or (for a constant arr) max(arr) + 1 (at least minlength). Values
    outside [0, length) are dropped. Each output element loops over all of arr."""
    from .ops_structure import unsorted_segment_sum
    with _scoped(name, "bincount"):
        a = _tensor(arr)
        if a.dtype != "int32":
            raise DTypeError(f"bincount needs int32 values, got {a.dtype}")
        if maxlength is not None:
            length = int(maxlength)
        elif a.op.op == "constant":
            values = a.op.attrs["value"]
            length = max(int(values.max()) + 1 if values.size else 0, int(minlength or 0))
        elif minlength is not None:
            length = int(minlength)
        else:
            raise ShapeError("bincount: the output's length must be known when the graph "
                             "is built: pass maxlength (or minlength)")
        flat = _ops.reshape(a, [-1])
        if weights is None:
            data = _ops.ones_like(flat) if dtype == "int32" else \
                _ops.ones_like(_ops.cast(flat, "float32"))
        else:
            data = _ops.reshape(_tensor(weights), [-1])
        return unsorted_segment_sum(data, flat, length)
