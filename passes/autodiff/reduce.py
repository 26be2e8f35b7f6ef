"""Gradient rules of the reductions."""
from __future__ import annotations

from ...ir.errors import GradientError
from ...ir.ops.reduce import cumsum, lrn_grad
from ...ir.types import normalize_axes
from .build import binary, broadcast_like, cast, div, expand_dims, mul, reduce, sub, unary, where
from .registry import gradient


def _keepdims(node, g):
    """g (shaped like the reduction's output) with the reduced axes back as size 1."""
    if node.attrs["keepdims"]:
        return g
    x = node.inputs[0]
    for axis in normalize_axes(node.attrs["axis"], x.type.rank):
        g = expand_dims(g, axis)
    return g


def _count(node):
    """How many elements each output element reduces (a tensor when shapes are
    only known at feed time)."""
    x = node.inputs[0]
    axes = normalize_axes(node.attrs["axis"], x.type.rank)
    dims = [x.shape[a] for a in axes]
    if all(d is not None for d in dims):
        n = 1
        for d in dims:
            n *= d
        return float(n)
    # ones_like, not x * 0 + 1: a NaN or inf in x must not make every element's share
    # NaN; and ones_like of a shape the compile knows folds, so the count is a constant
    return reduce("sum", unary("ones_like", x), node.attrs["axis"], True)


@gradient("sum")
def _sum(node, dy):
    return [broadcast_like(_keepdims(node, dy), node.inputs[0])]


@gradient("mean")
def _mean(node, dy):
    return [broadcast_like(div(_keepdims(node, dy), _count(node)), node.inputs[0])]


@gradient("variance")
def _variance(node, dy):
    """2 (x - mean) / n: each element's deviation, its share of the squares' mean."""
    x = node.inputs[0]
    centered = sub(x, reduce("mean", x, node.attrs["axis"], True))
    return [mul(div(mul(centered, 2.0), _count(node)), _keepdims(node, dy))]


def _extremum(node, dy):
    """max/min: split the gradient evenly among the elements equal to the result
    (TensorFlow's rule for ties)."""
    x = node.inputs[0]
    y = _keepdims(node, node.outputs[0])
    hits = cast(binary("equal", x, y), "float32")
    share = div(hits, reduce("sum", hits, node.attrs["axis"], True))
    return [mul(share, _keepdims(node, dy))]


gradient("max")(_extremum)
gradient("min")(_extremum)


@gradient("prod")
def _prod(node, dy):
    """d prod / d x_i = product of the others, exact with zeros: with no zero it is
    prod / x_i; with one zero only that element gets the product of the rest; with
    more, every gradient is 0."""
    x = node.inputs[0]
    axis = node.attrs["axis"]
    is_zero = binary("equal", x, 0.0)
    zeros = reduce("sum", cast(is_zero, "float32"), axis, True)
    others = reduce("prod", where(is_zero, 1.0, x), axis, True)
    safe_x = where(is_zero, 1.0, x)
    grad = where(is_zero,
                 where(binary("equal", zeros, 1.0), others, 0.0),
                 where(binary("equal", zeros, 0.0), div(others, safe_x), 0.0))
    return [mul(grad, _keepdims(node, dy))]


# --- softmax, log_softmax, logsumexp, cumsum, lrn: TensorFlow's rules -----------------

@gradient("softmax")
def _softmax(node, dy):
    """y * (dy - sum(dy * y)) along the axis."""
    y = node.outputs[0]
    axis = node.attrs["axis"]
    return [mul(y, sub(dy, reduce("sum", mul(dy, y), axis, True)))]


@gradient("log_softmax")
def _log_softmax(node, dy):
    """dy - softmax * sum(dy) along the axis (softmax = exp(y))."""
    y = node.outputs[0]
    return [sub(dy, mul(unary("exp", y), reduce("sum", dy, node.attrs["axis"], True)))]


@gradient("logsumexp")
def _logsumexp(node, dy):
    """dy * exp(x - logsumexp(x)): the softmax over the reduced axes."""
    x = node.inputs[0]
    lse = _keepdims(node, node.outputs[0])
    return [mul(_keepdims(node, dy), unary("exp", sub(x, lse)))]


@gradient("cumsum")
def _cumsum(node, dy):
    """A running sum's adjoint is the running sum the other way."""
    a = node.attrs
    return [cumsum(dy, a["axis"], a["exclusive"], not a["reverse"])]


@gradient("lrn")
def _lrn(node, dy):
    """TensorFlow's LRNGrad, as its own op (whose own rule only says that second order
    is not implemented)."""
    a = node.attrs
    return [lrn_grad(dy, node.inputs[0], a["depth_radius"], a["bias"], a["alpha"],
                     a["beta"])]


@gradient("lrn_grad")
def _lrn_grad(node, dy):
    raise GradientError(f"{node.where()}: second-order gradients of "
                        f"local_response_normalization (lrn_grad) are not implemented")
