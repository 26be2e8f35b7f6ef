"""Builders of the elementwise ops: they add a node to the inputs' graph and return its
output Value. The frontend wraps them; gradient rules and fusion call them directly.
The short names (add, mul, ...) let gradient rules read like the maths."""
from __future__ import annotations

import numpy as np

from ...errors import DTypeError
from ...source import user_location
from ...types import as_dtype, promote
from ..common import apply, as_value, as_values, graph_of


def unary(op: str, x, name=None, attrs=None):
    (x,) = as_values(x)
    return apply(op, [x], attrs, name)


def binary(op: str, a, b, name=None):
    a, b = as_values(a, b)
    if op == "pow":
        _check_int_exponent(a, b)
    return apply(op, [a, b], None, name)


def add(a, b): return binary("add", a, b)
def sub(a, b): return binary("sub", a, b)
def mul(a, b): return binary("mul", a, b)
def div(a, b): return binary("div", a, b)
def neg(a): return unary("neg", a)
def square(a): return unary("square", a)
def zeros_like(a): return unary("zeros_like", a)


def unbroadcast(g, x):
    """g (the gradient of a broadcast result) summed back to x's shape."""
    if g.shape == x.shape and g.type.is_static:
        return g
    from ..autodiff_ops import sum_like  # (ir/ops/autodiff_ops.py imports this package)
    return sum_like(g, x)


def _check_int_exponent(a, b):
    """int32 ** (a negative constant) is an error, as in TensorFlow and NumPy."""
    if promote(a.dtype, b.dtype) != "int32" or b.node.op != "constant":
        return
    exponent = b.node.attrs["value"]
    if exponent.size and exponent.min() < 0:
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
