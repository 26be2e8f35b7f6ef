"""Writing a fragflow graph as an ONNX model.

One rule per fragflow op (EXPORT_RULES), each emitting ONNX nodes for one node (an op
whose record names its ONNX type, OpDef.onnx, gets a one-node rule); an op with no rule
raises OnnxExportError naming it. Placeholders become graph inputs,
variables and constants initializers (a variable's value read from `session` when
given: export a fine-tuned model), fetches the outputs. fragflow's NHWC convolutions
and pools are written as ONNX's NCHW ones between Transposes, their HWIO weights as
OIHW initializers. Opset 18 (axes as inputs everywhere).
"""
from __future__ import annotations

import numpy as np

from ...ir.ops.conv import padding_arg, spatial_arg
from ...ir.ops.registry import all_ops, get_op
from ...ir.ops.shape import transpose_perm
from ..tensor import Tensor
from .errors import OnnxExportError, require_onnx

OPSET = 18
INT_MAX = np.iinfo(np.int64).max
EXPORT_RULES: dict = {}

# the ops whose record names their ONNX op type (OpDef.onnx) and that take no attributes:
# one node of that type on the same operands
SIMPLE = {name: opdef.onnx.op_type for name, opdef in all_ops().items()
          if opdef.onnx is not None and not opdef.attrs}
# the reductions with an ONNX name: one Reduce* node with axes and keepdims
REDUCE = {name: opdef.onnx.op_type for name, opdef in all_ops().items()
          if opdef.reduction is not None and opdef.onnx is not None}


def export_rule(*ops):
    def decorator(fn):
        for op in ops:
            EXPORT_RULES[op] = fn
        return fn
    return decorator


class Writer:
    """The ONNX graph being written: nodes, initializers, and names for values."""

    def __init__(self, session=None):
        self.onnx = require_onnx()
        from onnx import helper, numpy_helper  # optional: onnx (require_onnx above)
        self.helper, self.numpy_helper = helper, numpy_helper
        self.nodes, self.initializers = [], []
        self.names: dict = {}            # fragflow Value -> ONNX name
        self.arrays: dict = {}           # constant/variable Value -> (array, name)
        self.session = session
        self._count = 0

    def fresh(self, base: str) -> str:
        self._count += 1
        return f"{base}__{self._count}"

    def const(self, array, base="const") -> str:
        name = self.fresh(base)
        self.initializers.append(self.numpy_helper.from_array(np.asarray(array), name))
        return name

    def ints(self, values, base="ints") -> str:
        return self.const(np.asarray(list(values), np.int64), base)

    def emit(self, op, inputs, base, n_out=1, **attrs) -> list:
        outs = [self.fresh(base) for _ in range(n_out)]
        self.nodes.append(self.helper.make_node(op, list(inputs), outs, **attrs))
        return outs

    def name_of(self, value) -> str:
        """value's ONNX name; a constant or variable becomes an initializer when first
        read (a conv weight a rule writes in another layout never does)."""
        if value not in self.names:
            array, base = self.arrays[value]
            self.names[value] = self.const(array, base)
        return self.names[value]

    def one(self, op, inputs, base, **attrs) -> str:
        return self.emit(op, inputs, base, **attrs)[0]


def _dtype_enum(dtype: str):
    T = require_onnx().TensorProto
    return {"float32": T.FLOAT, "int32": T.INT32, "bool": T.BOOL}[dtype]


def _name(node) -> str:
    return node.name.replace("/", ".")


# -- elementwise -------------------------------------------------------------------------
def _simple(onnx_op):
    return lambda w, node, x: w.one(onnx_op, x, _name(node))


for _op, _onnx in SIMPLE.items():
    EXPORT_RULES[_op] = _simple(_onnx)


@export_rule("div")
def _div(w, node, x):
    a, b = (w.one("Cast", [v], _name(node), to=_dtype_enum("float32"))
            if val.dtype != "float32" else v for v, val in zip(x, node.inputs))
    return w.one("Div", [a, b], _name(node))


@export_rule("square")
def _square(w, node, x):
    return w.one("Mul", [x[0], x[0]], _name(node))


@export_rule("rsqrt")
def _rsqrt(w, node, x):
    return w.one("Reciprocal", [w.one("Sqrt", x, _name(node))], _name(node))


@export_rule("expm1")
def _expm1(w, node, x):
    return w.one("Sub", [w.one("Exp", x, _name(node)), w.const(np.float32(1))], _name(node))


@export_rule("log1p")
def _log1p(w, node, x):
    return w.one("Log", [w.one("Add", [x[0], w.const(np.float32(1))], _name(node))],
                 _name(node))


@export_rule("squared_difference")
def _squared_difference(w, node, x):
    d = w.one("Sub", x, _name(node))
    return w.one("Mul", [d, d], _name(node))


@export_rule("not_equal")
def _not_equal(w, node, x):
    return w.one("Not", [w.one("Equal", x, _name(node))], _name(node))


@export_rule("is_finite")
def _is_finite(w, node, x):
    bad = w.one("Or", [w.one("IsNaN", x, _name(node)), w.one("IsInf", x, _name(node))],
                _name(node))
    return w.one("Not", [bad], _name(node))


@export_rule("relu6")
def _relu6(w, node, x):
    return w.one("Clip", [x[0], w.const(np.float32(0)), w.const(np.float32(6))], _name(node))


@export_rule("leaky_relu")
def _leaky_relu(w, node, x):
    return w.one("LeakyRelu", x, _name(node), alpha=float(node.attrs["alpha"]))


@export_rule("clip_by_value")
def _clip(w, node, x):
    return w.one("Max", [w.one("Min", [x[0], x[2]], _name(node)), x[1]], _name(node))


@export_rule("where")
def _where(w, node, x):
    return w.one("Where", x, _name(node))


@export_rule("add_n")
def _add_n(w, node, x):
    return w.one("Sum", x, _name(node))


@export_rule("cast")
def _cast(w, node, x):
    return w.one("Cast", x, _name(node), to=_dtype_enum(node.attrs["dtype"]))


@export_rule("mod")
def _mod(w, node, x):
    if node.outputs[0].dtype == "int32":
        return w.one("Mod", x, _name(node))
    q = w.one("Floor", [w.one("Div", x, _name(node))], _name(node))   # the divisor's sign
    return w.one("Sub", [x[0], w.one("Mul", [x[1], q], _name(node))], _name(node))


@export_rule("floor_div")
def _floor_div(w, node, x):
    if node.outputs[0].dtype != "float32":
        raise OnnxExportError(f"floor_div '{node.name}' of integers has no ONNX counterpart "
                              f"(ONNX's Div truncates)")
    return w.one("Floor", [w.one("Div", x, _name(node))], _name(node))


# -- matrices, reductions, softmax --------------------------------------------------------
@export_rule("matmul")
def _matmul(w, node, x):
    a, b = x
    for flag, i in (("transpose_a", 0), ("transpose_b", 1)):
        if node.attrs[flag]:
            rank = node.inputs[i].type.rank
            perm = list(range(rank - 2)) + [rank - 1, rank - 2]
            t = w.one("Transpose", [x[i]], _name(node), perm=perm)
            a, b = (t, b) if i == 0 else (a, t)
    return w.one("MatMul", [a, b], _name(node))


def _axes(node, rank):
    axis = node.attrs["axis"]
    if axis is None:
        return None
    axis = (axis,) if isinstance(axis, int) else axis
    return sorted(a % rank for a in axis)


@export_rule(*REDUCE)
def _reduce(w, node, x):
    axes = _axes(node, node.inputs[0].type.rank)
    inputs = [x[0]] + ([w.ints(axes, "axes")] if axes is not None else [])
    return w.one(REDUCE[node.op], inputs, _name(node), keepdims=int(node.attrs["keepdims"]))


@export_rule("argmax", "argmin")
def _arg(w, node, x):
    out = w.one("ArgMax" if node.op == "argmax" else "ArgMin", x, _name(node),
                axis=int(node.attrs["axis"]), keepdims=0)
    return w.one("Cast", [out], _name(node), to=_dtype_enum("int32"))


@export_rule("softmax", "log_softmax")
def _softmax(w, node, x):
    return w.one("Softmax" if node.op == "softmax" else "LogSoftmax", x, _name(node),
                 axis=int(node.attrs["axis"]))


@export_rule("cumsum")
def _cumsum(w, node, x):
    return w.one("CumSum", [x[0], w.ints([node.attrs["axis"]])], _name(node),
                 exclusive=int(node.attrs["exclusive"]), reverse=int(node.attrs["reverse"]))


# -- shapes ---------------------------------------------------------------------------------
@export_rule("reshape", "reshape_like")
def _reshape(w, node, x):
    shape = [-1 if d is None else d for d in node.outputs[0].shape]
    if shape.count(-1) > 1:
        shape = [d if d is not None else -1 for d in node.attrs.get("shape", shape)]
    return w.one("Reshape", [x[0], w.ints(shape, "shape")], _name(node))


@export_rule("transpose")
def _transpose(w, node, x):
    return w.one("Transpose", x, _name(node),
                 perm=list(transpose_perm(node.attrs, node.inputs[0].type.rank)))


@export_rule("expand_dims")
def _expand_dims(w, node, x):
    axis = node.attrs["axis"] % node.outputs[0].type.rank
    return w.one("Unsqueeze", [x[0], w.ints([axis], "axes")], _name(node))


@export_rule("squeeze")
def _squeeze(w, node, x):
    rank = node.inputs[0].type.rank
    axis = node.attrs["axis"]
    axes = [i for i, d in enumerate(node.inputs[0].shape) if d == 1] if axis is None else \
        sorted(a % rank for a in ((axis,) if isinstance(axis, int) else axis))
    return w.one("Squeeze", [x[0], w.ints(axes, "axes")], _name(node))


@export_rule("concat")
def _concat(w, node, x):
    return w.one("Concat", x, _name(node),
                 axis=int(node.attrs["axis"]) % node.outputs[0].type.rank)


@export_rule("strided_slice")
def _strided_slice(w, node, x):
    spec = node.attrs["spec"]
    starts, ends, axes, steps, drop, new = [], [], [], [], [], []
    axis = out_axis = 0
    for entry in spec:
        kind = entry[0]
        if kind == "range":
            _, b, e, s = entry
            if (b, e, s) != (None, None, 1):
                starts.append(b if b is not None else (0 if s > 0 else -1))
                ends.append(e if e is not None else (INT_MAX if s > 0 else -INT_MAX))
                axes.append(axis)
                steps.append(s)
            axis += 1
            out_axis += 1
        elif kind == "index":
            i = entry[1]
            starts.append(i)
            ends.append(i + 1 if i != -1 else INT_MAX)
            axes.append(axis)
            steps.append(1)
            drop.append(axis)
            axis += 1
        elif kind == "new":
            new.append(out_axis)
            out_axis += 1
        else:
            raise OnnxExportError(f"strided_slice '{node.name}': index {entry} has no ONNX "
                                  f"counterpart")
    out = x[0]
    if axes:
        out = w.one("Slice", [out, w.ints(starts), w.ints(ends), w.ints(axes),
                              w.ints(steps)], _name(node))
    if drop:
        out = w.one("Squeeze", [out, w.ints(drop, "axes")], _name(node))
    if new:
        out = w.one("Unsqueeze", [out, w.ints(new, "axes")], _name(node))
    return out if out is not x[0] else w.one("Identity", [out], _name(node))


@export_rule("gather")
def _gather(w, node, x):
    if node.attrs["batch_dims"]:
        raise OnnxExportError(f"gather '{node.name}' with batch_dims has no ONNX counterpart")
    return w.one("Gather", x, _name(node), axis=int(node.attrs["axis"]))


@export_rule("pad")
def _pad(w, node, x):
    pairs = node.attrs["paddings"]
    pads = [p[0] for p in pairs] + [p[1] for p in pairs]
    value = np.asarray(node.attrs["constant_value"], np.dtype(node.outputs[0].dtype))
    return w.one("Pad", [x[0], w.ints(pads, "pads"), w.const(value)], _name(node))


@export_rule("mirror_pad")
def _mirror_pad(w, node, x):
    if node.attrs["mode"] != "REFLECT":
        raise OnnxExportError(f"mirror_pad '{node.name}' SYMMETRIC has no ONNX counterpart")
    pairs = node.attrs["paddings"]
    pads = [p[0] for p in pairs] + [p[1] for p in pairs]
    return w.one("Pad", [x[0], w.ints(pads, "pads")], _name(node), mode="reflect")


@export_rule("tile")
def _tile(w, node, x):
    return w.one("Tile", [x[0], w.ints(node.attrs["multiples"])], _name(node))


@export_rule("broadcast_to")
def _broadcast_to(w, node, x):
    return w.one("Expand", [x[0], w.ints(node.attrs["shape"])], _name(node))


# -- convolutions and pools (NCHW between transposes) ------------------------------------
def _nchw(w, node, value, d=2):
    """NHWC (NDHWC) -> NCHW (NCDHW)."""
    return w.one("Transpose", [value], _name(node), perm=[0, d + 1] + list(range(1, d + 1)))


def _nhwc(w, node, value, d=2):
    return w.one("Transpose", [value], _name(node), perm=[0] + list(range(2, d + 2)) + [1])


def _pads(padding, d):
    if isinstance(padding, str):
        return {"auto_pad": "SAME_UPPER"} if padding == "SAME" else {"auto_pad": "VALID"}
    return {"pads": [p[0] for p in padding] + [p[1] for p in padding]}


@export_rule("conv2d", "depthwise_conv2d")
def _conv(w, node, x):
    strides = spatial_arg(node.attrs["strides"], 2, "strides")
    dilations = spatial_arg(node.attrs["dilations"], 2, "dilations")
    padding = padding_arg(node.attrs["padding"], 2)
    kh, kw, ci, co = node.inputs[1].shape
    stored = w.arrays.get(node.inputs[1])          # a constant or variable weight
    if node.op == "conv2d":     # HWIO -> OIHW
        weight = w.const(stored[0].transpose(3, 2, 0, 1), stored[1]) if stored else \
            w.one("Transpose", [x[1]], _name(node), perm=[3, 2, 0, 1])
        group = 1
    else:                       # HWCM -> (C*M, 1, H, W)
        if stored:
            weight = w.const(stored[0].transpose(2, 3, 0, 1).reshape(ci * co, 1, kh, kw),
                             stored[1])
        else:
            t = w.one("Transpose", [x[1]], _name(node), perm=[2, 3, 0, 1])
            weight = w.one("Reshape", [t, w.ints([ci * co, 1, kh, kw])], _name(node))
        group = ci
    y = w.one("Conv", [_nchw(w, node, x[0]), weight], _name(node), group=group,
              kernel_shape=[kh, kw], strides=list(strides), dilations=list(dilations),
              **_pads(padding, 2))
    return _nhwc(w, node, y)


@export_rule("max_pool", "avg_pool", "max_pool3d", "avg_pool3d")
def _pool(w, node, x):
    d = 3 if node.op.endswith("3d") else 2
    ksize = spatial_arg(node.attrs["ksize"], d, "ksize")
    strides = spatial_arg(node.attrs["strides"], d, "strides")
    padding = padding_arg(node.attrs["padding"], d)
    op = "MaxPool" if node.op.startswith("max") else "AveragePool"
    y = w.one(op, [_nchw(w, node, x[0], d)], _name(node), kernel_shape=list(ksize),
              strides=list(strides), **_pads(padding, d))
    return _nhwc(w, node, y, d)


@export_rule("conv3d")
def _conv3d(w, node, x):
    strides = spatial_arg(node.attrs["strides"], 3, "strides")
    dilations = spatial_arg(node.attrs["dilations"], 3, "dilations")
    padding = padding_arg(node.attrs["padding"], 3)
    stored = w.arrays.get(node.inputs[1])          # DHWIO -> OIDHW
    weight = w.const(stored[0].transpose(4, 3, 0, 1, 2), stored[1]) if stored else \
        w.one("Transpose", [x[1]], _name(node), perm=[4, 3, 0, 1, 2])
    y = w.one("Conv", [_nchw(w, node, x[0], 3), weight], _name(node),
              kernel_shape=list(node.inputs[1].shape[:3]), strides=list(strides),
              dilations=list(dilations), **_pads(padding, 3))
    return _nhwc(w, node, y, 3)


@export_rule("lrn")
def _lrn(w, node, x):
    size = 2 * int(node.attrs["depth_radius"]) + 1
    y = w.one("LRN", [_nchw(w, node, x[0])], _name(node), size=size,
              alpha=float(node.attrs["alpha"]) * size, beta=float(node.attrs["beta"]),
              bias=float(node.attrs["bias"]))
    return _nhwc(w, node, y)


@export_rule("resize_bilinear", "resize_nearest_neighbor")
def _resize(w, node, x):
    n, h, wd, c = node.inputs[0].shape
    size = list(node.outputs[0].shape[1:3])     # from size, or from scale and the input
    if None in size:
        raise OnnxExportError(f"{node.op} '{node.name}' of an unknown output size "
                              f"{size}: export with the input's height and width known")
    linear = node.op == "resize_bilinear"
    if node.attrs["align_corners"]:
        coord, nearest = "align_corners", "round_prefer_ceil"
    elif node.attrs["half_pixel_centers"]:
        coord, nearest = ("half_pixel", "round_prefer_ceil") if linear else \
            ("tf_half_pixel_for_nn", "floor")
    else:
        coord, nearest = "asymmetric", "floor"
    if not linear and coord == "tf_half_pixel_for_nn":
        coord, nearest = "half_pixel", "round_prefer_ceil"
    sizes = w.ints([n if n is not None else 1, c, *size], "sizes") if n is not None else None
    if sizes is None:
        raise OnnxExportError(f"{node.op} '{node.name}' of an unknown batch size")
    attrs = {"mode": "linear" if linear else "nearest",
             "coordinate_transformation_mode": coord}
    if not linear:
        attrs["nearest_mode"] = nearest
    y = w.one("Resize", [_nchw(w, node, x[0]), "", "", sizes], _name(node), **attrs)
    return _nhwc(w, node, y)


@export_rule("one_hot")
def _one_hot(w, node, x):
    values = w.const(np.asarray([node.attrs["off_value"], node.attrs["on_value"]],
                                np.float32))
    index = w.one("Cast", [x[0]], _name(node), to=require_onnx().TensorProto.INT64)
    y = w.one("OneHot", [index, w.ints([node.attrs["depth"]]), values], _name(node),
              axis=int(node.attrs["axis"]))
    return w.one("Cast", [y], _name(node), to=_dtype_enum(node.outputs[0].dtype))


@export_rule("sparse_softmax_cross_entropy")
def _sparse_softmax_cross_entropy(w, node, x):
    """-log_softmax(logits)[label] per example, NaN where the label is out of range
    (fragflow's op; ONNX's SoftmaxCrossEntropyLoss would reject such labels):
    LogSoftmax, GatherElements at the label clipped into range, then a Where."""
    base = _name(node)
    classes = node.inputs[0].shape[-1]
    log_p = w.one("LogSoftmax", [x[0]], base, axis=-1)
    label = w.one("Cast", [x[1]], base, to=require_onnx().TensorProto.INT64)
    valid = w.one("And", [w.one("GreaterOrEqual", [label, w.const(np.int64(0))], base),
                          w.one("Less", [label, w.const(np.int64(classes))], base)], base)
    safe = w.one("Where", [valid, label, w.const(np.int64(0))], base)
    picked = w.one("GatherElements", [log_p, w.one("Unsqueeze", [safe, w.ints([-1], "axes")],
                                                   base)], base, axis=-1)
    loss = w.one("Neg", [w.one("Squeeze", [picked, w.ints([-1], "axes")], base)], base)
    return w.one("Where", [valid, loss, w.const(np.float32(np.nan))], base)


@export_rule("gather_nd")
def _gather_nd(w, node, x):
    index = w.one("Cast", [x[1]], _name(node), to=require_onnx().TensorProto.INT64)
    return w.one("GatherND", [x[0], index], _name(node))      # ONNX's indices are int64


@export_rule("reverse")
def _reverse(w, node, x):
    rank = node.inputs[0].type.rank
    axes = [a % rank for a in node.attrs["axis"]]
    return w.one("Slice", [x[0], w.ints([-1] * len(axes)), w.ints([-INT_MAX] * len(axes)),
                           w.ints(axes), w.ints([-1] * len(axes))], _name(node))


@export_rule("prelu")
def _prelu(w, node, x):
    return w.one("PRelu", x, _name(node))


@export_rule("fill", "range", "linspace", "zeros_like", "ones_like")
def _static(w, node, x):
    """Ops whose result depends only on attributes and shapes: written as the value."""
    out = node.outputs[0]
    if not out.type.is_static:
        raise OnnxExportError(f"{node.op} '{node.name}' of an unknown shape")
    if node.op in ("zeros_like", "ones_like"):
        value = np.full(out.shape, 0 if node.op == "zeros_like" else 1, np.dtype(out.dtype))
    else:
        (value,) = get_op(node.op).run_reference([], node.attrs)
    return w.const(np.asarray(value, np.dtype(out.dtype)).reshape(out.shape),
                   _name(node))


# -- the walk ---------------------------------------------------------------------------------
class _LazyInputs:
    """A node's inputs' ONNX names, made when a rule reads them (so that a rule may
    write a constant weight its own way instead)."""

    def __init__(self, w, values):
        self.w, self.values = w, list(values)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self.w.name_of(v) for v in self.values[i]]
        return self.w.name_of(self.values[i])

    def __len__(self):
        return len(self.values)

    def __iter__(self):
        return (self.w.name_of(v) for v in self.values)


def _needed(fetches):
    live, stack = set(), [v.node for v in fetches]
    while stack:
        node = stack.pop()
        if node not in live:
            live.add(node)
            stack.extend(v.node for v in node.inputs)
    return live


def _value_info(w, value, name):
    dims = [d if d is not None else f"d{i}" for i, d in enumerate(value.shape)]
    return w.helper.make_tensor_value_info(name, _dtype_enum(value.dtype), dims)


def _as_values(xs):
    xs = xs if isinstance(xs, (list, tuple)) else [xs]
    return [x.value if isinstance(x, Tensor) else x for x in xs]


def export(fetches, feeds, path=None, *, session=None, name=None):
    """Write the graph computing fetches from the placeholders feeds as an ONNX model.

    Variables are written with their values in `session` (a Session of their graph)
    when given, else their initial values. Returns the onnx.ModelProto (and saves it to
    path when given). An op with no ONNX counterpart raises OnnxExportError naming it.

    >>> ff.onnx.export(logits, [x], "model.onnx", session=sess)   # doctest: +SKIP
    """
    onnx = require_onnx()
    fetch_values, feed_values = _as_values(fetches), _as_values(feeds)
    graph = fetch_values[0].graph
    w = Writer(session)
    inputs, outputs = [], []
    for v in feed_values:
        if v.node.op != "placeholder":
            raise OnnxExportError(f"feed '{v.name}' is not a placeholder")
        w.names[v] = v.node.name
        inputs.append(_value_info(w, v, v.node.name))
    live = _needed(fetch_values)
    missing = [n for n in graph.nodes if n in live and n.op not in EXPORT_RULES
               and n.op not in ("placeholder", "constant", "variable")]
    if missing:
        listed = ", ".join(f"{n.op} '{n.name}' ({n.source})" for n in missing[:8])
        raise OnnxExportError(f"no ONNX counterpart in fragflow's exporter for: {listed}"
                              + (f" and {len(missing) - 8} more" if len(missing) > 8 else ""))
    for node in graph.nodes:
        if node not in live or node.outputs[0] in w.names:
            continue
        if node.op == "placeholder":
            raise OnnxExportError(f"placeholder '{node.name}' is needed by the fetches but "
                                  f"is not among the feeds")
        if node.op in ("constant", "variable"):
            value = node.attrs["value"] if node.op == "constant" else \
                (session.get(node.outputs[0]) if session is not None
                 else node.attrs["initial_value"])
            w.arrays[node.outputs[0]] = (np.asarray(value, np.dtype(node.outputs[0].dtype)),
                                         node.name.replace("/", "."))
            continue
        rule = EXPORT_RULES.get(node.op)
        if rule is None:
            raise OnnxExportError(f"{node.op} '{node.name}' ({node.source}) has no ONNX "
                                  f"counterpart in fragflow's exporter")
        result = rule(w, node, _LazyInputs(w, node.inputs))
        result = result if isinstance(result, list) else [result]
        w.names.update(zip(node.outputs, result))
    for v in fetch_values:
        out_name = v.name.replace("/", ".").replace(":", "_")
        if out_name in {vi.name for vi in inputs}:
            out_name = f"{out_name}_out"
        w.nodes.append(w.helper.make_node("Identity", [w.name_of(v)], [out_name]))
        outputs.append(_value_info(w, v, out_name))
    onnx_graph = w.helper.make_graph(w.nodes, name or graph.name, inputs, outputs,
                                     initializer=w.initializers)
    model = w.helper.make_model(onnx_graph, producer_name="fragflow",
                                opset_imports=[w.helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    if path is not None:
        onnx.save(model, str(path))
    return model


def exportable_ops() -> list:
    """The fragflow ops ff.onnx.export writes, sorted."""
    return sorted(EXPORT_RULES)
