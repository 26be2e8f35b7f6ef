"""Gradient rules of the elementwise ops. Broadcasting is undone with unbroadcast."""
from __future__ import annotations

from ...ir.ops.elementwise import SELU_ALPHA, SELU_SCALE
from .build import (add, binary, broadcast_like, cast, div, mul, neg, square, sub,
                    unary, unbroadcast, where, zeros_like)
from .registry import gradient

TWO_OVER_SQRT_PI = 1.1283791670955126          # erf' = 2/sqrt(pi) e^(-x^2)


def _y(node):
    return node.outputs[0]


def _binary(da, db):
    """A rule from the two partials (each a function of node, dy) with unbroadcasting."""
    def rule(node, dy):
        a, b = node.inputs
        return [unbroadcast(da(node, dy), a) if da else None,
                unbroadcast(db(node, dy), b) if db else None]
    return rule


gradient("add")(_binary(lambda n, dy: dy, lambda n, dy: dy))
gradient("sub")(_binary(lambda n, dy: dy, lambda n, dy: neg(dy)))
gradient("mul")(_binary(lambda n, dy: mul(dy, n.inputs[1]),
                        lambda n, dy: mul(dy, n.inputs[0])))
gradient("div")(_binary(lambda n, dy: div(dy, n.inputs[1]),
                        lambda n, dy: neg(div(mul(dy, n.inputs[0]),
                                              square(n.inputs[1])))))
# floormod(x, y) = x - floor(x / y) * y: dx = dy, dy = -dy * floor(x / y)  (TensorFlow's)
gradient("mod")(_binary(lambda n, dy: dy,
                        lambda n, dy: neg(mul(dy, binary("floor_div", *n.inputs)))))


@gradient("pow")
def _pow(node, dy):
    a, b = node.inputs
    y = _y(node)
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


gradient("maximum")(_select("greater_equal"))
gradient("minimum")(_select("less_equal"))

# One-input rules: d(input) from the node, its output y and dy.
UNARY = {
    "neg": lambda n, y, dy: neg(dy),
    "abs": lambda n, y, dy: mul(dy, unary("sign", n.inputs[0])),
    "square": lambda n, y, dy: mul(dy, mul(n.inputs[0], 2.0)),
    # relu, elu, selu, relu6 and leaky_relu (alpha >= 0) read their output, not their
    # input (y > 0 exactly where x > 0): the pre-activation then has no consumer in the
    # backward pass, so a conv/matmul + bias + activation still fuses into one kernel.
    "relu": lambda n, y, dy: where(binary("greater", y, 0.0), dy, 0.0),
    "exp": lambda n, y, dy: mul(dy, y),
    "log": lambda n, y, dy: div(dy, n.inputs[0]),
    "sqrt": lambda n, y, dy: div(mul(dy, 0.5), y),
    "rsqrt": lambda n, y, dy: mul(dy, mul(binary("pow", y, 3.0), -0.5)),
    "reciprocal": lambda n, y, dy: neg(mul(dy, square(y))),
    "sin": lambda n, y, dy: mul(dy, unary("cos", n.inputs[0])),
    "cos": lambda n, y, dy: neg(mul(dy, unary("sin", n.inputs[0]))),
    "tanh": lambda n, y, dy: mul(dy, sub(1.0, square(y))),
    "sigmoid": lambda n, y, dy: mul(dy, mul(y, sub(1.0, y))),
    "identity": lambda n, y, dy: dy,
    # piecewise constant: zero gradient, as in TensorFlow
    "sign": lambda n, y, dy: zeros_like(n.inputs[0]),
    "floor": lambda n, y, dy: zeros_like(n.inputs[0]),
    "ceil": lambda n, y, dy: zeros_like(n.inputs[0]),
    "round": lambda n, y, dy: zeros_like(n.inputs[0]),
}


def _x(node):
    return node.inputs[0]


def _rsqrt_one_minus_x2(node):
    """1 / sqrt(1 - x^2): the derivative of asin (and -acos)."""
    return unary("rsqrt", sub(1.0, square(_x(node))))


# The math family, with TensorFlow's formulas (in terms of x or of the output y).
UNARY.update({
    "asin": lambda n, y, dy: mul(dy, _rsqrt_one_minus_x2(n)),
    "acos": lambda n, y, dy: neg(mul(dy, _rsqrt_one_minus_x2(n))),
    "atan": lambda n, y, dy: div(dy, add(1.0, square(_x(n)))),
    "asinh": lambda n, y, dy: div(dy, unary("cosh", y)),
    "acosh": lambda n, y, dy: div(dy, unary("sinh", y)),
    "atanh": lambda n, y, dy: div(dy, sub(1.0, square(_x(n)))),
    "sinh": lambda n, y, dy: mul(dy, unary("cosh", _x(n))),
    "cosh": lambda n, y, dy: mul(dy, unary("sinh", _x(n))),
    "tan": lambda n, y, dy: mul(dy, add(1.0, square(y))),          # sec^2 = 1 + tan^2
    "erf": lambda n, y, dy: mul(dy, mul(unary("exp", neg(square(_x(n)))), TWO_OVER_SQRT_PI)),
    "expm1": lambda n, y, dy: mul(dy, unary("exp", _x(n))),
    "log1p": lambda n, y, dy: div(dy, add(1.0, _x(n))),
    "softplus": lambda n, y, dy: mul(dy, unary("sigmoid", _x(n))),
    # elu' = y + 1 below 0; selu' = y + scale * alpha below 0, scale above
    "elu": lambda n, y, dy: where(binary("less", y, 0.0), mul(dy, add(y, 1.0)), dy),
    "selu": lambda n, y, dy: where(binary("less", y, 0.0),
                                   mul(dy, add(y, SELU_SCALE * SELU_ALPHA)),
                                   mul(dy, SELU_SCALE)),
    "relu6": lambda n, y, dy: where(binary("logical_and", binary("greater", y, 0.0),
                                           binary("less", y, 6.0)), dy, 0.0),
    "leaky_relu": lambda n, y, dy: where(
        binary("greater", y if n.attrs["alpha"] >= 0 else _x(n), 0.0), dy,
        mul(dy, n.attrs["alpha"])),
    "step": lambda n, y, dy: zeros_like(_x(n)),                    # TensorFlow.js's
})

for _op, _fn in UNARY.items():
    gradient(_op)(lambda node, dy, _fn=_fn: [_fn(node, node.outputs[0], dy)])


@gradient("atan2")
def _atan2(node, dy):
    """atan2(y, x): d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2)."""
    y, x = node.inputs
    scaled = div(dy, add(square(x), square(y)))
    return [unbroadcast(mul(scaled, x), y), unbroadcast(neg(mul(scaled, y)), x)]


@gradient("squared_difference")
def _squared_difference(node, dy):
    a, b = node.inputs
    da = mul(mul(dy, 2.0), sub(a, b))
    return [unbroadcast(da, a), unbroadcast(neg(da), b)]


@gradient("prelu")
def _prelu(node, dy):
    """x > 0 ? x : alpha * x: dx = dy or alpha * dy, dalpha = 0 or x * dy."""
    x, alpha = node.inputs
    positive = binary("greater", x, 0.0)
    return [unbroadcast(where(positive, dy, mul(dy, alpha)), x),
            unbroadcast(where(positive, 0.0, mul(dy, x)), alpha)]


@gradient("clip_by_value")
def _clip_by_value(node, dy):
    """TensorFlow's: t's gradient passes where min <= t <= max; the rest goes to the
    bound that was taken, summed back to the bound's shape."""
    x, lo, hi = node.inputs
    below = binary("less", x, lo)
    above = binary("greater", x, hi)
    return [unbroadcast(where(binary("logical_or", below, above), 0.0, dy), x),
            unbroadcast(where(below, dy, 0.0), lo),
            unbroadcast(where(above, dy, 0.0), hi)]


@gradient("cast")
def _cast(node, dy):
    """Only float → float passes a gradient; ints and bools take none."""
    (x,) = node.inputs
    return [dy if x.dtype == "float32" else None]


@gradient("where")
def _where(node, dy):
    c, a, b = node.inputs
    return [None, unbroadcast(where(c, dy, 0.0), a), unbroadcast(where(c, 0.0, dy), b)]


@gradient("add_n")
def _add_n(node, dy):
    return [unbroadcast(dy, x) for x in node.inputs]


__all__ = ["broadcast_like", "cast"]
