"""The math family (tf.math): elementwise arithmetic, comparisons, logic and functions,
cast and where, reductions and arg reductions, scans, clipping, searchsorted, bincount,
range and linspace (the activations are in ops_nn). TensorFlow's names and arguments,
numpy's short names too (ff.sum is ff.reduce_sum); numpy's broadcasting (ir/ops/
elementwise has the semantics chosen where TensorFlow leaves them open). Composites
(divide_no_nan, reduce_std, clip_by_norm, cumprod, ...) are built from the ops, so
their reference, GLSL and gradients are their parts'; where the plain composition
would give NaN gradients they divide by a safe value, as TensorFlow's Python does.

>>> import numpy as np, fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     y = ff.log1p(ff.constant(np.float32([1e-7, 1.0])))
...     q = ff.divide_no_nan(ff.constant([1.0, 2.0]), ff.constant([0.0, 4.0]))
>>> v, w = ff.Session(g).run([y, q])
>>> bool(np.abs(v[0] - 1e-7) < 1e-13)        # log(1 + x) would give 1.19e-07
True
>>> w.tolist()
[0.0, 0.5]
"""
from __future__ import annotations

import builtins

import numpy as np

from ..ir.errors import AttrError, DTypeError, ShapeError
from ..ir.graph import get_default_graph
from ..ir.ops import elementwise as _ew, reduce as _red
from ..ir.ops.registry import get_op
from .operands import as_tensor, operands, scoped, static_shape, unary_function
from .ops_graph import constant
from .tensor import Tensor, as_tensor_value, wrap

# ops_structure builds on this module; the few functions here that reshape or transpose
# import it when they run. This module defines ff.max, ff.range, ...: Python's own are
# builtins.max, builtins.range here.

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _unary(op):
    """ff.<op>, its docstring and argument name from the op's record (OpDef.doc,
    OpDef.wrapper_arg in ir/ops/elementwise/unary_ops.py)."""
    return _export(unary_function(op))


def _binary(op):
    """ff.<op>(x, y, name=None), its docstring from the op's record
    (ir/ops/elementwise/binary_ops.py)."""
    def fn(x, y, name=None):
        a, b = operands(x, y)
        return wrap(_ew.binary(op, a, b, name=name))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = get_op(op).doc
    return _export(fn)


# One line per elementwise op (grep finds ff.<name> here); the ops, their docs and
# argument names are in ir/ops/elementwise/ (unary_ops.py, binary_ops.py).
neg = _unary("neg")
abs = _unary("abs")
sign = _unary("sign")
square = _unary("square")
exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt")
reciprocal = _unary("reciprocal")
floor = _unary("floor")
ceil = _unary("ceil")
round = _unary("round")
sin = _unary("sin")
cos = _unary("cos")
tanh = _unary("tanh")
sigmoid = _unary("sigmoid")
logical_not = _unary("logical_not")
identity = _unary("identity")
zeros_like = _unary("zeros_like")
ones_like = _unary("ones_like")
acos = _unary("acos")
asin = _unary("asin")
atan = _unary("atan")
acosh = _unary("acosh")
asinh = _unary("asinh")
atanh = _unary("atanh")
sinh = _unary("sinh")
cosh = _unary("cosh")
tan = _unary("tan")
erf = _unary("erf")
expm1 = _unary("expm1")
log1p = _unary("log1p")
is_nan = _unary("is_nan")
is_inf = _unary("is_inf")
is_finite = _unary("is_finite")
add = _binary("add")
sub = _binary("sub")
mul = _binary("mul")
div = _binary("div")
floor_div = _binary("floor_div")
mod = _binary("mod")
pow = _binary("pow")
maximum = _binary("maximum")
minimum = _binary("minimum")
equal = _binary("equal")
not_equal = _binary("not_equal")
less = _binary("less")
less_equal = _binary("less_equal")
greater = _binary("greater")
greater_equal = _binary("greater_equal")
logical_and = _binary("logical_and")
logical_or = _binary("logical_or")

# TensorFlow's names for the same ops.
negative = neg
subtract = sub
multiply = mul
divide = div
truediv = div
floordiv = floor_div
floormod = mod
__all__ += ['negative', 'subtract', 'multiply', 'divide', 'truediv', 'floordiv', 'floormod']


@_export
def add_n(inputs, name=None):
    """The sum of a list of tensors of one shape and dtype."""
    values = [x.value if isinstance(x, Tensor) else as_tensor_value(x) for x in inputs]
    return wrap(_ew.add_n(values, name=name))


@_export
def where(condition, x, y, name=None):
    """x where condition is true, else y (broadcasting all three)."""
    c, a, b = operands(condition, x, y)
    return wrap(_ew.where(c, a, b, name=name))


@_export
def cast(x, dtype, name=None):
    """Convert to dtype. float → int truncates toward zero, saturates, NaN → 0."""
    return wrap(_ew.cast(operands(x)[0], dtype, name=name))


def _renamed(value, old_value, name, old_name):
    if old_value is None:
        return value
    if value is not None:
        raise AttrError(f"give {name} or {old_name} (its TensorFlow 1 name), not both")
    return old_value


def _reduction(op, doc):
    def fn(x, axis=None, keepdims=False, name=None, reduction_indices=None,
           keep_dims=None):
        # reduction_indices and keep_dims: TensorFlow 1's older names of the same
        axis = _renamed(axis, reduction_indices, "axis", "reduction_indices")
        keepdims = _renamed(keepdims or None, keep_dims, "keepdims", "keep_dims") or False
        return wrap(_red.reduce(op, operands(x)[0], axis, keepdims, name=name))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return fn


# ff.sum is ff.reduce_sum (the short name, and TensorFlow's).
sum = reduce_sum = _export(_reduction("sum", "Sum over axis (None: all)."))
mean = reduce_mean = _export(_reduction("mean", "Mean over axis."))
max = reduce_max = _export(_reduction("max", "Max over axis; NaN propagates."))
min = reduce_min = _export(_reduction("min", "Min over axis."))
prod = reduce_prod = _export(_reduction("prod", "Product over axis."))
__all__ += ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"]


@_export
def argmax(x, axis=None, name=None, output_type="int32"):
    """Index (int32) of the largest value along axis (None: 0, as TensorFlow); the first
    one on ties. bool inputs count True as 1. output_type must be int32 (fragflow's
    only integer type; TensorFlow's int64 default is accepted as int32)."""
    return wrap(_red.arg_reduce("argmax", _arg_input(x, output_type), axis or 0,
                                 name=name))


@_export
def argmin(x, axis=None, name=None, output_type="int32"):
    """Index (int32) of the smallest value along axis (None: 0); the first one on ties.
    bool inputs count True as 1."""
    return wrap(_red.arg_reduce("argmin", _arg_input(x, output_type), axis or 0,
                                 name=name))


def _arg_input(x, output_type):
    if output_type not in ("int32", "int64", np.int32, np.int64):
        raise DTypeError(f"argmax/argmin: output_type {output_type!r} is not int32")
    value = operands(x)[0]
    if value.dtype == "bool":          # TensorFlow takes bools; the kernel takes numbers
        value = _ew.cast(value, "int32")
    return value


@_export
def atan2(y, x, name=None):
    """The angle of the point (x, y): atan(y / x) in the right quadrant, in [-pi, pi].
    C's special cases for zeros (signed) and infinities. Note the order: y first.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     a = ff.atan2(1.0, -1.0)
    >>> print(f'{ff.Session(g, backend="numpy").run(a):.6f}')
    2.356194
    """
    a, b = operands(y, x)
    return wrap(_ew.binary("atan2", a, b, name=name))


@_export
def squared_difference(x, y, name=None):
    """(x - y) ** 2, broadcasting; float32 or int32."""
    a, b = operands(x, y)
    return wrap(_ew.binary("squared_difference", a, b, name=name))


@_export
def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """t clipped to [clip_value_min, clip_value_max]; the bounds are tensors or scalars
    that broadcast to t's shape. Computed as TensorFlow does, maximum(minimum(t, max),
    min): NaN propagates, and min > max gives min. The gradient passes where
    min <= t <= max and goes to the bound elsewhere.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.clip_by_value(ff.constant([-3.0, 0.5, 9.0]), -1.0, 1.0)
    >>> ff.Session(g, backend="numpy").run(y).tolist()
    [-1.0, 0.5, 1.0]
    """
    x, lo, hi = operands(t, clip_value_min, clip_value_max)
    return wrap(_ew.clip_by_value(x, lo, hi, name=name))


@_export
def range(start, limit=None, delta=1, dtype=None, name=None):  # noqa: A001 (tf.range)
    """start, start + delta, ... up to but not including limit: ceil((limit - start) /
    delta) elements, as tf.range. With one argument, range(n) is 0 .. n-1. The dtype
    is float32 if any argument is a float, else int32. The arguments are Python
    numbers (the kernel computes start + i * delta; nothing is uploaded).

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     r = ff.range(3, 10, 3)
    >>> ff.Session(g, backend="numpy").run(r).tolist()
    [3, 6, 9]
    """
    if limit is None:
        start, limit = 0, start
    return wrap(_ew.range_(get_default_graph(), start, limit, delta, dtype, name=name))


@_export
def linspace(start, stop, num, name=None):
    """num evenly spaced float32 values from start to stop, both included (num = 1
    gives start), as tf.linspace. start, stop and num are Python numbers.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     v = ff.linspace(0.0, 1.0, 5)
    >>> ff.Session(g, backend="numpy").run(v).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    return wrap(_ew.linspace(get_default_graph(), start, stop, num, name=name))


@_export
def divide_no_nan(x, y, name=None):
    """x / y, and 0 where y is 0 (even for x = 0, inf or NaN), as tf.math.divide_no_nan.
    Gradients are 0 where y is 0."""
    with scoped(name, "divide_no_nan"):
        x, y = as_tensor(x), as_tensor(y)
        zero = equal(y, 0.0)
        safe = where(zero, 1.0, y)
        return where(zero, 0.0, div(x, safe))


div_no_nan = divide_no_nan   # TensorFlow 1's name (tf.div_no_nan, tf.math.div_no_nan)
__all__.append("div_no_nan")


@_export
def logical_xor(x, y, name=None):
    """x != y for bools: (x or y) and not (x and y), as tf.math.logical_xor."""
    with scoped(name, "logical_xor"):
        return logical_and(logical_or(x, y), logical_not(logical_and(x, y)))


def _bool_reduction(x, axis, keepdims, op, what):
    x = as_tensor(x)
    if x.dtype != "bool":
        raise DTypeError(f"{what} needs a bool tensor, got {x.dtype} {x!r}")
    counted = op(cast(x, "int32"), axis=axis, keepdims=keepdims)
    return cast(counted, "bool")


@_export
def reduce_all(input_tensor, axis=None, keepdims=False, name=None):
    """True where every element along axis is true (bool in, bool out)."""
    with scoped(name, "reduce_all"):
        return _bool_reduction(input_tensor, axis, keepdims, reduce_min, "reduce_all")


@_export
def reduce_any(input_tensor, axis=None, keepdims=False, name=None):
    """True where some element along axis is true (bool in, bool out)."""
    with scoped(name, "reduce_any"):
        return _bool_reduction(input_tensor, axis, keepdims, reduce_max, "reduce_any")


@_export
def reduce_variance(input_tensor, axis=None, keepdims=False, name=None):
    """The (population, divide by n) variance along axis, as tf.math.reduce_variance:
    the mean of squared deviations from the mean (one op, ir/ops/reduce.py)."""
    return wrap(_red.reduce("variance", operands(input_tensor)[0], axis, keepdims,
                            name=name))


variance = reduce_variance      # the op's name, as ff.mean is ff.reduce_mean
__all__.append("variance")


@_export
def reduce_std(input_tensor, axis=None, keepdims=False, name=None):
    """The (population) standard deviation along axis, as tf.math.reduce_std."""
    with scoped(name, "reduce_std"):
        return sqrt(reduce_variance(input_tensor, axis, keepdims))


@_export
def reduce_logsumexp(input_tensor, axis=None, keepdims=False, name=None):
    """log(sum(exp(x))) over axis (None: all, an int or a tuple), max-subtracted.
    NaN if any element is NaN, else +inf if any is +inf, -inf if all are -inf or the
    reduction is empty (TensorFlow's).

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.reduce_logsumexp(ff.constant(np.float32([1000.0, 1000.0])))
    >>> print(f'{ff.Session(g, backend="numpy").run(y):.2f}')   # 1000 + log(2)
    1000.69
    """
    return wrap(_red.logsumexp(operands(input_tensor)[0], axis, keepdims, name=name))


logsumexp = reduce_logsumexp
__all__.append("logsumexp")


@_export
def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    """Running sums along axis (float32 or int32; int32 wraps). exclusive leaves each
    element out of its own sum; reverse sums from the end.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.cumsum(ff.constant(np.int32([1, 2, 3])), exclusive=True, reverse=True)
    >>> ff.Session(g, backend="numpy").run(y)
    array([5, 3, 0], dtype=int32)
    """
    return wrap(_red.cumsum(operands(x)[0], axis, exclusive, reverse, name=name))


def _move_last(x, axis):
    axis = int(axis) % x.ndim
    perm = [i for i in builtins.range(x.ndim) if i != axis] + [axis]   # not ff.range
    back = list(np.argsort(perm))
    return perm, back


@_export
def cumprod(x, axis=0, exclusive=False, reverse=False, name=None):
    """The cumulative product along axis, as tf.math.cumprod (exclusive: the first is
    1; reverse: from the end). Exact (a product per output over a triangular mask, no
    logarithms: zeros and signs are right) and differentiable through reduce_prod;
    costs O(n) per output element and an n x n intermediate (n the axis's static
    size)."""
    from . import ops_structure as _structure  # ops_structure imports this module
    with scoped(name, "cumprod"):
        x = as_tensor(x)
        if x.dtype == "bool":
            raise DTypeError("cumprod needs float32 or int32, got bool")
        perm, back = _move_last(x, axis)
        moved = _structure.transpose(x, perm)
        n = static_shape(moved, "cumprod")[-1]
        i, j = np.arange(n)[:, None], np.arange(n)[None, :]
        if reverse:
            keep = j > i if exclusive else j >= i
        else:
            keep = j < i if exclusive else j <= i
        with x.graph.as_default():
            mask = constant(keep)
        one = 1 if x.dtype == "int32" else 1.0
        picked = where(mask, _structure.expand_dims(moved, -2), one)
        return _structure.transpose(reduce_prod(picked, axis=-1), back)


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
    from . import ops_structure as _structure  # ops_structure imports this module
    with scoped(name, "searchsorted"):
        seq, v = as_tensor(sorted_sequence), as_tensor(values)
        if seq.ndim != v.ndim or seq.ndim == 0:
            raise ShapeError(f"searchsorted: sorted_sequence {seq!r} and values {v!r} need "
                             f"the same rank (>= 1)")
        s = _structure.expand_dims(seq, -2)                  # [..., 1, n]
        w = _structure.expand_dims(v, -1)                    # [..., m, 1]
        if side == "left":       # lower_bound: the number of elements < v
            return reduce_sum(cast(less(s, w), "int32"), axis=-1)
        # upper_bound: n - the number of elements > v (n for a NaN value, as TF's)
        n = static_shape(seq, "searchsorted")[-1]
        return n - reduce_sum(cast(less(w, s), "int32"), axis=-1)


@_export
def clip_by_norm(t, clip_norm, axes=None, name=None):
    """t * clip_norm / max(l2norm(t, axes), clip_norm), as tf.clip_by_norm: unchanged
    where its L2 norm is at most clip_norm. A zero t gives zero (and finite
    gradients)."""
    with scoped(name, "clip_by_norm"):
        t = as_tensor(t)
        l2sum = reduce_sum(square(t), axis=axes, keepdims=True)
        positive = greater(l2sum, 0.0)
        safe = where(positive, l2sum, 1.0)
        l2norm = where(positive, sqrt(safe), l2sum)
        return t * clip_norm / maximum(l2norm, clip_norm)


@_export
def global_norm(t_list, name=None):
    """sqrt(sum of the squares of every element of every tensor in t_list)."""
    with scoped(name, "global_norm"):
        parts = [reduce_sum(square(as_tensor(t))) for t in t_list if t is not None]
        if not parts:
            raise AttrError("global_norm needs at least one tensor")
        return sqrt(add_n(parts) if len(parts) > 1 else parts[0])


@_export
def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """(t_list scaled by clip_norm / max(global_norm, clip_norm), global_norm), as
    tf.clip_by_global_norm; None entries stay None."""
    with scoped(name, "clip_by_global_norm"):
        norm_ = global_norm(t_list) if use_norm is None else as_tensor(use_norm)
        scale = clip_norm * minimum(1.0 / norm_, 1.0 / clip_norm)
        return [None if t is None else as_tensor(t) * scale for t in t_list], norm_


@_export
def bincount(arr, weights=None, minlength=None, maxlength=None, dtype="int32", name=None):
    """Counts of each value 0, 1, ... in arr (int32), or the sums of weights there, as
    tf.math.bincount. The length must be known when the graph is built: maxlength, or
    minlength, or (for a constant arr) max(arr) + 1 (at least minlength). Values
    outside [0, length) are dropped. Each output element loops over all of arr."""
    from . import ops_structure as _structure  # ops_structure imports this module
    with scoped(name, "bincount"):
        a = as_tensor(arr)
        if a.dtype != "int32":
            raise DTypeError(f"bincount needs int32 values, got {a.dtype}")
        if maxlength is not None:
            length = int(maxlength)
        elif a.op.op == "constant":
            values = a.op.attrs["value"]
            length = builtins.max(int(values.max()) + 1 if values.size else 0,  # not ff.max
                                  int(minlength or 0))
        elif minlength is not None:
            length = int(minlength)
        else:
            raise ShapeError("bincount: the output's length must be known when the graph "
                             "is built: pass maxlength (or minlength)")
        flat = _structure.reshape(a, [-1])
        if weights is None:
            data = ones_like(flat) if dtype == "int32" else \
                ones_like(cast(flat, "float32"))
        else:
            data = _structure.reshape(as_tensor(weights), [-1])
        return _structure.unsorted_segment_sum(data, flat, length)
