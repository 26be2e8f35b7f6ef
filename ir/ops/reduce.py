"""Reductions: sum, mean, max, min, prod and variance over axis (None, an int or a
tuple), with keepdims; argmax and argmin over one axis (int32 indices, the first on ties,
NaN counts as the largest/smallest like NumPy).

An empty reduction gives the identity: 0 for sum, 1 for prod, -inf / int32's minimum for
max and +inf / int32's maximum for min (TensorFlow's values); the float mean (and
variance) of nothing is NaN (0/0, as TensorFlow and NumPy give) and the int32 mean 0.
mean of an int32 tensor is the wrapped int32 sum divided by the count, truncated
(TensorFlow's). variance is tf.math.reduce_variance's: the mean of squared deviations
from the mean (float32; NaN where an element is NaN or infinite).

Each reduction's record (`Reduction`, OpDef.reduction) says how kernels compute it as
passes over windows (codegen/reduce_tree.py, templates/reduce_tree.glsl.j2): the
`Combine` folding elements into an accumulator, the finish step of the last pass, and
the reduction whose result shifts its elements first (logsumexp's max, variance's mean).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import AttrError, DTypeError, ShapeError
from ..types import TensorType, normalize_axes
from .common import apply
from .registry import Onnx, OpDef, get_op, register

# ONNX's Reduce* take axes as an attribute or (opset 13/18) an input: one importer rule
_BY_REDUCE_RULE = "frontend/onnx/op_table.py reduce: axes by opset, noop_with_empty_axes"

NUMERIC = ("float32", "int32")


def _float_big(dtype):
    return np.inf if dtype == "float32" else np.iinfo(np.int32).max


@dataclass(frozen=True)
class Combine:
    """How a pass folds value {v} into a lane's accumulator {a}: GLSL statements
    (float32's; glsl_int: int32's where they differ), {shift} the element's shift where
    the reduction has one. {pa}/{p}: the accumulator's and the value's positions
    (positional combines, which keep the winner's). merge folds partial {b} into {a}
    ("": as a value); then: the combine of every pass after the first ("": this one);
    lane_partials: the order of the operands is free, so a pass may keep four partial
    accumulators per window, one per lane, or write neighbours to render targets;
    identity(dtype): the accumulator's start, init: its GLSL ("": identity's literal)."""
    name: str
    glsl: str
    identity: Callable
    glsl_int: str = ""
    merge: str = ""
    then: str = ""
    init: str = ""
    lane_partials: bool = False
    positional: str = ""          # the comparison a winner makes (">": argmax)
    out: str = "result[{c}] = {a};"   # lane {c}'s result of a pass that does not finish

    def update(self, dtype: str) -> str:
        return self.glsl_int if dtype != "float32" and self.glsl_int else self.glsl


# selects of values, not an `if` around the update: SwiftShader's JIT pays per branch
# (reduce_tree.glsl.j2's better() has none either; docs/WEBGL.md, "Rasterisers")
_BETTER = ("{{\n    int ff_p = {p};\n    bool ff_w = better({v}, ff_p, {a}, {pa});\n"
           "    {a} = ff_w ? {v} : {a};\n    {pa} = ff_w ? ff_p : {pa};\n}}")
_STICKY = "{a} = any(bvec2({v} %s {a}, isnan({v}))) ? {v} : {a};   // NaN sticks"

COMBINES = {c.name: c for c in (
    Combine("sum", "{a} += {v};", lambda dtype: 0, init="0", lane_partials=True),
    Combine("prod", "{a} *= {v};", lambda dtype: 1, init="1", lane_partials=True),
    Combine("max", _STICKY % ">", lambda dtype: -_float_big(dtype) if dtype == "float32"
            else np.iinfo(np.int32).min, glsl_int="{a} = max({a}, {v});", lane_partials=True),
    Combine("min", _STICKY % "<", _float_big, glsl_int="{a} = min({a}, {v});",
            lane_partials=True),
    Combine("argmax", _BETTER, lambda dtype: -_float_big(dtype) if dtype == "float32"
            else np.iinfo(np.int32).min, positional=">", out="result[{c}] = {p};"),
    Combine("argmin", _BETTER, _float_big, positional="<", out="result[{c}] = {p};"),
    # exp(x - shift) summed: logsumexp's and softmax's sums, shifted by the slice max
    # -inf (and NaN, which the max already carries) adds nothing. A select of values
    # (mix with a bool), never `?:` with an expression as an arm: ANGLE makes that a
    # branch, and SwiftShader's compile time grows ~6x per four such branches in one
    # loop body (an unrolled pass of 32 hung Chrome; docs/WEBGL.md, "Rasterisers")
    Combine("sumexp", "{a} += mix(0.0, exp({v} - {shift}), {v} > -ff_inf());",
            lambda dtype: 0, merge="{a} += {b};", then="sum", init="0", lane_partials=True),
    # (x - shift)^2 summed: variance's, shifted by the slice mean
    Combine("sumsq", "{a} += ({v} - {shift}) * ({v} - {shift});", lambda dtype: 0,
            merge="{a} += {b};", then="sum", init="0", lane_partials=True),
)}

_MEAN = "result[{c}] = {a} / float(COUNT);"
_MEAN_INT = ("// truncating division of the wrapped sum (GLSL leaves negative / undefined)\n"
             "result[{c}] = {a} < 0 ? -int(uint(-{a}) / uint(COUNT)) : {a} / COUNT;")
_LOGSUMEXP = """{{
    // TensorFlow's reduce_logsumexp: NaN with any NaN, else +-inf with an
    // infinite max (the sum is then meaningless), else max + log(sum)
    float mx = fetch_{shift}({e});
    result[{c}] = isnan(mx) ? ff_nan() : (isinf(mx) ? mx : mx + log({a}));
}}"""


@dataclass(frozen=True)
class Reduction:
    """A reduction as kernels compute it: `combine` (a COMBINES name) folds the elements;
    the last pass finishes lane {c}'s result from its accumulator {a} with `finish`
    (GLSL; finish_int for int32; "": the combine's out; COUNT: the elements reduced
    into each result, {e}: the output element, {shift}: the shift's sampler);
    `shift`: the reduction (an op's name) computed first whose result per kept element
    the combine reads; empty(dtype): the result of reducing nothing; transposable: a
    transpose of its input may move past it, its axes permuted
    (passes/layout_transposes.py)."""
    combine: str
    empty: Callable
    finish: str = ""
    finish_int: str = ""
    shift: str = ""
    transposable: bool = False

    @property
    def folds(self) -> Combine:
        return COMBINES[self.combine]

    def finish_for(self, dtype: str) -> str:
        text = self.finish_int if dtype != "float32" and self.finish_int else self.finish
        return text or self.folds.out


def _nan_or_zero(dtype):
    return np.nan if dtype == "float32" else 0


def identity_of(op: str, dtype: str):
    """An empty reduction's value (KeyError: op is no transposable reduction: sum,
    mean, max, min, prod)."""
    reduction = get_op(op).reduction
    if reduction is None or not reduction.transposable:
        raise KeyError(op)
    return reduction.empty(dtype)


def reduced_shape(shape, axes, keepdims):
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_type(types, attrs):
    (t,) = types
    if t.dtype not in NUMERIC:
        raise DTypeError(f"does not accept {t.dtype} inputs (accepts float32, int32); "
                         f"cast first")
    axes = normalize_axes(attrs["axis"], t.rank)
    return TensorType(reduced_shape(t.shape, axes, attrs["keepdims"]), t.dtype)


def _reduce_ref(op):
    def ref(arrays, attrs):
        (x,) = arrays
        axes = normalize_axes(attrs["axis"], x.ndim)
        keep = attrs["keepdims"]
        out_shape = reduced_shape(x.shape, axes, keep)
        if x.size == 0 or any(x.shape[a] == 0 for a in axes):
            return np.full(out_shape, identity_of(op, x.dtype.name), x.dtype)
        if op == "mean" and x.dtype == np.int32:
            total = np.sum(x, axis=axes, keepdims=keep, dtype=np.int32)
            count = int(np.prod([x.shape[a] for a in axes]))
            return (np.sign(total) * (np.abs(total.astype(np.int64)) // count)).astype(np.int32)
        fn = {"sum": np.sum, "mean": np.mean, "prod": np.prod, "max": np.max,
              "min": np.min}[op]
        kwargs = {"dtype": x.dtype} if op in ("sum", "mean", "prod") else {}
        return np.asarray(fn(x, axis=axes, keepdims=keep, **kwargs)).astype(x.dtype)
    return ref


for _op, _reduction in (
        ("sum", Reduction("sum", COMBINES["sum"].identity, transposable=True)),
        ("mean", Reduction("sum", _nan_or_zero, finish=_MEAN, finish_int=_MEAN_INT,
                           transposable=True)),
        ("max", Reduction("max", COMBINES["max"].identity, transposable=True)),
        ("min", Reduction("min", COMBINES["min"].identity, transposable=True)),
        ("prod", Reduction("prod", COMBINES["prod"].identity, transposable=True))):
    register(OpDef(_op, "reduce", _reduce_type, _reduce_ref(_op),
                   attrs={"axis": None, "keepdims": False}, num_inputs=1,
                   tf=f"tf.reduce_{_op}", reduction=_reduction,
                   onnx=Onnx(f"Reduce{_op.capitalize()}", _BY_REDUCE_RULE)))


def _variance_type(types, attrs):
    if types[0].dtype != "float32":
        raise DTypeError(f"does not accept {types[0].dtype} inputs (accepts float32); "
                         f"cast first")
    return _reduce_type(types, attrs)


def _variance_ref(arrays, attrs):
    (x,) = arrays
    axes = normalize_axes(attrs["axis"], x.ndim)
    shape = reduced_shape(x.shape, axes, attrs["keepdims"])
    if x.size == 0 or any(x.shape[a] == 0 for a in axes):
        return np.full(shape, np.nan, x.dtype)
    with np.errstate(invalid="ignore"):         # inf - inf: NaN, as TensorFlow's
        return np.asarray(np.var(x, axis=axes, keepdims=attrs["keepdims"])).astype(x.dtype)


register(OpDef("variance", "reduce", _variance_type, _variance_ref,
               attrs={"axis": None, "keepdims": False}, num_inputs=1,
               tf="tf.math.reduce_variance",
               reduction=Reduction("sumsq", _nan_or_zero, finish=_MEAN, shift="mean"),
               doc="The mean of squared deviations from the mean over axis (population "
                   "variance); NaN where an element is NaN or infinite."))


def _arg_type(types, attrs):
    (t,) = types
    if t.dtype not in NUMERIC:
        raise DTypeError(f"does not accept {t.dtype} inputs (accepts float32, int32)")
    (axis,) = normalize_axes(attrs["axis"], t.rank)
    if t.shape[axis] == 0:
        raise ShapeError(f"cannot take the arg-extremum of an empty axis {axis}")
    return TensorType(reduced_shape(t.shape, (axis,), False), "int32")


def _arg_ref(fn):
    def ref(arrays, attrs):
        (x,) = arrays
        (axis,) = normalize_axes(attrs["axis"], x.ndim)
        return fn(x, axis=axis).astype(np.int32)
    return ref


register(OpDef("argmax", "reduce", _arg_type, _arg_ref(np.argmax), attrs={"axis": 0},
               num_inputs=1, no_gradient="integer indices", tf="tf.math.argmax",
               reduction=Reduction("argmax", COMBINES["argmax"].identity)))
register(OpDef("argmin", "reduce", _arg_type, _arg_ref(np.argmin), attrs={"axis": 0},
               num_inputs=1, no_gradient="integer indices", tf="tf.math.argmin",
               reduction=Reduction("argmin", COMBINES["argmin"].identity)))


def _axis_attr(axis):
    if axis is None or isinstance(axis, (int, np.integer)) and not isinstance(axis, bool):
        return None if axis is None else int(axis)
    # a string is a sequence too: axis="21" must not mean axes (2, 1)
    if isinstance(axis, (str, bytes, float, bool)) or not hasattr(axis, "__iter__") or \
            any(isinstance(a, bool) or not isinstance(a, (int, np.integer)) for a in axis):
        raise ShapeError(f"axis must be None, an int or a sequence of ints, got {axis!r}")
    return tuple(int(a) for a in axis)


def reduce(op: str, x, axis=None, keepdims=False, name=None):
    return apply(op, [x], {"axis": _axis_attr(axis), "keepdims": bool(keepdims)}, name)


def arg_reduce(op: str, x, axis=0, name=None):
    if not isinstance(axis, (int, np.integer)):
        raise ShapeError(f"{op} takes a single axis, got {axis!r}")
    return apply(op, [x], {"axis": int(axis)}, name)


# --- Normalisation, scans and local response normalisation --------------------------
#
# softmax(x) {axis}, log_softmax(x) {axis}: over one axis, max-subtracted. As in
# TensorFlow, a slice holding NaN or +inf, or only -inf, gives NaN throughout; -inf
# elements beside finite ones get probability 0 (log-probability -inf).
# logsumexp(x) {axis, keepdims}: log(sum(exp(x))) over axis (None, an int or a tuple),
# TensorFlow's reduce_logsumexp: NaN if any NaN, +inf if any +inf, -inf if all are -inf
# (and for an empty reduction).
# cumsum(x) {axis, exclusive, reverse}: running sums along one axis, float32 or int32
# (int32 wraps, like the sums above).
# lrn(x) {depth_radius, bias, alpha, beta}: TensorFlow's local_response_normalization
# over the last axis of a 4-D tensor, x / (bias + alpha * sum of squares of the window
# x[..., d - r : d + r + 1]) ** beta; lrn_grad(dy, x) {same attrs} is its gradient
# (TensorFlow's LRNGrad, with the window sums recomputed from x).


def _float_only(t):
    if t.dtype != "float32":
        raise DTypeError(f"does not accept {t.dtype} inputs (accepts float32); cast first")


def _one_axis(attrs, rank, what="axis"):
    axis = attrs["axis"]
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise ShapeError(f"takes a single int {what}, got {axis!r}")
    if rank == 0:
        raise ShapeError("needs a tensor of rank >= 1, got a scalar")
    (axis,) = normalize_axes(axis, rank)
    return axis


def _softmax_type(types, attrs):
    (t,) = types
    _float_only(t)
    _one_axis(attrs, t.rank)
    return TensorType(t.shape, t.dtype)


def _shifted(x, axis):
    """x minus its max along axis (NaN where the max is NaN or infinite makes it so)."""
    return x - np.max(x, axis=axis, keepdims=True)


def _softmax_ref(arrays, attrs):
    (x,) = arrays
    axis = attrs["axis"] % x.ndim
    if x.shape[axis] == 0:
        return x.copy()
    e = np.exp(_shifted(x, axis))
    return (e / np.sum(e, axis=axis, keepdims=True)).astype(x.dtype)


def _log_softmax_ref(arrays, attrs):
    (x,) = arrays
    axis = attrs["axis"] % x.ndim
    if x.shape[axis] == 0:
        return x.copy()
    s = _shifted(x, axis)
    return (s - np.log(np.sum(np.exp(s), axis=axis, keepdims=True))).astype(x.dtype)


def _logsumexp_type(types, attrs):
    (t,) = types
    _float_only(t)
    axes = normalize_axes(attrs["axis"], t.rank)
    return TensorType(reduced_shape(t.shape, axes, attrs["keepdims"]), t.dtype)


def _logsumexp_ref(arrays, attrs):
    (x,) = arrays
    axes = normalize_axes(attrs["axis"], x.ndim)
    keep = attrs["keepdims"]
    if x.size == 0 or any(x.shape[a] == 0 for a in axes):
        return np.full(reduced_shape(x.shape, axes, keep), -np.inf, x.dtype)
    # TensorFlow's reduce_logsumexp: shift by the max unless the max is infinite
    raw = np.max(x, axis=axes, keepdims=True)
    shift = np.where(np.isfinite(raw), raw, 0).astype(x.dtype)
    out = np.log(np.sum(np.exp(x - shift), axis=axes, keepdims=True)) + shift
    if not keep:
        out = np.squeeze(out, axis=axes)
    return np.asarray(out).astype(x.dtype)


def _cumsum_type(types, attrs):
    (t,) = types
    if t.dtype not in NUMERIC:
        raise DTypeError(f"does not accept {t.dtype} inputs (accepts float32, int32); "
                         f"cast first")
    _one_axis(attrs, t.rank)
    return TensorType(t.shape, t.dtype)


def _cumsum_ref(arrays, attrs):
    (x,) = arrays
    axis = attrs["axis"] % x.ndim
    if attrs["reverse"]:
        x = np.flip(x, axis)
    out = np.cumsum(x, axis=axis, dtype=x.dtype)
    if attrs["exclusive"]:
        # shift by one along axis: the first running sum is the empty one, 0
        out = np.concatenate([np.zeros_like(np.take(out, [0], axis=axis)),
                              np.take(out, range(x.shape[axis] - 1), axis=axis)],
                             axis=axis) if x.shape[axis] else out
    if attrs["reverse"]:
        out = np.flip(out, axis)
    return np.ascontiguousarray(out).astype(x.dtype)


def _lrn_type(types, attrs):
    t = types[-1]
    _float_only(t)
    if t.rank != 4:
        raise ShapeError(f"needs a 4-D input (NHWC), got rank {t.rank}")
    r = attrs["depth_radius"]
    if not isinstance(r, (int, np.integer)) or isinstance(r, bool) or r < 0:
        raise AttrError(f"depth_radius must be an int >= 0, got {r!r}")
    if len(types) == 2 and (types[0].shape != t.shape or types[0].dtype != t.dtype):
        raise ShapeError(f"the gradient {types[0]} does not match the input {t}")
    return TensorType(t.shape, t.dtype)


def _window_sum_of_squares(x, r):
    """sum of x[..., d - r : d + r + 1] ** 2 over the last axis, clipped at the ends."""
    depth = x.shape[-1]
    sq = np.square(x)
    out = np.zeros_like(x)
    for d in range(depth):
        out[..., d] = np.sum(sq[..., max(0, d - r):d + r + 1], axis=-1)
    return out


def _lrn_norm(x, attrs):
    return attrs["bias"] + attrs["alpha"] * _window_sum_of_squares(x, attrs["depth_radius"])


def _lrn_ref(arrays, attrs):
    (x,) = arrays
    return (x * _lrn_norm(x, attrs) ** -attrs["beta"]).astype(x.dtype)


def _lrn_grad_ref(arrays, attrs):
    dy, x = arrays
    r, alpha, beta = attrs["depth_radius"], attrs["alpha"], attrs["beta"]
    norm = _lrn_norm(x, attrs)
    # d y_j / d x_i = [i == j] norm_j^-beta - 2 alpha beta x_i x_j norm_j^(-beta-1)
    # for i in j's window (the window relation is symmetric)
    t = dy * x * norm ** (-beta - 1)
    depth = x.shape[-1]
    window_t = np.zeros_like(t)
    for d in range(depth):
        window_t[..., d] = np.sum(t[..., max(0, d - r):d + r + 1], axis=-1)
    return (dy * norm ** -beta - 2 * alpha * beta * x * window_t).astype(x.dtype)


_LRN_ATTRS = {"depth_radius": 5, "bias": 1.0, "alpha": 1.0, "beta": 0.5}

register(OpDef("softmax", "reduce", _softmax_type, _softmax_ref, attrs={"axis": -1},
               num_inputs=1, tf="tf.nn.softmax"))
register(OpDef("log_softmax", "reduce", _softmax_type, _log_softmax_ref,
               attrs={"axis": -1}, num_inputs=1, tf="tf.nn.log_softmax"))
register(OpDef("logsumexp", "reduce", _logsumexp_type, _logsumexp_ref,
               attrs={"axis": None, "keepdims": False}, num_inputs=1,
               tf="tf.reduce_logsumexp", onnx=Onnx("ReduceLogSumExp", _BY_REDUCE_RULE),
               reduction=Reduction("sumexp", lambda dtype: -np.inf, finish=_LOGSUMEXP,
                                   shift="max")))
register(OpDef("cumsum", "reduce", _cumsum_type, _cumsum_ref,
               attrs={"axis": 0, "exclusive": False, "reverse": False}, num_inputs=1,
               tf="tf.math.cumsum"))
register(OpDef("lrn", "reduce", _lrn_type, _lrn_ref, attrs=dict(_LRN_ATTRS), num_inputs=1,
               tf="tf.nn.local_response_normalization"))
register(OpDef("lrn_grad", "reduce", _lrn_type, _lrn_grad_ref, attrs=dict(_LRN_ATTRS),
               num_inputs=2, tf="LRNGrad"))


def _int_attr(v):
    return int(v) if isinstance(v, np.integer) else v    # checked by the type rules


def softmax(op: str, x, axis=-1, name=None):
    """softmax or log_softmax over one axis."""
    return apply(op, [x], {"axis": _int_attr(axis)}, name)


def logsumexp(x, axis=None, keepdims=False, name=None):
    return apply("logsumexp", [x], {"axis": _axis_attr(axis), "keepdims": bool(keepdims)},
                 name)


def cumsum(x, axis=0, exclusive=False, reverse=False, name=None):
    return apply("cumsum", [x], {"axis": _int_attr(axis), "exclusive": bool(exclusive),
                                 "reverse": bool(reverse)}, name)


def _lrn_attrs(depth_radius, bias, alpha, beta):
    return {"depth_radius": _int_attr(depth_radius), "bias": float(bias),
            "alpha": float(alpha), "beta": float(beta)}


def lrn(x, depth_radius=5, bias=1.0, alpha=1.0, beta=0.5, name=None):
    return apply("lrn", [x], _lrn_attrs(depth_radius, bias, alpha, beta), name)


def lrn_grad(dy, x, depth_radius=5, bias=1.0, alpha=1.0, beta=0.5, name=None):
    return apply("lrn_grad", [dy, x], _lrn_attrs(depth_radius, bias, alpha, beta), name)
