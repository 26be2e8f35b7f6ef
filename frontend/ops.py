"""The op functions users call (ff.add, ff.relu, ff.sum, ...): Tensor ergonomics over
the ir builders. Arguments are Tensors, numpy arrays or Python scalars; names and
meanings follow TensorFlow (with the short names of shared/DESIGN.md as well)."""
from __future__ import annotations

import contextlib

import numpy as np

from ..ir.graph import get_default_graph
from ..ir.ops import elementwise as _ew, matmul as _mm, reduce as _red, shape as _shape
from ..ir.ops import state as _state
from .tensor import Tensor, Variable, _wrap, as_tensor_value

__all__ = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _operands(*xs):
    """Tensors to values; arrays and lists become constants of the tensors' graph.
    Python scalars stay as they are (the ir builders type them weakly, as JAX does),
    unless no operand is a tensor: then the first becomes a constant of the default
    graph so that the builders know the graph."""
    from ..ir.ops.common import as_value
    tensors = [x for x in xs if isinstance(x, Tensor)]
    graph = tensors[0].graph if tensors else None
    values = []
    for x in xs:
        if isinstance(x, Tensor):
            values.append(x.value)
        elif graph is not None and x is not None and not np.isscalar(x):
            values.append(as_value(graph, x))
        else:
            values.append(x)
    if not tensors:
        values[0] = as_tensor_value(values[0])
    return values


def _unary(op, doc):
    def fn(x, name=None):
        return _wrap(_ew.unary(op, *_operands(x), name=name))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return fn


def _binary(op, doc):
    def fn(x, y, name=None):
        a, b = _operands(x, y)
        return _wrap(_ew.binary(op, a, b, name=name))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return fn


_UNARY_DOCS = {
    "neg": "-x.", "abs": "|x|.", "sign": "-1, 0 or 1 (NaN stays NaN).", "square": "x * x.",
    "relu": "max(x, 0); NaN propagates.", "exp": "e**x.", "log": "Natural log (NaN below 0).",
    "sqrt": "Square root (NaN below 0).", "rsqrt": "1 / sqrt(x).", "reciprocal": "1 / x.",
    "floor": "Round down.", "ceil": "Round up.", "round": "Round half to even.",
    "sin": "Sine.", "cos": "Cosine.", "tanh": "Hyperbolic tangent.",
    "sigmoid": "1 / (1 + e**-x).", "logical_not": "not x (bool).",
    "identity": "x itself (a view: no kernel runs).",
    "zeros_like": "Zeros of x's shape and dtype.", "ones_like": "Ones of x's shape and dtype.",
}
_BINARY_DOCS = {
    "add": "x + y.", "sub": "x - y.", "mul": "x * y.", "div": "x / y, always float32.",
    "floor_div": "Floor division (TensorFlow's floordiv).",
    "mod": "Floor modulo: the result has y's sign (TensorFlow's floormod).",
    "pow": "x ** y.", "maximum": "Elementwise max; NaN propagates.",
    "minimum": "Elementwise min; NaN propagates.", "equal": "x == y.",
    "not_equal": "x != y.", "less": "x < y.", "less_equal": "x <= y.", "greater": "x > y.",
    "greater_equal": "x >= y.", "logical_and": "x and y (bool).",
    "logical_or": "x or y (bool).",
}

for _op, _doc in _UNARY_DOCS.items():
    globals()[_op] = _export(_unary(_op, _doc))
for _op, _doc in _BINARY_DOCS.items():
    globals()[_op] = _export(_binary(_op, _doc))

# TensorFlow's names for the same ops.
ALIASES = {"negative": "neg", "subtract": "sub", "multiply": "mul", "divide": "div",
           "truediv": "div", "floordiv": "floor_div", "floormod": "mod", "pow": "pow"}
for _alias, _op in ALIASES.items():
    globals()[_alias] = globals()[_op]
    __all__.append(_alias)


@_export
def add_n(inputs, name=None):
    """The sum of a list of tensors of one shape and dtype."""
    values = [x.value if isinstance(x, Tensor) else as_tensor_value(x) for x in inputs]
    return _wrap(_ew.add_n(values, name=name))


@_export
def where(condition, x, y, name=None):
    """x where condition is true, else y (broadcasting all three)."""
    c, a, b = _operands(condition, x, y)
    return _wrap(_ew.where(c, a, b, name=name))


@_export
def cast(x, dtype, name=None):
    """Convert to dtype. float → int truncates toward zero, saturates, NaN → 0."""
    return _wrap(_ew.cast(_operands(x)[0], dtype, name=name))


@_export
def fill(dims, value, dtype=None, name=None):
    """A tensor of shape dims holding value everywhere."""
    return _wrap(_ew.fill(get_default_graph(), dims, value, dtype, name=name))


@_export
def zeros(shape, dtype="float32", name=None):
    return fill(shape, 0, dtype, name=name)


@_export
def ones(shape, dtype="float32", name=None):
    return fill(shape, 1, dtype, name=name)


def _renamed(value, old_value, name, old_name):
    if old_value is None:
        return value
    if value is not None:
        from ..ir.errors import AttrError
        raise AttrError(f"give {name} or {old_name} (its TensorFlow 1 name), not both")
    return old_value


def _reduction(op, doc):
    def fn(x, axis=None, keepdims=False, name=None, reduction_indices=None,
           keep_dims=None):
        # reduction_indices and keep_dims: TensorFlow 1's older names of the same
        axis = _renamed(axis, reduction_indices, "axis", "reduction_indices")
        keepdims = _renamed(keepdims or None, keep_dims, "keepdims", "keep_dims") or False
        return _wrap(_red.reduce(op, _operands(x)[0], axis, keepdims, name=name))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return fn


for _op, _doc in {"sum": "Sum over axis (None: all).", "mean": "Mean over axis.",
                  "max": "Max over axis; NaN propagates.", "min": "Min over axis.",
                  "prod": "Product over axis."}.items():
    globals()[_op] = _export(_reduction(_op, _doc))
    globals()["reduce_" + _op] = globals()[_op]
    __all__.append("reduce_" + _op)


@_export
def argmax(x, axis=None, name=None, output_type="int32"):
    """Index (int32) of the largest value along axis (None: 0, as TensorFlow); the first
    one on ties. bool inputs count True as 1. output_type must be int32 (fragflow's
    only integer type; TensorFlow's int64 default is accepted as int32)."""
    return _wrap(_red.arg_reduce("argmax", _arg_input(x, output_type), axis or 0,
                                 name=name))


@_export
def argmin(x, axis=None, name=None, output_type="int32"):
    """Index (int32) of the smallest value along axis (None: 0); the first one on ties.
    bool inputs count True as 1."""
    return _wrap(_red.arg_reduce("argmin", _arg_input(x, output_type), axis or 0,
                                 name=name))


def _arg_input(x, output_type):
    from ..ir.errors import DTypeError
    if output_type not in ("int32", "int64", np.int32, np.int64):
        raise DTypeError(f"argmax/argmin: output_type {output_type!r} is not int32")
    value = _operands(x)[0]
    if value.dtype == "bool":          # TensorFlow takes bools; the kernel takes numbers
        value = _ew.cast(value, "int32")
    return value


@_export
def matmul(a, b, transpose_a=False, transpose_b=False, name=None):
    """a @ b over the last two axes, broadcasting batch axes."""
    x, y = _operands(a, b)
    return _wrap(_mm.matmul(x, y, transpose_a, transpose_b, name=name))


@_export
def reshape(x, shape, name=None):
    """Same elements, new shape (one dimension may be -1). No kernel runs."""
    return _wrap(_shape.reshape(_operands(x)[0], shape, name=name))


@_export
def transpose(x, perm=None, name=None):
    """Permute axes (default: reverse them)."""
    return _wrap(_shape.transpose(_operands(x)[0], perm, name=name))


@_export
def expand_dims(x, axis, name=None):
    return _wrap(_shape.expand_dims(_operands(x)[0], axis, name=name))


@_export
def squeeze(x, axis=None, name=None):
    return _wrap(_shape.squeeze(_operands(x)[0], axis, name=name))


_UNSET = object()


@_export
def placeholder(*args, shape=_UNSET, dtype=_UNSET, name=None):
    """A value fed at run time: sess.run(..., feed_dict={x: array}). None dims are
    fixed by the feed.

    placeholder(shape, dtype="float32", name=None), or TensorFlow 1's order,
    placeholder(dtype, shape, name) (a dtype first, such as ff.float32, is taken as
    TF1's): ff.placeholder(ff.float32, [None, 784]) and ff.placeholder((None, 784))
    are the same. fragflow has no tensors of unknown rank: TF1's shapeless
    ff.placeholder(ff.float32) is a scalar."""
    shape, dtype, name = _placeholder_args(args, shape, dtype, name)
    return _wrap(_state.placeholder(get_default_graph(), shape, dtype, name))


def _is_dtype(x, dtypes) -> bool:
    """A dtype name ("float32", ff.float32) or a numpy dtype / scalar type (np.float32)."""
    if isinstance(x, str):          # "float32", and TF1's "float", "int32", "int", ...
        from ..ir.types import as_dtype
        try:
            return as_dtype(x) in dtypes
        except Exception:               # a string that is no dtype: not TF1's order
            return False
    if isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic)):
        return True
    return False


def _placeholder_args(args, shape, dtype, name):
    from ..ir.errors import AttrError
    from ..ir.types import DTYPES
    if len(args) > 3:
        raise AttrError(f"placeholder takes at most 3 positional arguments, got {len(args)}")
    tf1 = bool(args) and _is_dtype(args[0], DTYPES)
    keys = ("dtype", "shape", "name") if tf1 else ("shape", "dtype", "name")
    given = {"shape": shape, "dtype": dtype, "name": name}
    for key, value in zip(keys, args):
        if key == "name" and name is not None or key != "name" and given[key] is not _UNSET:
            raise AttrError(f"placeholder got {key} twice")
        given[key] = value
    if given["shape"] is _UNSET and tf1:
        given["shape"] = ()    # TF1's shapeless placeholder (keep_prob, a learning rate)
    if given["shape"] is _UNSET:
        raise AttrError("placeholder needs a shape, e.g. ff.placeholder(ff.float32, "
                        "[None, 784]) (fragflow has no tensors of unknown rank)")
    return (given["shape"], "float32" if given["dtype"] is _UNSET else given["dtype"],
            given["name"])



@_export
def constant(value, dtype=None, shape=None, name=None):
    """A value baked into the graph (float64 → float32, int64 → int32). With shape, a
    scalar value is repeated to fill it and other values are reshaped to it, as
    tf.constant(0.1, shape=[10])."""
    if shape is not None:
        value = np.asarray(value)
        value = np.full(tuple(shape), value) if value.ndim == 0 \
            else value.reshape(tuple(shape))
    return _wrap(_state.constant(get_default_graph(), value, dtype, name))


@_export
def name_scope(name: str) -> contextlib.AbstractContextManager:
    """Prefix the names of the nodes made inside with 'name/'.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default(), ff.name_scope("dense"):
    ...     ff.constant(1.0).name
    'dense/constant'
    """
    return get_default_graph().name_scope(name)


__all__ += ["Tensor", "Variable"]
