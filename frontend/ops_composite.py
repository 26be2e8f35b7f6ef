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
