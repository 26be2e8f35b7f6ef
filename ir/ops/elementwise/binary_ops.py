"""The two-input elementwise ops (numpy broadcasting), one row each: accepted dtypes,
output dtype, numpy reference, GLSL, TensorFlow's name. Their gradients, which undo
broadcasting, are in passes/autodiff/elementwise.py; the ones without say why here.
Integer semantics are in the package docstring."""
from __future__ import annotations

import numpy as np

from ..registry import OpDef, register
from .type_rules import ANY, BOOL, FLOAT, NUMERIC, binary_rule, promoted


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
    a, b = promoted(a, b)
    return _float_floor_div(a, b) if a.dtype.kind == "f" else _int_floor_div(a, b)


def _mod(a, b):
    a, b = promoted(a, b)
    return np.mod(a, b) if a.dtype.kind == "f" else _int_mod(a, b)


def _int_pow(a, b):
    a, b = np.broadcast_arrays(a, b)
    nonneg = np.power(a, np.where(b < 0, 0, b))
    negative = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
    return np.where(b < 0, negative, nonneg).astype(np.int32)


def _pow(a, b):
    a, b = promoted(a, b)
    return np.power(a, b) if a.dtype.kind == "f" else _int_pow(a, b)


def _arith(fn):
    def ref(arrays, attrs):
        a, b = promoted(*arrays)
        return fn(a, b)
    return ref


def _div(arrays, attrs):
    return np.divide(*[a if a.dtype == np.float64 else a.astype(np.float32) for a in arrays])


_COMPARISON = "its result is bool"
_INTEGER = "integer valued: zero gradient almost everywhere, none in TensorFlow"

BINARY = {
    # name: (accepted dtypes, output dtype or None for the promoted one, reference,
    #        GLSL of {0} and {1} or "" for a macro, TensorFlow's name, why no gradient)
    "add": (NUMERIC, None, _arith(np.add), "({0} + {1})", "tf.math.add", ""),
    "sub": (NUMERIC, None, _arith(np.subtract), "({0} - {1})", "tf.math.subtract", ""),
    "mul": (NUMERIC, None, _arith(np.multiply), "({0} * {1})", "tf.math.multiply", ""),
    "div": (NUMERIC, "float32", _div, "({0} / {1})", "tf.math.truediv", ""),
    "floor_div": (NUMERIC, None, lambda arrays, attrs: _floor_div(*arrays), "",
                  "tf.math.floordiv", _INTEGER),
    "mod": (NUMERIC, None, lambda arrays, attrs: _mod(*arrays), "", "tf.math.floormod", ""),
    "pow": (NUMERIC, None, lambda arrays, attrs: _pow(*arrays), "", "tf.math.pow", ""),
    "maximum": (NUMERIC, None, _arith(np.maximum), "", "tf.math.maximum", ""),
    "minimum": (NUMERIC, None, _arith(np.minimum), "", "tf.math.minimum", ""),
    "equal": (ANY, "bool", _arith(np.equal), "", "tf.math.equal", _COMPARISON),
    "not_equal": (ANY, "bool", _arith(np.not_equal), "", "tf.math.not_equal", _COMPARISON),
    "less": (NUMERIC, "bool", _arith(np.less), "", "tf.math.less", _COMPARISON),
    "less_equal": (NUMERIC, "bool", _arith(np.less_equal), "", "tf.math.less_equal",
                   _COMPARISON),
    "greater": (NUMERIC, "bool", _arith(np.greater), "", "tf.math.greater", _COMPARISON),
    "greater_equal": (NUMERIC, "bool", _arith(np.greater_equal), "",
                      "tf.math.greater_equal", _COMPARISON),
    "logical_and": (BOOL, "bool", _arith(np.logical_and), "", "tf.math.logical_and",
                    "bool in and out"),
    "logical_or": (BOOL, "bool", _arith(np.logical_or), "", "tf.math.logical_or",
                   "bool in and out"),
    # the math family
    "atan2": (FLOAT, None, _arith(np.arctan2), "ff_atan2({0}, {1})",   # atan2(y, x)
              "tf.math.atan2", ""),
    "squared_difference": (NUMERIC, None, _arith(lambda a, b: np.square(a - b)), "",
                           "tf.math.squared_difference", ""),
    "prelu": (FLOAT, None, _arith(lambda x, alpha: np.where(x > 0, x, alpha * x)),
              "ff_prelu({0}, {1})", "tf.keras PReLU", ""),
}

for _name, (_allowed, _out, _fn, _glsl, _tf, _why) in BINARY.items():
    register(OpDef(_name, "elementwise", binary_rule(_allowed, _out), _fn, num_inputs=2,
                   glsl=_glsl, tf=_tf, no_gradient=_why))
