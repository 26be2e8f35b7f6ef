"""Gradient rules of the elementwise ops. Broadcasting is undone with unbroadcast."""
from __future__ import annotations

from .build import (add, binary, broadcast_like, cast, div, mul, neg, square, sub,
                    unary, unbroadcast, where, zeros_like)
from .registry import gradient


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
    "relu": lambda n, y, dy: where(binary("greater", n.inputs[0], 0.0), dy, 0.0),
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

for _op, _fn in UNARY.items():
    gradient(_op)(lambda node, dy, _fn=_fn: [_fn(node, node.outputs[0], dy)])


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
