"""Gradient rules of the elementwise ops of several inputs. Broadcasting is undone with
unbroadcast. One-input ops carry their rules in their records
(ir/ops/elementwise/unary_ops.py)."""
from __future__ import annotations

from .build import (
    add,
    binary,
    broadcast_like,
    cast,
    div,
    mul,
    neg,
    square,
    sub,
    unary,
    unbroadcast,
    where,
)
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


@gradient("where")
def _where(node, dy):
    c, a, b = node.inputs
    return [None, unbroadcast(where(c, dy, 0.0), a), unbroadcast(where(c, 0.0, dy), b)]


@gradient("add_n")
def _add_n(node, dy):
    return [unbroadcast(dy, x) for x in node.inputs]


__all__ = ["broadcast_like", "cast"]
