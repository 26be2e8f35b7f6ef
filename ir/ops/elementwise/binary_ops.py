"""The two-input elementwise ops (numpy broadcasting), one record each: accepted dtypes,
output dtype, numpy reference, GLSL, gradient rule (it sums each input's gradient back
to the input's shape: unbroadcast) or why none, TensorFlow's name, doc. Integer
semantics are in the package docstring."""
from __future__ import annotations

import numpy as np

from ..registry import Onnx, OpDef, register
from .builders import add, binary, div, mul, neg, square, sub, unary, unbroadcast, where
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
_VARIADIC = "variadic, the rule of Sum, Mean, Max and Min"
_INTEGER = "integer valued: zero gradient almost everywhere, none in TensorFlow"

def binary_op(name, dtypes, reference, *, out=None, glsl="", grad=None, no_gradient="",
              tf="—", onnx=None, doc=""):
    """Registers a two-input elementwise op: dtypes the accepted (promoted) dtypes, out
    the output dtype (default: the promoted one), reference(arrays, attrs), glsl of the
    operands {0} and {1} ("" for a macro in templates/elementwise_ops.glsl.j2), grad a
    rule(node, dy) -> [da, db] or no_gradient why there is none; onnx: ONNX's name
    (OpDef.onnx)."""
    return register(OpDef(name, "elementwise", binary_rule(dtypes, out), reference,
                          num_inputs=2, glsl=glsl, gradient=grad, no_gradient=no_gradient,
                          tf=tf, onnx=onnx, doc=doc, pointwise=True))


# -- gradient rules ----------------------------------------------------------------------
def _partials(da, db):
    """A rule from the two partials (each a function of node, dy) with unbroadcasting."""
    def rule(node, dy):
        a, b = node.inputs
        return [unbroadcast(da(node, dy), a) if da else None,
                unbroadcast(db(node, dy), b) if db else None]
    return rule


def _pow_gradient(node, dy):
    a, b = node.inputs
    y = node.outputs[0]
    # d/da = b * a^(b-1); d/db = log(a) * a^b, taken as 0 where a <= 0 (TensorFlow's)
    da = mul(dy, mul(b, binary("pow", a, sub(b, 1.0))))
    positive = binary("greater", a, 0.0)
    safe_a = where(positive, a, 1.0)
    db = mul(dy, where(positive, mul(unary("log", safe_a), y), 0.0))
    return [unbroadcast(da, a), unbroadcast(db, b)]


def _select(pick_a: str):
    """maximum/minimum: the gradient goes to the chosen side (a on ties, TensorFlow's)."""
    def rule(node, dy):
        a, b = node.inputs
        chosen = binary(pick_a, a, b)
        return [unbroadcast(where(chosen, dy, 0.0), a),
                unbroadcast(where(chosen, 0.0, dy), b)]
    return rule


def _atan2_gradient(node, dy):
    """atan2(y, x): d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2)."""
    y, x = node.inputs
    scaled = div(dy, add(square(x), square(y)))
    return [unbroadcast(mul(scaled, x), y), unbroadcast(neg(mul(scaled, y)), x)]


def _squared_difference_gradient(node, dy):
    a, b = node.inputs
    da = mul(mul(dy, 2.0), sub(a, b))
    return [unbroadcast(da, a), unbroadcast(neg(da), b)]


def _prelu_gradient(node, dy):
    """x > 0 ? x : alpha * x: dx = dy or alpha * dy, dalpha = 0 or x * dy."""
    x, alpha = node.inputs
    positive = binary("greater", x, 0.0)
    return [unbroadcast(where(positive, dy, mul(dy, alpha)), x),
            unbroadcast(where(positive, 0.0, mul(dy, x)), alpha)]


def _pairwise(fn):
    return lambda arrays, attrs: fn(*arrays)


binary_op("add", NUMERIC, _arith(np.add), glsl="({0} + {1})",
          grad=_partials(lambda n, dy: dy, lambda n, dy: dy), tf="tf.math.add", onnx="Add",
          doc="x + y.")
binary_op("sub", NUMERIC, _arith(np.subtract), glsl="({0} - {1})",
          grad=_partials(lambda n, dy: dy, lambda n, dy: neg(dy)), tf="tf.math.subtract",
          onnx="Sub",
          doc="x - y.")
binary_op("mul", NUMERIC, _arith(np.multiply), glsl="({0} * {1})",
          grad=_partials(lambda n, dy: mul(dy, n.inputs[1]), lambda n, dy: mul(dy, n.inputs[0])),
          tf="tf.math.multiply", onnx="Mul", doc="x * y.")
binary_op("div", NUMERIC, _div, out="float32", glsl="({0} / {1})",
          grad=_partials(lambda n, dy: div(dy, n.inputs[1]),
                         lambda n, dy: neg(div(mul(dy, n.inputs[0]), square(n.inputs[1])))),
          tf="tf.math.truediv", doc="x / y, always float32.")
binary_op("floor_div", NUMERIC, _pairwise(_floor_div), no_gradient=_INTEGER,
          tf="tf.math.floordiv", doc="Floor division (TensorFlow's floordiv).")
# floormod(x, y) = x - floor(x / y) * y: dx = dy, dy = -dy * floor(x / y)  (TensorFlow's)
binary_op("mod", NUMERIC, _pairwise(_mod), tf="tf.math.floormod",
          grad=_partials(lambda n, dy: dy,
                         lambda n, dy: neg(mul(dy, binary("floor_div", *n.inputs)))),
          doc="Floor modulo: the result has y's sign (TensorFlow's floormod).")
binary_op("pow", NUMERIC, _pairwise(_pow), grad=_pow_gradient, tf="tf.math.pow", onnx="Pow",
          doc="x ** y.")
binary_op("maximum", NUMERIC, _arith(np.maximum), grad=_select("greater_equal"),
          tf="tf.math.maximum", onnx=Onnx("Max", imported_by=_VARIADIC),
          doc="Elementwise max; NaN propagates.")
binary_op("minimum", NUMERIC, _arith(np.minimum), grad=_select("less_equal"),
          tf="tf.math.minimum", onnx=Onnx("Min", imported_by=_VARIADIC),
          doc="Elementwise min; NaN propagates.")
binary_op("equal", ANY, _arith(np.equal), out="bool", no_gradient=_COMPARISON,
          tf="tf.math.equal", onnx="Equal", doc="x == y.")
binary_op("not_equal", ANY, _arith(np.not_equal), out="bool", no_gradient=_COMPARISON,
          tf="tf.math.not_equal", doc="x != y.")
binary_op("less", NUMERIC, _arith(np.less), out="bool", no_gradient=_COMPARISON,
          tf="tf.math.less", onnx="Less", doc="x < y.")
binary_op("less_equal", NUMERIC, _arith(np.less_equal), out="bool", no_gradient=_COMPARISON,
          tf="tf.math.less_equal", onnx="LessOrEqual", doc="x <= y.")
binary_op("greater", NUMERIC, _arith(np.greater), out="bool", no_gradient=_COMPARISON,
          tf="tf.math.greater", onnx="Greater", doc="x > y.")
binary_op("greater_equal", NUMERIC, _arith(np.greater_equal), out="bool",
          no_gradient=_COMPARISON, tf="tf.math.greater_equal", onnx="GreaterOrEqual", doc="x >= y.")
binary_op("logical_and", BOOL, _arith(np.logical_and), out="bool",
          no_gradient="bool in and out", tf="tf.math.logical_and", onnx="And",
          doc="x and y (bool).")
binary_op("logical_or", BOOL, _arith(np.logical_or), out="bool",
          no_gradient="bool in and out", tf="tf.math.logical_or", onnx="Or", doc="x or y (bool).")
# the math family
binary_op("atan2", FLOAT, _arith(np.arctan2), glsl="ff_atan2({0}, {1})",
          grad=_atan2_gradient, tf="tf.math.atan2",
          doc="atan2(y, x): the angle of the point (x, y), TensorFlow's order.")
binary_op("squared_difference", NUMERIC, _arith(lambda a, b: np.square(a - b)),
          grad=_squared_difference_gradient, tf="tf.math.squared_difference",
          doc="(x - y) ** 2, broadcasting.")
binary_op("prelu", FLOAT, _arith(lambda x, alpha: np.where(x > 0, x, alpha * x)),
          glsl="ff_prelu({0}, {1})", grad=_prelu_gradient, tf="tf.keras PReLU",
          doc="x if x > 0, else alpha * x, alpha a broadcast tensor.")
