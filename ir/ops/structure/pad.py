"""pad (a constant border), mirror_pad (REFLECT or SYMMETRIC) and mirror_pad_grad
(the mirrored border folded back: mirror_pad's gradient, whose own gradient is
mirror_pad)."""
from __future__ import annotations

import numpy as np

from ...errors import AttrError, ShapeError
from ...types import TensorType, format_shape
from ..common import apply
from ..registry import REQUIRED, OpDef, register
from .checks import (
    padding_pairs,
    scalar_of,
)

MIRROR_MODES = ("REFLECT", "SYMMETRIC")


def _check_paddings(paddings, rank):
    if len(paddings) != rank:
        raise ShapeError(f"paddings has {len(paddings)} rows for a tensor of rank {rank}; "
                         f"give one (before, after) pair per axis")
    for a, pair in enumerate(paddings):
        if len(pair) != 2:
            raise ShapeError(f"paddings row {a} is {pair}: give (before, after)")
        if pair[0] < 0 or pair[1] < 0:
            raise ShapeError(f"negative padding {tuple(pair)} at axis {a}; pad amounts "
                             f"must be >= 0 (use slice to cut)")


def _padded(shape, paddings):
    return tuple(None if d is None else d + b + e for d, (b, e) in zip(shape, paddings))


def _pad_type(types, attrs):
    (t,) = types
    _check_paddings(attrs["paddings"], t.rank)
    return TensorType(_padded(t.shape, attrs["paddings"]), t.dtype)


register(OpDef("pad", "structure", _pad_type,
               lambda arrays, attrs: np.pad(arrays[0], attrs["paddings"], mode="constant",
                                            constant_values=attrs["constant_value"]),
               attrs={"paddings": REQUIRED, "constant_value": 0}, num_inputs=1, tf="tf.pad"))


def _check_mirror(shape, paddings, mode):
    if mode not in MIRROR_MODES:
        raise AttrError(f"mode must be REFLECT or SYMMETRIC, got {mode!r}")
    for a, (d, (b, e)) in enumerate(zip(shape, paddings)):
        limit = None if d is None else d - 1 if mode == "REFLECT" else d
        if limit is not None and max(b, e) > limit:
            raise ShapeError(f"{mode} padding {(b, e)} at axis {a} is larger than the "
                             f"axis allows ({limit} for size {d})")


def _mirror_pad_type(types, attrs):
    (t,) = types
    _check_paddings(attrs["paddings"], t.rank)
    _check_mirror(t.shape, attrs["paddings"], attrs["mode"])
    return TensorType(_padded(t.shape, attrs["paddings"]), t.dtype)


register(OpDef("mirror_pad", "structure", _mirror_pad_type,
               lambda arrays, attrs: np.pad(arrays[0], attrs["paddings"],
                                            mode=attrs["mode"].lower()),
               attrs={"paddings": REQUIRED, "mode": "REFLECT"}, num_inputs=1,
               tf="tf.pad (REFLECT/SYMMETRIC)"))


def mirror_source(o, before, dim, mode):
    """The input coordinate padded position o reads (also used by the reference)."""
    s = o - before
    if s < 0:
        return -s if mode == "REFLECT" else -s - 1
    if s >= dim:
        return 2 * (dim - 1) - s if mode == "REFLECT" else 2 * dim - 1 - s
    return s


def _mirror_pad_grad_type(types, attrs):
    (t,) = types
    _check_paddings(attrs["paddings"], t.rank)
    shape = tuple(None if d is None else d - b - e for d, (b, e) in zip(t.shape, attrs["paddings"]))
    if any(d is not None and d < 0 for d in shape):
        raise ShapeError(f"paddings {attrs['paddings']} are larger than "
                         f"{format_shape(t.shape)}")
    _check_mirror(shape, attrs["paddings"], attrs["mode"])
    return TensorType(shape, t.dtype)


def _mirror_pad_grad_ref(arrays, attrs):
    # Fold one axis at a time: every padded position adds into the input position
    # it was copied from.
    g = arrays[0]
    for axis, (b, e) in enumerate(attrs["paddings"]):
        dim = g.shape[axis] - b - e
        src = [mirror_source(o, b, dim, attrs["mode"]) for o in range(g.shape[axis])]
        moved = np.moveaxis(g, axis, 0)
        out = np.zeros((dim,) + moved.shape[1:], g.dtype)
        np.add.at(out, np.array(src, np.int64), moved)
        g = np.moveaxis(out, 0, axis)
    return np.ascontiguousarray(g)


register(OpDef("mirror_pad_grad", "structure", _mirror_pad_grad_type, _mirror_pad_grad_ref,
               attrs={"paddings": REQUIRED, "mode": "REFLECT"}, num_inputs=1,
               tf="MirrorPadGrad"))


def pad(x, paddings, constant_value=0, name=None):
    return apply("pad", [x], {"paddings": padding_pairs(paddings),
                              "constant_value": scalar_of(constant_value, x.dtype)}, name)


def mirror_pad(x, paddings, mode="REFLECT", name=None):
    return apply("mirror_pad", [x],
                 {"paddings": padding_pairs(paddings), "mode": str(mode).upper()}, name)


def mirror_pad_grad(dy, paddings, mode="REFLECT", name=None):
    return apply("mirror_pad_grad", [dy], {"paddings": padding_pairs(paddings),
                                           "mode": str(mode).upper()}, name)
