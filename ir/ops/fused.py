"""Fused ops: several ops computed by one kernel.

- fused_elementwise(*inputs) {steps}: an expression DAG of elementwise ops over its
  inputs (made by the elementwise fusion pass).
- fused_matmul(a, b, *extra) {transpose_a, transpose_b, steps}: matmul with an
  elementwise epilogue over (matmul result, *extra) — bias add and activation, or any
  elementwise DAG the fusion pass folds in (ff.fused.matmul makes one too).
- fused_conv(x, w, *extra) and fused_sum_like(g, x, *extra): the same with a
  convolution or a bias's gradient (sum_like) first.

steps is a tuple of (op, attrs, args); attrs a tuple of (name, value) pairs; each arg
("in", k) — the k-th operand — or ("step", j) — an earlier step's result. The last
step is the result. Type inference and the reference run each step through its own
op's OpDef, so a fused node means exactly what its steps mean."""
from __future__ import annotations

import numpy as np

from ..errors import AttrError, DTypeError, ShapeError
from ..types import TensorType, format_shape
from . import matmul as _matmul
from .common import apply
from .registry import REQUIRED, OpDef, get_op, register
from .state import constant


def eval_steps(steps, operands, run):
    """Walk the steps: run(op, attrs dict, args) gives a step's result."""
    results = []
    for op, attrs, args in steps:
        values = []
        for kind, k in args:
            if kind == "in":
                if not 0 <= k < len(operands):
                    raise AttrError(f"step {op} reads operand {k} of {len(operands)}")
                values.append(operands[k])
            elif kind == "step":
                if not 0 <= k < len(results):
                    raise AttrError(f"step {op} reads step {k} before it exists")
                values.append(results[k])
            else:
                raise AttrError(f"unknown step argument {kind!r}")
        # defaults filled here, once, for the type rule, the reference and the kernel
        results.append(run(op, get_op(op).check_attrs(dict(attrs)), values))
    if not results:
        raise AttrError("a fused op needs at least one step")
    return results[-1]


def infer_step(op, attrs, types):
    opdef = get_op(op)
    if opdef.family != "elementwise":
        raise AttrError(f"only elementwise ops can be fused steps, not {op}")
    return opdef.infer_types(types, opdef.check_attrs(attrs))[0]


def reference_step(op, attrs, arrays):
    opdef = get_op(op)
    return opdef.run_reference(arrays, opdef.check_attrs(attrs))[0]


register(OpDef(
    "fused_elementwise", "fused",
    lambda types, attrs: eval_steps(attrs["steps"], types, infer_step),
    lambda arrays, attrs: eval_steps(attrs["steps"], arrays, reference_step),
    attrs={"steps": REQUIRED, "nodes": ()}, hidden_attrs=("nodes",),
    doc="Elementwise ops fused into one kernel (see the module docstring).",
    tf="— (XLA loop fusion)"))


# pad_last ((k, amount), ...): operand k of a fused_matmul or fused_conv (k >= 2: an
# epilogue operand) is read zero-padded by `amount` at the end of its last axis (a
# channel pad before a residual add: passes/pad_folding.py fold_channel_pads), so its
# pad needs no kernel of its own.
def _check_pad_last(attrs, count):
    for pair in attrs.get("pad_last", ()):
        if len(pair) != 2 or not 2 <= pair[0] < count or pair[1] <= 0:
            raise AttrError(f"pad_last entries are (operand index >= 2, amount > 0) of "
                            f"{count} operands, got {pair!r}")


def _padded_types(types, attrs):
    _check_pad_last(attrs, len(types))
    types = list(types)
    for k, amount in attrs.get("pad_last", ()):
        t = types[k]
        if t.rank == 0:
            raise ShapeError("pad_last pads a last axis: the operand is a scalar")
        last = None if t.shape[-1] is None else t.shape[-1] + amount
        types[k] = TensorType(t.shape[:-1] + (last,), t.dtype)
    return types


def _padded_arrays(arrays, attrs):
    arrays = list(arrays)
    for k, amount in attrs.get("pad_last", ()):
        a = arrays[k]
        arrays[k] = np.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, amount)])
    return arrays


def _fused_matmul_type(types, attrs):
    types = _padded_types(types, attrs)
    mm = _matmul._matmul_type(types[:2], attrs)
    return eval_steps(attrs["steps"], [mm, *types[2:]], infer_step)


def _fused_matmul_ref(arrays, attrs):
    arrays = _padded_arrays(arrays, attrs)
    mm = _matmul._matmul_ref(arrays[:2], attrs)
    return eval_steps(attrs["steps"], [mm, *arrays[2:]], reference_step)


register(OpDef("fused_matmul", "fused", _fused_matmul_type, _fused_matmul_ref,
               attrs={"transpose_a": False, "transpose_b": False, "steps": REQUIRED,
                      "nodes": (), "pad_last": ()}, hidden_attrs=("nodes",),
               doc="matmul with an elementwise epilogue (bias, activation) in one kernel.",
               tf="_FusedMatMul"))


# "nodes": the names of the ops a fusion pass folded in (kernel headers and profiles
# show them); empty for fused ops users build directly.


# fused_conv(x, w, *extra) {conv_op, conv_attrs, steps}: conv2d or depthwise_conv2d
# (conv_op) with its attrs (a tuple of pairs) and an epilogue, like fused_matmul.
# (conv2d_backprop_filter: a filter's gradient with its optimizer update)
CONV_HEADS = ("conv2d", "depthwise_conv2d", "conv2d_backprop_filter")
# the ops an epilogue fuses into (and CONV_HEADS), and a batch norm folds into (passes/)
HEADS = ("matmul", "conv2d", "depthwise_conv2d")


def _conv_head(attrs):
    if attrs["conv_op"] not in CONV_HEADS:
        raise AttrError(f"conv_op must be one of {CONV_HEADS}, got {attrs['conv_op']!r}")
    opdef = get_op(attrs["conv_op"])
    given = dict(attrs["conv_attrs"])
    # the kernel reads every one of them (a hidden one, conv2d's padding_taps, may be
    # left to its default)
    needed = set(opdef.attrs) - set(opdef.hidden_attrs)
    if not needed <= set(given) <= set(opdef.attrs):
        raise AttrError(f"conv_attrs must set {sorted(needed)}, got {sorted(given)}")
    return opdef, opdef.check_attrs(given)


def _fused_conv_type(types, attrs):
    opdef, conv_attrs = _conv_head(attrs)
    types = _padded_types(types, attrs)
    acc = opdef.infer_types(types[:2], conv_attrs)[0]
    return eval_steps(attrs["steps"], [acc, *types[2:]], infer_step)


def _fused_conv_ref(arrays, attrs):
    opdef, conv_attrs = _conv_head(attrs)
    arrays = _padded_arrays(arrays, attrs)
    acc = opdef.run_reference(arrays[:2], conv_attrs)[0]
    return eval_steps(attrs["steps"], [acc, *arrays[2:]], reference_step)


register(OpDef("fused_conv", "fused", _fused_conv_type, _fused_conv_ref,
               attrs={"conv_op": REQUIRED, "conv_attrs": REQUIRED, "steps": REQUIRED,
                      "nodes": (), "pad_last": ()}, hidden_attrs=("nodes",),
               doc="conv2d / depthwise_conv2d with an elementwise epilogue in one kernel.",
               tf="_FusedConv2D / FusedDepthwiseConv2dNative"))


# fused_sum_like(g, x, *extra) {steps}: sum_like(g, x) (a bias's gradient: g summed
# over its leading axes down to x's one axis) with an elementwise epilogue, like
# fused_matmul: an optimizer's update of the bias in the kernel that sums its gradient
# (passes/fusion.py makes it where the sum is small enough for one kernel).
def bias_sum_dims(g_type, x_type):
    """(rows, columns) where sum_like(g, x) sums a static g over all its leading axes
    down to x's one axis (a bias's gradient), else None."""
    if not (g_type.is_static and x_type.is_static) or x_type.rank != 1 or \
            g_type.rank < 2 or g_type.shape[-1] != x_type.shape[0]:
        return None
    return g_type.size // x_type.shape[0], x_type.shape[0]


def _fused_sum_like_type(types, attrs):
    acc = get_op("sum_like").infer_types(types[:2], {})[0]
    return eval_steps(attrs["steps"], [acc, *types[2:]], infer_step)


def _fused_sum_like_ref(arrays, attrs):
    acc = get_op("sum_like").run_reference(arrays[:2], {})[0]
    return eval_steps(attrs["steps"], [acc, *arrays[2:]], reference_step)


register(OpDef("fused_sum_like", "fused", _fused_sum_like_type, _fused_sum_like_ref,
               attrs={"steps": REQUIRED, "nodes": ()}, hidden_attrs=("nodes",),
               doc="sum_like (a bias's gradient) with an elementwise epilogue (its "
                   "update) in one kernel.",
               tf="— (BiasAddGrad + the update)"))


def fused_conv(conv_op, x, w, extra, steps, conv_attrs, nodes=(), name=None):
    return apply("fused_conv", [x, w, *extra],
                 {"conv_op": conv_op, "conv_attrs": tuple(sorted(conv_attrs.items())),
                  "steps": steps, "nodes": nodes}, name)


def fused_matmul(a, b, extra, steps, transpose_a=False, transpose_b=False, nodes=(),
                 name=None):
    return apply("fused_matmul", [a, b, *extra],
                 {"steps": steps, "transpose_a": transpose_a, "transpose_b": transpose_b,
                  "nodes": nodes}, name)


def decompose(node):
    """The fused node's value rebuilt from the ops it fuses (in the current graph
    scope): what its gradient is taken through."""
    if node.op == "fused_attention":
        return decompose_attention(node)
    if node.op == "fused_layer_norm":
        return decompose_layer_norm(node)
    operands = list(node.inputs)
    for k, amount in node.attrs.get("pad_last", ()):
        x = operands[k]
        operands[k] = apply("pad", [x], {"paddings": ((0, 0),) * (x.type.rank - 1) +
                                         ((0, amount),), "constant_value": 0})
    if node.op == "fused_matmul":
        mm = _matmul.matmul(operands[0], operands[1], node.attrs["transpose_a"],
                            node.attrs["transpose_b"])
        operands = [mm, *operands[2:]]
    elif node.op == "fused_conv":
        acc = apply(node.attrs["conv_op"], operands[:2], dict(node.attrs["conv_attrs"]))
        operands = [acc, *operands[2:]]
    elif node.op == "fused_sum_like":
        operands = [apply("sum_like", operands[:2]), *operands[2:]]
    return eval_steps(node.attrs["steps"], operands,
                      lambda op, attrs, args: apply(op, args, attrs or None))


# fused_attention(q, k, v[, mask]) {scale, divide, transpose_k, transpose_v,
# subtract_mask}: scaled dot-product attention as torch, TensorFlow and Keras write it,
#     softmax(matmul(q, k, transpose_b=transpose_k) / scale (or * scale) [+ mask,
#             or - mask where subtract_mask: Keras' Attention lowers masked scores],
#             axis=-1) @ v (transpose_b=transpose_v),
# made by passes/attention.py from those five ops; scale None: no scaling step. Its type
# rule, reference and gradient (decompose) are those ops', step by step, so it means
# exactly what they meant. q: [..., Lq, D]; k: [..., Lk, D] (transpose_k) or
# [..., D, Lk]; v: [..., Lk, Dv] (or [..., Dv, Lk] with transpose_v); the batch dims
# of q, k and v equal; mask broadcasts to the scores [..., Lq, Lk]. q_heads, k_heads,
# v_heads: q, k, v come as [..., L, H, D] (their axes before the heads split off: the
# transpose that makes them [..., H, L, D] is the node's, k then read as transpose_k
# says); out_heads: the result is [..., Lq, H, Dv], transposed back the same way
# (passes/attention.py folds the head transposes). q_columns, k_columns, v_columns:
# () or (start, H, D): the operand comes as x [..., L, W] and is x[..., start:start +
# H * D] as [..., L, H, D] (with its *_heads): the column slice and reshape of a merged
# q, k, v projection (passes/merge_matmuls.py), folded by passes/attention.py.
def heads_perm(rank):
    """The permutation swapping axes -3 and -2 of a rank-`rank` value."""
    return tuple(range(rank - 3)) + (rank - 2, rank - 3, rank - 1)


def columns_shape(shape, columns):
    """The [..., L, H, D] an operand of `columns` (start, H, D) stands for."""
    return tuple(shape[:-1]) + tuple(columns[1:]) if columns else tuple(shape)


def columns_spec(rank, columns):
    """The strided_slice spec of a `columns` operand's slice (rank: x's)."""
    start, heads, width = columns
    return tuple(("range", None, None, 1) for _ in range(rank - 1)) + \
        (("range", start, start + heads * width, 1),)


def _attention_steps(operands, attrs, matmul, scale, add, softmax, transpose,
                     columns=None):
    """add(scores, mask, subtract) applies the mask, transpose(x) swaps axes -3, -2,
    columns(x, (start, H, D)) is x[..., start:start + H * D] as [..., L, H, D]."""
    q, k, v, *mask = (columns(x, attrs.get(f"{r}_columns")) if attrs.get(f"{r}_columns")
                      else x for x, r in zip(operands, ("q", "k", "v", "mask")))
    q = transpose(q) if attrs["q_heads"] else q
    k = transpose(k) if attrs["k_heads"] else k
    if attrs["v_heads"]:
        v = transpose(v)
    scores = matmul([q, k], {"transpose_a": False, "transpose_b": attrs["transpose_k"]})
    if attrs["scale"] is not None:
        scores = scale(scores, attrs["scale"], attrs["divide"])
    if mask:
        scores = add(scores, mask[0], attrs["subtract_mask"])
    out = matmul([softmax(scores), v],
                 {"transpose_a": False, "transpose_b": attrs["transpose_v"]})
    return transpose(out) if attrs["out_heads"] else out


def _check_attention(types, attrs):
    if len(types) not in (3, 4):
        raise AttrError(f"fused_attention takes q, k, v and an optional mask, got "
                        f"{len(types)} operands")
    if attrs["scale"] is not None and not isinstance(attrs["scale"], float):
        raise AttrError(f"scale must be a float or None, got {attrs['scale']!r}")
    for i, r in enumerate("qkv"):
        columns = attrs[f"{r}_columns"]
        if not columns:
            continue
        shape = types[i].shape
        if not attrs[f"{r}_heads"] or len(columns) != 3 or \
                not all(isinstance(c, int) and c >= 0 for c in columns) or \
                min(columns[1:]) < 1 or len(shape) < 3 or shape[-1] is None or \
                columns[0] + columns[1] * columns[2] > shape[-1]:
            raise AttrError(f"{r}_columns must be (start, heads, width) of columns inside "
                            f"the operand's last axis, with {r}_heads; got {columns} "
                            f"for {format_shape(shape)}")
    shapes = [columns_shape(t.shape, attrs.get(f"{r}_columns")) for t, r in zip(types, "qkvm")]
    for name, i in (("q_heads", 0), ("k_heads", 1), ("v_heads", 2), ("out_heads", 0)):
        if attrs[name] and len(shapes[i]) < 4:
            raise AttrError(f"{name} needs operands of rank 4 or more (batch, length, "
                            f"heads, width)")


def _fused_attention_type(types, attrs):
    _check_attention(types, attrs)

    def matmul(ts, a):
        return _matmul._matmul_type(ts, a)

    def scale(t, value, divide):
        return infer_step("div" if divide else "mul", {},
                          [t, TensorType((), "float32")])

    return _attention_steps(
        types, attrs, matmul, scale,
        lambda t, m, sub: infer_step("sub" if sub else "add", {}, [t, m]),
        lambda t: get_op("softmax").infer_types([t], {"axis": -1})[0],
        lambda t: TensorType(tuple(t.shape[p] for p in heads_perm(t.rank)), t.dtype),
        lambda t, c: TensorType(columns_shape(t.shape, c), t.dtype))


def _fused_attention_ref(arrays, attrs):
    _check_attention(arrays, attrs)

    def scale(x, value, divide):
        return reference_step("div" if divide else "mul", {}, [x, np.float32(value)])

    return _attention_steps(
        arrays, attrs, _matmul._matmul_ref, scale,
        lambda x, m, sub: reference_step("sub" if sub else "add", {}, [x, m]),
        lambda x: get_op("softmax").run_reference([x], {"axis": -1})[0],
        lambda x: np.ascontiguousarray(np.transpose(x, heads_perm(x.ndim))),
        lambda x, c: np.ascontiguousarray(
            x[..., c[0]:c[0] + c[1] * c[2]]).reshape(columns_shape(x.shape, c)))


register(OpDef("fused_attention", "fused", _fused_attention_type, _fused_attention_ref,
               attrs={"scale": None, "divide": True, "transpose_k": True,
                      "transpose_v": False, "subtract_mask": False, "q_heads": False,
                      "k_heads": False, "v_heads": False, "out_heads": False,
                      "q_columns": (), "k_columns": (), "v_columns": (), "nodes": ()},
               hidden_attrs=("nodes",),
               doc="softmax(q kᵀ / scale + mask) v, scaled dot-product attention, in one "
                   "kernel (an online softmax over key tiles).",
               tf="— (XLA / onnxruntime Attention)"))


def decompose_attention(node):
    """fused_attention's value rebuilt from the five ops it stands for."""
    graph = node.inputs[0].graph

    def scale(x, value, divide):
        c = constant(graph, value, "float32")
        return apply("div" if divide else "mul", [x, c])

    return _attention_steps(
        list(node.inputs), node.attrs, lambda vs, a: apply("matmul", vs, a), scale,
        lambda x, m, sub: apply("sub" if sub else "add", [x, m]),
        lambda x: apply("softmax", [x], {"axis": -1}),
        lambda x: apply("transpose", [x], {"perm": heads_perm(len(x.shape))}),
        lambda x, c: apply("reshape", [apply("strided_slice", [x], {
            "spec": columns_spec(len(x.shape), c)})], {"shape": columns_shape(x.shape, c)}))


# fused_layer_norm(x[, scale][, offset]) {axis, epsilon, center, has_scale, has_offset}:
# x normalized over its axes axis..rank-1 (one row per index of the others),
#     center:     (x - mean(x)) * rsqrt(mean((x - mean(x))²) + epsilon)   (LayerNorm)
#     not center:  x * rsqrt(mean(x²) + epsilon)                           (RMSNorm)
# then * scale where has_scale, + offset where has_offset, each broadcast along the
# normalized axes only (its shape, leading 1s dropped, ends x's shape). Made by
# passes/norms.py from those ops as torch, ONNX, TensorFlow and Keras write them; its
# type rule, reference and gradient (decompose_layer_norm) are those ops', step by step.
def _norm_steps(operands, attrs, op, const):
    """op(name, args, attrs) runs one op, const(float) makes a float32 scalar."""
    x, *affine = operands
    axes = tuple(range(attrs["axis"], len(x.shape)))
    if attrs["center"]:
        x = op("sub", [x, op("mean", [x], {"axis": axes, "keepdims": True})], {})
    var = op("mean", [op("square", [x], {})], {"axis": axes, "keepdims": True})
    y = op("mul", [x, op("rsqrt", [op("add", [var, const(attrs["epsilon"])], {})], {})],
           {})
    if attrs["has_scale"]:
        y = op("mul", [y, affine.pop(0)], {})
    if attrs["has_offset"]:
        y = op("add", [y, affine.pop(0)], {})
    return y


def _fused_layer_norm_type(types, attrs):
    x, *affine = types
    if x.dtype != "float32":
        raise DTypeError(f"fused_layer_norm normalizes float32, got {x.dtype}")
    if not isinstance(attrs["axis"], int) or not 0 <= attrs["axis"] < x.rank:
        raise AttrError(f"axis must be the first normalized axis, in [0, {x.rank}), got "
                        f"{attrs['axis']!r}")
    normalized = x.shape[attrs["axis"]:]
    if any(d is None for d in normalized):
        raise ShapeError(f"the normalized axes must be known, got {x}")
    if not isinstance(attrs["epsilon"], float) or not attrs["epsilon"] >= 0:
        raise AttrError(f"epsilon must be a float >= 0, got {attrs['epsilon']!r}")
    want = int(bool(attrs["has_scale"])) + int(bool(attrs["has_offset"]))
    if len(affine) != want:
        raise AttrError(f"fused_layer_norm takes x and {want} of scale and offset, got "
                        f"{len(types)} operands")
    for t in affine:
        shape = list(t.shape)
        while shape and shape[0] == 1:
            shape.pop(0)
        if t.dtype != "float32" or tuple(shape) != normalized[len(normalized) - len(shape):]:
            raise ShapeError(f"a scale or offset must be float32 of the normalized shape "
                             f"{list(normalized)} (or its end), got {t}")
    return TensorType(x.shape, "float32")


def _fused_layer_norm_ref(arrays, attrs):
    def op(name, args, a):
        opdef = get_op(name)
        return opdef.run_reference(args, opdef.check_attrs(a))[0]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return _norm_steps(arrays, attrs, op, np.float32)


register(OpDef("fused_layer_norm", "fused", _fused_layer_norm_type, _fused_layer_norm_ref,
               attrs={"axis": REQUIRED, "epsilon": REQUIRED, "center": True,
                      "has_scale": False, "has_offset": False, "nodes": ()},
               hidden_attrs=("nodes",),
               doc="LayerNorm ((x - mean) * rsqrt(var + epsilon)) or RMSNorm (x * "
                   "rsqrt(mean(x²) + epsilon)) over the last axes, times scale, plus "
                   "offset, in one kernel.",
               tf="— (onnxruntime LayerNormalization / SimplifiedLayerNormalization)"))


def decompose_layer_norm(node):
    """fused_layer_norm's value rebuilt from the ops it stands for."""
    graph = node.inputs[0].graph
    return _norm_steps(list(node.inputs), node.attrs,
                       lambda name, args, a: apply(name, args, a or None),
                       lambda value: constant(graph, value, "float32"))
