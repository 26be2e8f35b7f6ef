"""The autodiff ops: ops that gradients are built from, beside the ordinary ones:

- stop_gradient(x): x itself, through which no gradient flows.
- sum_like(g, x): g summed down to x's shape (undoes broadcasting; x's shape may only
  be known at feed time, so it is an op, not a Python-side sum).
- reshape_like(g, x): g with x's shape.
- strided_slice_grad(dy, x) {spec}: zeros of x's shape with dy at the slice's elements.
- custom_gradient(y, *inputs) {key}: y itself; its gradient is the user's function
  (Graph.custom_gradients[key]) applied to the inputs.
The second operand of the *_like ops gives a shape only: it gets no gradient."""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, ShapeError
from ..types import TensorType, broadcast_shapes, format_shape
from .common import apply
from .registry import REQUIRED, Onnx, OpDef, register
from .shape import check_slice_spec


def broadcast_axes(g_shape, x_shape) -> tuple:
    """Axes of g to sum so that g takes x's shape (x broadcast to g)."""
    lead = len(g_shape) - len(x_shape)
    axes = list(range(lead))
    for i, d in enumerate(x_shape):
        if d == 1 and g_shape[lead + i] != 1:
            axes.append(lead + i)
    return tuple(axes)


def _sum_like_type(types, attrs):
    g, x = types
    if g.dtype != x.dtype:
        raise DTypeError(f"sum_like of {g.dtype} to a {x.dtype} tensor")
    if len(g.shape) < len(x.shape) or broadcast_shapes(g.shape, x.shape) != g.shape and \
            g.is_static and x.is_static:
        raise ShapeError(f"cannot sum {format_shape(g.shape)} down to {format_shape(x.shape)}")
    return x


def _sum_like_ref(arrays, attrs):
    g, x = arrays
    return np.sum(g, axis=broadcast_axes(g.shape, x.shape), dtype=g.dtype).reshape(x.shape)


register(OpDef("sum_like", "autodiff_ops", _sum_like_type, _sum_like_ref, num_inputs=2,
               tf="— (BroadcastGradientArgs + Sum)"))


def _reshape_like_type(types, attrs):
    g, x = types
    if g.is_static and x.is_static and g.size != x.size:
        raise ShapeError(f"cannot reshape {format_shape(g.shape)} like {format_shape(x.shape)}")
    return TensorType(x.shape, g.dtype)


register(OpDef("reshape_like", "autodiff_ops", _reshape_like_type,
               lambda arrays, attrs: arrays[0].reshape(arrays[1].shape), num_inputs=2,
               tf="— (Reshape to shape)", kind="view"))

register(OpDef("stop_gradient", "autodiff_ops", lambda types, attrs: types[0],
               lambda arrays, attrs: arrays[0], num_inputs=1,
               no_gradient="it stops gradients: that is its job", tf="tf.stop_gradient",
               onnx=Onnx("Identity", imported_by="Identity's rule, as an identity"),
               kind="view"))


def _slice_grad_type(types, attrs):
    dy, x = types
    check_slice_spec(attrs["spec"], x.rank)
    return TensorType(x.shape, dy.dtype)


def _slice_grad_ref(arrays, attrs):
    dy, x = arrays
    out = np.zeros(x.shape, dy.dtype)
    index = tuple(e[1] if e[0] == "index" else slice(e[1], e[2], e[3])
                  for e in attrs["spec"] if e[0] != "new")
    out[index] = dy.reshape(np.shape(out[index]))
    return out


register(OpDef("strided_slice_grad", "autodiff_ops", _slice_grad_type, _slice_grad_ref,
               attrs={"spec": REQUIRED}, num_inputs=2, tf="StridedSliceGrad"))

register(OpDef("custom_gradient", "autodiff_ops", lambda types, attrs: types[0],
               lambda arrays, attrs: arrays[0], attrs={"key": REQUIRED},
               hidden_attrs=("key",),
               tf="tf.custom_gradient", kind="view"))


def sum_like(g, x, name=None):
    return apply("sum_like", [g, x], None, name)


def reshape_like(g, x, name=None):
    return apply("reshape_like", [g, x], None, name)


def stop_gradient(x, name=None):
    return apply("stop_gradient", [x], None, name)


def strided_slice_grad(dy, x, spec, name=None):
    return apply("strided_slice_grad", [dy, x], {"spec": spec}, name)
