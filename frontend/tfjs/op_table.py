"""The import table: one small rule per TF op, written with fragflow's ops.

A rule is rule(ctx, node, inputs, attrs) -> output value(s). inputs are numpy arrays
(known at import), interop Init (weights) or ff Tensors; attrs the node's decoded
attributes (a ReadAttrs: one no rule reads is refused). TF and fragflow are both NHWC
with HWIO filters, so the rules keep TF's semantics with no transposes. The converter's
fused kernels (_FusedConv2D, FusedDepthwiseConv2dNative, _FusedMatMul) become
fragflow's fused ops (ff.fused), one kernel each, whatever fused_ops combination they
hold. A node whose inputs are all known is evaluated at import by running its rule on
constants (interop/static.py), so the shape arithmetic rules here (Shape, Pack,
StridedSlice, ...) return numpy arrays when their inputs are static.
"""
from __future__ import annotations

import numpy as np

import fragflow.frontend as F

from ...frontend import fused as FUSED
from ..interop.importer import Partial, shape_of
from .importer import TF_DTYPES

RULES: dict = {}


def rule(*op_types):
    def decorator(fn):
        for t in op_types:
            if t in RULES:
                raise ValueError(f"two import rules for TF's {t}")
            RULES[t] = fn
        return fn
    return decorator


# Ops refused with the reason, until their work is done (docs/TFJS.md, "Limits").
CONTROL_FLOW = {"While", "StatelessWhile", "If", "StatelessIf"}
DATA_DEPENDENT = {"Unique", "ListDiff", "Bincount", "DenseBincount"}


def refusal(op: str) -> str:
    """The error message for an op with no rule."""
    if op in CONTROL_FLOW:
        return (f"op {op} is TF2 functional control flow (a function-library body), which "
                f"ff.tfjs.load does not import: convert the model with TF1 control flow "
                f"(Enter/Exit/Merge/Switch), which it stages (docs/TFJS.md, Limits)")
    if op.startswith(("TensorArray", "TensorList")):
        return (f"op {op} (TensorArray/TensorList) is not imported: the ones ff.tfjs.load "
                f"stages are listed in docs/TFJS.md, Staged models")
    if op in DATA_DEPENDENT:
        return (f"op {op} gives a tensor whose shape depends on the data and has no "
                f"staged rule yet (docs/TFJS.md, Limits); NonMaxSuppression, Where and "
                f"TopKV2 are staged")
    return (f"op {op} is not supported by fragflow's TF.js importer; it supports "
            f"{len(RULES)} ops: {', '.join(sorted(RULES))}")


def T(ctx, x):
    return ctx.tensor(x)


def _dtype(ctx, value, what="dtype"):
    if not (isinstance(value, tuple) and value[0] == "dtype"):
        raise ctx.error(f"attribute {what} is not a dtype")
    dtype = TF_DTYPES.get(value[1])
    if dtype is None:
        raise ctx.error(f"{what} {value[1]} is not supported (fragflow has float32, int32 "
                        f"and bool)")
    return dtype


def _nhwc(ctx, attrs):
    fmt = attrs.get("data_format", "NHWC")
    if fmt not in ("NHWC", "NDHWC"):
        raise ctx.error(f"data_format {fmt!r} is not supported (NHWC; the converter writes "
                        f"NHWC for TF.js)")


def _spatial(ctx, attrs, name, default=1):
    value = attrs.get(name)
    if value is None:
        return (default, default)
    if len(value) != 4 or value[0] != 1 or value[3] != 1:
        raise ctx.error(f"attribute {name}={value} (4 values, 1 for batch and channels)")
    return (value[1], value[2])


def _padding(ctx, attrs):
    padding = attrs.get("padding", "VALID")
    explicit = attrs.get("explicit_paddings", [])
    if padding == "EXPLICIT":
        if len(explicit) != 8:
            raise ctx.error(f"explicit_paddings {explicit} (8 values for NHWC)")
        return [(explicit[2], explicit[3]), (explicit[4], explicit[5])]
    if padding not in ("SAME", "VALID"):
        raise ctx.error(f"padding {padding!r} is not SAME, VALID or EXPLICIT")
    return padding


# -- elementwise ----------------------------------------------------------------------------
UNARY = {
    "Abs": F.abs, "Neg": F.negative, "Exp": F.exp, "Log": F.log, "Log1p": F.log1p,
    "Sqrt": F.sqrt, "Rsqrt": F.rsqrt, "Square": F.square, "Reciprocal": F.reciprocal,
    "Floor": F.floor, "Ceil": F.ceil, "Round": F.round, "Sign": F.sign, "Sin": F.sin,
    "Cos": F.cos, "Tan": F.tan, "Asin": F.asin, "Acos": F.acos, "Atan": F.atan,
    "Sinh": F.sinh, "Cosh": F.cosh, "Asinh": F.asinh, "Acosh": F.acosh, "Atanh": F.atanh,
    "Tanh": F.tanh, "Sigmoid": F.sigmoid, "Relu": F.relu, "Relu6": F.relu6, "Elu": F.elu,
    "Selu": F.selu, "Softplus": F.softplus, "Softsign": F.softsign, "Erf": F.erf,
    "Expm1": F.expm1, "IsNan": F.is_nan, "IsInf": F.is_inf, "IsFinite": F.is_finite,
    "LogicalNot": F.logical_not, "ZerosLike": F.zeros_like, "OnesLike": F.ones_like,
    "Identity": F.identity, "StopGradient": F.identity, "Snapshot": F.identity,
    "PreventGradient": F.identity,
}
BINARY = {
    "Add": F.add, "AddV2": F.add, "Sub": F.subtract, "Mul": F.multiply, "RealDiv": F.div,
    "Maximum": F.maximum, "Minimum": F.minimum, "Pow": F.pow, "FloorDiv": F.floordiv,
    "FloorMod": F.floormod, "Mod": F.floormod, "SquaredDifference": F.squared_difference,
    "Atan2": F.atan2, "Less": F.less, "Greater": F.greater, "LessEqual": F.less_equal,
    "GreaterEqual": F.greater_equal,
    "LogicalAnd": F.logical_and, "LogicalOr": F.logical_or, "Prelu": F.prelu,
}


def _unary(fn):
    return lambda ctx, node, x, a: fn(T(ctx, x[0]))


def _binary(fn):
    return lambda ctx, node, x, a: fn(T(ctx, x[0]), T(ctx, x[1]))


for _t, _fn in UNARY.items():
    RULES[_t] = _unary(_fn)
for _t, _fn in BINARY.items():
    RULES[_t] = _binary(_fn)


@rule("Div", "DivNoNan")
def div(ctx, node, x, a):
    p, q = T(ctx, x[0]), T(ctx, x[1])
    if node.op == "DivNoNan":
        return F.where(F.equal(q, 0.0), F.zeros_like(p * q), p / F.where(
            F.equal(q, 0.0), F.ones_like(q), q))
    # TF.js's div of two int32 tensors is floorDiv
    return F.floordiv(p, q) if p.dtype == "int32" and q.dtype == "int32" else F.div(p, q)


@rule("Equal", "NotEqual")
def equal(ctx, node, x, a):
    # incompatible_shape_error=false makes TF answer false for shapes that do not
    # broadcast; fragflow refuses those shapes at import either way
    a.get("incompatible_shape_error")
    return (F.equal if node.op == "Equal" else F.not_equal)(T(ctx, x[0]), T(ctx, x[1]))


@rule("IdentityN")
def identity_n(ctx, node, x, a):
    return [F.identity(T(ctx, v)) for v in x]


@rule("LeakyRelu")
def leaky_relu(ctx, node, x, a):
    return F.leaky_relu(T(ctx, x[0]), alpha=float(a.get("alpha", 0.2)))


@rule("AddN")
def add_n(ctx, node, x, a):
    a.get("N")
    return F.add_n([T(ctx, v) for v in x]) if len(x) > 1 else F.identity(T(ctx, x[0]))


@rule("BiasAdd", "BiasAddV1")
def bias_add(ctx, node, x, a):
    _nhwc(ctx, a)
    return F.add(T(ctx, x[0]), T(ctx, x[1]))


@rule("Select", "SelectV2")
def select(ctx, node, x, a):
    cond, then, other = T(ctx, x[0]), T(ctx, x[1]), T(ctx, x[2])
    if node.op == "Select" and len(cond.shape) == 1 and len(then.shape) > 1:
        # TF1's Select: a vector condition picks whole rows
        cond = F.reshape(cond, [-1] + [1] * (len(then.shape) - 1))
    return F.where(cond, then, other)


@rule("ClipByValue")
def clip_by_value(ctx, node, x, a):
    return F.clip_by_value(T(ctx, x[0]), T(ctx, x[1]), T(ctx, x[2]))


@rule("Cast")
def cast(ctx, node, x, a):
    a.get("Truncate")
    dtype = _dtype(ctx, a["DstT"], "DstT")
    if isinstance(x[0], Partial) and dtype == "int32":
        return x[0]
    if isinstance(x[0], np.ndarray):
        return ctx.to_supported(x[0].astype(dtype))
    return F.cast(T(ctx, x[0]), dtype)


# -- activations and normalization ----------------------------------------------------------
@rule("Softmax", "LogSoftmax")
def softmax(ctx, node, x, a):
    fn = F.softmax if node.op == "Softmax" else F.log_softmax
    return fn(T(ctx, x[0]), axis=-1)


@rule("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
def fused_batch_norm(ctx, node, x, a):
    _nhwc(ctx, a)
    if a.get("is_training", False):
        raise ctx.error("is_training=true (batch statistics) is not supported; the "
                        "converter writes inference graphs")
    a.get("exponential_avg_factor")
    a.get("U")
    eps = float(a.get("epsilon", 1e-4))
    v, scale, offset, mean, var = (T(ctx, v) for v in x[:5])
    y = (v - mean) * F.rsqrt(var + eps) * scale + offset
    return [y, mean, var, mean, var, var]


# -- convolutions and matmuls --------------------------------------------------------------
ACTIVATIONS = {"relu": "relu", "relu6": "relu6", "elu": "elu", "sigmoid": "sigmoid",
               "tanh": "tanh", "prelu": "prelu", "leakyrelu": "leaky_relu"}


def _fused_epilogue(ctx, node, x, a, first_arg):
    """(bias, activation, alpha) of a converter fused op: fused_ops [BiasAdd, act] or
    [act], its args after the main operands (bias, then Prelu's alpha)."""
    ops = [str(o).lower() for o in a.get("fused_ops", [])]
    num_args = a.get("num_args", len(x) - first_arg)
    args = x[first_arg:first_arg + num_args]
    extra, act = (ops + [None, None])[:2]
    if extra == "fusedbatchnorm":
        raise ctx.error("fused_ops FusedBatchNorm is not supported (TF.js does not run it "
                        "either)")
    bias = None
    if extra == "biasadd":
        bias, args = (args[0] if args else None), args[1:]
        if bias is None:
            raise ctx.error("fused_ops BiasAdd needs a bias operand")
    elif extra is not None:
        act = extra
    if act is None:
        activation, alpha = "linear", None
    elif act in ACTIVATIONS:
        activation = ACTIVATIONS[act]
        alpha = None
        if activation == "prelu":
            if not args:
                raise ctx.error("fused_ops Prelu needs an alpha operand")
            alpha = T(ctx, args[0])
        elif activation == "leaky_relu":
            alpha = float(a.get("leakyrelu_alpha", 0.2))
    else:
        raise ctx.error(f"fused_ops {a.get('fused_ops')}: activation {act!r} is not "
                        f"supported (BiasAdd with Relu, Relu6, Elu, Sigmoid, Tanh, Prelu, "
                        f"LeakyRelu)")
    a.get("epsilon")
    a.get("leakyrelu_alpha")
    return (None if bias is None else T(ctx, bias)), activation, alpha


@rule("Conv2D", "_FusedConv2D")
def conv2d(ctx, node, x, a):
    _nhwc(ctx, a)
    strides, dilations = _spatial(ctx, a, "strides"), _spatial(ctx, a, "dilations")
    padding = _padding(ctx, a)
    w = T(ctx, x[1])
    if node.op == "Conv2D":
        return F.conv2d(T(ctx, x[0]), w, strides=strides, padding=padding,
                        dilations=dilations)
    bias, activation, alpha = _fused_epilogue(ctx, node, x, a, 2)
    return FUSED.conv2d(T(ctx, x[0]), w, strides=strides, padding=padding,
                        dilations=dilations, bias=bias, activation=activation, alpha=alpha)


@rule("DepthwiseConv2dNative", "FusedDepthwiseConv2dNative")
def depthwise(ctx, node, x, a):
    _nhwc(ctx, a)
    strides, dilations = _spatial(ctx, a, "strides"), _spatial(ctx, a, "dilations")
    padding = _padding(ctx, a)
    w = T(ctx, x[1])
    if node.op == "DepthwiseConv2dNative":
        return F.depthwise_conv2d(T(ctx, x[0]), w, strides=strides, padding=padding,
                                  dilations=dilations)
    bias, activation, alpha = _fused_epilogue(ctx, node, x, a, 2)
    return FUSED.depthwise_conv2d(T(ctx, x[0]), w, strides=strides, padding=padding,
                                  dilations=dilations, bias=bias, activation=activation,
                                  alpha=alpha)


@rule("Conv2DBackpropInput")
def conv2d_backprop_input(ctx, node, x, a):
    _nhwc(ctx, a)
    strides, dilations = _spatial(ctx, a, "strides"), _spatial(ctx, a, "dilations")
    sizes = ctx.ints(x[0], "input_sizes")
    return F.conv2d_transpose(T(ctx, x[2]), T(ctx, x[1]), sizes, strides=strides,
                              padding=_padding(ctx, a), dilations=dilations)


@rule("MatMul", "_FusedMatMul")
def matmul(ctx, node, x, a):
    ta, tb = bool(a.get("transpose_a", False)), bool(a.get("transpose_b", False))
    p, q = T(ctx, x[0]), T(ctx, x[1])
    if node.op == "MatMul":
        return F.matmul(p, q, transpose_a=ta, transpose_b=tb)
    bias, activation, alpha = _fused_epilogue(ctx, node, x, a, 2)
    return FUSED.matmul(p, q, transpose_a=ta, transpose_b=tb, bias=bias,
                        activation=activation, alpha=alpha)


@rule("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3")
def batch_matmul(ctx, node, x, a):
    a.get("Ta"), a.get("Tb"), a.get("Tout")
    return F.matmul(T(ctx, x[0]), T(ctx, x[1]), transpose_a=bool(a.get("adj_x", False)),
                    transpose_b=bool(a.get("adj_y", False)))


# -- pools and images -----------------------------------------------------------------------
# a pool window at least this large, tiling its input (strides = ksize, VALID), is a
# reduction over the windows' axes: the pool kernels loop over the window in one
# fragment, and 128x128 (selfie's) is past the 65,535 iterations a fragment may run
LARGE_WINDOW = 32 * 32


@rule("MaxPool", "AvgPool")
def pool(ctx, node, x, a):
    _nhwc(ctx, a)
    ksize, strides = _spatial(ctx, a, "ksize"), _spatial(ctx, a, "strides")
    padding = _padding(ctx, a)
    v = T(ctx, x[0])
    if ksize == strides and padding == "VALID" and ksize[0] * ksize[1] >= LARGE_WINDOW \
            and len(v.shape) == 4 and None not in v.shape[1:]:
        return _tiling_pool(v, ksize, F.reduce_max if node.op == "MaxPool"
                            else F.reduce_mean)
    fn = F.max_pool2d if node.op == "MaxPool" else F.avg_pool2d
    return fn(v, ksize, strides, padding=padding)


def _tiling_pool(v, ksize, reduce):
    """A VALID pool whose windows tile the input, as a reduction: [N, H, W, C] ->
    [N, H/kh, kh, W/kw, kw, C] reduced over the window axes (rows and columns past the
    last whole window dropped, as VALID does)."""
    n, h, w, c = v.shape
    (kh, kw) = ksize
    oh, ow = h // kh, w // kw
    if oh * kh != h or ow * kw != w:
        v = F.slice(v, [0, 0, 0, 0], [-1, oh * kh, ow * kw, -1])
    v = F.reshape(v, [-1 if n is None else n, oh, kh, ow, kw, c])
    return reduce(v, axis=[2, 4])


@rule("ResizeBilinear", "ResizeNearestNeighbor")
def resize(ctx, node, x, a):
    size = ctx.ints(x[1], "size")
    fn = F.resize_bilinear if node.op == "ResizeBilinear" else F.resize_nearest_neighbor
    return fn(T(ctx, x[0]), size, align_corners=bool(a.get("align_corners", False)),
              half_pixel_centers=bool(a.get("half_pixel_centers", False)))


@rule("LRN")
def lrn(ctx, node, x, a):
    return F.local_response_normalization(
        T(ctx, x[0]), depth_radius=int(a.get("depth_radius", 5)),
        bias=float(a.get("bias", 1.0)), alpha=float(a.get("alpha", 1.0)),
        beta=float(a.get("beta", 0.5)))


@rule("Conv3D")
def conv3d(ctx, node, x, a):
    _nhwc(ctx, a)
    s, d = a.get("strides", [1] * 5), a.get("dilations", [1] * 5)
    if len(s) != 5 or len(d) != 5 or a.get("padding") not in ("SAME", "VALID"):
        raise ctx.error(f"strides {s}, dilations {d} (5 values) and padding SAME/VALID")
    return F.conv3d(T(ctx, x[0]), T(ctx, x[1]), strides=tuple(s[1:4]),
                    padding=a["padding"], dilations=tuple(d[1:4]))


@rule("MaxPool3D", "AvgPool3D")
def pool3d(ctx, node, x, a):
    _nhwc(ctx, a)
    k, s = a.get("ksize", []), a.get("strides", [])
    if len(k) != 5 or len(s) != 5 or a.get("padding") not in ("SAME", "VALID"):
        raise ctx.error(f"ksize {k}, strides {s} (5 values) and padding SAME/VALID")
    fn = F.max_pool3d if node.op == "MaxPool3D" else F.avg_pool3d
    return fn(T(ctx, x[0]), tuple(k[1:4]), tuple(s[1:4]), padding=a["padding"])


@rule("Dilation2D")
def dilation2d(ctx, node, x, a):
    return F.dilation2d(T(ctx, x[0]), T(ctx, x[1]), strides=_spatial(ctx, a, "strides"),
                        padding=a.get("padding", "VALID"),
                        dilations=_spatial(ctx, a, "rates"))


@rule("DepthToSpace")
def depth_to_space(ctx, node, x, a):
    _nhwc(ctx, a)
    return F.depth_to_space(T(ctx, x[0]), int(a["block_size"]))


@rule("SpaceToBatchND")
def space_to_batch(ctx, node, x, a):
    block = ctx.ints(x[1], "block_shape")
    pads = np.asarray(ctx.static(x[2], "paddings")).reshape(-1, 2).tolist()
    return F.space_to_batch_nd(T(ctx, x[0]), block, pads)


@rule("BatchToSpaceND")
def batch_to_space(ctx, node, x, a):
    block = ctx.ints(x[1], "block_shape")
    crops = np.asarray(ctx.static(x[2], "crops")).reshape(-1, 2).tolist()
    return F.batch_to_space_nd(T(ctx, x[0]), block, crops)


# -- reductions -----------------------------------------------------------------------------
REDUCE = {"Mean": F.reduce_mean, "Max": F.reduce_max, "Min": F.reduce_min,
          "Sum": F.reduce_sum, "Prod": F.reduce_prod, "All": None, "Any": None}


@rule("Mean", "Max", "Min", "Sum", "Prod")
def reduce(ctx, node, x, a):
    axes = ctx.ints(x[1], "reduction axes")
    v = T(ctx, x[0])
    if not axes:
        return F.identity(v)             # TF: no axes, no reduction
    return REDUCE[node.op](v, axis=axes, keepdims=bool(a.get("keep_dims", False)))


@rule("All", "Any")
def reduce_logical(ctx, node, x, a):
    axes = ctx.ints(x[1], "reduction axes")
    v = T(ctx, x[0])
    if not axes:
        return F.identity(v)
    fn = F.reduce_all if node.op == "All" else F.reduce_any
    return fn(v, axis=axes, keepdims=bool(a.get("keep_dims", False)))


@rule("EuclideanNorm")
def euclidean_norm(ctx, node, x, a):
    axes = ctx.ints(x[1], "reduction axes")
    v = T(ctx, x[0])
    if not axes:
        return F.abs(v)
    return F.sqrt(F.reduce_sum(F.square(v), axis=axes,
                               keepdims=bool(a.get("keep_dims", False))))


@rule("ArgMax", "ArgMin")
def arg_max(ctx, node, x, a):
    if "output_type" in a:
        _dtype(ctx, a["output_type"], "output_type")
    axis = ctx.ints(x[1], "dimension")[0]
    fn = F.argmax if node.op == "ArgMax" else F.argmin
    return fn(T(ctx, x[0]), axis=axis)


@rule("Cumsum")
def cumsum(ctx, node, x, a):
    return F.cumsum(T(ctx, x[0]), axis=ctx.ints(x[1], "axis")[0],
                    exclusive=bool(a.get("exclusive", False)),
                    reverse=bool(a.get("reverse", False)))


# -- shapes ---------------------------------------------------------------------------------
@rule("Shape")
def shape(ctx, node, x, a):
    if "out_type" in a:
        _dtype(ctx, a["out_type"], "out_type")
    dims = shape_of(x[0])
    if None not in dims:
        return np.asarray(dims, np.int32)
    source = x[0]
    return Partial(list(dims), lambda: F.shape(T(ctx, source)),
                   [(source, k) if d is None else None for k, d in enumerate(dims)])


@rule("Size")
def size(ctx, node, x, a):
    if "out_type" in a:
        _dtype(ctx, a["out_type"], "out_type")
    dims = shape_of(x[0])
    if None not in dims:
        return np.asarray(int(np.prod(dims, dtype=np.int64)), np.int32)
    return F.size(T(ctx, x[0]))


@rule("Rank")
def rank(ctx, node, x, a):
    return np.asarray(len(shape_of(x[0])), np.int32)


@rule("Reshape")
def reshape(ctx, node, x, a):
    if isinstance(x[1], Partial) and x[1].known.ndim == 1:
        target = _partial_reshape(x[0], list(x[1].known), list(x[1].sources))
        if target is not None:
            return F.reshape(T(ctx, x[0]), target)
    return F.reshape(T(ctx, x[0]), ctx.ints(x[1], "shape"))


def _partial_reshape(data, known, sources):
    """A static target for a reshape whose shape is partly known, or None.
    - one free entry and no -1: the free entry is the -1;
    - one free entry that is the data's own free dim (Shape read it: [batch, -1, 16] of
      a [?, 8, 8, 4] tensor) beside a -1: the free entry is the -1 and the other -1 is
      the data's known dims over the target's known entries (exact, as the data's
      element count is that dim times the rest)."""
    free = [k for k, d in enumerate(known) if d is None]
    if len(free) != 1:
        return None
    target = [-1 if d is None else int(d) for d in known]
    if -1 not in (int(d) for d in known if d is not None):
        return target
    source = sources[free[0]]
    dims = tuple(shape_of(data))
    if source is None or source[0] is not data or dims.count(None) != 1 \
            or dims[source[1]] is not None:
        return None
    rest = int(np.prod([d for d in dims if d is not None], dtype=np.int64))
    fixed = int(np.prod([d for d in target if d != -1], dtype=np.int64))
    if fixed <= 0 or rest % fixed:
        return None
    other = next(k for k, d in enumerate(target) if d == -1 and k != free[0])
    target[other] = rest // fixed
    return target


@rule("Squeeze")
def squeeze(ctx, node, x, a):
    axes = a.get("squeeze_dims", [])
    return F.squeeze(T(ctx, x[0]), axis=list(axes) if axes else None)


@rule("ExpandDims")
def expand_dims(ctx, node, x, a):
    return F.expand_dims(T(ctx, x[0]), ctx.ints(x[1], "axis")[0])


@rule("Transpose")
def transpose(ctx, node, x, a):
    return F.transpose(T(ctx, x[0]), ctx.ints(x[1], "perm"))


@rule("ConcatV2", "Concat")
def concat(ctx, node, x, a):
    a.get("N")
    values, axis = (x[:-1], x[-1]) if node.op == "ConcatV2" else (x[1:], x[0])
    axis = ctx.ints(axis, "axis")[0]
    if len(values) == 1:
        return values[0] if isinstance(values[0], Partial) else F.identity(T(ctx, values[0]))
    if axis in (0, -1) and any(isinstance(v, Partial) for v in values) and all(
            isinstance(v, (Partial, np.ndarray)) and len(shape_of(v)) == 1 for v in values):
        known = [e if isinstance(v, Partial) else int(e)
                 for v in values for e in (v.known if isinstance(v, Partial) else v)]
        sources = [e for v in values for e in (
            v.sources if isinstance(v, Partial) else [None] * len(v))]
        return Partial.of(known, lambda: F.concat([T(ctx, v) for v in values], 0), sources)
    return F.concat([T(ctx, v) for v in values], axis)


@rule("Pack")
def pack(ctx, node, x, a):
    a.get("N")
    axis = int(a.get("axis", 0))
    if axis == 0 and any(isinstance(v, Partial) for v in x) and all(
            shape_of(v) == () and (isinstance(v, (Partial, np.ndarray)) or v.dtype == "int32")
            for v in x):
        return Partial.of([_known_scalar(v) for v in x],
                          lambda: F.stack([T(ctx, v) for v in x], axis=0),
                          [v.sources.item() if isinstance(v, Partial) else None for v in x])
    return F.stack([T(ctx, v) for v in x], axis=axis)


def _known_scalar(v):
    if isinstance(v, np.ndarray):
        return int(v)
    if isinstance(v, Partial):
        return v.known.item()
    return None


@rule("Unpack")
def unpack(ctx, node, x, a):
    return F.unstack(T(ctx, x[0]), num=a.get("num"), axis=int(a.get("axis", 0)))


@rule("Split")
def split(ctx, node, x, a):
    axis = ctx.ints(x[0], "axis")[0]
    return F.split(T(ctx, x[1]), int(a["num_split"]), axis=axis)


@rule("SplitV")
def split_v(ctx, node, x, a):
    a.get("num_split")
    v = T(ctx, x[0])
    sizes = ctx.ints(x[1], "size_splits")
    axis = ctx.ints(x[2], "axis")[0]
    if -1 in sizes:
        dim = v.shape[axis]
        if dim is None:
            raise ctx.error("size_splits holds -1 on an axis of unknown size")
        sizes[sizes.index(-1)] = dim - (sum(sizes) + 1)
    return F.split(v, sizes, axis=axis)


@rule("StridedSlice")
def strided_slice(ctx, node, x, a):
    begin, end = ctx.ints(x[1], "begin"), ctx.ints(x[2], "end")
    strides = ctx.ints(x[3], "strides") if len(x) > 3 else None
    masks = {m: int(a.get(m, 0)) for m in ("begin_mask", "end_mask", "ellipsis_mask",
                                           "new_axis_mask", "shrink_axis_mask")}
    if isinstance(x[0], Partial) and x[0].known.ndim == 1 and len(begin) == 1 \
            and not masks["ellipsis_mask"] and not masks["new_axis_mask"]:
        known = list(x[0].known)
        step = strides[0] if strides else 1
        sources = list(x[0].sources)
        if masks["shrink_axis_mask"] & 1:
            if -len(known) <= begin[0] < len(known):
                return Partial.of(np.asarray(known[begin[0]], dtype=object),
                                  lambda: _strided(ctx, x, a, begin, end, strides),
                                  sources[begin[0]])
        elif step != 0:
            lo = None if masks["begin_mask"] & 1 else begin[0]
            hi = None if masks["end_mask"] & 1 else end[0]
            return Partial.of(known[lo:hi:step],
                              lambda: _strided(ctx, x, a, begin, end, strides),
                              sources[lo:hi:step])
    return _strided(ctx, x, a, begin, end, strides)


def _strided(ctx, x, a, begin, end, strides):
    return F.strided_slice(T(ctx, x[0]), begin, end, strides,
                           begin_mask=int(a.get("begin_mask", 0)),
                           end_mask=int(a.get("end_mask", 0)),
                           ellipsis_mask=int(a.get("ellipsis_mask", 0)),
                           new_axis_mask=int(a.get("new_axis_mask", 0)),
                           shrink_axis_mask=int(a.get("shrink_axis_mask", 0)))


@rule("Slice")
def slice_(ctx, node, x, a):
    return F.slice(T(ctx, x[0]), ctx.ints(x[1], "begin"), ctx.ints(x[2], "size"))


@rule("ReverseV2", "Reverse")
def reverse(ctx, node, x, a):
    v = T(ctx, x[0])
    if node.op == "Reverse":            # a bool mask per axis
        axes = [k for k, flag in enumerate(ctx.static(x[1], "dims").reshape(-1)) if flag]
    else:
        axes = ctx.ints(x[1], "axis")
    return F.reverse(v, axes) if axes else F.identity(v)


@rule("LinSpace")
def linspace(ctx, node, x, a):
    a.get("Tidx")
    start, stop = (float(np.asarray(ctx.static(v, w)).reshape(-1)[0])
                   for v, w in zip(x[:2], ("start", "stop")))
    num = ctx.ints(x[2], "num")[0]
    ctx.check_elements((num,), "the result")
    return np.linspace(start, stop, num, dtype=np.float64).astype(np.float32)


@rule("ScatterNd")
def scatter_nd(ctx, node, x, a):
    return F.scatter_nd(T(ctx, x[0]), T(ctx, x[1]), ctx.ints(x[2], "shape"))


@rule("Einsum")
def einsum(ctx, node, x, a):
    a.get("N")
    return F.einsum(str(a["equation"]), *(T(ctx, v) for v in x))


@rule("Tile")
def tile(ctx, node, x, a):
    return F.tile(T(ctx, x[0]), ctx.ints(x[1], "multiples"))


@rule("BroadcastTo")
def broadcast_to(ctx, node, x, a):
    return F.broadcast_to(T(ctx, x[0]), ctx.ints(x[1], "shape"))


@rule("Pad", "PadV2", "MirrorPad")
def pad(ctx, node, x, a):
    pads = np.asarray(ctx.static(x[1], "paddings")).reshape(-1, 2).tolist()
    v = T(ctx, x[0])
    if node.op == "MirrorPad":
        return F.pad(v, pads, mode=str(a["mode"]).upper())
    value = 0
    if node.op == "PadV2":
        value = np.asarray(ctx.static(x[2], "constant_values")).reshape(-1)[0].item()
    return F.pad(v, pads, constant_values=value)


@rule("Fill")
def fill(ctx, node, x, a):
    a.get("index_type")
    dims = ctx.ints(x[0], "dims")
    if isinstance(x[1], np.ndarray):
        return np.full(dims, x[1].reshape(-1)[0], dtype=x[1].dtype) \
            if int(np.prod(dims, dtype=np.int64)) <= ctx.max_elements else ctx.check_elements(
                dims, "the result")
    return F.broadcast_to(F.reshape(T(ctx, x[1]), []), dims)


@rule("Range")
def range_(ctx, node, x, a):
    a.get("Tidx")
    start, limit, delta = (np.asarray(ctx.static(v, n)).reshape(-1)[0]
                           for v, n in zip(x, ("start", "limit", "delta")))
    if delta == 0:
        raise ctx.error("delta is 0")
    count = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    ctx.check_elements((count,), "the range")
    dtype = np.result_type(start, limit, delta)
    return ctx.to_supported(np.arange(start, limit, delta, dtype=dtype))


@rule("GatherV2", "Gather", "ResourceGather")
def gather(ctx, node, x, a):
    axis = ctx.ints(x[2], "axis")[0] if len(x) > 2 else 0
    return F.gather(T(ctx, x[0]), T(ctx, x[1]), axis=axis,
                    batch_dims=int(a.get("batch_dims", 0)))


@rule("GatherNd")
def gather_nd(ctx, node, x, a):
    return F.gather_nd(T(ctx, x[0]), T(ctx, x[1]))


@rule("TopKV2")
def top_k(ctx, node, x, a):
    """TopKV2: k known at import (a Const: the output shapes are static), or computed
    by the graph: then a guard of a staged model (staged.py; a plain import hands the
    model on as staged). Ties keep the lower index first, as TF. A long row (centernet's
    1,310,720 scores) needs nothing special: GL's top_k_select picks a radix select."""
    a.get("sorted")                # TF.js sorts whatever it says; so does fragflow
    # a k the graph computes: a guard of a staged model (staged.py)
    k = int(np.asarray(ctx.concrete(x[1], "k")).reshape(-1)[0])
    v = T(ctx, x[0])
    if k < 0 or (v.shape[-1] is not None and k > v.shape[-1]):
        raise ctx.error(f"k={k} is outside [0, {v.shape[-1]}] (the last axis)")
    result = F.top_k(v, k=k)
    return [result.values, result.indices]


@rule("SparseToDense")
def sparse_to_dense(ctx, node, x, a):
    """SparseToDense of values known at import (nanodet's are all Consts): evaluated
    there. Indices the graph computes (after a Where) are refused: data-dependent."""
    a.get("validate_indices")
    what = ("sparse_indices", "output_shape", "sparse_values", "default_value")
    if not all(ctx.is_static(v) for v in x[:4]):
        raise ctx.error("sparse_indices, output_shape and the values must be known at "
                        "import time (indices a graph computes give data-dependent "
                        "work, which ff.tfjs.load does not import yet)")
    indices, shape, values, default = (np.asarray(ctx.static(v, w)) for v, w in zip(x, what))
    shape = [int(d) for d in shape.reshape(-1)]
    ctx.check_elements(shape, "the dense result")
    out = np.full(shape, default.reshape(-1)[0], dtype=values.dtype)
    if indices.ndim < 2:               # a scalar or a vector: indices into a 1-D result
        indices = indices.reshape(-1, 1)
    if indices.size:
        if (indices < 0).any() or (indices >= np.asarray(shape)[:indices.shape[1]]).any():
            raise ctx.error("sparse_indices hold an index outside output_shape")
        out[tuple(indices.T)] = np.broadcast_to(values, (indices.shape[0],))
    return ctx.to_supported(out)


@rule("OneHot")
def one_hot(ctx, node, x, a):
    depth = ctx.ints(x[1], "depth")[0]
    on = np.asarray(ctx.static(x[2], "on_value")).item()
    off = np.asarray(ctx.static(x[3], "off_value")).item()
    return F.one_hot(T(ctx, x[0]), depth, on_value=on, off_value=off,
                     axis=int(a.get("axis", -1)))


@rule("PlaceholderWithDefault")
def placeholder_with_default(ctx, node, x, a):
    a.get("shape")
    a.get("dtype")
    return x[0] if isinstance(x[0], np.ndarray) else F.identity(T(ctx, x[0]))


__all__ = ["RULES", "refusal"]


