"""The gradient API: ff.gradients, value_and_gradients, vjp, stop_gradient,
custom_gradient. Gradients are graph tensors (built by passes/autodiff when called, as
tf.gradients does), so they can be fetched and differentiated again."""
from __future__ import annotations

import functools
import itertools

from ..ir.ops import autodiff_ops
from ..ir.ops.common import apply
from ..passes.autodiff import gradients as _gradients
from .tensor import Tensor, as_tensor_value, wrap

__all__ = ["gradients", "value_and_gradients", "vjp", "stop_gradient", "custom_gradient"]


def _values(xs):
    items = list(xs) if isinstance(xs, (list, tuple)) else [xs]
    return [x.value if isinstance(x, Tensor) else x for x in items]


def gradients(ys, xs, grad_ys=None, stop_gradients=None, unconnected="none"):
    """d(sum of ys)/dx for each x, as tensors of the graph.

    An x that ys do not depend on gets None (or zeros with unconnected="zero").

    >>> import fragflow as ff, numpy as np
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     x = ff.placeholder((3,), name="x")
    ...     dx, = ff.gradients(ff.sum(x * x), [x])
    >>> ff.Session(g, backend="numpy").run(dx, {x: np.array([1., 2., 3.], np.float32)})
    array([2., 4., 6.], dtype=float32)
    """
    y_values = _values(ys)
    x_values = _values(xs)
    dys = None
    if grad_ys is not None:
        dys = _values(grad_ys)
        dys = [None if d is None else as_tensor_value(d) for d in dys]
    stops = _values(stop_gradients) if stop_gradients is not None else ()
    grads = _gradients(y_values, x_values, dys, stops, unconnected)
    out = [None if g is None else wrap(g) for g in grads]
    return out


def value_and_gradients(y, xs):
    """(y, [dy/dx for x in xs])."""
    return y, gradients(y, xs)


def vjp(ys, xs, dys):
    """The vector-Jacobian product: sum over ys of dys · d ys / d x, for each x."""
    return gradients(ys, xs, grad_ys=dys)


def stop_gradient(x, name=None):
    """x itself; no gradient flows through it."""
    return wrap(autodiff_ops.stop_gradient(as_tensor_value(x), name=name))


_keys = itertools.count()


def custom_gradient(fn):
    """Decorator: fn(*tensors) returns (output, grad_fn) where grad_fn(dy) returns one
    gradient per input tensor (graph ops, None for none). Differentiating the output
    calls grad_fn instead of differentiating fn's ops.

    >>> import fragflow as ff, numpy as np
    >>> @ff.custom_gradient
    ... def clip_grad_identity(x):
    ...     return ff.identity(x), lambda dy: [ff.minimum(dy, 1.0)]
    """
    @functools.wraps(fn)
    def wrapper(*args):
        inputs = [as_tensor_value(a) for a in args]
        output, grad_fn = fn(*[wrap(v) for v in inputs])
        out_value = as_tensor_value(output)
        graph = out_value.graph
        key = f"{fn.__name__}_{next(_keys)}"

        def values_grad_fn(dy):
            grads = grad_fn(wrap(dy))
            grads = list(grads) if isinstance(grads, (list, tuple)) else [grads]
            return [None if g is None else as_tensor_value(g) for g in grads]

        graph.custom_gradients[key] = values_grad_fn
        return wrap(apply("custom_gradient", [out_value, *inputs], {"key": key},
                           fn.__name__))
    return wrapper

