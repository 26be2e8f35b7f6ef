"""ff.fused: matmul, conv2d and depthwise_conv2d with a bias and an activation computed
in the same kernel; scaled dot-product attention in one kernel; LayerNorm and RMSNorm in
one kernel.

Activations: linear, relu, relu6, elu, leaky_relu (alpha, a number), prelu (alpha, a
tensor broadcast against the output), sigmoid, tanh. Gradients work for every one of
them, to any order (they are taken through the ops the fused op stands for)."""
from __future__ import annotations

from ..ir.errors import AttrError
from ..ir.ops import fused as _fused
from ..ir.ops.common import as_values
from ..ir.ops.conv import conv_node_attrs
from .activations import FUSED as ACTIVATIONS  # the names the fused kernels compute
from .operands import graph_operands
from .tensor import Tensor, as_tensor_value, wrap


def epilogue_steps(bias, activation: str, alpha):
    """(steps over (acc, *extra), extra operands) for a bias add and an activation."""
    if activation not in ACTIVATIONS:
        raise AttrError(f"unknown activation {activation!r}; use one of "
                        f"{', '.join(ACTIVATIONS)}")
    steps, extra = [], []
    current = ("in", 0)
    if bias is not None:
        extra.append(bias)
        steps.append(("add", (), (current, ("in", len(extra)))))
        current = ("step", len(steps) - 1)
    if activation == "prelu":
        if alpha is None:
            raise AttrError("prelu needs alpha (a tensor broadcast against the output)")
        extra.append(alpha)
        steps.append(("prelu", (), (current, ("in", len(extra)))))
    elif activation == "leaky_relu":
        steps.append(("leaky_relu", (("alpha", float(0.2 if alpha is None else alpha)),),
                      (current,)))
    elif activation != "linear":
        steps.append((activation, (), (current,)))
    if not steps:
        steps.append(("identity", (), (current,)))
    return tuple(steps), extra


def matmul(a, b, transpose_a=False, transpose_b=False, bias=None, activation="linear",
           alpha=None, name=None):
    """activation(a @ b + bias) in one kernel.

    >>> import fragflow as ff, numpy as np
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     x = ff.constant(np.ones((2, 3), np.float32))
    ...     w = ff.constant(np.ones((3, 4), np.float32))
    ...     y = ff.fused.matmul(x, w, bias=ff.constant(np.full(4, -4.0, np.float32)),
    ...                         activation="relu")
    >>> ff.Session(g, backend="numpy").run(y).tolist()
    [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]
    """
    x, w = as_values(*(v.value if isinstance(v, Tensor) else v for v in (a, b)))
    bias_v = None if bias is None else as_tensor_value(bias)
    alpha_v = as_tensor_value(alpha) if activation == "prelu" and alpha is not None \
        else alpha
    steps, extra = epilogue_steps(bias_v, activation, alpha_v)
    return wrap(_fused.fused_matmul(x, w, extra, steps, bool(transpose_a),
                                     bool(transpose_b), name=name or "fused_matmul"))


def _conv(conv_op, x, filters, strides, padding, dilations, bias, activation, alpha, name):
    x_v, w_v = graph_operands(x, filters)
    bias_v = None if bias is None else as_tensor_value(bias) if not isinstance(bias, Tensor) \
        else bias.value
    alpha_v = as_tensor_value(alpha) if activation == "prelu" and alpha is not None \
        else alpha
    steps, extra = epilogue_steps(bias_v, activation, alpha_v)
    return wrap(_fused.fused_conv(conv_op, x_v, w_v, extra, steps,
                                   conv_node_attrs(strides, padding, dilations),
                                   name=name or f"fused_{conv_op}"))


def conv2d(input, filters, strides=1, padding="VALID", dilations=1, bias=None,
           activation="linear", alpha=None, name=None):
    """activation(conv2d(input, filters) + bias) in one kernel (NHWC, HWIO)."""
    return _conv("conv2d", input, filters, strides, padding, dilations, bias, activation,
                 alpha, name)


def depthwise_conv2d(input, filter, strides=1, padding="VALID", dilations=1, bias=None,
                     activation="linear", alpha=None, name=None):
    """activation(depthwise_conv2d(input, filter) + bias) in one kernel."""
    return _conv("depthwise_conv2d", input, filter, strides, padding, dilations, bias,
                 activation, alpha, name)


def attention(q, k, v, mask=None, scale=None, divide=True, transpose_k=True,
              transpose_v=False, subtract_mask=False, q_heads=False, k_heads=False,
              v_heads=False, out_heads=False, q_columns=(), k_columns=(), v_columns=(),
              name=None):
    """softmax(matmul(q, k, transpose_b=transpose_k) / scale (* scale where divide is
    False) + mask, axis=-1) @ v in one kernel (an online softmax over key tiles); the
    fuse_attention pass makes the same op from those five ops. q: [..., Lq, D], k:
    [..., Lk, D] (or [..., D, Lk] with transpose_k=False), v: [..., Lk, Dv]; the mask
    broadcasts to the scores [..., Lq, Lk] (subtracted where subtract_mask). q_heads,
    k_heads, v_heads: q, k, v come as [..., L, H, D] (before the head split's
    transpose; k then read as transpose_k says); out_heads: the result is [..., Lq, H,
    Dv] (rank 4 or more). q_columns, k_columns, v_columns: (start, H, D) where that
    operand (with its *_heads) comes as x [..., L, W] and stands for x[..., start:start
    + H * D] as [..., L, H, D] (a merged q, k, v projection's columns). Gradients are
    taken through the ops."""
    values = graph_operands(q, k, v, *(() if mask is None else (mask,)))
    return wrap(_fused.apply("fused_attention", list(values),
                             {"scale": None if scale is None else float(scale),
                              "divide": bool(divide), "transpose_k": bool(transpose_k),
                              "transpose_v": bool(transpose_v),
                              "subtract_mask": bool(subtract_mask),
                              "q_heads": bool(q_heads), "k_heads": bool(k_heads),
                              "v_heads": bool(v_heads), "out_heads": bool(out_heads),
                              **{f"{r}_columns": tuple(int(c) for c in cols)
                                 for r, cols in zip("qkv", (q_columns, k_columns,
                                                            v_columns))}},
                             name or "fused_attention"))


def layer_norm(x, scale=None, offset=None, axis=-1, epsilon=1e-5, center=True, name=None):
    """(x - mean) * rsqrt(variance + epsilon) over the axes from `axis` to the last
    (LayerNorm; center=False: x * rsqrt(mean(x²) + epsilon), RMSNorm), times scale,
    plus offset (each None or of the normalized axes' shape, or its end), in one
    kernel; the fuse_norms pass makes the same op from those ops. Gradients are taken
    through them."""
    x, *affine = graph_operands(x, *(t for t in (scale, offset) if t is not None))
    if isinstance(axis, bool) or not isinstance(axis, int) or \
            not -x.type.rank <= axis < x.type.rank:
        raise AttrError(f"layer_norm: axis {axis!r} is out of range for {x.type}")
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float)):
        raise AttrError(f"layer_norm: epsilon must be a number, got {epsilon!r}")
    return wrap(_fused.apply("fused_layer_norm", [x, *affine],
                             {"axis": axis % x.type.rank, "epsilon": float(epsilon),
                              "center": bool(center), "has_scale": scale is not None,
                              "has_offset": offset is not None},
                             name or "fused_layer_norm"))


__all__ = ["matmul", "conv2d", "depthwise_conv2d", "attention", "layer_norm", "ACTIVATIONS",
           "epilogue_steps"]


def __dir__():
    """dir() of the module: its API (__all__), not its imports."""
    return sorted(__all__)
