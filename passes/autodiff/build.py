"""Short names for the ir builders, so rules read like the maths."""
from __future__ import annotations

from ...ir.ops import (
    autodiff_ops as _autodiff_ops,
    elementwise as _ew,
    matmul as _mm,
    reduce as _red,
    shape as _shape,
)


def add(a, b): return _ew.binary("add", a, b)
def sub(a, b): return _ew.binary("sub", a, b)
def mul(a, b): return _ew.binary("mul", a, b)
def div(a, b): return _ew.binary("div", a, b)
def neg(a): return _ew.unary("neg", a)
def square(a): return _ew.unary("square", a)
def unary(op, a): return _ew.unary(op, a)
def binary(op, a, b): return _ew.binary(op, a, b)
def where(c, a, b): return _ew.where(c, a, b)
def cast(a, dtype): return _ew.cast(a, dtype)
def zeros_like(a): return _ew.unary("zeros_like", a)
def ones_like(a): return _ew.unary("ones_like", a)
def reduce(op, a, axis=None, keepdims=False): return _red.reduce(op, a, axis, keepdims)
def matmul(a, b, ta=False, tb=False): return _mm.matmul(a, b, ta, tb)
def transpose(a, perm): return _shape.transpose(a, perm)
def expand_dims(a, axis): return _shape.expand_dims(a, axis)
sum_like = _autodiff_ops.sum_like
reshape_like = _autodiff_ops.reshape_like
strided_slice_grad = _autodiff_ops.strided_slice_grad


unbroadcast = _ew.unbroadcast       # g summed back to x's shape (ir/ops/elementwise)


def broadcast_like(g, x):
    """g broadcast up to x's shape (g + zeros of x's shape)."""
    if g.shape == x.shape and g.type.is_static:
        return g
    return add(g, zeros_like(x))
