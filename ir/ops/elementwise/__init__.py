"""Elementwise ops (numpy broadcasting): unary math and activations (unary_ops.py),
binary arithmetic, comparisons and logic (binary_ops.py), where, clip_by_value and
add_n (nary_ops.py), cast (unary_ops.py), and the index-computed fill, range and
linspace (sequences.py); their builders are in builders.py.

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
with the choices that unary_ops.py's and sequences.py's docstrings state.
"""
from __future__ import annotations

from . import binary_ops, nary_ops  # noqa: F401  (registration)
from .builders import (
    add_n,
    binary,
    cast,
    clip_by_value,
    fill,
    linspace,
    range_,
    unary,
    unbroadcast,
    where,
)
from .sequences import linspace_step, range_size
from .type_rules import ANY, BOOL, FLOAT, NUMERIC, binary_rule, unary_rule
from .unary_ops import SELU_ALPHA, SELU_SCALE, cast_array, unary_op

__all__ = ["ANY", "BOOL", "FLOAT", "NUMERIC", "SELU_ALPHA", "SELU_SCALE", "add_n",
           "binary", "binary_rule", "cast", "cast_array", "clip_by_value", "fill",
           "linspace", "linspace_step", "range_", "range_size", "unary", "unary_op",
           "unary_rule", "unbroadcast", "where"]
