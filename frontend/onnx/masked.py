"""Writes at a mask's positions: torch's `x[mask] = value` as the dynamo exporter writes it.

torch.onnx.export (dynamo=True, torch's default) exports an index_put at a boolean mask
the graph computes as

    ScatterND(data, Transpose(NonZero(mask)), Expand(value, [ReduceSum(mask)]))

(wav2vec2's padded frames set to zero, for one). NonZero's and Expand's results have a
size the data decides, which a fragflow graph cannot hold; the write itself has none:
it is `where(mask, value, data)`. So NonZero of a computed value and Expand of one
value to a computed shape import as deferred values (the classes below) that the
Transpose and ScatterND rules read; any other reader gets an OnnxImportError naming the
node that made the value (Importer.tensor)."""
from __future__ import annotations

import numpy as np

import fragflow.frontend as F

from .importer import Deferred, Init


class MaskIndices(Deferred):
    """NonZero(mask) of a mask the graph computes: the [rank, n] indices of its true
    elements (transposed: [n, rank], ScatterND's form)."""

    def __init__(self, mask, refusal, transposed=False):
        super().__init__(refusal)
        self.mask, self.transposed = mask, transposed

    @property
    def shape(self) -> tuple:
        return (None, len(self.mask.shape)) if self.transposed else (len(self.mask.shape),
                                                                    None)


class Filled(Deferred):
    """Expand of one value (every dim 1) to a shape the graph computes."""

    def __init__(self, value, refusal):
        super().__init__(refusal)
        self.value = value


def nonzero(ctx, x):
    """NonZero: its value at import for a static input, else MaskIndices."""
    if isinstance(x, (np.ndarray, Init)):
        array = x.array if isinstance(x, Init) else x
        return ctx.as_int32(np.array(np.nonzero(array), np.int64).reshape(array.ndim, -1))
    t = ctx.tensor(x)
    mask = t if t.dtype == "bool" else F.not_equal(t, F.constant(np.zeros((), t.dtype)))
    return MaskIndices(mask, ctx.error(
        "NonZero of a value the graph computes: its result's size depends on the data, "
        "which a fragflow graph cannot hold; it is imported only as ScatterND's indices "
        "(after a Transpose): a write at a mask's positions, torch's x[mask] = value"))


def transposed(ctx, indices: MaskIndices, perm) -> MaskIndices:
    if [int(p) for p in perm] != [1, 0]:
        raise ctx.error(f"Transpose of NonZero's indices with perm {list(perm)}")
    return MaskIndices(indices.mask, indices.refusal, not indices.transposed)


def expanded(ctx, t, shape):
    """Expand of t to a shape the graph computes: Filled where t holds one value (a
    write's value, ScatterND below), else the static error Expand gave before."""
    refusal = ctx.static_error(shape, "shape")
    if any(d != 1 for d in t.shape):
        raise refusal
    return Filled(t, refusal)


COMBINE = {"none": lambda old, new: new, "add": F.add, "mul": F.mul, "max": F.maximum,
           "min": F.minimum}


def scatter_at_mask(ctx, data, indices: MaskIndices, updates, reduction):
    """ScatterND(data, NonZero(mask)ᵀ, updates) where updates is one value for every
    position: where(mask, value, data) (combined with data per `reduction`; NonZero's
    indices never repeat)."""
    mask = indices.mask
    k = len(mask.shape)
    if not indices.transposed:
        raise ctx.error("ScatterND's indices are NonZero's result untransposed ([rank, n]; "
                        "ScatterND reads [n, rank])")
    if k > len(data.shape) or any(m is not None and d is not None and m != d
                                  for m, d in zip(mask.shape, data.shape)):
        raise ctx.error(f"ScatterND at the true elements of a mask of shape "
                        f"{list(mask.shape)} into data of shape {list(data.shape)} (the "
                        f"mask must be the data's leading dims)")
    if isinstance(updates, Filled):
        value = updates.value
    else:
        value = ctx.tensor(updates)
        if any(d != 1 for d in value.shape):
            raise ctx.error(f"ScatterND at a mask's positions with updates of shape "
                            f"{list(value.shape)}: only one value written at every "
                            f"position (x[mask] = scalar) is supported, the updates' size "
                            f"depends on the data")
    if reduction not in COMBINE:
        raise ctx.error(f"reduction {reduction!r} is not supported")
    value = F.reshape(value, [])
    if value.dtype != data.dtype:
        value = F.cast(value, data.dtype)
    for _ in range(len(data.shape) - k):       # the mask over the data's leading dims
        mask = F.expand_dims(mask, -1)
    return F.where(mask, COMBINE[reduction](data, value), data)
