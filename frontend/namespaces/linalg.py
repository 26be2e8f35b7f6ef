"""ff.linalg: tf.linalg's names (matmul, eye, diag, diag_part, band_part, trace,
tensordot, einsum, norm, l2_normalize, matrix_transpose).

>>> import fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     t = ff.linalg.trace(ff.linalg.eye(3))
>>> float(ff.Session(g, backend="numpy").run(t))
3.0
"""
from __future__ import annotations

from .. import ops as _ops
from ._missing import install as _install

matmul = _ops.matmul
eye, diag, diag_part = _ops.eye, _ops.diag, _ops.diag_part
band_part = _ops.band_part
trace, tensordot, einsum = _ops.trace, _ops.tensordot, _ops.einsum
matrix_transpose = _ops.matrix_transpose
norm, l2_normalize = _ops.norm, _ops.l2_normalize
global_norm = _ops.global_norm


def matvec(a, b, transpose_a=False, name=None):
    """a @ b for matrices a [..., M, N] and vectors b [..., N] (tf.linalg.matvec)."""
    y = _ops.matmul(a, _ops.expand_dims(b, -1), transpose_a=transpose_a)
    return _ops.squeeze(y, -1, name=name)


__all__ = ["matmul", "eye", "diag", "diag_part", "band_part", "trace", "tensordot",
           "einsum", "matrix_transpose", "norm", "l2_normalize", "global_norm", "matvec"]
_install(globals(), "fragflow.linalg")
