"""Elementwise ops (numpy broadcasting): unary math, binary arithmetic, comparisons,
logic, where, cast, identity, and the fills.

Semantics follow TensorFlow where it differs from NumPy or GLSL:
- floor_div and mod are floor division and floor modulo (the result of mod has the
  divisor's sign); float floor_div is floor(a / b).
- integer division or modulo by zero gives 0 (TensorFlow raises; GPUs cannot).
- integer pow with a negative exponent is 1/(a**-b) truncated: 1 for a = 1,
  ±1 for a = -1, 0 otherwise.
- round is half to even; maximum, minimum and relu propagate NaN.
- cast float → int truncates toward zero, saturates at int32's limits, and maps NaN
  to 0 (TensorFlow leaves these undefined); anything → bool is "!= 0".
- integer arithmetic wraps around (two's complement).
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..types import TensorType, as_dtype, broadcast_shapes, format_shape, promote
from .common import apply, as_value, as_values, graph_of
from .registry import REQUIRED, OpDef, register

_I32 = np.iinfo(np.int32)


# -- type rules -----------------------------------------------------------------
def _check(dtype, allowed, what="inputs"):
    if dtype not in allowed:
        raise DTypeError(f"does not accept {dtype} {what} (accepts {', '.join(allowed)}); "
                         f"cast first")


NUMERIC = ("float32", "int32")
FLOAT = ("float32",)
BOOL = ("bool",)
ANY = ("float32", "int32", "bool")


def unary_rule(allowed, out=None):
    def infer(types, attrs):
        (t,) = types
        _check(t.dtype, allowed)
        return TensorType(t.shape, out or t.dtype)
    return infer


def binary_rule(allowed, out=None):
    def infer(types, attrs):
        a, b = types
        dtype = promote(a.dtype, b.dtype)
        _check(dtype, allowed)
        return TensorType(broadcast_shapes(a.shape, b.shape), out or dtype)
    return infer


# -- references -------------------------------------------------------------------
def _promoted(a, b):
    dtype = np.dtype(promote(a.dtype.name, b.dtype.name))
    return a.astype(dtype, copy=False), b.astype(dtype, copy=False)


def _float_floor_div(a, b):
    return np.floor(a / b)


def _int_floor_div(a, b):
    safe = np.where(b == 0, 1, b)
    q = np.floor_divide(a, safe)
    q = np.where(b == -1, np.negative(a), q)           # INT_MIN // -1 wraps, as on GPUs
    return np.where(b == 0, 0, q).astype(np.int32)


def _int_mod(a, b):
    safe = np.where((b == 0) | (b == -1), 1, b)
    return np.where((b == 0) | (b == -1), 0, np.mod(a, safe)).astype(np.int32)


def _floor_div(a, b):
    a, b = _promoted(a, b)
    return _float_floor_div(a, b) if a.dtype.kind == "f" else _int_floor_div(a, b)


def _mod(a, b):
    a, b = _promoted(a, b)
    return np.mod(a, b) if a.dtype.kind == "f" else _int_mod(a, b)


def _int_pow(a, b):
    a, b = np.broadcast_arrays(a, b)
    nonneg = np.power(a, np.where(b < 0, 0, b))
    negative = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
    return np.where(b < 0, negative, nonneg).astype(np.int32)


def _pow(a, b):
    a, b = _promoted(a, b)
    return np.power(a, b) if a.dtype.kind == "f" else _int_pow(a, b)


def _arith(fn):
    def ref(arrays, attrs):
        a, b = _promoted(*arrays)
        return fn(a, b)
    return ref


def cast_array(x: np.ndarray, dtype: str) -> np.ndarray:
    """The reference cast (see the module docstring for float → int)."""
    if dtype == "bool":
        return x != 0
    if dtype == "float32" and x.dtype == np.float64:
        return x                    # the float64 reference mode keeps its precision
    if dtype == "int32" and x.dtype.kind == "f":
        clipped = np.clip(np.nan_to_num(x, nan=0.0), _I32.min, _I32.max)
        out = np.trunc(clipped.astype(np.float64))
        return np.clip(out, _I32.min, _I32.max).astype(np.int32)
    return x.astype(np.dtype(dtype))


def _sigmoid(x):
    return (1.0 / (1.0 + np.exp(-x))).astype(x.dtype)


UNARY = {
    # name: (accepted dtypes, numpy reference)
    "neg": (NUMERIC, np.negative),
    "abs": (NUMERIC, np.abs),
    "sign": (NUMERIC, np.sign),
    "square": (NUMERIC, np.square),
    "relu": (NUMERIC, lambda x: np.where(x < 0, np.zeros_like(x), x)),
    "exp": (FLOAT, np.exp),
    "log": (FLOAT, np.log),
    "sqrt": (FLOAT, np.sqrt),
    "rsqrt": (FLOAT, lambda x: np.float32(1) / np.sqrt(x)),
    "reciprocal": (FLOAT, lambda x: np.float32(1) / x),
    "floor": (FLOAT, np.floor),
    "ceil": (FLOAT, np.ceil),
    "round": (FLOAT, np.round),        # half to even, like TensorFlow
    "sin": (FLOAT, np.sin),
    "cos": (FLOAT, np.cos),
    "tanh": (FLOAT, np.tanh),
    "sigmoid": (FLOAT, _sigmoid),
    "logical_not": (BOOL, np.logical_not),
    "identity": (ANY, lambda x: x),
    "zeros_like": (ANY, np.zeros_like),
    "ones_like": (ANY, np.ones_like),
}

BINARY = {
    # name: (accepted dtypes, output dtype or None for the promoted one, reference)
    "add": (NUMERIC, None, _arith(np.add)),
    "sub": (NUMERIC, None, _arith(np.subtract)),
    "mul": (NUMERIC, None, _arith(np.multiply)),
    "div": (NUMERIC, "float32",
            lambda arrays, attrs: np.divide(*[a if a.dtype == np.float64 else a.astype(np.float32)
                                              for a in arrays])),
    "floor_div": (NUMERIC, None, lambda arrays, attrs: _floor_div(*arrays)),
    "mod": (NUMERIC, None, lambda arrays, attrs: _mod(*arrays)),
    "pow": (NUMERIC, None, lambda arrays, attrs: _pow(*arrays)),
    "maximum": (NUMERIC, None, _arith(np.maximum)),
    "minimum": (NUMERIC, None, _arith(np.minimum)),
    "equal": (ANY, "bool", _arith(np.equal)),
    "not_equal": (ANY, "bool", _arith(np.not_equal)),
    "less": (NUMERIC, "bool", _arith(np.less)),
    "less_equal": (NUMERIC, "bool", _arith(np.less_equal)),
    "greater": (NUMERIC, "bool", _arith(np.greater)),
    "greater_equal": (NUMERIC, "bool", _arith(np.greater_equal)),
    "logical_and": (BOOL, "bool", _arith(np.logical_and)),
    "logical_or": (BOOL, "bool", _arith(np.logical_or)),
}

NON_DIFFERENTIABLE = {"sign", "floor", "ceil", "round", "logical_not", "zeros_like",
                      "ones_like", "equal", "not_equal", "less", "less_equal", "greater",
                      "greater_equal", "logical_and", "logical_or", "floor_div", "cast"}
# sign/floor/ceil/round have zero gradients in TensorFlow: their rules return zeros.
ZERO_GRADIENT = {"sign", "floor", "ceil", "round"}


def _unary_ref(fn):
    def ref(arrays, attrs):
        (x,) = arrays
        return np.asarray(fn(x)).astype(x.dtype, copy=False)
    return ref


for _name, (_allowed, _fn) in UNARY.items():
    register(OpDef(_name, "elementwise", unary_rule(_allowed), _unary_ref(_fn),
                   num_inputs=1,
                   differentiable=_name not in NON_DIFFERENTIABLE or _name in ZERO_GRADIENT))

for _name, (_allowed, _out, _fn) in BINARY.items():
    register(OpDef(_name, "elementwise", binary_rule(_allowed, _out), _fn, num_inputs=2,
                   differentiable=_name not in NON_DIFFERENTIABLE))


def _where_type(types, attrs):
    cond, x, y = types
    _check(cond.dtype, BOOL, "as the condition")
    return TensorType(broadcast_shapes(cond.shape, x.shape, y.shape),
                      promote(x.dtype, y.dtype))


def _where_ref(arrays, attrs):
    cond, x, y = arrays
    x, y = _promoted(x, y)
    return np.where(cond, x, y)


register(OpDef("where", "elementwise", _where_type, _where_ref, num_inputs=3))

def _add_n_type(types, attrs):
    if not types:
        raise ShapeError("needs at least one input")
    first = types[0]
    for t in types[1:]:
        if t.dtype != first.dtype:
            raise DTypeError(f"inputs must share a dtype, got {first.dtype} and {t.dtype}")
        broadcast_shapes(first.shape, t.shape)
        if t.rank != first.rank or any(a is not None and b is not None and a != b
                                       for a, b in zip(t.shape, first.shape)):
            raise ShapeError(f"inputs must share a shape, got {format_shape(first.shape)} "
                             f"and {format_shape(t.shape)}")
    _check(first.dtype, NUMERIC)
    shape = tuple(next((d for d in dims if d is not None), None)
                  for dims in zip(*(t.shape for t in types)))
    return TensorType(shape, first.dtype)


def _add_n_ref(arrays, attrs):
    total = arrays[0].copy()
    for a in arrays[1:]:
        total = total + a
    return total


register(OpDef("add_n", "elementwise", _add_n_type, _add_n_ref,
               doc="The sum of several tensors of one shape (TensorFlow's add_n)."))

register(OpDef("cast", "elementwise",
               lambda types, attrs: TensorType(types[0].shape, attrs["dtype"]),
               lambda arrays, attrs: cast_array(arrays[0], attrs["dtype"]),
               attrs={"dtype": REQUIRED}, num_inputs=1, differentiable=True,
               doc="Float ↔ int casts pass gradients only between float tensors."))

register(OpDef("fill", "elementwise",
               lambda types, attrs: TensorType(attrs["shape"], attrs["dtype"]),
               lambda arrays, attrs: np.full(attrs["shape"], attrs["value"],
                                             np.dtype(attrs["dtype"])),
               attrs={"shape": REQUIRED, "value": REQUIRED, "dtype": REQUIRED},
               num_inputs=0, differentiable=False,
               doc="A tensor of one value; no upload, the shader writes it."))


# -- builders ---------------------------------------------------------------------
def unary(op: str, x, name=None):
    (x,) = as_values(x)
    return apply(op, [x], None, name)


def binary(op: str, a, b, name=None):
    a, b = as_values(a, b)
    return apply(op, [a, b], None, name)


def where(cond, x, y, name=None):
    if isinstance(cond, (bool, np.bool_)):
        # a Python bool condition is a bool constant, not weakly typed like x and y
        cond = as_value(graph_of(cond, x, y), bool(cond), "bool")
    cond, x, y = as_values(cond, x, y)
    return apply("where", [cond, x, y], None, name)


def add_n(values, name=None):
    values = list(values)
    return apply("add_n", values, None, name, values[0].graph if values else None)


def cast(x, dtype, name=None):
    return apply("cast", [x], {"dtype": as_dtype(dtype)}, name)


def fill(graph, shape, value, dtype=None, name=None):
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else \
            "int32" if isinstance(value, (int, np.integer)) else "float32"
    dtype = as_dtype(dtype)
    value = bool(value) if dtype == "bool" else int(value) if dtype == "int32" \
        else float(value)
    return apply("fill", [], {"shape": tuple(int(d) for d in shape), "value": value,
                              "dtype": dtype}, name, graph)
