"""Elementwise ops (numpy broadcasting): unary math, binary arithmetic, comparisons,
logic, where, cast, identity, and the fills.

Semantics follow TensorFlow where it differs from NumPy or GLSL:
- floor_div and mod are floor division and floor modulo (the result of mod has the
  divisor's sign); float floor_div is floor(a / b).
- integer division or modulo by zero gives 0 (TensorFlow raises; GPUs cannot).
- integer pow with a negative exponent known when the graph is built (a constant)
  raises DTypeError, as TensorFlow and NumPy do; one known only at run time gives
  1/(a**-b) truncated: 1 for a = 1, ±1 for a = -1, 0 otherwise.
- round is half to even; maximum, minimum and relu propagate NaN.
- cast float → int truncates toward zero, saturates at int32's limits, and maps NaN
  to 0 (TensorFlow leaves these undefined); anything → bool is "!= 0".
- integer arithmetic wraps around (two's complement).

The math family (inverse trig, hyperbolics, erf, expm1/log1p, the activations,
clip_by_value, the predicates, range and linspace) follows TensorFlow's definitions,
with these choices:
- relu6, clip_by_value, elu, selu, leaky_relu, prelu and step keep NaN as NaN.
- step is TensorFlow.js's: x > 0 ? 1 : alpha (float only); its gradient is zero.
- range and linspace have no inputs: their kernels compute each element from its
  index, start + i * delta (TensorFlow accumulates delta, which rounds more);
  linspace's last element is stop exactly, as in TensorFlow.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import AttrError, DTypeError, ShapeError
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


# SELU's constants (Klambauer et al. 2017), as TensorFlow writes them
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _keep_nan(fn):
    """fn(x), with NaN inputs giving NaN (numpy's clip and where would not)."""
    return lambda x: np.where(np.isnan(x), x, fn(x)) if x.dtype.kind == "f" else fn(x)


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
    # the math family
    "acos": (FLOAT, np.arccos),
    "asin": (FLOAT, np.arcsin),
    "atan": (FLOAT, np.arctan),
    "acosh": (FLOAT, np.arccosh),
    "asinh": (FLOAT, np.arcsinh),
    "atanh": (FLOAT, np.arctanh),
    "sinh": (FLOAT, np.sinh),
    "cosh": (FLOAT, np.cosh),
    "tan": (FLOAT, np.tan),
    "erf": (FLOAT, _erf),
    "expm1": (FLOAT, np.expm1),
    "log1p": (FLOAT, np.log1p),
    "softplus": (FLOAT, lambda x: np.logaddexp(np.zeros_like(x), x)),
    "elu": (FLOAT, lambda x: np.where(x < 0, np.expm1(x), x)),
    "selu": (FLOAT, lambda x: np.where(x > 0, SELU_SCALE * x,
                                       SELU_SCALE * SELU_ALPHA * np.expm1(x))),
    "relu6": (NUMERIC, _keep_nan(lambda x: np.clip(x, 0, 6))),
}

# float -> bool tests; no gradient (as in TensorFlow)
PREDICATES = {"is_nan": np.isnan, "is_inf": np.isinf, "is_finite": np.isfinite}

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
    # the math family
    "atan2": (FLOAT, None, _arith(np.arctan2)),          # atan2(y, x), TensorFlow's order
    "squared_difference": (NUMERIC, None, _arith(lambda a, b: np.square(a - b))),
    "prelu": (FLOAT, None, _arith(lambda x, alpha: np.where(x > 0, x, alpha * x))),
}

NON_DIFFERENTIABLE = {"logical_not", "zeros_like", "ones_like", "equal", "not_equal",
                      "less", "less_equal", "greater", "greater_equal", "logical_and",
                      "logical_or", "floor_div"}
# sign/floor/ceil/round (and TensorFlow.js's step) are differentiable: their gradient
# rules return zeros.


def _unary_ref(fn):
    def ref(arrays, attrs):
        (x,) = arrays
        return np.asarray(fn(x)).astype(x.dtype, copy=False)
    return ref


for _name, (_allowed, _fn) in UNARY.items():
    register(OpDef(_name, "elementwise", unary_rule(_allowed), _unary_ref(_fn),
                   num_inputs=1,
                   differentiable=_name not in NON_DIFFERENTIABLE))

for _name, (_allowed, _out, _fn) in BINARY.items():
    register(OpDef(_name, "elementwise", binary_rule(_allowed, _out), _fn, num_inputs=2,
                   differentiable=_name not in NON_DIFFERENTIABLE))

for _name, _fn in PREDICATES.items():
    register(OpDef(_name, "elementwise", unary_rule(FLOAT, "bool"),
                   lambda arrays, attrs, _fn=_fn: _fn(arrays[0]), num_inputs=1,
                   differentiable=False))


# -- one input and a float attribute --------------------------------------------------
def _alpha_rule(types, attrs):
    alpha = attrs["alpha"]
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise AttrError(f"alpha must be a Python number, got {alpha!r}")
    return unary_rule(FLOAT)(types, attrs)


def _leaky_relu_ref(arrays, attrs):
    (x,) = arrays
    return np.where(x > 0, x, x * x.dtype.type(attrs["alpha"]))


def _step_ref(arrays, attrs):
    (x,) = arrays
    return np.where(np.isnan(x), x, np.where(x > 0, 1.0, attrs["alpha"])).astype(x.dtype)


register(OpDef("leaky_relu", "elementwise", _alpha_rule, _leaky_relu_ref,
               attrs={"alpha": 0.2}, num_inputs=1,
               doc="x > 0 ? x : alpha * x (TensorFlow's leaky_relu)."))
register(OpDef("step", "elementwise", _alpha_rule, _step_ref, attrs={"alpha": 0.0},
               num_inputs=1, doc="x > 0 ? 1 : alpha; NaN stays NaN (TensorFlow.js's step)."))


# -- clip_by_value ---------------------------------------------------------------------
def _clip_type(types, attrs):
    x, lo, hi = types
    dtype = promote(x.dtype, lo.dtype, hi.dtype)
    _check(dtype, NUMERIC)
    shape = broadcast_shapes(x.shape, lo.shape, hi.shape)
    if len(shape) != x.rank or any(a is not None and b is not None and a != b
                                   for a, b in zip(shape, x.shape)):
        # TensorFlow: the bounds broadcast to t's shape, never the other way round
        raise ShapeError(f"the bounds ({format_shape(lo.shape)} and "
                         f"{format_shape(hi.shape)}) must broadcast to t's shape "
                         f"{format_shape(x.shape)}, not enlarge it to {format_shape(shape)}")
    return TensorType(x.shape, dtype)


def _clip_ref(arrays, attrs):
    x, lo, hi = arrays
    dtype = np.dtype(promote(x.dtype.name, lo.dtype.name, hi.dtype.name))
    x, lo, hi = (a.astype(dtype, copy=False) for a in (x, lo, hi))
    # minimum then maximum, as TensorFlow composes it (min > max gives min)
    return np.broadcast_to(np.maximum(np.minimum(x, hi), lo), x.shape)


register(OpDef("clip_by_value", "elementwise", _clip_type, _clip_ref, num_inputs=3,
               doc="min(max(t, clip_value_min), clip_value_max), as TensorFlow: "
                   "maximum(minimum(t, max), min)."))


# -- index-computed sequences: range and linspace (no inputs, like fill) ------------
def _number(value, what):
    if isinstance(value, (bool, np.bool_)) or \
            not isinstance(value, (int, float, np.integer, np.floating)):
        raise AttrError(f"{what} must be a Python number, got {value!r}")
    return value


def range_size(start, limit, delta) -> int:
    """TensorFlow's: ceil((limit - start) / delta) elements, erroring as it does."""
    if delta == 0:
        raise AttrError("delta must not be 0")
    if delta > 0 and start > limit:
        raise AttrError(f"start ({start}) must be <= limit ({limit}) when delta > 0")
    if delta < 0 and start < limit:
        raise AttrError(f"start ({start}) must be >= limit ({limit}) when delta < 0")
    if all(isinstance(v, (int, np.integer)) for v in (start, limit, delta)):
        return (abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta))
    start, limit, delta = np.float32([start, limit, delta])     # as float32 computes it
    return int(np.ceil(np.abs((limit - start) / delta)))


def _range_type(types, attrs):
    dtype = attrs["dtype"]
    if dtype not in NUMERIC:
        raise DTypeError(f"makes float32 or int32 sequences, not {dtype}")
    values = [_number(attrs[k], k) for k in ("start", "limit", "delta")]
    if dtype == "int32" and not all(isinstance(v, (int, np.integer)) for v in values):
        raise AttrError(f"an int32 range needs integer start, limit and delta, got {values}")
    size = range_size(*values)
    if size > 2 ** 31 - 1:
        raise ShapeError(f"a range of {size} elements is too long")
    return TensorType((size,), dtype)


def _range_ref(arrays, attrs):
    start, limit, delta = (attrs[k] for k in ("start", "limit", "delta"))
    n = range_size(start, limit, delta)
    if attrs["dtype"] == "int32":
        values = int(start) + np.arange(n, dtype=np.int64) * int(delta)
        return values.astype(np.int32)          # wraps where int32 arithmetic would
    # the float32 arguments, exactly, then the value rounded once
    start, delta = (float(np.float32(v)) for v in (start, delta))
    return (start + np.arange(n, dtype=np.float64) * delta).astype(np.float32)


def _linspace_type(types, attrs):
    _number(attrs["start"], "start"), _number(attrs["stop"], "stop")
    num = attrs["num"]
    if isinstance(num, (bool, np.bool_)) or not isinstance(num, (int, np.integer)) or num < 1:
        raise AttrError(f"num must be a positive integer, got {num!r}")
    return TensorType((int(num),), "float32")


def linspace_step(start, stop, num) -> float:
    """(stop - start) / (num - 1) of the float32 start and stop, in float64."""
    start, stop = (float(np.float32(v)) for v in (start, stop))
    return 0.0 if num == 1 else (stop - start) / (num - 1)


def _linspace_ref(arrays, attrs):
    start, stop = (float(np.float32(attrs[k])) for k in ("start", "stop"))
    num = int(attrs["num"])
    values = start + np.arange(num, dtype=np.float64) * linspace_step(start, stop, num)
    if num > 1:
        values[-1] = stop
    return values.astype(np.float32)


register(OpDef("range", "elementwise", _range_type, _range_ref,
               attrs={"start": REQUIRED, "limit": REQUIRED, "delta": 1, "dtype": REQUIRED},
               num_inputs=0, differentiable=False,
               doc="start, start + delta, ... up to (not including) limit."))
register(OpDef("linspace", "elementwise", _linspace_type, _linspace_ref,
               attrs={"start": REQUIRED, "stop": REQUIRED, "num": REQUIRED},
               num_inputs=0, differentiable=False,
               doc="num evenly spaced values from start to stop, both included."))


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
def unary(op: str, x, name=None, attrs=None):
    (x,) = as_values(x)
    return apply(op, [x], attrs, name)


def binary(op: str, a, b, name=None):
    a, b = as_values(a, b)
    if op == "pow":
        _check_int_exponent(a, b)
    return apply(op, [a, b], None, name)


def _check_int_exponent(a, b):
    """int32 ** (a negative constant) is an error, as in TensorFlow and NumPy."""
    if promote(a.dtype, b.dtype) != "int32" or b.node.op != "constant":
        return
    exponent = b.node.attrs["value"]
    if exponent.size and exponent.min() < 0:
        from ..source import user_location
        raise DTypeError(f"pow ({user_location()}): int32 to the negative power "
                         f"{exponent.min()} is not allowed (as in TensorFlow and NumPy); "
                         f"cast the base to float32 first")


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


def clip_by_value(x, clip_value_min, clip_value_max, name=None):
    x, lo, hi = as_values(x, clip_value_min, clip_value_max)
    return apply("clip_by_value", [x, lo, hi], None, name)


def _as_float(v):
    """Python numbers become floats; anything else is left for type inference to
    reject with the node's name."""
    number = isinstance(v, (int, float, np.integer, np.floating)) and \
        not isinstance(v, (bool, np.bool_))
    return float(v) if number else v


def range_(graph, start, limit, delta=1, dtype=None, name=None):
    """TensorFlow's range: dtype defaults to float32 if any argument is a float."""
    if dtype is None:
        dtype = "float32" if any(isinstance(v, (float, np.floating))
                                 for v in (start, limit, delta)) else "int32"
    dtype = as_dtype(dtype)
    if dtype == "float32":
        start, limit, delta = _as_float(start), _as_float(limit), _as_float(delta)
    return apply("range", [], {"start": start, "limit": limit, "delta": delta,
                               "dtype": dtype}, name, graph)


def linspace(graph, start, stop, num, name=None):
    return apply("linspace", [], {"start": _as_float(start), "stop": _as_float(stop),
                                  "num": num}, name, graph)
