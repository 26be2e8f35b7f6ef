"""Gradient rule of matmul (TensorFlow's four transpose cases); batch dimensions that
were broadcast are summed back."""
from __future__ import annotations

from .build import matmul, unbroadcast
from .registry import gradient


@gradient("matmul")
def _matmul(node, dy):
    a, b = node.inputs
    ta, tb = node.attrs["transpose_a"], node.attrs["transpose_b"]
    if not ta and not tb:
        da, db = matmul(dy, b, tb=True), matmul(a, dy, ta=True)
    elif not ta and tb:
        da, db = matmul(dy, b), matmul(dy, a, ta=True)
    elif ta and not tb:
        da, db = matmul(b, dy, tb=True), matmul(a, dy)
    else:
        da, db = matmul(b, dy, ta=True, tb=True), matmul(dy, a, ta=True, tb=True)
    return [unbroadcast(da, a) if a.dtype == "float32" else None,
            unbroadcast(db, b) if b.dtype == "float32" else None]
