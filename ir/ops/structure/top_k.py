"""top_k in two ops: top_k_rank (each element's place in its last axis, sorted
descending, ties by lower index) and top_k_indices (the indices of places 0..k-1).
top_k_select {k} is the two in one, x to the indices of its k first places: the pass
select_top_k (passes/top_k.py) makes it from a top_k_indices reading a top_k_rank, so
that GL can find the k largest without ranking every element (codegen/top_k.py).

NaN sorts first (as the largest), then +inf ... -inf, equal values (-0.0 == 0.0, NaN
== NaN) by lower index. TensorFlow leaves NaN's place open: its CPU TopKV2 sorts with
a comparator to which NaN is equal to every value (not a strict weak order), TF.js's
CPU sort alike, so its answers depend on the sort algorithm and the data around the
NaN; NaN first is torch.topk's choice and one order for every backend here."""
from __future__ import annotations

import numpy as np

from ...errors import AttrError, ShapeError
from ...types import TensorType
from ..common import apply
from ..registry import REQUIRED, OpDef, register
from .checks import (
    NUMERIC,
    check_dtype_in,
)


def _top_k_rank_type(types, attrs):
    (t,) = types
    check_dtype_in(t.dtype, NUMERIC, "top_k's input")
    if t.rank == 0:
        raise ShapeError("top_k needs a tensor of rank >= 1")
    return TensorType(t.shape, "int32")


def _top_k_rank_ref(arrays, attrs):
    (x,) = arrays
    n = x.shape[-1]
    rows = x.reshape(-1, n)
    rank = np.zeros(rows.shape, np.int32)
    index = np.arange(n)
    for r, row in enumerate(rows):
        nan = np.isnan(row) if row.dtype.kind == "f" else np.zeros(n, bool)
        value = np.where(nan, 0, row).astype(np.float64)   # exact; -INT32_MIN fits
        # NaN first, then larger values, then lower indices (lexsort: last key primary)
        order = np.lexsort((index, -value, ~nan))
        rank[r, order] = index
    return rank.reshape(x.shape)


register(OpDef("top_k_rank", "structure", _top_k_rank_type, _top_k_rank_ref,
               num_inputs=1, no_gradient="integer ranks", tf="tf.math.top_k"))


def _top_k_indices_type(types, attrs):
    (t,) = types
    check_dtype_in(t.dtype, ("int32",), "ranks")
    k, n = attrs["k"], t.shape[-1]
    if not isinstance(k, int) or k < 0:
        raise AttrError(f"k must be an int >= 0, got {k!r}")
    if n is not None and k > n:
        raise ShapeError(f"k = {k} is larger than the last axis ({n})")
    return TensorType(t.shape[:-1] + (k,), "int32")


register(OpDef("top_k_indices", "structure", _top_k_indices_type,
               lambda arrays, attrs: np.argsort(arrays[0], axis=-1, kind="stable")
               [..., :attrs["k"]].astype(np.int32),
               attrs={"k": REQUIRED}, num_inputs=1, no_gradient="integer indices",
               tf="tf.math.top_k"))


def _top_k_select_type(types, attrs):
    (t,) = types
    _top_k_rank_type(types, attrs)
    return _top_k_indices_type([TensorType(t.shape, "int32")], attrs)


def _top_k_select_ref(arrays, attrs):
    rank = _top_k_rank_ref(arrays, attrs)
    return np.argsort(rank, axis=-1, kind="stable")[..., :attrs["k"]].astype(np.int32)


register(OpDef("top_k_select", "structure", _top_k_select_type, _top_k_select_ref,
               attrs={"k": REQUIRED}, num_inputs=1, no_gradient="integer indices",
               tf="tf.math.top_k"))


def top_k_rank(x, name=None):
    return apply("top_k_rank", [x], None, name)


def top_k_indices(rank, k, name=None):
    return apply("top_k_indices", [rank], {"k": int(k)}, name)


def top_k_select(x, k, name=None):
    return apply("top_k_select", [x], {"k": int(k)}, name)
