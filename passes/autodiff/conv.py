"""Gradient rules of the conv op family (TensorFlow's, nn_grad.py).

Convolutions are bilinear, so every gradient is another member of the family:

    y  = conv(x, w)                 dx = backprop_input(dy, w)     dw = backprop_filter(x, dy)
    dx = backprop_input(dy, w)      d(dy) = conv(g, w)             dw = backprop_filter(g, dy)
    dw = backprop_filter(x, dy)     dx = backprop_input(dy, g)     d(dy) = conv(x, g)

which closes the family under differentiation: second order works through a conv net.
Pools: max_pool_grad routes dy to the argmax; its gradient (in dy) gathers at the argmax
(max_pool_grad_grad), whose gradient is max_pool_grad again. avg_pool's gradient
avg_pool_grad is linear; its gradient is avg_pool. Argmax positions are piecewise
constant in x, so x and y get no gradient through the *_grad ops (TensorFlow's zeros).
"""
from __future__ import annotations

from ...ir.errors import GradientError
from ...ir.ops import conv as _conv
from .registry import gradient


def _geometry(node):
    a = node.attrs
    return {"strides": a["strides"], "padding": a["padding"], "dilations": a["dilations"]}


def _spatial(node, value, what):
    """The static spatial size of value (the gradient ops carry it as an attr)."""
    d = _conv.SPATIAL[node.op][1]
    dims = value.shape[1:1 + d] if what == "input" else value.shape[:d]
    if any(s is None for s in dims):
        raise GradientError(f"{node.where()}: its gradient needs the {what}'s spatial size "
                            f"when the graph is built, but it is {value.type}; give the "
                            f"placeholder a static height and width")
    return tuple(dims)


def _bpi(op, dy, w, input_size, geo):
    return _conv.conv_backprop_input(op, dy, w, input_size, **geo)


def _bpf(op, x, dy, filter_size, geo):
    return _conv.conv_backprop_filter(op, x, dy, filter_size, **geo)


@gradient("conv2d", "conv3d", "depthwise_conv2d")
def _conv_rule(node, dy):
    x, w = node.inputs
    geo = _geometry(node)
    return [_bpi(node.op, dy, w, _spatial(node, x, "input"), geo),
            _bpf(node.op, x, dy, _spatial(node, w, "filter"), geo)]


@gradient("conv2d_backprop_input", "conv3d_backprop_input",
          "depthwise_conv2d_backprop_input")
def _backprop_input_rule(node, g):
    dy, w = node.inputs
    op = _conv.base_op(node.op)
    geo = _geometry(node)
    return [_conv.conv(op, g, w, **geo),
            _bpf(op, g, dy, _spatial(node, w, "filter"), geo)]


@gradient("conv2d_backprop_filter", "conv3d_backprop_filter",
          "depthwise_conv2d_backprop_filter")
def _backprop_filter_rule(node, g):
    x, dy = node.inputs
    op = _conv.base_op(node.op)
    geo = _geometry(node)
    return [_bpi(op, dy, g, _spatial(node, x, "input"), geo),
            _conv.conv(op, x, g, **geo)]


def _pool_attrs(node):
    a = node.attrs
    return {"ksize": a["ksize"], "strides": a["strides"], "padding": a["padding"]}


@gradient("max_pool", "min_pool", "max_pool3d")
def _extremum_pool(node, dy):
    (x,) = node.inputs
    return [_conv.pool_grad(f"{node.op}_grad", x, node.outputs[0], dy, **_pool_attrs(node))]


@gradient("max_pool_grad", "min_pool_grad", "max_pool3d_grad")
def _extremum_pool_grad(node, g):
    x, y, _ = node.inputs
    return [None, None, _conv.pool_grad(f"{node.op}_grad", x, y, g, **_pool_attrs(node))]


@gradient("max_pool_grad_grad", "min_pool_grad_grad", "max_pool3d_grad_grad")
def _extremum_pool_grad_grad(node, g):
    x, y, _ = node.inputs
    return [None, None, _conv.pool_grad(node.op[:-len("_grad")], x, y, g,
                                        **_pool_attrs(node))]


@gradient("avg_pool", "avg_pool3d")
def _avg_pool(node, dy):
    (x,) = node.inputs
    d = _conv.SPATIAL[node.op][1]
    size = x.shape[1:1 + d]
    if any(s is None for s in size):
        raise GradientError(f"{node.where()}: its gradient needs the input's spatial size "
                            f"when the graph is built, but it is {x.type}")
    return [_conv.avg_pool_grad(f"{node.op}_grad", dy, size, **_pool_attrs(node))]


@gradient("avg_pool_grad", "avg_pool3d_grad")
def _avg_pool_grad(node, g):
    return [_conv.pool(node.op[:-len("_grad")], g, **_pool_attrs(node))]


@gradient("dilation2d")
def _dilation2d(node, dy):
    x, w = node.inputs
    geo = _geometry(node)
    return [_conv.dilation_backprop("input", x, w, dy, **geo),
            _conv.dilation_backprop("filter", x, w, dy, **geo)]


@gradient("dilation2d_backprop_input", "dilation2d_backprop_filter")
def _dilation2d_backprop(node, g):
    # Linear in dy (a gather at the argmax would be its gradient); not implemented.
    raise GradientError(f"{node.where()}: second-order gradients through dilation2d are "
                        f"not implemented (TensorFlow has none either)")
