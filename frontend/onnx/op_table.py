"""The import table: one small rule per ONNX op type, written with fragflow's ops.

The types read as one fragflow op (Relu, Add, ...) come from the op records
(OpDef.onnx); the rest have rules here. A rule is rule(ctx, node, inputs, attrs) ->
output value(s), where inputs are numpy arrays (static: known at import), importer.Init
(initializers) or ff Tensors; ctx is the importer (ctx.tensor(x), ctx.static(x, what),
ctx.weight(...), ctx.error(...)).
Rules keep ONNX's semantics exactly: NCHW in, NCHW out. Convolutions and pools run
NHWC between two transposes; passes/layout_transposes.py removes those that cancel.
Where an ONNX op has no fragflow op, its rule composes existing ones (DepthToSpace,
Mish, ...; Gelu, HardSwish and the layer/instance normalizations through
frontend/ops_nn_extra.py): fusion makes most of them one kernel. The larger rules live
beside this table: resize.py, pool_taps.py, recurrent.py, grid_sample.py, spectral.py,
masked.py (a write at a computed mask's positions), sequences.py (sequences of tensors).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

import fragflow.frontend as F

from ...ir.ops.registry import all_ops
from .. import ops_nn_extra as NN  # gelu, hard_swish, layer/instance normalization
from . import grid_sample as GS, masked, pool_taps, recurrent, resize as R, sequences, spectral
from .importer import _DTYPES, Init, onnx_dtype_name

RULES: dict = {}
TO_NHWC, TO_NCHW = (0, 2, 3, 1), (0, 3, 1, 2)


def rule(*op_types):
    def decorator(fn):
        for t in op_types:
            if t in RULES:      # e.g. a record's onnx= naming a type a rule reads
                raise ValueError(f"two import rules for ONNX's {t}")
            RULES[t] = fn
        return fn
    return decorator


def _shape(ctx, x):
    if isinstance(x, (np.ndarray, Init)):
        return tuple((x.array if isinstance(x, Init) else x).shape)
    return tuple(x.shape)


def _rank(ctx, x):
    return len(_shape(ctx, x))


def _axis(axis, rank):
    return axis + rank if axis < 0 else axis


def _unsupported_attr(ctx, attrs, name, allowed):
    if name in attrs and attrs[name] not in allowed:
        raise ctx.error(f"attribute {name}={attrs[name]!r} is not supported "
                        f"(supported: {', '.join(repr(a) for a in allowed)})")


def _input_or_attr(ctx, inputs, index, attrs, name, what, default=None):
    """An operand that moved from an attribute to an input in a later opset (Reshape's
    shape, Slice's starts, Squeeze's axes, Clip's min, Pad's pads, Split's split)."""
    if len(inputs) > index and inputs[index] is not None:
        return ctx.ints(inputs[index], what)
    if name in attrs:
        value = attrs[name]
        return list(value) if isinstance(value, (list, tuple)) else value
    return default


# -- elementwise ------------------------------------------------------------------------
# The ONNX op types that op records name (OpDef.onnx) and read back as their op, by
# operand count: ONNX type -> the fragflow function of that op.
_READ_BACK = {opdef.onnx.op_type: opdef for opdef in all_ops().values()
              if opdef.onnx is not None and not opdef.onnx.imported_by and not opdef.attrs}
UNARY = {t: getattr(F, opdef.name) for t, opdef in _READ_BACK.items() if opdef.num_inputs == 1}
BINARY = {t: getattr(F, opdef.name) for t, opdef in _READ_BACK.items()
          if opdef.num_inputs == 2}


def _unary_rule(fn):
    return lambda ctx, node, x, a: fn(ctx.tensor(x[0]))


def legacy_broadcast(ctx, a, p, q):
    """Before opset 7 a binary op broadcast only with broadcast=1, the second operand's
    axes starting at `axis` of the first's (numpy's rule when axis is not given)."""
    if ctx.opset >= 7 or not a.get("broadcast", 0) or "axis" not in a:
        return q
    rank, axis = len(p.shape), _axis(int(a["axis"]), len(p.shape))
    return F.reshape(q, [1] * axis + [d if d is not None else -1 for d in q.shape]
                     + [1] * (rank - axis - len(q.shape)))


def _binary_rule(fn):
    def apply(ctx, node, x, a):
        p, q = ctx.tensor(x[0]), ctx.tensor(x[1])
        return fn(p, legacy_broadcast(ctx, a, p, q))
    return apply


for _t, _fn in UNARY.items():
    RULES[_t] = _unary_rule(_fn)
for _t, _fn in BINARY.items():
    RULES[_t] = _binary_rule(_fn)


@rule("Div")
def div(ctx, node, x, a):
    p, q = ctx.tensor(x[0]), ctx.tensor(x[1])
    q = legacy_broadcast(ctx, a, p, q)
    if p.dtype != "int32":
        return F.div(p, q)
    quotient = F.div(p, q)            # ONNX's integer division truncates toward zero
    return F.cast(F.sign(quotient) * F.floor(F.abs(quotient)), "int32")


@rule("Mod")
def mod(ctx, node, x, a):
    p, q = ctx.tensor(x[0]), ctx.tensor(x[1])
    if not a.get("fmod", 0):
        return F.mod(p, q)               # the divisor's sign, as Python (and ff.mod)
    ratio = F.div(p, q)                  # C's fmod: the dividend's sign
    trunc = F.sign(ratio) * F.floor(F.abs(ratio))
    result = F.cast(p, "float32") - F.cast(q, "float32") * trunc
    return F.cast(result, p.dtype) if p.dtype != "float32" else result


@rule("Xor")
def xor(ctx, node, x, a):
    return F.not_equal(ctx.tensor(x[0]), ctx.tensor(x[1]))


@rule("IsInf")
def is_inf(ctx, node, x, a):
    t = ctx.tensor(x[0])
    pos, neg = a.get("detect_positive", 1), a.get("detect_negative", 1)
    if pos and neg:
        return F.is_inf(t)
    if pos:
        return F.equal(t, np.float32(np.inf))
    if neg:
        return F.equal(t, np.float32(-np.inf))
    return F.logical_and(F.is_inf(t), F.is_nan(t))


@rule("Sum", "Mean", "Max", "Min")
def variadic(ctx, node, x, a):
    ts = [ctx.tensor(v) for v in x]
    pair = {"Sum": F.add, "Mean": F.add, "Max": F.maximum, "Min": F.minimum}[node.op_type]
    out = ts[0]
    for t in ts[1:]:
        out = pair(out, t)
    return out / float(len(ts)) if node.op_type == "Mean" and len(ts) > 1 else out


@rule("Where")
def where(ctx, node, x, a):
    return F.where(ctx.tensor(x[0]), ctx.tensor(x[1]), ctx.tensor(x[2]))


@rule("Cast")
def cast(ctx, node, x, a):
    a.get("saturate")                 # float8 only: nothing to saturate in fragflow's dtypes
    to = a["to"]
    if isinstance(to, str):           # opset 1: the type's name
        from onnx import TensorProto  # optional: onnx
        to = TensorProto.DataType.Value(to.upper())
    dtype = _DTYPES.get(to)
    if dtype is None:
        raise ctx.error(f"Cast to {onnx_dtype_name(a['to'])} is not supported (fragflow "
                        f"has float32, int32 and bool)")
    return F.cast(ctx.tensor(x[0]), dtype)


@rule("CastLike")
def cast_like(ctx, node, x, a):
    a.get("saturate")
    target = ctx.tensor(x[1]).dtype
    if ctx.is_static(x[0]):      # a constant cast like a tensor stays a constant (a pad
        return ctx.to_supported(np.asarray(x[0]).astype(target))   # value, a mask fill)
    return F.cast(ctx.tensor(x[0]), target)


@rule("CenterCropPad")
def center_crop_pad(ctx, node, x, a):
    """Pad each axis (zeros, the larger half after) to at least the target size, then
    crop the centred window (the larger part cut after), as ONNX's function does."""
    t = ctx.tensor(x[0])
    rank = len(t.shape)
    target = ctx.ints(x[1], "shape")
    axes = [_axis(int(v), rank) for v in a.get("axes", range(rank))]
    if len(axes) != len(target):
        raise ctx.error(f"shape has {len(target)} values for {len(axes)} axes")
    if any(t.shape[k] is None for k in axes):
        raise ctx.error("CenterCropPad needs static sizes on its axes")
    pads, begin, size = [[0, 0] for _ in range(rank)], [0] * rank, [-1] * rank
    for k, want in zip(axes, target):
        grow = max(want - t.shape[k], 0)
        pads[k] = [grow // 2, grow - grow // 2]
        begin[k], size[k] = (t.shape[k] + grow - want) // 2, want
    if any(p != [0, 0] for p in pads):
        t = F.pad(t, pads)
    return F.slice(t, begin, size)


@rule("HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix")
def window(ctx, node, x, a):
    """Windows and mel matrices of sizes known at import time: evaluated there (by
    onnx's reference, which folds any node whose inputs are all static) to a constant."""
    for k, v in enumerate(x):
        ctx.static(v, f"input {k}")
    raise ctx.error("the value could not be evaluated at import time")


@rule("RNN", "GRU", "LSTM")
def rnn(ctx, node, x, a):
    """Unrolled over the static sequence length (recurrent.py)."""
    return recurrent.recurrent(ctx, node, x, a, node.op_type)


@rule("GridSample")
def grid_sample(ctx, node, x, a):
    """Gathers at the grid's positions, weighted (grid_sample.py)."""
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(a.get("mode", "linear"),
                                                          a.get("mode", "linear"))
    if ctx.opset < 20 and "mode" not in a:
        mode = "linear"                        # opset 16's default, "bilinear"
    padding = a.get("padding_mode", "zeros")
    if mode not in ("nearest", "linear", "cubic") or \
            padding not in ("zeros", "border", "reflection"):
        raise ctx.error(f"GridSample mode {mode!r} with padding_mode {padding!r} is not "
                        f"supported")
    t, grid = ctx.tensor(x[0]), ctx.tensor(x[1])
    if mode == "cubic" and len(t.shape) != 4:
        raise ctx.error("GridSample cubic of a non-4-D input is not supported")
    return GS.grid_sample(ctx, t, grid, mode, padding, bool(a.get("align_corners", 0)))


@rule("DFT")
def dft(ctx, node, x, a):
    """Matmuls with constant cosine and sine matrices (spectral.py)."""
    t = ctx.tensor(x[0])
    length = None
    if len(x) > 1 and x[1] is not None and np.asarray(ctx.static(x[1], "dft_length")).size:
        length = ctx.ints(x[1], "dft_length")[0]
    if ctx.opset >= 20:
        axis = ctx.ints(x[2], "axis")[0] if len(x) > 2 and x[2] is not None else -2
    else:
        axis = int(a.get("axis", 1))
    return spectral.dft(ctx, t, axis, length, bool(a.get("inverse", 0)),
                        bool(a.get("onesided", 0)))


@rule("SwiGLU")
def swiglu(ctx, node, x, a):
    """a * sigmoid(alpha * a) * b."""
    t, b = ctx.tensor(x[0]), ctx.tensor(x[1])
    return t * F.sigmoid(t * float(a.get("alpha", 1.0))) * b


@rule("ReverseSequence")
def reverse_sequence(ctx, node, x, a):
    """Each batch entry's first sequence_lens[b] time steps reversed: one gather of the
    (batch * time, ...) rows at a constant map (the lengths known at import)."""
    t = ctx.tensor(x[0])
    lens = ctx.ints(x[1], "sequence_lens")
    rank = len(t.shape)
    batch_axis, time_axis = int(a.get("batch_axis", 1)), int(a.get("time_axis", 0))
    nb, nt = t.shape[batch_axis], t.shape[time_axis]
    if nb is None or nt is None or any(d is None for d in t.shape[2:]):
        raise ctx.error("ReverseSequence needs static sizes")
    perm = [batch_axis, time_axis] + [d for d in range(rank) if d not in (batch_axis,
                                                                         time_axis)]
    rest = [t.shape[d] for d in perm[2:]]
    rows = F.reshape(F.transpose(t, perm), [nb * nt] + rest)
    source = np.array([b * nt + (n - 1 - k if k < n else k)
                       for b, n in enumerate(lens) for k in range(nt)], np.int32)
    y = F.reshape(F.gather(rows, F.constant(source)), [nb, nt] + rest)
    return F.transpose(y, list(np.argsort(perm)))


@rule("RotaryEmbedding")
def rotary_embedding(ctx, node, x, a):
    """The rotation of (x1, x2) halves (or even/odd pairs when interleaved) of the first
    rotary_embedding_dim features of each head by the cached cos and sin at each
    position (gathered by position_ids when given), as onnx's reference."""
    t = ctx.tensor(x[0])
    cos, sin = ctx.tensor(x[1]), ctx.tensor(x[2])
    if len(x) > 3 and x[3] is not None:
        ids = ctx.tensor(x[3])
        cos, sin = F.gather(cos, ids), F.gather(sin, ids)        # (batch, seq, dim / 2)
    interleaved = bool(a.get("interleaved", 0))
    heads = int(a.get("num_heads", 0))
    shape = list(t.shape)
    if any(d is None for d in shape):
        raise ctx.error("RotaryEmbedding needs static sizes")
    if len(shape) == 4:                                   # (batch, heads, seq, head)
        h = F.transpose(t, (0, 2, 1, 3))
    else:                                                 # (batch, seq, heads * head)
        if not heads:
            raise ctx.error("RotaryEmbedding of a 3-D input needs num_heads")
        h = F.reshape(t, [shape[0], shape[1], heads, shape[2] // heads])
    head = h.shape[3]
    dim = int(a.get("rotary_embedding_dim", 0)) or head
    half = dim // 2
    cos, sin = F.expand_dims(cos, 2), F.expand_dims(sin, 2)       # (batch, seq, 1, half)
    rotate = F.slice(h, [0, 0, 0, 0], [-1, -1, -1, dim])
    if interleaved:
        pairs = F.reshape(rotate, list(rotate.shape[:3]) + [half, 2])
        x1 = F.reshape(F.slice(pairs, [0, 0, 0, 0, 0], [-1, -1, -1, -1, 1]),
                       list(rotate.shape[:3]) + [half])
        x2 = F.reshape(F.slice(pairs, [0, 0, 0, 0, 1], [-1, -1, -1, -1, 1]),
                       list(rotate.shape[:3]) + [half])
    else:
        x1 = F.slice(rotate, [0, 0, 0, 0], [-1, -1, -1, half])
        x2 = F.slice(rotate, [0, 0, 0, half], [-1, -1, -1, half])
    real, imag = cos * x1 - sin * x2, sin * x1 + cos * x2
    if interleaved:
        rotated = F.reshape(F.stack([real, imag], axis=-1), list(rotate.shape))
    else:
        rotated = F.concat([real, imag], axis=-1)
    if dim < head:
        rotated = F.concat([rotated, F.slice(h, [0, 0, 0, dim], [-1, -1, -1, -1])], axis=-1)
    if len(shape) == 4:
        return F.transpose(rotated, (0, 2, 1, 3))
    return F.reshape(rotated, shape)


@rule("Col2Im")
def col2im(ctx, node, x, a):
    """Sliding blocks (N, C * prod(block), L) summed back into (N, C, *image): for each
    position in the block, a gather of its column at a constant map of the image's
    pixels (masked where no block covers the pixel there), and the sum."""
    t = ctx.tensor(x[0])
    image = ctx.ints(x[1], "image_shape")
    block = ctx.ints(x[2], "block_shape")
    dims = len(image)
    strides = list(a.get("strides", [1] * dims))
    dilations = list(a.get("dilations", [1] * dims))
    pads = list(a.get("pads", [0] * 2 * dims))
    n, ck, length = t.shape
    k = int(np.prod(block))
    if ck is None or ck % k:
        raise ctx.error(f"input's {ck} channels are not a multiple of the block's {k}")
    counts = [(image[d] + pads[d] + pads[d + dims] - dilations[d] * (block[d] - 1) - 1)
              // strides[d] + 1 for d in range(dims)]
    if int(np.prod(counts)) != length:
        raise ctx.error(f"{length} blocks given, the sizes make {counts}")
    c = ck // k
    if any(v < 1 for v in image) or any(v < 1 for v in block):
        raise ctx.error(f"Col2Im of image_shape {image} and block_shape {block}")
    ctx.check_elements(image + [dims], "the pixel map")
    ctx.check_elements([k], "the block")
    cols = F.reshape(t, [-1, c, k, length])
    pixels = np.stack(np.meshgrid(*[np.arange(v) for v in image], indexing="ij"),
                      -1).reshape(-1, dims)                            # (prod(image), d)
    total = None
    for flat, offset in enumerate(itertools.product(*[range(b) for b in block])):
        start = pixels + np.array(pads[:dims]) - np.array(offset) * np.array(dilations)
        index = start // np.array(strides)
        ok = np.all((start % np.array(strides) == 0) & (index >= 0) &
                    (index < np.array(counts)), axis=1)
        if not ok.any():
            continue
        linear = np.ravel_multi_index(tuple(np.clip(index, 0, np.array(counts) - 1).T),
                                      counts).astype(np.int32)
        column = F.reshape(F.slice(cols, [0, 0, flat, 0], [-1, -1, 1, -1]), [-1, c, length])
        picked = F.gather(column, F.constant(linear), axis=2)
        if not ok.all():
            picked = F.where(F.constant(ok.reshape(1, 1, -1)), picked, F.zeros_like(picked))
        total = picked if total is None else total + picked
    if total is None:
        raise ctx.error("no block covers any pixel")
    return F.reshape(total, [-1, c] + list(image))


@rule("AffineGrid")
def affine_grid(ctx, node, x, a):
    """theta (N, 2, 3) or (N, 3, 4) applied to the base grid of the static size:
    one batched matmul, (N, H*W, 3) x (N, 3, 2) -> (N, H, W, 2)."""
    theta = ctx.tensor(x[0])
    size = ctx.ints(x[1], "size")
    align = bool(a.get("align_corners", 0))
    spatial = size[2:]
    if len(spatial) not in (2, 3):
        raise ctx.error(f"AffineGrid of {len(spatial)} spatial axes (2 or 3 are supported)")
    if any(n < 1 for n in spatial):
        raise ctx.error(f"AffineGrid of size {size}")
    ctx.check_elements(spatial + [len(spatial) + 1], "the base grid")

    def axis_coords(n):
        if align:
            return np.linspace(-1.0, 1.0, n)
        return (2.0 * np.arange(n) + 1.0) / n - 1.0
    # the base grid, x varying fastest: (W, H[, D]) coordinates and a 1 per position
    mesh = np.meshgrid(*[axis_coords(n) for n in spatial], indexing="ij")
    base = np.stack([m.reshape(-1) for m in reversed(mesh)] +
                    [np.ones(int(np.prod(spatial)))], axis=1).astype(np.float32)
    grid = F.matmul(F.constant(base), theta, transpose_b=True)
    return F.reshape(grid, [-1] + list(spatial) + [len(spatial)])


@rule("Compress")
def compress(ctx, node, x, a):
    """The slices where the condition (known at import) is true, along axis (or of the
    flattened input)."""
    t = ctx.tensor(x[0])
    keep = np.flatnonzero(np.asarray(ctx.static(x[1], "condition")).reshape(-1) != 0)
    if "axis" in a:
        return F.gather(t, F.constant(keep.astype(np.int32)),
                        axis=_axis(int(a["axis"]), len(t.shape)))
    return F.gather(F.reshape(t, [-1]), F.constant(keep.astype(np.int32)))


@rule("CumProd")
def cumprod(ctx, node, x, a):
    t = ctx.tensor(x[0])
    axis = _axis(int(np.asarray(ctx.static(x[1], "axis")).reshape(-1)[0]), len(t.shape))
    return F.cumprod(t, axis=axis, exclusive=bool(a.get("exclusive", 0)),
                     reverse=bool(a.get("reverse", 0)))


@rule("Clip")
def clip(ctx, node, x, a):
    t = ctx.tensor(x[0])
    if ctx.opset < 11:
        low, high = a.get("min", -np.inf), a.get("max", np.inf)
    else:
        low = x[1] if len(x) > 1 and x[1] is not None else -np.inf
        high = x[2] if len(x) > 2 and x[2] is not None else np.inf
    if not isinstance(low, F.Tensor) and not isinstance(high, F.Tensor):
        low = float(np.asarray(ctx.static(low if isinstance(low, Init) else np.asarray(low),
                                          "min")).reshape(()))
        high = float(np.asarray(ctx.static(high if isinstance(high, Init) else
                                           np.asarray(high), "max")).reshape(()))
        if low == 0.0 and high == 6.0:
            return F.relu6(t)
        if low > high:                           # ONNX: every value is max then
            return F.minimum(F.maximum(t, low), high)
        if np.isinf(low) and np.isinf(high):
            return F.identity(t)
        if np.isinf(low):
            return F.minimum(t, np.float32(high))
        if np.isinf(high):
            return F.maximum(t, np.float32(low))
        if t.dtype == "int32":
            low, high = int(low), int(high)
    low = ctx.tensor(low) if isinstance(low, (Init, F.Tensor)) else low
    high = ctx.tensor(high) if isinstance(high, (Init, F.Tensor)) else high
    if isinstance(low, F.Tensor) or isinstance(high, F.Tensor):
        return F.minimum(F.maximum(t, low), high)     # ONNX's order when min > max
    return F.clip_by_value(t, low, high)


# -- activations (compositions where fragflow has no op) ------------------------------
@rule("LeakyRelu")
def leaky_relu(ctx, node, x, a):
    return F.leaky_relu(ctx.tensor(x[0]), alpha=float(a.get("alpha", 0.01)))


@rule("PRelu")
def prelu(ctx, node, x, a):
    t, slope = ctx.tensor(x[0]), ctx.tensor(x[1])
    if len(slope.shape) == 1 and len(t.shape) > 2 and slope.shape[0] == t.shape[1] \
            and slope.shape[0] != t.shape[-1]:
        # a per-channel slope as old exporters wrote it: (C,) for an NC... input
        slope = F.reshape(slope, [-1] + [1] * (len(t.shape) - 2))
    return F.where(F.less(t, 0.0), t * slope, t)


@rule("Elu")
def elu(ctx, node, x, a):
    t, alpha = ctx.tensor(x[0]), float(a.get("alpha", 1.0))
    return F.elu(t) if alpha == 1.0 else F.where(F.greater(t, 0.0), t, alpha * F.expm1(t))


@rule("Selu")
def selu(ctx, node, x, a):
    t = ctx.tensor(x[0])
    alpha, gamma = float(a.get("alpha", 1.67326319217681884765625)), \
        float(a.get("gamma", 1.05070102214813232421875))
    return gamma * F.where(F.greater(t, 0.0), t, alpha * F.expm1(t))


@rule("Celu")
def celu(ctx, node, x, a):
    t, alpha = ctx.tensor(x[0]), float(a.get("alpha", 1.0))
    return F.maximum(t, 0.0) + F.minimum(alpha * F.expm1(t / alpha), 0.0)


@rule("ThresholdedRelu")
def thresholded_relu(ctx, node, x, a):
    t = ctx.tensor(x[0])
    return F.where(F.greater(t, float(a.get("alpha", 1.0))), t, F.zeros_like(t))


@rule("HardSigmoid")
def hard_sigmoid(ctx, node, x, a):
    t = ctx.tensor(x[0])
    return F.clip_by_value(float(a.get("alpha", 0.2)) * t + float(a.get("beta", 0.5)),
                           0.0, 1.0)


@rule("HardSwish")
def hard_swish(ctx, node, x, a):
    return NN.hard_swish(ctx.tensor(x[0]))


@rule("Softsign")
def softsign(ctx, node, x, a):
    t = ctx.tensor(x[0])
    return t / (F.abs(t) + 1.0)


@rule("Mish")
def mish(ctx, node, x, a):
    t = ctx.tensor(x[0])
    return t * F.tanh(F.softplus(t))


@rule("Gelu")
def gelu(ctx, node, x, a):
    _unsupported_attr(ctx, a, "approximate", ("none", "tanh"))
    return NN.gelu(ctx.tensor(x[0]), approximate=a.get("approximate", "none") == "tanh")


@rule("Dropout")
def dropout(ctx, node, x, a):
    # inference: the identity (training_mode, an input since opset 12, must be false)
    a.get("ratio"), a.get("seed")
    if len(x) > 2 and x[2] is not None and bool(np.asarray(ctx.static(x[2], "training_mode"))):
        ratio = x[1] if len(x) > 1 and x[1] is not None else np.float32(0.5)
        if float(np.asarray(ctx.static(ratio, "ratio (training_mode=true)"))) != 0.0:
            raise ctx.error("Dropout with training_mode=true is not supported (its random "
                            "mask; ratio 0 is the identity)")
    t = ctx.tensor(x[0])
    if len(node.output) > 1 and node.output[1]:
        return [F.identity(t), F.fill(list(t.shape), True, "bool")]
    return F.identity(t)


# -- matrices ---------------------------------------------------------------------------
@rule("MatMul")
def matmul(ctx, node, x, a):
    p, q = ctx.tensor(x[0]), ctx.tensor(x[1])
    squeeze = []
    if len(p.shape) == 1:
        p, squeeze = F.expand_dims(p, 0), squeeze + [-2]
    if len(q.shape) == 1:
        q, squeeze = F.expand_dims(q, 1), squeeze + [-1]
    out = F.matmul(p, q)
    for axis in sorted(squeeze):
        out = F.squeeze(out, axis=axis if axis == -1 else len(out.shape) + axis)
    return out


@rule("Gemm")
def gemm(ctx, node, x, a):
    p, q = ctx.tensor(x[0]), ctx.tensor(x[1])
    out = F.matmul(p, q, transpose_a=bool(a.get("transA", 0)),
                   transpose_b=bool(a.get("transB", 0)))
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    a.get("broadcast")                # opset < 7: C broadcasts either way
    if alpha != 1.0:
        out = out * alpha
    if len(x) > 2 and x[2] is not None and beta != 0.0:
        c = ctx.tensor(x[2])
        out = out + (c if beta == 1.0 else c * beta)
    return out


# -- convolutions and pools (NHWC between transposes) ------------------------------------
def _spatial_padding(ctx, a, in_sizes, kernel, strides, dilations):
    """ONNX's pads/auto_pad as fragflow's padding ("VALID", "SAME" or pairs)."""
    auto = a.get("auto_pad", "NOTSET")
    d = len(kernel)
    if auto == "VALID":
        return "VALID"
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        if auto == "SAME_UPPER":
            return "SAME"
        pairs = []
        for n, k, s, r in zip(in_sizes, kernel, strides, dilations):
            if n is None:
                raise ctx.error("auto_pad SAME_LOWER needs static spatial sizes")
            total = max((math.ceil(n / s) - 1) * s + (k - 1) * r + 1 - n, 0)
            pairs.append((total - total // 2, total // 2))
        return pairs
    pads = list(a.get("pads", [0] * (2 * d)))
    pairs = [(pads[i], pads[i + d]) for i in range(d)]
    return "VALID" if not any(sum(p) for p in pairs) else pairs


def _conv_attrs(ctx, a, kernel):
    d = len(kernel)
    strides = tuple(a.get("strides", [1] * d))
    dilations = tuple(a.get("dilations", [1] * d))
    return strides, dilations


@rule("Conv")
def conv(ctx, node, x, a):
    X, W = x[0], x[1]
    B = x[2] if len(x) > 2 else None
    w_shape = _shape(ctx, W)
    rank = _rank(ctx, X)
    if rank == 5:
        return _conv3d(ctx, X, W, B, a, w_shape)
    if rank not in (3, 4):
        raise ctx.error(f"Conv of rank {rank} input: fragflow imports 1-D, 2-D and 3-D "
                        f"convolutions")
    one_d = rank == 3
    t = ctx.tensor(X)
    if one_d:                                     # NCW as NCHW with H = 1
        t = F.expand_dims(t, 2)
        w_shape = (w_shape[0], w_shape[1], 1, w_shape[2])
        for key in ("kernel_shape", "strides", "dilations"):
            if key in a:
                a[key] = [1] + list(a[key])
        if "pads" in a:
            a["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
    expand = (lambda w: w[:, :, None, :]) if one_d else (lambda w: w)
    kernel = tuple(w_shape[2:])
    if "kernel_shape" in a and tuple(a["kernel_shape"]) != kernel:
        raise ctx.error(f"kernel_shape {list(a['kernel_shape'])} differs from the weight's "
                        f"{list(kernel)}")
    strides, dilations = _conv_attrs(ctx, a, kernel)
    channels = t.shape[1]
    group = int(a.get("group", 1))
    padding = _spatial_padding(ctx, a, t.shape[2:], kernel, strides, dilations)
    xt = F.transpose(t, TO_NHWC)
    out_channels = w_shape[0]
    subsample = None
    if any(s > 1 for s in strides) and any(r > 1 for r in dilations) and \
            padding != "SAME":
        # fragflow (as TensorFlow) takes strides or dilations: stride 1, then every s-th
        subsample, strides = strides, (1,) * len(strides)
    if group == 1:
        w = ctx.weight(W, "hwio", lambda w: expand(w).transpose(2, 3, 1, 0))
        if w is None:
            w = F.transpose(ctx.tensor(W), (2, 3, 1, 0)) if not one_d else \
                F.transpose(F.expand_dims(ctx.tensor(W), 2), (2, 3, 1, 0))
        y = F.conv2d(xt, w, strides=strides, padding=padding, dilations=dilations)
    elif group == channels and w_shape[1] == 1:
        m = out_channels // group
        w = ctx.weight(W, "hwcm", lambda w: expand(w).reshape(
            group, m, *kernel).transpose(2, 3, 0, 1))
        if w is None:                            # a weight the graph computes
            w = F.transpose(F.reshape(ctx.tensor(W), [group, m, *kernel]), (2, 3, 0, 1))
        y = F.depthwise_conv2d(xt, w, strides=strides, padding=padding,
                               dilations=dilations)
    else:
        if channels is None or channels % group or out_channels % group:
            raise ctx.error(f"group={group} does not divide the channels")
        ci, co = channels // group, out_channels // group
        parts = []
        for g in range(group):
            w = ctx.weight(W, f"hwio_g{g}", lambda w, g=g: expand(w)[g * co:(g + 1) * co]
                           .transpose(2, 3, 1, 0))
            if w is None:                        # a weight the graph computes
                w = F.reshape(ctx.tensor(W)[g * co:(g + 1) * co], [co, ci, *kernel])
                w = F.transpose(w, (2, 3, 1, 0))
            parts.append(F.conv2d(xt[:, :, :, g * ci:(g + 1) * ci], w, strides=strides,
                                  padding=padding, dilations=dilations))
        y = F.concat(parts, axis=3)
    if subsample is not None:
        y = y[:, ::subsample[0], ::subsample[1], :]
    if B is not None:
        y = y + ctx.tensor(B)                    # NHWC: the bias is on the last axis
    y = F.transpose(y, TO_NCHW)
    return F.squeeze(y, axis=2) if one_d else y


TO_NDHWC, TO_NCDHW = (0, 2, 3, 4, 1), (0, 4, 1, 2, 3)


def _conv3d(ctx, X, W, B, a, w_shape):
    """A 3-D Conv (group 1) as fragflow's NDHWC conv3d with a DHWIO weight."""
    if int(a.get("group", 1)) != 1:
        raise ctx.error("3-D Conv with groups is not supported")
    kernel = tuple(w_shape[2:])
    if "kernel_shape" in a and tuple(a["kernel_shape"]) != kernel:
        raise ctx.error("kernel_shape differs from the weight's")
    strides, dilations = _conv_attrs(ctx, a, kernel)
    t = ctx.tensor(X)
    padding = _spatial_padding(ctx, a, t.shape[2:], kernel, strides, dilations)
    subsample = None
    if any(s > 1 for s in strides) and any(r > 1 for r in dilations) and \
            padding != "SAME":               # stride 1, then every s-th (see conv)
        subsample, strides = strides, (1, 1, 1)
    w = ctx.weight(W, "dhwio", lambda w: w.transpose(2, 3, 4, 1, 0))
    if w is None:
        w = F.transpose(ctx.tensor(W), (2, 3, 4, 1, 0))
    y = F.conv3d(F.transpose(t, TO_NDHWC), w, strides=strides, padding=padding,
                 dilations=dilations)
    if subsample is not None:
        y = y[:, ::subsample[0], ::subsample[1], ::subsample[2], :]
    if B is not None:
        y = y + ctx.tensor(B)
    return F.transpose(y, TO_NCDHW)


def _pool_padding(ctx, a, in_sizes, kernel, strides):
    padding = _spatial_padding(ctx, a, in_sizes, kernel, strides, (1,) * len(kernel))
    if not a.get("ceil_mode", 0):
        return padding
    if isinstance(padding, str):
        if padding == "SAME":
            return padding           # SAME's sizes are already rounded up
        padding = [(0, 0)] * len(kernel)
    pairs = []
    for n, k, s, (b, e) in zip(in_sizes, kernel, strides, padding):
        if n is None:
            raise ctx.error("ceil_mode=1 needs static spatial sizes")
        out = math.ceil((n + b + e - k) / s) + 1
        if (out - 1) * s >= n + b:               # a last window of padding alone: dropped
            out -= 1
        pairs.append((b, e + max((out - 1) * s + k - (n + b + e), 0)))
    return pairs


@rule("MaxPool", "AveragePool")
def pool(ctx, node, x, a):
    if len(node.output) > 1 and node.output[1]:
        raise ctx.error("MaxPool's Indices output is not supported")
    t = ctx.tensor(x[0])
    one_d = len(t.shape) == 3
    if len(t.shape) not in (3, 4, 5):
        raise ctx.error(f"{node.op_type} of a rank {len(t.shape)} input: fragflow imports "
                        f"1-D, 2-D and 3-D pools (NCW, NCHW, NCDHW)")
    kernel = tuple(a["kernel_shape"])
    strides = tuple(a.get("strides", [1] * len(kernel)))
    if any(r != 1 for r in a.get("dilations", [1] * len(kernel))):
        return _dilated(ctx, t, a, "max" if node.op_type == "MaxPool" else "avg", kernel,
                        strides)
    if one_d:                                    # NCW as NCHW with H = 1
        t = F.expand_dims(t, 2)
        kernel, strides = (1,) + kernel, (1,) + strides
        for key in ("dilations",):
            if key in a:
                a[key] = [1] + list(a[key])
        if "pads" in a:
            a["pads"] = [0, a["pads"][0], 0, a["pads"][1]]
    if any(r != 1 for r in a.get("dilations", [1] * len(kernel))):
        raise ctx.error("pool dilations other than 1 are not supported")
    padding = _pool_padding(ctx, a, t.shape[2:], kernel, strides)
    three_d = len(t.shape) == 5
    xt = F.transpose(t, TO_NDHWC if three_d else TO_NHWC)
    if node.op_type == "AveragePool" and a.get("count_include_pad", 0) and \
            not isinstance(padding, str):
        # padding counted in the mean: pad with zeros first, then pool without padding
        xt = F.pad(xt, [(0, 0)] + [tuple(p) for p in padding] + [(0, 0)])
        padding = "VALID"
    if not isinstance(padding, str) and any(b >= k or e >= k for (b, e), k in
                                            zip(padding, kernel)):
        raise ctx.error(f"pads {list(padding)} as large as the window {list(kernel)}")
    if three_d:
        fn = F.max_pool3d if node.op_type == "MaxPool" else F.avg_pool3d
        return F.transpose(fn(xt, ksize=kernel, strides=strides, padding=padding), TO_NCDHW)
    fn = F.max_pool if node.op_type == "MaxPool" else F.avg_pool
    y = F.transpose(fn(xt, ksize=kernel, strides=strides, padding=padding), TO_NCHW)
    return F.squeeze(y, axis=2) if one_d else y


def _dilated(ctx, t, a, kind, kernel, strides, p=None):
    """A pool with dilations: pool_taps.py's gathers and elementwise max or sum."""
    spatial = t.shape[2:]
    if any(n is None for n in spatial):
        raise ctx.error("a pool with dilations needs static spatial sizes")
    dilations = tuple(a["dilations"])
    ctx.check_elements(list(kernel), "the pool's taps")
    pads = a.get("pads", [0] * 2 * len(kernel))
    pairs = list(zip(pads[:len(kernel)], pads[len(kernel):]))
    auto_pad = a.get("auto_pad", "NOTSET")
    if auto_pad != "NOTSET":
        # onnx's reference sizes these by the undilated kernel, onnxruntime by the
        # dilated one: no answer to follow
        raise ctx.error(f"a pool with dilations and auto_pad={auto_pad!r} is not "
                        f"supported (give explicit pads)")
    return pool_taps.dilated_pool(t, kind, kernel, strides, dilations, pairs,
                                  bool(a.get("ceil_mode", 0)),
                                  bool(a.get("count_include_pad", 0)), p)


@rule("GlobalAveragePool", "GlobalMaxPool")
def global_pool(ctx, node, x, a):
    t = ctx.tensor(x[0])
    axes = tuple(range(2, len(t.shape)))
    fn = F.reduce_mean if node.op_type == "GlobalAveragePool" else F.reduce_max
    return fn(t, axis=axes, keepdims=True)


def _per_channel(v, rank):
    """A (C,) vector shaped to broadcast over NC... ((C, 1, 1) for rank 4)."""
    return F.reshape(v, [-1] + [1] * (rank - 2))


@rule("BatchNormalization")
def batch_norm(ctx, node, x, a):
    if not a.get("spatial", 1):
        raise ctx.error("BatchNormalization with spatial=0 is not supported")
    if a.get("training_mode", 0) or len([o for o in node.output if o]) > 1:
        return _batch_norm_training(ctx, node, x, a)
    t = ctx.tensor(x[0])
    eps = float(a.get("epsilon", 1e-5))
    rank = len(t.shape)
    if not all(isinstance(v, (np.ndarray, Init)) for v in x[3:5]):
        # a running mean or variance the graph computes: torch's export, which keeps one
        # copy of equal initializers, gives a fresh model's zero running mean as an
        # Identity of a zero bias (a Variable when trainable). The same formula on tensors.
        scale = ctx.tensor(x[1]) * F.rsqrt(ctx.tensor(x[4]) + eps)
        shift = ctx.tensor(x[2]) - ctx.tensor(x[3]) * scale
        return t * _per_channel(scale, rank) + _per_channel(shift, rank)
    mean = np.asarray(ctx.static(x[3], "mean"), np.float32)
    var = np.asarray(ctx.static(x[4], "var"), np.float32)
    inv_std = (1.0 / np.sqrt(var + np.float32(eps))).astype(np.float32)
    if isinstance(x[1], np.ndarray) and isinstance(x[2], np.ndarray):
        scale = (x[1] * inv_std).astype(np.float32)
        shift = (x[2] - mean * scale).astype(np.float32)
        scale_t, shift_t = F.constant(scale.reshape([-1] + [1] * (rank - 2))), \
            F.constant(shift.reshape([-1] + [1] * (rank - 2)))
        return t * scale_t + shift_t
    # trainable gamma and beta: scale = gamma / sqrt(var + eps), shift = beta - mean * scale
    gamma, beta = ctx.tensor(x[1]), ctx.tensor(x[2])
    scale = gamma * F.constant(inv_std)
    shift = beta - F.constant(mean) * scale
    return t * _per_channel(scale, rank) + _per_channel(shift, rank)


def _batch_norm_training(ctx, node, x, a):
    """training_mode=1 (opset 14+): normalized by the batch's mean and (biased)
    variance; the outputs after Y are the running mean and variance updated with
    momentum."""
    if ctx.opset < 14:
        raise ctx.error("BatchNormalization in training mode before opset 14 is not "
                        "supported (import runs batch norm with its running statistics)")
    t = ctx.tensor(x[0])
    rank = len(t.shape)
    axes = (0,) + tuple(range(2, rank))
    eps, momentum = float(a.get("epsilon", 1e-5)), float(a.get("momentum", 0.9))
    mean = F.reduce_mean(t, axis=axes)
    var = F.reduce_mean(F.square(t - _per_channel(mean, rank)), axis=axes)
    scale = ctx.tensor(x[1]) * F.rsqrt(var + eps)
    y = (t - _per_channel(mean, rank)) * _per_channel(scale, rank) + \
        _per_channel(ctx.tensor(x[2]), rank)
    running_mean = ctx.tensor(x[3]) * momentum + mean * (1.0 - momentum)
    running_var = ctx.tensor(x[4]) * momentum + var * (1.0 - momentum)
    return [y, running_mean, running_var]


@rule("MeanVarianceNormalization")
def mean_variance_norm(ctx, node, x, a):
    """(x - mean) / (sqrt(var) + 1e-9) over axes (default N, H, W), as ONNX's function."""
    t = ctx.tensor(x[0])
    axes = tuple(_axis(int(v), len(t.shape)) for v in a.get("axes", [0, 2, 3]))
    mean = F.reduce_mean(t, axis=axes, keepdims=True)
    centred = t - mean
    return centred / (F.sqrt(F.reduce_mean(F.square(centred), axis=axes, keepdims=True))
                      + 1e-9)


@rule("InstanceNormalization")
def instance_norm(ctx, node, x, a):
    t = ctx.tensor(x[0])
    if len(t.shape) < 3:
        raise ctx.error(f"InstanceNormalization of a rank-{len(t.shape)} input (needs N, C "
                        f"and spatial axes)")
    return NN.instance_normalization(t, ctx.tensor(x[1]), ctx.tensor(x[2]),
                                     epsilon=float(a.get("epsilon", 1e-5)),
                                     data_format="NCHW")


@rule("LayerNormalization")
def layer_norm(ctx, node, x, a):
    a.get("stash_type")              # the statistics' precision: fragflow's is float32
    t = ctx.tensor(x[0])
    rank = len(t.shape)
    axes = tuple(range(_axis(int(a.get("axis", -1)), rank), rank))
    offset = ctx.tensor(x[2]) if len(x) > 2 and x[2] is not None else None
    # Mean and InvStdDev are the optional outputs
    return list(NN.layer_normalization(t, ctx.tensor(x[1]), offset, axis=axes,
                                       epsilon=float(a.get("epsilon", 1e-5)),
                                       return_statistics=True))


@rule("LRN")
def lrn(ctx, node, x, a):
    size = int(a["size"])
    if size % 2 == 0:
        raise ctx.error("LRN with an even size is not supported")
    t = F.transpose(ctx.tensor(x[0]), TO_NHWC)
    y = F.local_response_normalization(t, depth_radius=(size - 1) // 2,
                                       bias=float(a.get("bias", 1.0)),
                                       alpha=float(a.get("alpha", 1e-4)) / size,
                                       beta=float(a.get("beta", 0.75)))
    return F.transpose(y, TO_NCHW)


@rule("Resize", "Upsample")
def resize(ctx, node, x, a):
    """The dedicated NHWC kernels (resize_nearest_neighbor, resize_bilinear) where they
    compute exactly ONNX's result: 4-D, spatial axes only, whole-number sizes, the
    modes they have. Everything else: resize.py's gathers and weighted sums."""
    t = ctx.tensor(x[0])
    mode = a.get("mode", "nearest")
    if node.op_type == "Upsample" or ctx.opset < 11:
        scales = a.get("scales") if ctx.opset < 9 else ctx.static(x[1], "scales")
        scales = [float(s) for s in np.asarray(scales).reshape(-1)]
        sizes, roi, axes, coord, nearest = None, None, None, "asymmetric", "floor"
        mode = "linear" if mode in ("linear", "bilinear") else mode
    else:
        scales = x[2] if len(x) > 2 and x[2] is not None else None
        sizes = x[3] if len(x) > 3 and x[3] is not None else None
        scales = None if scales is None or ctx.static(scales, "scales").size == 0 \
            else [float(s) for s in np.asarray(ctx.static(scales, "scales")).reshape(-1)]
        sizes = None if sizes is None else ctx.ints(sizes, "sizes")
        roi = ctx.static(x[1], "roi") if len(x) > 1 and x[1] is not None else None
        axes = a.get("axes")
        coord = a.get("coordinate_transformation_mode", "half_pixel")
        nearest = a.get("nearest_mode", "round_prefer_floor")
    if mode not in ("nearest", "linear", "cubic"):
        raise ctx.error(f"Resize mode {mode!r} is not supported (nearest, linear and cubic "
                        f"are)")
    if scales is None and sizes is None:
        raise ctx.error("Resize needs scales or sizes")
    shape = tuple(t.shape)
    if any(d is None for d in shape):
        raise ctx.error(f"Resize needs a static input shape, got {list(shape)} (give it "
                        f"with input_shapes=)")
    policy = a.get("keep_aspect_ratio_policy", "stretch")
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise ctx.error(f"keep_aspect_ratio_policy {policy!r} is not supported")
    plan = R.plan_axes(shape, scales=scales, sizes=sizes, axes=axes, roi=roi,
                       keep_aspect_ratio_policy=policy)
    out_shape = list(shape)
    for axis, n_in, n_out, *_ in plan:
        if n_out < 0:
            raise ctx.error(f"Resize to a negative size {n_out} along axis {axis}")
        out_shape[axis] = n_out
        ctx.check_elements([n_in, n_out], f"the weights of axis {axis}")
    ctx.check_elements(out_shape, "the output")            # before the taps are computed
    extrapolation = float(a.get("extrapolation_value", 0.0))
    cubic_a = float(a.get("cubic_coeff_a", -0.75))
    antialias = bool(a.get("antialias", 0)) and mode != "nearest"
    exclude = bool(a.get("exclude_outside", 0))
    if not plan:
        return F.identity(t)
    if coord == "tf_crop_and_resize" and roi is None:
        raise ctx.error("Resize with tf_crop_and_resize needs the roi input")
    fast = _resize_kernel(t, plan, mode, coord, nearest, antialias, exclude, policy)
    if fast is not None:
        return fast
    y = t
    for axis, n_in, n_out, scale, pair in plan:
        try:
            weights, extrapolated = R.axis_weights(
                n_in, n_out, scale, mode=mode, coordinate_mode=coord, nearest_mode=nearest,
                cubic_coeff_a=cubic_a, antialias=antialias, exclude_outside=exclude,
                roi=pair)
        except (ValueError, TypeError) as err:    # an unknown mode's name, from onnx
            raise ctx.error(f"Resize {mode} with coordinate_transformation_mode={coord!r}, "
                            f"nearest_mode={nearest!r}: {err}") from None
        y = R.resize_axis(y, axis, weights, extrapolated, extrapolation)
    return y


def _resize_kernel(t, plan, mode, coord, nearest, antialias, exclude, policy):
    """resize_nearest_neighbor or resize_bilinear (NHWC, between transposes) where one
    gives exactly ONNX's result, else None."""
    if len(t.shape) != 4 or antialias or exclude or policy != "stretch" or \
            any(axis not in (2, 3) or pair is not None or
                not math.isclose(n_out, n_in * scale, rel_tol=1e-6)
                for axis, n_in, n_out, scale, pair in plan):
        return None          # fractional scales map coordinates by the scale, not sizes
    n, c, h, w = t.shape
    sizes = {axis: n_out for axis, _, n_out, _, _ in plan}
    size = (sizes.get(2, h), sizes.get(3, w))
    xt = F.transpose(t, TO_NHWC)
    if mode == "nearest":
        if coord == "asymmetric" and nearest == "floor":
            y = F.resize_nearest_neighbor(xt, size)
        elif coord == "align_corners" and nearest == "round_prefer_ceil":
            y = F.resize_nearest_neighbor(xt, size, align_corners=True)
        elif coord in ("half_pixel", "tf_half_pixel_for_nn") and \
                nearest == "round_prefer_ceil":
            y = F.resize_nearest_neighbor(xt, size, half_pixel_centers=True)
        else:
            return None
    elif mode == "linear":
        if coord == "asymmetric":
            y = F.resize_bilinear(xt, size)
        elif coord == "align_corners":
            y = F.resize_bilinear(xt, size, align_corners=True)
        elif coord == "half_pixel" or (coord == "pytorch_half_pixel" and min(size) > 1):
            y = F.resize_bilinear(xt, size, half_pixel_centers=True)
        else:
            return None
    else:
        return None
    return F.transpose(y, TO_NCHW)


@rule("DepthToSpace")
def depth_to_space(ctx, node, x, a):
    t = ctx.tensor(x[0])
    b = int(a["blocksize"])
    n, c, h, w = t.shape
    if a.get("mode", "DCR") == "DCR":
        y = F.reshape(t, [-1, b, b, c // (b * b), h, w])
        y = F.transpose(y, (0, 3, 4, 1, 5, 2))
    else:
        y = F.reshape(t, [-1, c // (b * b), b, b, h, w])
        y = F.transpose(y, (0, 1, 4, 2, 5, 3))
    return F.reshape(y, [-1, c // (b * b), h * b, w * b])


@rule("SpaceToDepth")
def space_to_depth(ctx, node, x, a):
    mode = a.get("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise ctx.error(f"SpaceToDepth mode {mode!r} is not supported (DCR and CRD are)")
    t = ctx.tensor(x[0])
    b = int(a["blocksize"])
    n, c, h, w = t.shape
    y = F.reshape(t, [-1, c, h // b, b, w // b, b])
    y = F.transpose(y, (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4))
    return F.reshape(y, [-1, c * b * b, h // b, w // b])


# -- reductions and softmax --------------------------------------------------------------
# the reductions whose records name an ONNX Reduce* (ir/ops/reduce.py), by that name
REDUCTIONS = {opdef.onnx.op_type: getattr(F, f"reduce_{name}")
              for name, opdef in all_ops().items()
              if opdef.reduction is not None and opdef.onnx is not None}


@rule(*REDUCTIONS, "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum")
def reduce(ctx, node, x, a):
    t = ctx.tensor(x[0])
    keep = bool(a.get("keepdims", 1))
    axes_in_input = ctx.opset >= 18 or (node.op_type == "ReduceSum" and ctx.opset >= 13)
    axes = (ctx.ints(x[1], "axes") if len(x) > 1 and x[1] is not None else None) \
        if axes_in_input else a.get("axes")
    if axes is not None and len(axes) == 0:
        axes = None
    noop = a.get("noop_with_empty_axes", 0)
    if axes is None and noop:
        return F.identity(t)
    axis = None if axes is None else tuple(_axis(int(v), len(t.shape)) for v in axes)
    op = node.op_type
    if t.dtype == "bool" and op in ("ReduceMax", "ReduceMin"):
        # any / all, as counts (so that an empty set gives False / True as in ONNX)
        counted = t if op == "ReduceMax" else F.logical_not(t)
        hits = F.reduce_sum(F.cast(counted, "int32"), axis=axis, keepdims=keep)
        return F.greater(hits, 0) if op == "ReduceMax" else F.equal(hits, 0)
    if op in REDUCTIONS:
        return REDUCTIONS[op](t, axis=axis, keepdims=keep)
    if op == "ReduceL1":
        return F.reduce_sum(F.abs(t), axis=axis, keepdims=keep)
    if op == "ReduceL2":
        return F.sqrt(F.reduce_sum(F.square(t), axis=axis, keepdims=keep))
    if op == "ReduceSumSquare":
        return F.reduce_sum(F.square(t), axis=axis, keepdims=keep)
    return F.log(F.reduce_sum(t, axis=axis, keepdims=keep))      # ReduceLogSum


@rule("ArgMax", "ArgMin")
def arg_reduce(ctx, node, x, a):
    t = ctx.tensor(x[0])
    axis = _axis(int(a.get("axis", 0)), len(t.shape))
    fn = F.argmax if node.op_type == "ArgMax" else F.argmin
    if a.get("select_last_index", 0):            # the first of the reversed axis
        if t.shape[axis] is None:
            raise ctx.error("select_last_index=1 on an axis of unknown size")
        out = (t.shape[axis] - 1) - fn(F.reverse(t, [axis]), axis=axis)
    else:
        out = fn(t, axis=axis)
    return F.expand_dims(out, axis) if a.get("keepdims", 1) else out


@rule("Softmax", "LogSoftmax")
def softmax(ctx, node, x, a):
    t = ctx.tensor(x[0])
    rank = len(t.shape)
    fn = F.softmax if node.op_type == "Softmax" else F.log_softmax
    if ctx.opset >= 13:
        return fn(t, axis=_axis(int(a.get("axis", -1)), rank))
    axis = _axis(int(a.get("axis", 1)), rank)       # before 13: over the flattened tail
    if axis == rank - 1:
        return fn(t, axis=-1)
    tail = t.shape[axis:]
    if any(d is None for d in tail):
        raise ctx.error("Softmax (opset < 13) over axes of unknown size")
    flat = F.reshape(t, [-1, int(np.prod(tail))])
    return F.reshape(fn(flat, axis=-1), [d if d is not None else -1 for d in t.shape])


@rule("CumSum")
def cumsum(ctx, node, x, a):
    t = ctx.tensor(x[0])
    axis = _axis(ctx.ints(x[1], "axis")[0], len(t.shape))
    return F.cumsum(t, axis=axis, exclusive=bool(a.get("exclusive", 0)),
                    reverse=bool(a.get("reverse", 0)))


# -- shapes and structure ----------------------------------------------------------------
@rule("Constant")
def constant(ctx, node, x, a):
    for key in ("value", "value_float", "value_floats", "value_int", "value_ints"):
        if key in a:
            value = np.asarray(a[key])
            if key.startswith("value_float"):
                value = value.astype(np.float32)
            elif key.startswith("value_int"):
                value = value.astype(np.int64)
            return value
    raise ctx.error(f"Constant with attribute(s) {sorted(a)} is not supported")


@rule("Shape")
def shape(ctx, node, x, a):
    dims = _shape(ctx, x[0])
    start, end = int(a.get("start", 0)), a.get("end")
    dims = dims[start:None if end is None else int(end)]
    if any(d is None for d in dims):
        raise ctx.error(f"Shape of a tensor with unknown dims {list(dims)}: give static "
                        f"input shapes with ff.onnx.load(..., input_shapes={{...}})")
    return np.array(dims, np.int64)


@rule("Size")
def size(ctx, node, x, a):
    dims = _shape(ctx, x[0])
    if any(d is None for d in dims):
        raise ctx.error("Size of a tensor with unknown dims")
    return np.array(int(np.prod(dims)), np.int64)


@rule("ConstantOfShape")
def constant_of_shape(ctx, node, x, a):
    dims = ctx.ints(x[0], "shape")
    if any(d < 0 for d in dims):
        raise ctx.error(f"ConstantOfShape of negative dims {dims[:40]}")
    ctx.check_elements(dims, "the output")
    value = np.asarray(a.get("value", np.zeros(1, np.float32))).reshape(-1)
    if value.size != 1:
        raise ctx.error(f"ConstantOfShape's value must hold one element, not {value.size}")
    return np.full(dims, value[0], value.dtype)


def _resolve_shape(ctx, in_shape, target, allowzero=False):
    out = []
    for i, s in enumerate(target):
        out.append(in_shape[i] if s == 0 and not allowzero else s)
    out = [-1 if d is None else d for d in out]
    if out.count(-1) > 1:
        raise ctx.error(f"Reshape to {target} of a tensor of shape {list(in_shape)} leaves "
                        f"more than one dim unknown")
    return out


@rule("Reshape")
def reshape(ctx, node, x, a):
    target = _input_or_attr(ctx, x, 1, a, "shape", "shape")
    allowzero = bool(a.get("allowzero", 0))
    if isinstance(x[0], masked.Filled):            # one value still, of a computed count
        return x[0]
    t = ctx.tensor(x[0])
    return F.reshape(t, _resolve_shape(ctx, t.shape, target, allowzero))


@rule("Flatten")
def flatten(ctx, node, x, a):
    t = ctx.tensor(x[0])
    axis = _axis(int(a.get("axis", 1)), len(t.shape))
    head, tail = t.shape[:axis], t.shape[axis:]
    if all(d is not None for d in tail):
        return F.reshape(t, [-1, int(np.prod(tail, dtype=np.int64))])
    if all(d is not None for d in head):
        return F.reshape(t, [int(np.prod(head, dtype=np.int64)), -1])
    raise ctx.error("Flatten with unknown dims on both sides of the axis")


@rule("Transpose")
def transpose(ctx, node, x, a):
    if isinstance(x[0], masked.MaskIndices):
        return masked.transposed(ctx, x[0], a.get("perm", [1, 0]))
    t = ctx.tensor(x[0])
    perm = a.get("perm", list(reversed(range(len(t.shape)))))
    return F.transpose(t, tuple(int(p) for p in perm))


@rule("Squeeze")
def squeeze(ctx, node, x, a):
    t = ctx.tensor(x[0])
    axes = _input_or_attr(ctx, x, 1, a, "axes", "axes")
    if axes is None:
        axes = [i for i, d in enumerate(t.shape) if d == 1]
    axes = sorted(_axis(int(v), len(t.shape)) for v in axes)
    for axis in reversed(axes):
        t = F.squeeze(t, axis=axis)
    return t


@rule("Unsqueeze")
def unsqueeze(ctx, node, x, a):
    t = ctx.tensor(x[0])
    axes = _input_or_attr(ctx, x, 1, a, "axes", "axes")
    rank = len(t.shape) + len(axes)
    for axis in sorted(_axis(int(v), rank) for v in axes):
        t = F.expand_dims(t, axis)
    return t


@rule("Concat")
def concat(ctx, node, x, a):
    ts = [ctx.tensor(v) for v in x if v is not None]
    axis = _axis(int(a.get("axis", 1) if ctx.opset < 4 else a["axis"]), len(ts[0].shape))
    ts = [v for v in ts if v.shape[axis] != 0] or ts[:1]
    return ts[0] if len(ts) == 1 else F.concat(ts, axis=axis)


@rule("Split")
def split(ctx, node, x, a):
    t = ctx.tensor(x[0])
    axis = _axis(int(a.get("axis", 0)), len(t.shape))
    sizes = _input_or_attr(ctx, x, 1, a, "split", "split")
    count = len(node.output)
    dim = t.shape[axis]
    if sizes is None:
        if dim is None:
            raise ctx.error("Split of an axis of unknown size")
        part = -(-dim // count) if "num_outputs" in a else dim // count
        sizes = [part] * (count - 1) + [dim - part * (count - 1)]
    outs, start = [], 0
    for s in sizes:
        key = [slice(None)] * len(t.shape)
        key[axis] = slice(start, start + s)
        outs.append(t[tuple(key)])
        start += s
    return outs


_PASS_THROUGH = ("reshape", "expand_dims", "squeeze", "identity", "cast")


def _index_terms(v, depth=0):
    """The elements of an int value as terms: ("c", n) for a number known now, or
    (value, k, offset) for element k of a value the graph computes, plus offset. Follows
    the shape ops, int casts, 1-D concats and additions of constants, so that ends
    computed as starts + 1 (a Loop body slicing at the iteration number) show their
    difference. None where the element count is unknown."""
    if any(d is None for d in v.shape):
        return None
    n = int(np.prod(v.shape, dtype=np.int64))
    node = v.node
    if node.op == "constant":
        return [("c", int(e)) for e in np.asarray(node.attrs["value"]).reshape(-1)]
    if depth < 16 and node.op in _PASS_THROUGH and node.inputs and \
            node.inputs[0].dtype == "int32":
        inner = _index_terms(node.inputs[0], depth + 1)
        if inner is not None and len(inner) == n:
            return inner
    if depth < 16 and node.op == "concat" and v.type.rank == 1:
        parts = [_index_terms(u, depth + 1) for u in node.inputs]
        if all(p is not None for p in parts):
            return [t for p in parts for t in p]
    if depth < 16 and node.op in ("add", "sub") and len(node.inputs) == 2:
        a, b = (_index_terms(u, depth + 1) for u in node.inputs)
        if a is not None and b is not None and {len(a), len(b)} <= {1, n}:
            a, b = (t * n if len(t) == 1 else t for t in (a, b))
            sign = 1 if node.op == "add" else -1
            out = []
            for k, (ta, tb) in enumerate(zip(a, b)):
                if ta[0] == "c" and tb[0] == "c":
                    out.append(("c", ta[1] + sign * tb[1]))
                elif tb[0] == "c":
                    out.append((ta[0], ta[1], ta[2] + sign * tb[1]))
                elif ta[0] == "c" and sign == 1:
                    out.append((tb[0], tb[1], tb[2] + ta[1]))
                else:
                    out.append((v, k, 0))
            return out
    return [(v, k, 0) for k in range(n)]


def _term_difference(end, start):
    """end - start when import can tell (both numbers, or one computed element plus
    two offsets), else None."""
    if end[0] == "c" and start[0] == "c":
        return end[1] - start[1]
    if end[0] != "c" and start[0] != "c" and end[0] is start[0] and end[1] == start[1]:
        return end[2] - start[2]
    return None


def _dynamic_slice(ctx, t, shape_, x, axes):
    """Slice with starts the graph computes: a dynamic_slice where every size
    (ends - starts) is known at import. Negative starts count from the end as ONNX's
    do (dims known); a block that would run past the end is shifted back to fit (XLA's
    clamp) where ONNX would return fewer elements, which a static shape cannot hold.
    Where it cannot be, the error is ctx.static's for the starts (a backend may bind
    them when they are a graph input, and import again)."""
    def refuse(why):
        ctx.static(x[1], f"starts (or, for a dynamic_slice, {why})")

    if len(x) > 4 and x[4] is not None and any(v != 1 for v in ctx.ints(x[4], "steps")):
        refuse("steps of 1")
    starts_t, ends = ctx.tensor(x[1]), x[2]
    s_terms = _index_terms(starts_t.value)
    e_terms = [("c", v) for v in ctx.ints(ends, "ends")] \
        if ctx.is_static(ends) or isinstance(ends, Init) else _index_terms(ctx.tensor(ends).value)
    if s_terms is None or e_terms is None or len(s_terms) != len(e_terms):
        refuse("as many starts as ends, known at import")
    rank = len(shape_)
    axes = list(range(len(s_terms))) if axes is None else [_axis(int(v), rank) for v in axes]
    begin, sizes = [0] * rank, list(shape_)
    for j, (ax, st, en) in enumerate(zip(axes, s_terms, e_terms)):
        d = shape_[ax]
        size = _term_difference(en, st)
        if d is None or size is None:
            refuse(f"the size along axis {ax}, ends - starts, known at import (the "
                   f"result's shape would depend on the data)")
        if st[0] == "c":                     # this axis's start is a number: ONNX's clamp
            b, e = st[1] + d if st[1] < 0 else st[1], en[1] + d if en[1] < 0 else en[1]
            b, e = min(max(b, 0), d), min(max(e, 0), d)
            begin[ax], sizes[ax] = b, max(e - b, 0)
            continue
        sj = starts_t[j] if len(starts_t.shape) else starts_t
        sj = sj if sj.dtype == "int32" else F.cast(sj, "int32")
        begin[ax] = F.where(F.less(sj, 0), sj + d, sj)   # negative: from the end
        sizes[ax] = min(max(size, 0), d)
    if any(s is None for s in sizes):
        refuse("the sliced tensor's shape known at import")
    return F.dynamic_slice(ctx.tensor(t), begin, sizes)


@rule("Slice")
def slice_(ctx, node, x, a):
    t = x[0]
    shape_ = _shape(ctx, t)
    if ctx.opset >= 10 and not (ctx.is_static(x[1]) or isinstance(x[1], Init)):
        axes = ctx.ints(x[3], "axes") if len(x) > 3 and x[3] is not None else None
        return _dynamic_slice(ctx, t, shape_, x, axes)
    if ctx.opset < 10:
        starts, ends = list(a["starts"]), list(a["ends"])
        axes, steps = a.get("axes"), None
    else:
        starts, ends = ctx.ints(x[1], "starts"), ctx.ints(x[2], "ends")
        axes = ctx.ints(x[3], "axes") if len(x) > 3 and x[3] is not None else None
        steps = ctx.ints(x[4], "steps") if len(x) > 4 and x[4] is not None else None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    key = [slice(None)] * len(shape_)
    for s, e, ax, st in zip(starts, ends, axes, steps):
        ax = _axis(int(ax), len(shape_))
        d = shape_[ax]
        if d is not None:           # ONNX clamps like Python; keep the numbers small
            s, e = max(min(s, d), -d - 1), max(min(e, d), -d - 1)
        key[ax] = slice(s, e, st)
    return ctx.tensor(t)[tuple(key)]


@rule("Gather")
def gather(ctx, node, x, a):
    params = ctx.tensor(x[0])
    axis = _axis(int(a.get("axis", 0)), len(params.shape))
    indices = x[1]
    if isinstance(indices, np.ndarray):
        dim = params.shape[axis]
        indices = np.asarray(indices).astype(np.int64)
        if dim is not None:
            indices = np.where(indices < 0, indices + dim, indices)
        indices = ctx.as_int32(indices)
        if indices.ndim == 0:
            key = [slice(None)] * len(params.shape)
            key[axis] = int(indices)
            return params[tuple(key)]
    indices = ctx.tensor(indices)
    dim = params.shape[axis]
    if dim is not None:                          # negative indices count from the end
        indices = indices + F.cast(F.less(indices, 0), "int32") * dim
    return F.gather(params, indices, axis=axis)


@rule("Expand")
def expand(ctx, node, x, a):
    t = ctx.tensor(x[0])
    if not isinstance(x[1], (np.ndarray, Init)):
        return masked.expanded(ctx, t, x[1])         # one value to a computed count
    target = ctx.ints(x[1], "shape")
    rank = max(len(target), len(t.shape))
    have = [1] * (rank - len(t.shape)) + list(t.shape)
    want = [1] * (rank - len(target)) + target
    out = [h if w == 1 else w for h, w in zip(have, want)]
    if any(d is None for d in out):
        raise ctx.error("Expand to a shape with unknown dims")
    return F.broadcast_to(t, out) if tuple(out) != tuple(t.shape) else F.identity(t)


@rule("Tile")
def tile(ctx, node, x, a):
    return F.tile(ctx.tensor(x[0]), ctx.ints(x[1], "repeats"))


def _crop(ctx, t, pairs, mode):
    """Negative pads remove that many elements from their side (RWKV's time shift,
    ZeroPad2d((0, 0, 1, -1)): one zero row in front, the last row cut): t sliced so,
    and the pads left over."""
    if mode != "constant":
        raise ctx.error(f"negative pads (cropping) with mode {mode!r} are not supported "
                        f"(constant mode's are)")
    for axis, (before, after) in enumerate(pairs):
        cut = max(-before, 0) + max(-after, 0)
        if cut and (t.shape[axis] is None or cut >= t.shape[axis]):
            raise ctx.error(f"negative pads {[before, after]} on axis {axis} of size "
                            f"{t.shape[axis]}: they must leave at least one element of a "
                            f"known size")
    t = t[tuple(slice(max(-before, 0), after if after < 0 else None)
                for before, after in pairs)]
    return t, [(max(before, 0), max(after, 0)) for before, after in pairs]


@rule("Pad")
def pad(ctx, node, x, a):
    t = ctx.tensor(x[0])
    rank = len(t.shape)
    pads = a.get("pads", a.get("paddings")) if ctx.opset < 11 else ctx.ints(x[1], "pads")
    value = a.get("value", 0.0) if ctx.opset < 11 else (
        float(np.asarray(ctx.static(x[2], "constant_value")).reshape(-1)[0])
        if len(x) > 2 and x[2] is not None else 0.0)
    axes = ctx.ints(x[3], "axes") if len(x) > 3 and x[3] is not None else list(range(rank))
    pairs = [(0, 0)] * rank
    k = len(axes)
    for i, ax in enumerate(axes):
        pairs[_axis(ax, rank)] = (int(pads[i]), int(pads[i + k]))
    mode = a.get("mode", "constant")
    if any(p < 0 for pair in pairs for p in pair):
        t, pairs = _crop(ctx, t, pairs, mode)
    if mode == "constant":
        return F.pad(t, pairs, constant_values=value)
    if mode == "reflect":
        return F.pad(t, pairs, mode="REFLECT")
    if mode == "edge":                           # repeat each edge slice
        for axis, (before, after) in enumerate(pairs):
            if before or after:
                if t.shape[axis] is None:
                    raise ctx.error("Pad edge along an axis of unknown size")
                key = [slice(None)] * rank

                def edge(index, count, axis=axis, key=key, t=t):
                    k = list(key)
                    k[axis] = slice(index, index + 1) if index >= 0 else slice(index, None)
                    piece = t[tuple(k)]
                    shape_ = [d if d is not None else -1 for d in piece.shape]
                    shape_[axis] = count
                    return F.broadcast_to(piece, shape_) if all(
                        d is not None for d in piece.shape) else F.tile(
                        piece, [count if i == axis else 1 for i in range(rank)])
                parts = ([edge(0, before)] if before else []) + [t] + \
                    ([edge(-1, after)] if after else [])
                t = F.concat(parts, axis=axis)
        return t
    raise ctx.error(f"Pad mode {mode!r} is not supported (constant, reflect and edge are)")


@rule("Range")
def range_(ctx, node, x, a):
    start, limit, delta = (np.asarray(ctx.static(v, n)).reshape(()) for v, n in
                           zip(x, ("start", "limit", "delta")))
    if delta == 0 or not all(np.isfinite(v) for v in (start, limit, delta)):
        raise ctx.error(f"Range({start}, {limit}, {delta}) has no finite length")
    ctx.check_elements([max(math.ceil((float(limit) - float(start)) / float(delta)), 0)],
                       "the output")
    return np.arange(start, limit, delta)


@rule("EyeLike")
def eye_like(ctx, node, x, a):
    shape_ = _shape(ctx, x[0])
    from onnx import helper  # optional: onnx
    dtype = helper.tensor_dtype_to_np_dtype(a["dtype"]) if "dtype" in a else (
        x[0].dtype if isinstance(x[0], np.ndarray) else np.float32)
    if len(shape_) != 2 or None in shape_:
        raise ctx.error(f"EyeLike needs a 2-D input of known shape, not {list(shape_)}")
    ctx.check_elements(shape_, "the output")
    return np.eye(shape_[0], shape_[1], int(a.get("k", 0)), dtype=dtype)


# -- more composites ------------------------------------------------------------------------
@rule("RMSNormalization")
def rms_norm(ctx, node, x, a):
    a.get("stash_type")
    t = ctx.tensor(x[0])
    rank = len(t.shape)
    axes = tuple(range(_axis(int(a.get("axis", -1)), rank), rank))
    mean_square = F.reduce_mean(F.square(t), axis=axes, keepdims=True)
    return t * F.rsqrt(mean_square + float(a.get("epsilon", 1e-5))) * ctx.tensor(x[1])


@rule("LpNormalization")
def lp_norm(ctx, node, x, a):
    t = ctx.tensor(x[0])
    axis, p = _axis(int(a.get("axis", -1)), len(t.shape)), int(a.get("p", 2))
    if p not in (1, 2):
        raise ctx.error(f"LpNormalization with p={p} (ONNX allows 1 and 2)")
    norm = F.reduce_sum(F.abs(t), axis=axis, keepdims=True) if p == 1 else \
        F.sqrt(F.reduce_sum(F.square(t), axis=axis, keepdims=True))
    return t / F.where(F.equal(norm, 0.0), F.ones_like(norm), norm)   # 0 / 0 is 0 here


@rule("Hardmax")
def hardmax(ctx, node, x, a):
    t = ctx.tensor(x[0])
    rank = len(t.shape)
    if ctx.opset >= 13:
        axis = _axis(int(a.get("axis", -1)), rank)
        return F.one_hot(F.argmax(t, axis=axis), t.shape[axis], axis=axis)
    axis = _axis(int(a.get("axis", 1)), rank)     # before 13: over the flattened tail
    tail = t.shape[axis:]
    if any(d is None for d in tail):
        raise ctx.error("Hardmax (opset < 13) over axes of unknown size")
    n = int(np.prod(tail))
    flat = F.reshape(t, [-1, n])
    out = F.one_hot(F.argmax(flat, axis=1), n, axis=1)
    return F.reshape(out, [d if d is not None else -1 for d in t.shape])


@rule("Trilu")
def trilu(ctx, node, x, a):
    t = ctx.tensor(x[0])
    k = ctx.ints(x[1], "k")[0] if len(x) > 1 and x[1] is not None else 0
    n, m = t.shape[-2:]
    if n is None or m is None:
        raise ctx.error("Trilu of a matrix of unknown size")
    ctx.check_elements([n, m], "the mask")
    ones = np.ones((n, m), np.bool_)
    mask = np.triu(ones, k) if a.get("upper", 1) else np.tril(ones, k)
    return F.where(F.constant(mask), t, F.zeros_like(t))


@rule("TopK")
def top_k(ctx, node, x, a):
    t = ctx.tensor(x[0])
    k = ctx.ints(x[1], "K")[0] if ctx.opset >= 10 else int(a["k"])
    rank = len(t.shape)
    axis = _axis(int(a.get("axis", -1)), rank)
    largest = a.get("largest", 1)
    if not a.get("sorted", 1):
        pass                          # ONNX leaves the order open: sorted is one answer
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    moved = F.transpose(t, perm) if axis != rank - 1 else t
    values, indices = F.top_k(moved if largest else F.neg(moved), k=k)
    if not largest:
        values = F.neg(values)
    if axis != rank - 1:
        values, indices = F.transpose(values, perm), F.transpose(indices, perm)
    return [values, indices]


@rule("GatherElements")
def gather_elements(ctx, node, x, a):
    data = ctx.tensor(x[0])
    rank = len(data.shape)
    axis = _axis(int(a.get("axis", 0)), rank)
    idx = ctx.tensor(x[1] if not isinstance(x[1], np.ndarray) else ctx.as_int32(
        np.asarray(x[1]).astype(np.int64)))
    shape = idx.shape
    if any(d is None for d in shape) or data.shape[axis] is None:
        raise ctx.error("GatherElements needs static shapes")
    idx = idx + F.cast(F.less(idx, 0), "int32") * data.shape[axis]
    coords = []
    for k in range(rank):             # every other axis: its own position
        if k == axis:
            coords.append(idx)
        else:
            grid = np.arange(shape[k], dtype=np.int32).reshape(
                [-1 if j == k else 1 for j in range(rank)])
            coords.append(F.constant(np.broadcast_to(grid, shape).copy()))
    return F.gather_nd(data, F.stack(coords, axis=-1))


@rule("ConvTranspose")
def conv_transpose(ctx, node, x, a):
    """conv2d's input gradient (NHWC, HWOI weight); 1-D as 2-D with a height of 1,
    groups as one per group, concatenated; output_shape and SAME give the pads."""
    X, W = x[0], x[1]
    B = x[2] if len(x) > 2 else None
    t = ctx.tensor(X)
    w_shape = _shape(ctx, W)
    one_d = len(t.shape) == 3
    if len(t.shape) not in (3, 4):
        raise ctx.error(f"ConvTranspose of a rank-{len(t.shape)} input (1-D and 2-D, NCW "
                        f"and NCHW, are supported)")
    kernel = tuple(w_shape[2:])
    if "kernel_shape" in a and tuple(a["kernel_shape"]) != kernel:
        raise ctx.error("kernel_shape differs from the weight's")
    strides, dilations = _conv_attrs(ctx, a, kernel)
    dims = len(kernel)
    pads = list(a.get("pads", [0] * 2 * dims))
    extra = list(a.get("output_padding", [0] * dims))
    sizes = list(t.shape[2:])
    if any(v is None for v in sizes):
        raise ctx.error("ConvTranspose needs static spatial sizes")
    auto_pad = a.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"ConvTranspose auto_pad {auto_pad!r} is not supported")
    wanted = list(a["output_shape"])[-dims:] if "output_shape" in a else (
        [i * s for i, s in zip(sizes, strides)] if auto_pad.startswith("SAME") else None)
    if wanted is not None:
        total = [s * (i - 1) + op + (k - 1) * d + 1 - o for i, s, op, k, d, o in
                 zip(sizes, strides, extra, kernel, dilations, wanted)]
        # a larger output_shape than the convolution gives: extra rows at the end
        extra = [op + max(-v, 0) for op, v in zip(extra, total)]
        total = [max(v, 0) for v in total]
        small = [v // 2 for v in total]
        large = [v - v // 2 for v in total]
        # ONNX: the larger half after only for SAME_UPPER, before otherwise
        pads = small + large if auto_pad == "SAME_UPPER" else large + small
    if auto_pad == "VALID":
        pads = [0] * 2 * dims
    if one_d:                                    # NCW as NCHW with H = 1
        t = F.expand_dims(t, 2)
        sizes, kernel = [1] + sizes, (1,) + kernel
        strides, dilations = (1,) + tuple(strides), (1,) + tuple(dilations)
        pads, extra = [0, pads[0], 0, pads[1]], [0] + extra
    out_hw = [s * (i - 1) + op + (k - 1) * d + 1 - pb - pe for i, s, op, k, d, pb, pe in
              zip(sizes, strides, extra, kernel, dilations, pads[:2], pads[2:])]
    to_hwoi = (lambda w: w[:, :, None].transpose(2, 3, 1, 0)) if one_d else \
        (lambda w: w.transpose(2, 3, 1, 0))
    weight = ctx.weight(W, "hwoi", to_hwoi)
    if weight is None:
        w = ctx.tensor(W)
        weight = F.transpose(F.expand_dims(w, 2) if one_d else w, (2, 3, 1, 0))
    padding = [(pads[0], pads[2]), (pads[1], pads[3])]
    groups = int(a.get("group", 1))
    # fragflow's conv2d_transpose: the forward conv's explicit padding, whose output
    # (input's sizes) floor-divides, so output_padding rows are part of out_hw
    from ...ir.ops import conv as _conv
    xt = F.transpose(t, TO_NHWC)

    def transposed(inp, wgt):
        return F.Tensor(_conv.conv_backprop_input(
            "conv2d", inp.value, wgt.value, tuple(out_hw), tuple(strides),
            padding if any(pads) else "VALID", tuple(dilations)))
    if groups == 1:
        y = transposed(xt, weight)
    else:                                        # weight (H, W, C_out / g, C_in)
        c_in = t.shape[1]
        if c_in % groups:
            raise ctx.error(f"{c_in} input channels are not divisible by group {groups}")
        per = c_in // groups
        y = F.concat([transposed(F.slice(xt, [0, 0, 0, g * per], [-1, -1, -1, per]),
                                 F.slice(weight, [0, 0, 0, g * per], [-1, -1, -1, per]))
                      for g in range(groups)], axis=-1)
    if B is not None:
        y = y + ctx.tensor(B)
    y = F.transpose(y, TO_NCHW)
    return F.squeeze(y, axis=2) if one_d else y


def _nll(ctx, a, log_prob, target, weight):
    """NegativeLogLikelihoodLoss of log_prob (N, C, d...) at int targets (N, d...)."""
    classes = log_prob.shape[1]
    if classes is None:
        raise ctx.error("the class axis (1) must have a known size")
    picked = F.reduce_sum(log_prob * F.one_hot(target, classes, axis=1), axis=1)
    w = F.gather(weight, target) if weight is not None else None
    if "ignore_index" in a:
        keep = F.cast(F.not_equal(target, int(a["ignore_index"])), "float32")
        w = keep if w is None else w * keep
    loss = -picked if w is None else -picked * w
    reduction = a.get("reduction", "mean")
    if reduction == "none":
        return loss
    if reduction == "sum":
        return F.reduce_sum(loss)
    if reduction == "mean":
        return F.reduce_mean(loss) if w is None else F.reduce_sum(loss) / F.reduce_sum(w)
    raise ctx.error(f"reduction {reduction!r} is not supported")


@rule("NegativeLogLikelihoodLoss")
def nll_loss(ctx, node, x, a):
    weight = ctx.tensor(x[2]) if len(x) > 2 and x[2] is not None else None
    return _nll(ctx, a, ctx.tensor(x[0]), ctx.tensor(x[1]), weight)


@rule("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(ctx, node, x, a):
    log_prob = F.log_softmax(ctx.tensor(x[0]), axis=1)
    weight = ctx.tensor(x[2]) if len(x) > 2 and x[2] is not None else None
    return [_nll(ctx, a, log_prob, ctx.tensor(x[1]), weight), log_prob]


@rule("Attention")
def attention(ctx, node, x, a):
    """Opset 23's scaled dot-product attention: 3-D (with q/kv_num_heads) or 4-D
    inputs, a boolean or additive mask, causal masking, a past key/value cache,
    grouped-query heads, softcap and the qk_matmul_output modes."""
    x = list(x) + [None] * (7 - len(x))
    nonpad = None
    if x[6] is not None:             # per-batch valid key counts (an external cache)
        if x[4] is not None:
            raise ctx.error("nonpad_kv_seqlen with a past key/value cache")
        nonpad = np.asarray(ctx.static(x[6], "nonpad_kv_seqlen")).reshape(-1)
    left, right = int(a.get("left_window_size", -1)), int(a.get("right_window_size", -1))
    a.get("softmax_precision")                   # fragflow's softmax is float32
    q, k, v = (ctx.tensor(t) for t in x[:3])
    three_d = len(q.shape) == 3
    q_heads, kv_heads = a.get("q_num_heads"), a.get("kv_num_heads")
    if three_d:
        def heads(t, n):
            b, s, hidden = t.shape
            return F.transpose(F.reshape(t, [-1, s, n, hidden // n]), (0, 2, 1, 3))
        q, k, v = heads(q, q_heads), heads(k, kv_heads), heads(v, kv_heads)
    if any(d is None for t in (q, k, v) for d in t.shape[1:]):
        raise ctx.error("Attention needs static head, sequence and hidden sizes")
    scale = a.get("scale")
    scale = 1.0 / math.sqrt(q.shape[3]) if scale is None else float(scale)
    root = math.sqrt(scale)
    past = 0
    if x[4] is not None:
        past_k, past_v = ctx.tensor(x[4]), ctx.tensor(x[5])
        past = past_k.shape[2]
        k, v = F.concat([past_k, k], axis=2), F.concat([past_v, v], axis=2)
    present_k, present_v = k, v
    q_len, kv_len = q.shape[2], k.shape[2]
    ctx.check_elements([q_len, kv_len], "the attention mask")
    bias = None
    if x[3] is not None:
        mask = ctx.tensor(x[3])
        if mask.dtype == "bool":
            mask = F.where(mask, F.constant(np.float32(0)), F.constant(np.float32(-np.inf)))
        missing = kv_len - mask.shape[-1]
        if missing > 0:                          # a short mask: the rest is masked
            ctx.check_elements(list(mask.shape[:-1]) + [missing], "the mask's filler")
            filler = np.full(tuple(d if d is not None else 1 for d in mask.shape[:-1])
                             + (missing,), -np.inf, np.float32)
            mask = F.concat([mask, F.broadcast_to(F.constant(filler), [
                d if d is not None else -1 for d in mask.shape[:-1]] + [missing])
                if all(d is not None for d in mask.shape) else F.constant(filler)],
                axis=-1)
        bias = mask
    # causal and sliding-window masks are offset-aligned: query i sits at position
    # i + offset, offset = the keys before this block (the past's length, or per batch
    # nonpad_kv_seqlen - q_len); known at import, so one constant additive bias
    i = np.arange(q_len).reshape(-1, 1)
    j = np.arange(kv_len).reshape(1, -1)
    offset = past if nonpad is None else (nonpad - q_len).reshape(-1, 1, 1, 1)
    allowed = np.ones((1, 1, q_len, kv_len), bool)
    if a.get("is_causal", 0):
        allowed = allowed & (j <= i + offset)
    if left >= 0:
        allowed = allowed & (i + offset - j <= left)
    if right >= 0:
        allowed = allowed & (j - (i + offset) <= right)
    if nonpad is not None:
        allowed = allowed & (j < nonpad.reshape(-1, 1, 1, 1))
    if not allowed.all() or a.get("is_causal", 0):
        extra = np.where(allowed, 0.0, -np.inf).astype(np.float32)
        if extra.shape[0] == 1:
            extra = extra.reshape(q_len, kv_len)
        extra = F.constant(extra)
        bias = extra if bias is None else bias + extra
    h_q, h_kv = q.shape[1], k.shape[1]
    if h_q != h_kv:
        if h_q % h_kv:
            raise ctx.error(f"{h_q} query heads are not a multiple of {h_kv} key heads")
        rep = h_q // h_kv                        # each key/value head for rep query heads

        def repeat(t):
            b, h, s, d = t.shape
            t = F.broadcast_to(F.expand_dims(t, 2), [q.shape[0] or -1, h, rep, s, d]) \
                if q.shape[0] is not None else F.tile(F.expand_dims(t, 2), [1, 1, rep, 1, 1])
            return F.reshape(t, [-1, h * rep, s, d])
        k, v = repeat(k), repeat(v)
    logits = F.matmul(q * root, F.transpose(k * root, (0, 1, 3, 2)))
    softcap = float(a.get("softcap", 0.0) or 0.0)
    if softcap > 0:
        logits = softcap * F.tanh(logits / softcap)
    mode = int(a.get("qk_matmul_output_mode", 0))
    qk_out = logits
    scores = logits if bias is None else logits + bias
    if mode == 2:
        qk_out = scores
    probs = F.softmax(scores, axis=-1)
    if bias is not None:                         # a row with no key to attend: zeros
        row_max = F.reduce_max(bias, axis=-1, keepdims=True)
        blocked = F.logical_and(F.is_inf(row_max), F.less(row_max, 0.0))
        probs = F.where(blocked, F.zeros_like(probs), probs)
    if mode == 3:
        qk_out = probs
    y = F.matmul(probs, v)
    if three_d:
        y = F.transpose(y, (0, 2, 1, 3))
        y = F.reshape(y, [-1, y.shape[1], y.shape[2] * y.shape[3]])
    return [y, present_k, present_v, qk_out]


@rule("OneHot")
def one_hot(ctx, node, x, a):
    indices = ctx.tensor(x[0])
    if indices.dtype != "int32":                  # float indices: truncated, as ONNX says
        indices = F.cast(indices, "int32")
    depth = int(np.asarray(ctx.static(x[1], "depth")).reshape(-1)[0])
    off, on = (np.asarray(ctx.static(x[2], "values")).reshape(-1)[:2]).tolist()
    indices = indices + F.cast(F.less(indices, 0), "int32") * depth   # negative: from the end
    rank = len(indices.shape) + 1
    axis = _axis(int(a.get("axis", -1)), rank)
    values = np.asarray(ctx.static(x[2], "values"))
    dtype = "float32" if np.issubdtype(values.dtype, np.floating) else \
        "bool" if values.dtype == np.bool_ else "int32"
    return F.one_hot(indices, depth, on_value=on, off_value=off, axis=axis, dtype=dtype)


def _scatter(ctx, node, data, flat_targets, updates, reduction):
    """data with updates written at flat positions flat_targets (known at import)."""
    size = int(np.prod(data.shape))
    flat_data = F.reshape(data, [size])
    flat_updates = F.reshape(updates, [-1])
    if reduction == "add":
        added = F.unsorted_segment_sum(flat_updates, flat_targets.astype(np.int32), size)
        return F.reshape(flat_data + added, list(data.shape))
    combine = {"none": None, "mul": F.mul, "max": F.maximum, "min": F.minimum}
    if reduction not in combine:
        raise ctx.error(f"reduction {reduction!r} is not supported")
    if reduction == "none":
        layers = [np.arange(flat_targets.size)]              # the last write wins
    else:                           # repeated targets: one layer per repetition, in order
        seen: dict = {}
        order = np.array([seen.setdefault(t, []).append(j) or len(seen[t]) - 1
                          for j, t in enumerate(flat_targets.tolist())])
        layers = [np.nonzero(order == r)[0] for r in range(int(order.max()) + 1)]
    out = flat_data
    for layer in layers:
        source = np.full(size, -1, np.int64)
        source[flat_targets[layer]] = layer
        written = F.constant(source >= 0)
        picked = F.gather(flat_updates, F.constant(np.maximum(source, 0).astype(np.int32)))
        if combine[reduction] is not None:
            picked = combine[reduction](out, picked)
        out = F.where(written, picked, out)
    return F.reshape(out, list(data.shape))


@rule("ScatterND")
def scatter_nd(ctx, node, x, a):
    reduction = a.get("reduction", "none")
    if isinstance(x[1], masked.MaskIndices):        # x[mask] = value
        return masked.scatter_at_mask(ctx, ctx.tensor(x[0]), x[1], x[2], reduction)
    data, updates = ctx.tensor(x[0]), ctx.tensor(x[2])
    if any(d is None for d in data.shape):
        raise ctx.error("ScatterND needs a static data shape")
    if not isinstance(x[1], (np.ndarray, Init)) and reduction in ("none", "add"):
        return _scatter_nd_computed(ctx, data, ctx.tensor(x[1]), updates, reduction)
    indices = np.asarray(ctx.static(x[1], "indices")).astype(np.int64)
    k = indices.shape[-1]
    shape = np.array(data.shape)
    idx = np.where(indices < 0, indices + shape[:k], indices).reshape(-1, k)
    inner = int(np.prod(shape[k:]))
    base = np.ravel_multi_index(idx.T, tuple(shape[:k])) * inner
    targets = (base[:, None] + np.arange(inner)[None, :]).reshape(-1)
    return _scatter(ctx, node, data, targets, updates, reduction)


def _scatter_nd_computed(ctx, data, indices, updates, reduction):
    """ScatterND whose indices the graph computes (wav2vec2's feature mask with an
    attention_mask feed: each row's last frame, at its length less one, set to 1):
    tensor_scatter_nd_update, or _add for reduction="add"; negative indices count from
    the end, as onnxruntime's. At run time an index out of range is dropped where
    onnxruntime raises; duplicates (undefined in ONNX) add up. (mul, max and min need
    the indices at import: the static path's error, which lets the ONNX backend bind
    them.)"""
    k = indices.shape[-1] if indices.shape else None
    if k is None or k > len(data.shape):
        raise ctx.error(f"ScatterND: indices of shape {list(indices.shape)} for data of "
                        f"rank {len(data.shape)} (their last axis must be static and at "
                        f"most the rank)")
    dims = F.constant(np.array(data.shape[:k], np.int32))
    indices = F.where(F.less(indices, 0), indices + dims, indices)
    scatter = F.tensor_scatter_nd_update if reduction == "none" else F.tensor_scatter_nd_add
    return scatter(data, indices, updates)


@rule("NonZero")
def nonzero(ctx, node, x, a):
    return masked.nonzero(ctx, x[0])


# sequences of tensors at import (frontend/onnx/sequences.py)
for _type, _fn in sequences.RULES.items():
    rule(_type)(_fn)


@rule("ScatterElements", "Scatter")
def scatter_elements(ctx, node, x, a):
    data, updates = ctx.tensor(x[0]), ctx.tensor(x[2])
    if any(d is None for d in data.shape):
        raise ctx.error("ScatterElements needs a static data shape")
    indices = np.asarray(ctx.static(x[1], "indices")).astype(np.int64)
    rank = len(data.shape)
    axis = _axis(int(a.get("axis", 0)), rank)
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    coords = list(np.indices(indices.shape))
    coords[axis] = indices
    targets = np.ravel_multi_index(tuple(c.reshape(-1) for c in coords), data.shape)
    return _scatter(ctx, node, data, targets, updates, a.get("reduction", "none"))


@rule("RandomUniform", "RandomUniformLike", "RandomNormal", "RandomNormalLike")
def random_draw(ctx, node, x, a):
    """Philox draws (ff.random_uniform, ff.random_normal: fresh values each run, the
    `seed` attribute choosing the stream, 0 when absent). onnxruntime's generator is
    another, so the values differ from its, not their distribution (ViT-MAE's masking
    noise when it is not fed). float32 whatever `dtype` says (float16 and float64
    compute in float32); the Like forms take the input's (static) shape."""
    shape = list(_shape(ctx, x[0])) if node.op_type.endswith("Like") else \
        [int(d) for d in a.get("shape", [])]
    if any(d is None for d in shape):
        raise ctx.error(f"{node.op_type} of a shape not known at import ({shape})")
    name = onnx_dtype_name(int(a.get("dtype", 1)))
    if name not in ("FLOAT", "FLOAT16", "DOUBLE") and "dtype" in a:
        raise ctx.error(f"{node.op_type} with dtype {name} (ONNX allows float types only)")
    seed = int(a["seed"]) if "seed" in a else None
    if node.op_type.startswith("RandomUniform"):
        return F.random_uniform(shape, float(a.get("low", 0.0)), float(a.get("high", 1.0)),
                                seed=seed)
    return F.random_normal(shape, float(a.get("mean", 0.0)), float(a.get("scale", 1.0)),
                           seed=seed)


@rule("LpPool")
def lp_pool(ctx, node, x, a):
    t = ctx.tensor(x[0])
    p = float(a.get("p", 2))
    kernel = tuple(a["kernel_shape"])
    strides = tuple(a.get("strides", [1] * len(kernel)))
    if len(t.shape) != 4 or any(r != 1 for r in a.get("dilations", [1] * len(kernel))):
        if len(t.shape) < 3:
            raise ctx.error(f"LpPool of a rank-{len(t.shape)} input (needs N, C and "
                            f"spatial axes)")
        a.setdefault("dilations", [1] * len(kernel))
        return _dilated(ctx, t, a, "lp", kernel, strides, p)
    padding = _pool_padding(ctx, a, t.shape[2:], kernel, strides)
    powered = F.transpose(F.pow(F.abs(t), p), TO_NHWC)
    if padding == "SAME":
        padding = _spatial_padding(ctx, {"auto_pad": "SAME_LOWER"}, t.shape[2:], kernel,
                                   strides, (1, 1))
        padding = [(e, b) for b, e in padding]          # SAME_UPPER's split
    if not isinstance(padding, str):                    # zeros count in the sum
        powered = F.pad(powered, [(0, 0)] + [tuple(q) for q in padding] + [(0, 0)])
    summed = F.avg_pool(powered, ksize=kernel, strides=strides, padding="VALID") * \
        float(np.prod(kernel))
    return F.transpose(F.pow(summed, 1.0 / p), TO_NCHW)


@rule("Shrink")
def shrink(ctx, node, x, a):
    t = ctx.tensor(x[0])
    lambd, bias = float(a.get("lambd", 0.5)), float(a.get("bias", 0.0))
    zero = F.zeros_like(t)
    return F.where(F.greater(t, lambd), t - bias,
                   F.where(F.less(t, -lambd), t + bias, zero))


@rule("GatherND")
def gather_nd(ctx, node, x, a):
    if int(a.get("batch_dims", 0)):
        raise ctx.error("GatherND with batch_dims > 0 is not supported")
    data = ctx.tensor(x[0])
    indices = x[1]
    if isinstance(indices, np.ndarray):
        k = indices.shape[-1]
        b = int(a.get("batch_dims", 0))
        dims = np.array(data.shape[b:b + k])
        if all(d is not None for d in dims):
            indices = np.where(indices < 0, indices + dims, indices)
        indices = ctx.as_int32(np.asarray(indices).astype(np.int64))
    return F.gather_nd(data, ctx.tensor(indices), batch_dims=int(a.get("batch_dims", 0)))


@rule("Swish")
def swish(ctx, node, x, a):
    t = ctx.tensor(x[0])
    return t * F.sigmoid(float(a.get("alpha", 1.0)) * t)


@rule("GroupNormalization")
def group_norm(ctx, node, x, a):
    a.get("stash_type")
    t = ctx.tensor(x[0])
    groups = int(a["num_groups"])
    eps = float(a.get("epsilon", 1e-5))
    n, c, *spatial = t.shape
    if c is None or any(d is None for d in spatial) or c % groups:
        raise ctx.error("GroupNormalization needs static channels divisible by num_groups")
    grouped = F.reshape(t, [-1, groups, c // groups, *spatial])
    axes = tuple(range(2, 3 + len(spatial)))
    mean = F.reduce_mean(grouped, axis=axes, keepdims=True)
    centred = grouped - mean
    var = F.reduce_mean(F.square(centred), axis=axes, keepdims=True)
    normed = F.reshape(centred * F.rsqrt(var + eps), [-1, c, *spatial])
    scale, bias = ctx.tensor(x[1]), ctx.tensor(x[2])
    if scale.shape[0] == groups and groups != c:     # opset 18: one per group
        scale = F.reshape(F.tile(F.reshape(scale, [groups, 1]), [1, c // groups]), [c])
        bias = F.reshape(F.tile(F.reshape(bias, [groups, 1]), [1, c // groups]), [c])
    return normed * _per_channel(scale, len(t.shape)) + _per_channel(bias, len(t.shape))


def _einsum_operands(ctx, equation, count):
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != count or "." in equation:
        raise ctx.error(f"Einsum {equation!r}: ellipses are not supported")
    if not arrow:                                 # implicit output: letters seen once, sorted
        letters = "".join(terms)
        rhs = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    for term in terms + [rhs]:
        if len(set(term)) != len(term):
            raise ctx.error(f"Einsum {equation!r}: a repeated index in one operand "
                            f"(diagonals) is not supported")
    return terms, rhs


def _sum_out(t, term, keep):
    """t (indexed by term) summed over the letters not in keep."""
    axes = tuple(i for i, c in enumerate(term) if c not in keep)
    if axes:
        t = F.reduce_sum(t, axis=axes)
        term = "".join(c for c in term if c in keep)
    return t, term


def _permute(t, term, order):
    if term == order:
        return t
    return F.transpose(t, tuple(term.index(c) for c in order))


@rule("Einsum")
def einsum(ctx, node, x, a):
    """One or two operands, as sums, transposes and one batched matmul."""
    equation = a["equation"]
    ts = [ctx.tensor(v) for v in x]
    terms, out = _einsum_operands(ctx, equation, len(ts))
    if len(ts) == 1:
        t, term = _sum_out(ts[0], terms[0], out)
        return _permute(t, term, out)
    if len(ts) != 2:
        raise ctx.error("Einsum of more than two operands is not supported")
    (p, tp), (q, tq) = (_sum_out(ts[0], terms[0], terms[1] + out),
                        _sum_out(ts[1], terms[1], terms[0] + out))
    batch = "".join(c for c in tp if c in tq and c in out)
    contract = "".join(c for c in tp if c in tq and c not in out)
    left = "".join(c for c in tp if c not in tq)
    right = "".join(c for c in tq if c not in tp)
    dims = {c: d for term, t in ((tp, p), (tq, q)) for c, d in zip(term, t.shape)}
    if any(dims[c] is None for c in left + right + contract):
        raise ctx.error(f"Einsum {equation!r} needs static sizes")

    def size(letters):
        return int(np.prod([dims[c] for c in letters], dtype=np.int64))
    batch_shape = [dims[c] if dims[c] is not None else -1 for c in batch]
    p3 = F.reshape(_permute(p, tp, batch + left + contract),
                   batch_shape + [size(left), size(contract)])
    q3 = F.reshape(_permute(q, tq, batch + contract + right),
                   batch_shape + [size(contract), size(right)])
    y = F.matmul(p3, q3)
    y = F.reshape(y, batch_shape + [dims[c] for c in left + right])
    return _permute(y, batch + left + right, out)
