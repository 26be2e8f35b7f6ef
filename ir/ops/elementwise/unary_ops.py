"""The one-input elementwise ops, one record each: accepted dtypes, numpy reference,
GLSL, gradient (or why none), TensorFlow's name and the generated ff function.

To add an op, add its `unary_op(...)` here and a test row (tests/ops/test_math.py,
tests/autodiff/test_math_gradients.py); the kernel, the gradient, ff.<name> and its
line in docs/OPS.md follow from the record (CONTRIBUTING.md walks through one).

In a gradient, x is the op's input, y its output and dy the gradient of y; rules build
with the ir builders, so gradients can be differentiated again. relu, elu, selu and
relu6 read y, not x (y > 0 exactly where x > 0): the pre-activation then has no
consumer in the backward pass, so a conv/matmul + bias + activation still fuses.

Choices where TensorFlow's definitions leave one (the package docstring has the rest):
- relu6, clip_by_value (nary_ops.py), elu, selu, leaky_relu, prelu and step keep NaN
  as NaN.
- step is TensorFlow.js's: x > 0 ? 1 : alpha (float only); its gradient is zero.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import AttrError
from ...types import TensorType
from ..registry import REQUIRED, Onnx, OpDef, register
from .builders import add, binary, div, mul, neg, square, sub, unary, where, zeros_like
from .type_rules import ANY, BOOL, FLOAT, NUMERIC, unary_rule

_I32 = np.iinfo(np.int32)

# SELU's constants (Klambauer et al. 2017), as TensorFlow writes them
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946
TWO_OVER_SQRT_PI = 1.1283791670955126          # erf' = 2/sqrt(pi) e^(-x^2)

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _unary_ref(fn):
    def ref(arrays, attrs):
        (x,) = arrays
        return np.asarray(fn(x)).astype(x.dtype, copy=False)
    return ref


def _input_gradient(grad):
    """A rule(node, dy) from grad(x, y, dy) -> the input's gradient."""
    return lambda node, dy: [grad(node.inputs[0], node.outputs[0], dy)]


def unary_op(name, dtypes, reference, *, glsl="", grad=None, no_gradient="", tf="—",
             onnx=None, arg="x", doc="", out=None, kind="kernel"):
    """Registers a one-input elementwise op (see the module docstring).

    dtypes: the accepted input dtypes; out: the output dtype (default: the input's);
    reference: numpy, array -> array; glsl: GLSL of the operand {0} (OpDef.glsl), ""
    for a macro in templates/elementwise_ops.glsl.j2; grad(x, y, dy): the input's
    gradient, or no_gradient: why there is none; onnx: ONNX's name (OpDef.onnx); arg:
    the argument name of ff.<name> ("" for no generated function); kind: OpDef.kind."""
    return register(OpDef(
        name, "elementwise", unary_rule(dtypes, out), _unary_ref(reference), num_inputs=1,
        doc=doc, glsl=glsl, gradient=_input_gradient(grad) if grad else None,
        no_gradient=no_gradient, tf=tf, onnx=onnx, wrapper_arg=arg, kind=kind,
        pointwise=True))


def _zero_gradient(x, y, dy):
    """Piecewise constant: zero gradient, as in TensorFlow."""
    return zeros_like(x)


def _rsqrt_one_minus_x2(x):
    """1 / sqrt(1 - x^2): the derivative of asin (and -acos)."""
    return unary("rsqrt", sub(1.0, square(x)))


def _keep_nan(fn):
    """fn(x), with NaN inputs giving NaN (numpy's clip and where would not)."""
    return lambda x: np.where(np.isnan(x), x, fn(x)) if x.dtype.kind == "f" else fn(x)


# -- arithmetic and rounding ----------------------------------------------------------
unary_op("neg", NUMERIC, np.negative, glsl="(-{0})", grad=lambda x, y, dy: neg(dy),
         tf="tf.math.negative", onnx="Neg", doc="-x.")
unary_op("abs", NUMERIC, np.abs, grad=lambda x, y, dy: mul(dy, unary("sign", x)),
         tf="tf.math.abs", onnx="Abs", doc="|x|.")
unary_op("sign", NUMERIC, np.sign, grad=_zero_gradient, tf="tf.math.sign", onnx="Sign",
         doc="-1, 0 or 1 (NaN stays NaN).")
unary_op("square", NUMERIC, np.square, glsl="({0} * {0})",
         grad=lambda x, y, dy: mul(dy, mul(x, 2.0)), tf="tf.math.square", doc="x * x.")
unary_op("reciprocal", FLOAT, lambda x: np.float32(1) / x, glsl="(1.0 / {0})",
         grad=lambda x, y, dy: neg(mul(dy, square(y))), tf="tf.math.reciprocal", onnx="Reciprocal",
         doc="1 / x.")
unary_op("floor", FLOAT, np.floor, glsl="floor({0})", grad=_zero_gradient,
         tf="tf.math.floor", onnx="Floor", doc="Round down.")
unary_op("ceil", FLOAT, np.ceil, glsl="ceil({0})", grad=_zero_gradient,
         tf="tf.math.ceil", onnx="Ceil", doc="Round up.")
unary_op("round", FLOAT, np.round, glsl="roundEven({0})", grad=_zero_gradient,
         tf="tf.math.round", onnx="Round", doc="Round half to even.")      # as TensorFlow

# -- exponentials, logarithms, roots --------------------------------------------------
unary_op("exp", FLOAT, np.exp, glsl="ff_exp_nan({0})", grad=lambda x, y, dy: mul(dy, y),
         tf="tf.math.exp", onnx="Exp", doc="e**x.")
unary_op("log", FLOAT, np.log, glsl="ff_log({0})", grad=lambda x, y, dy: div(dy, x),
         tf="tf.math.log", onnx="Log", doc="Natural log (NaN below 0).")
unary_op("sqrt", FLOAT, np.sqrt, glsl="ff_sqrt({0})",
         grad=lambda x, y, dy: div(mul(dy, 0.5), y), tf="tf.math.sqrt", onnx="Sqrt",
         doc="Square root (NaN below 0).")
unary_op("rsqrt", FLOAT, lambda x: np.float32(1) / np.sqrt(x), glsl="(1.0 / ff_sqrt({0}))",
         grad=lambda x, y, dy: mul(dy, mul(binary("pow", y, 3.0), -0.5)),
         tf="tf.math.rsqrt", doc="1 / sqrt(x).")
unary_op("expm1", FLOAT, np.expm1, glsl="ff_expm1({0})",
         grad=lambda x, y, dy: mul(dy, unary("exp", x)), tf="tf.math.expm1",
         doc="exp(x) - 1, accurate next to 0.")
unary_op("log1p", FLOAT, np.log1p, glsl="ff_log1p({0})",
         grad=lambda x, y, dy: div(dy, add(1.0, x)), tf="tf.math.log1p",
         doc="log(1 + x), accurate next to 0.")

# -- trigonometry and hyperbolics (TensorFlow's derivative formulas) -------------------
unary_op("sin", FLOAT, np.sin, glsl="sin({0})",
         grad=lambda x, y, dy: mul(dy, unary("cos", x)), tf="tf.math.sin", onnx="Sin", doc="Sine.")
unary_op("cos", FLOAT, np.cos, glsl="cos({0})",
         grad=lambda x, y, dy: neg(mul(dy, unary("sin", x))), tf="tf.math.cos", onnx="Cos",
         doc="Cosine.")
unary_op("tan", FLOAT, np.tan, glsl="ff_tan({0})",
         grad=lambda x, y, dy: mul(dy, add(1.0, square(y))),          # sec^2 = 1 + tan^2
         tf="tf.math.tan", onnx="Tan", doc="Tangent (accurate for |x| < 8192; beyond, sin / cos).")
unary_op("asin", FLOAT, np.arcsin, glsl="ff_asin({0})",
         grad=lambda x, y, dy: mul(dy, _rsqrt_one_minus_x2(x)), tf="tf.math.asin", onnx="Asin",
         doc="Inverse sine, in [-pi/2, pi/2]; NaN outside [-1, 1].")
unary_op("acos", FLOAT, np.arccos, glsl="ff_acos({0})",
         grad=lambda x, y, dy: neg(mul(dy, _rsqrt_one_minus_x2(x))), tf="tf.math.acos", onnx="Acos",
         doc="Inverse cosine, in [0, pi]; NaN outside [-1, 1].")
unary_op("atan", FLOAT, np.arctan, glsl="ff_atan({0})",
         grad=lambda x, y, dy: div(dy, add(1.0, square(x))), tf="tf.math.atan", onnx="Atan",
         doc="Inverse tangent, in (-pi/2, pi/2).")
unary_op("sinh", FLOAT, np.sinh, glsl="ff_sinh({0})",
         grad=lambda x, y, dy: mul(dy, unary("cosh", x)), tf="tf.math.sinh", onnx="Sinh",
         doc="Hyperbolic sine.")
unary_op("cosh", FLOAT, np.cosh, glsl="ff_cosh({0})",
         grad=lambda x, y, dy: mul(dy, unary("sinh", x)), tf="tf.math.cosh", onnx="Cosh",
         doc="Hyperbolic cosine.")
unary_op("tanh", FLOAT, np.tanh, glsl="ff_tanh({0})",
         grad=lambda x, y, dy: mul(dy, sub(1.0, square(y))), tf="tf.math.tanh", onnx="Tanh",
         doc="Hyperbolic tangent.")
unary_op("asinh", FLOAT, np.arcsinh, glsl="ff_asinh({0})",
         grad=lambda x, y, dy: div(dy, unary("cosh", y)), tf="tf.math.asinh", onnx="Asinh",
         doc="Inverse hyperbolic sine.")
unary_op("acosh", FLOAT, np.arccosh, glsl="ff_acosh({0})",
         grad=lambda x, y, dy: div(dy, unary("sinh", y)), tf="tf.math.acosh", onnx="Acosh",
         doc="Inverse hyperbolic cosine; NaN below 1.")
unary_op("atanh", FLOAT, np.arctanh, glsl="ff_atanh({0})",
         grad=lambda x, y, dy: div(dy, sub(1.0, square(x))), tf="tf.math.atanh", onnx="Atanh",
         doc="Inverse hyperbolic tangent; +-inf at +-1, NaN beyond.")
unary_op("erf", FLOAT, _erf, glsl="ff_erf({0})",
         grad=lambda x, y, dy: mul(dy, mul(unary("exp", neg(square(x))), TWO_OVER_SQRT_PI)),
         tf="tf.math.erf", onnx="Erf",
         doc="The error function, 2/sqrt(pi) * integral of exp(-t**2) from 0 to x.")

# -- activations -------------------------------------------------------------------------
unary_op("relu", NUMERIC, lambda x: np.where(x < 0, np.zeros_like(x), x),
         grad=lambda x, y, dy: where(binary("greater", y, 0.0), dy, 0.0),
         tf="tf.nn.relu", onnx="Relu", doc="max(x, 0); NaN propagates.")
unary_op("relu6", NUMERIC, _keep_nan(lambda x: np.clip(x, 0, 6)),
         grad=lambda x, y, dy: where(binary("logical_and", binary("greater", y, 0.0),
                                             binary("less", y, 6.0)), dy, 0.0),
         tf="tf.nn.relu6", arg="features",
         doc="min(max(features, 0), 6); NaN stays NaN. float32 or int32.")
unary_op("sigmoid", FLOAT, lambda x: (1.0 / (1.0 + np.exp(-x))).astype(x.dtype),
         glsl="ff_sigmoid({0})", grad=lambda x, y, dy: mul(dy, mul(y, sub(1.0, y))),
         tf="tf.math.sigmoid", onnx="Sigmoid", doc="1 / (1 + e**-x).")
unary_op("softplus", FLOAT, lambda x: np.logaddexp(np.zeros_like(x), x),
         glsl="ff_softplus({0})", grad=lambda x, y, dy: mul(dy, unary("sigmoid", x)),
         tf="tf.math.softplus", onnx="Softplus", arg="features",
         doc="log(1 + exp(features)), without overflow.")
# elu' = y + 1 below 0; selu' = y + scale * alpha below 0, scale above
unary_op("elu", FLOAT, lambda x: np.where(x < 0, np.expm1(x), x), glsl="ff_elu({0})",
         grad=lambda x, y, dy: where(binary("less", y, 0.0), mul(dy, add(y, 1.0)), dy),
         tf="tf.nn.elu", onnx=Onnx("Elu", imported_by="its rule reads alpha"), arg="features",
         doc="features if > 0, else exp(features) - 1.")
unary_op("selu", FLOAT, lambda x: np.where(x > 0, SELU_SCALE * x,
                                           SELU_SCALE * SELU_ALPHA * np.expm1(x)),
         glsl="ff_selu({0})",
         grad=lambda x, y, dy: where(binary("less", y, 0.0),
                                     mul(dy, add(y, SELU_SCALE * SELU_ALPHA)),
                                     mul(dy, SELU_SCALE)),
         tf="tf.nn.selu", onnx=Onnx("Selu", imported_by="its rule reads alpha and gamma"),
         arg="features",
         doc="scale * (features if > 0 else alpha * (exp(features) - 1)), with scale = "
             "1.0507... and alpha = 1.6732... (Klambauer et al. 2017).")

unary_op("softsign", FLOAT, lambda x: x / (x.dtype.type(1) + np.abs(x)),
         glsl="({0} / (1.0 + abs({0})))",
         grad=lambda x, y, dy: div(dy, square(add(1.0, unary("abs", x)))),
         tf="tf.nn.softsign", arg="features",
         doc="features / (1 + |features|), in (-1, 1); NaN at +-inf, as TensorFlow's.")

# -- predicates, logic, copies -----------------------------------------------------------
_BOOL_RESULT = "its result is bool"
unary_op("is_nan", FLOAT, np.isnan, out="bool", glsl="isnan({0})", no_gradient=_BOOL_RESULT,
         tf="tf.math.is_nan", onnx="IsNaN", doc="True where x is NaN (bool; no gradient).")
unary_op("is_inf", FLOAT, np.isinf, out="bool", glsl="isinf({0})", no_gradient=_BOOL_RESULT,
         tf="tf.math.is_inf",
         onnx=Onnx("IsInf", imported_by="its rule reads detect_positive, detect_negative"),
         doc="True where x is +inf or -inf (bool; no gradient).")
unary_op("is_finite", FLOAT, np.isfinite, out="bool", glsl="ff_is_finite({0})",
         no_gradient=_BOOL_RESULT, tf="tf.math.is_finite",
         doc="True where x is neither NaN nor infinite (bool; no gradient).")
unary_op("logical_not", BOOL, np.logical_not, no_gradient="bool in and out",
         tf="tf.math.logical_not", onnx="Not", doc="not x (bool).")
unary_op("identity", ANY, lambda x: x, glsl="{0}", grad=lambda x, y, dy: dy,
         tf="tf.identity", onnx="Identity", kind="view", doc="x itself (a view: no kernel runs).")
_SHAPE_ONLY = "its value depends on x's shape only"
unary_op("zeros_like", ANY, np.zeros_like, no_gradient=_SHAPE_ONLY, tf="tf.zeros_like",
         doc="Zeros of x's shape and dtype.")
unary_op("ones_like", ANY, np.ones_like, glsl="{t}(1)", no_gradient=_SHAPE_ONLY,
         tf="tf.ones_like", doc="Ones of x's shape and dtype.")


# -- one input and a float attribute --------------------------------------------------
def _alpha_rule(types, attrs):
    alpha = attrs["alpha"]
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float, np.integer, np.floating)):
        raise AttrError(f"alpha must be a Python number, got {alpha!r}")
    return unary_rule(FLOAT)(types, attrs)


def _leaky_relu_ref(arrays, attrs):
    (x,) = arrays
    return np.where(x > 0, x, x * x.dtype.type(attrs["alpha"]))


def _leaky_relu_gradient(node, dy):
    """Reads y (not x) when alpha >= 0, as relu does: y > 0 exactly where x > 0."""
    x, y, alpha = node.inputs[0], node.outputs[0], node.attrs["alpha"]
    return [where(binary("greater", y if alpha >= 0 else x, 0.0), dy, mul(dy, alpha))]


def _step_ref(arrays, attrs):
    (x,) = arrays
    return np.where(np.isnan(x), x, np.where(x > 0, 1.0, attrs["alpha"])).astype(x.dtype)


register(OpDef("leaky_relu", "elementwise", _alpha_rule, _leaky_relu_ref,
               attrs={"alpha": 0.2}, num_inputs=1, glsl="ff_leaky_relu({0}, {alpha})",
               gradient=_leaky_relu_gradient, tf="tf.nn.leaky_relu", pointwise=True,
               doc="x > 0 ? x : alpha * x (TensorFlow's leaky_relu)."))
register(OpDef("step", "elementwise", _alpha_rule, _step_ref, attrs={"alpha": 0.0},
               num_inputs=1, glsl="ff_step({0}, {alpha})", pointwise=True,
               gradient=lambda node, dy: [zeros_like(node.inputs[0])], tf="tf.js step",
               doc="x > 0 ? 1 : alpha; NaN stays NaN (TensorFlow.js's step); its "
                   "gradient is zero."))


# -- cast ----------------------------------------------------------------------------
def cast_array(x: np.ndarray, dtype: str) -> np.ndarray:
    """The reference cast (see the package docstring for float → int)."""
    if dtype == "bool":
        return x != 0
    if dtype == "float32" and x.dtype == np.float64:
        return x                    # the float64 reference mode keeps its precision
    if dtype == "int32" and x.dtype.kind == "f":
        clipped = np.clip(np.nan_to_num(x, nan=0.0), _I32.min, _I32.max)
        out = np.trunc(clipped.astype(np.float64))
        return np.clip(out, _I32.min, _I32.max).astype(np.int32)
    return x.astype(np.dtype(dtype))


# the operand arrives converted to the output's type: the GLSL is the operand itself
register(OpDef("cast", "elementwise",
               lambda types, attrs: TensorType(types[0].shape, attrs["dtype"]),
               lambda arrays, attrs: cast_array(arrays[0], attrs["dtype"]),
               attrs={"dtype": REQUIRED}, num_inputs=1, glsl="{0}", tf="tf.cast", pointwise=True,
               gradient=lambda node, dy: [dy if node.inputs[0].dtype == "float32" else None],
               doc="Float ↔ int casts pass gradients only between float tensors."))
