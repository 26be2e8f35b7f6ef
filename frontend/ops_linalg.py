"""Linear-algebra functions with TensorFlow's names (tf.eye, tf.linalg.diag,
tf.linalg.band_part, tf.tensordot, tf.einsum, ...), built from fragflow's ops: masks
are constants chosen with `where` (so NaN off the band does not leak into the result),
contractions are transposes, reshapes and one matmul. Shapes must be static where a
mask or a reshape depends on them.

>>> import fragflow as ff, numpy as np
>>> g = ff.Graph()
>>> with g.as_default():
...     a = ff.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
...     y = ff.einsum("ij,kj->ik", a, a)
>>> ff.Session(g, backend="numpy").run(y).tolist()
[[5.0, 14.0], [14.0, 50.0]]
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.errors import AttrError, ShapeError
from ..ir.ops import matmul as _mm
from . import ops_math as _math, ops_structure as _structure
from .operands import as_tensor, operands, scoped, static_shape
from .ops_graph import constant, name_scope
from .tensor import Tensor, wrap

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


@_export
def matmul(a, b, transpose_a=False, transpose_b=False, name=None):
    """a @ b over the last two axes, broadcasting batch axes."""
    x, y = operands(a, b)
    return wrap(_mm.matmul(x, y, transpose_a, transpose_b, name=name))



@_export
def eye(num_rows, num_columns=None, batch_shape=None, dtype="float32", name=None):
    """The identity matrix (num_rows x num_columns), repeated over batch_shape, as tf.eye.
    A constant: nothing runs."""
    num_columns = num_rows if num_columns is None else num_columns
    value = np.eye(int(num_rows), int(num_columns), dtype=np.dtype(dtype))
    if batch_shape is not None:
        value = np.broadcast_to(value, tuple(batch_shape) + value.shape).copy()
    return constant(value, dtype, name=name or "eye")


def _graph_constant(x: Tensor, value):
    with x.graph.as_default():
        return constant(value)


def _zero(x):
    return 0 if x.dtype == "int32" else False if x.dtype == "bool" else 0.0


@_export
def diag(diagonal, name=None):
    """Square matrices with diagonal on their diagonal and zeros elsewhere: shape
    [..., N] -> [..., N, N] (tf.linalg.diag; for a vector, tf.diag too)."""
    with name_scope(name or "diag"):
        x = as_tensor(diagonal)
        n = static_shape(x, "diag")[-1] if x.ndim else None
        if n is None:
            raise ShapeError(f"diag needs a tensor of rank >= 1, got {x!r}")
        mask = _graph_constant(x, np.eye(n, dtype=bool))
        return _math.where(mask, _structure.expand_dims(x, -1), _zero(x))


@_export
def diag_part(input, name=None):  # noqa: A002 (TensorFlow's name)
    """The main diagonals of matrices: [..., M, N] -> [..., min(M, N)]
    (tf.linalg.diag_part)."""
    with name_scope(name or "diag_part"):
        x = as_tensor(input)
        if x.ndim < 2:
            raise ShapeError(f"diag_part needs matrices (rank >= 2), got {x!r}")
        m, n = static_shape(x, "diag_part")[-2:]
        mask = _graph_constant(x, np.eye(m, n, dtype=bool))
        picked = _math.where(mask, x, _zero(x))
        if m <= n:
            return _math.reduce_sum(picked[..., :m], axis=-1)
        return _math.reduce_sum(picked[..., :n, :], axis=-2)


@_export
def band_part(input, num_lower, num_upper, name=None):  # noqa: A002
    """Keeps the band of each matrix within num_lower subdiagonals and num_upper
    superdiagonals (negative: all of them) and zeros the rest (tf.linalg.band_part).
    num_lower and num_upper are Python ints."""
    with name_scope(name or "band_part"):
        x = as_tensor(input)
        if x.ndim < 2:
            raise ShapeError(f"band_part needs matrices (rank >= 2), got {x!r}")
        m, n = static_shape(x, "band_part")[-2:]
        i, j = np.arange(m)[:, None], np.arange(n)[None, :]
        keep = np.ones((m, n), bool)
        if int(num_lower) >= 0:
            keep &= (i - j) <= int(num_lower)
        if int(num_upper) >= 0:
            keep &= (j - i) <= int(num_upper)
        mask = _graph_constant(x, keep)
        return _math.where(mask, x, _zero(x))


@_export
def trace(x, name=None):
    """The sum of each matrix's main diagonal: [..., M, N] -> [...] (tf.linalg.trace)."""
    with name_scope(name or "trace"):
        return _math.reduce_sum(diag_part(x), axis=-1)


@_export
def matrix_transpose(a, name=None, conjugate=False):
    """Swaps the last two axes (tf.linalg.matrix_transpose)."""
    x = as_tensor(a)
    perm = list(range(x.ndim - 2)) + [x.ndim - 1, x.ndim - 2]
    return _structure.transpose(x, perm, name=name)


@_export
def tensordot(a, b, axes, name=None):
    """Sums the products of a's and b's elements over the given axes, as tf.tensordot:
    axes an int N (a's last N axes with b's first N) or a pair of axis lists.
    Computed as one matmul between transposed, reshaped operands."""
    with name_scope(name or "tensordot"):
        a, b = as_tensor(a), as_tensor(b)
        sa, sb = static_shape(a, "tensordot"), static_shape(b, "tensordot")
        if isinstance(axes, (int, np.integer)):
            k = int(axes)
            if k < 0 or k > min(a.ndim, b.ndim):
                raise AttrError(f"tensordot: axes={k} is out of range for ranks "
                                f"{a.ndim} and {b.ndim}")
            axes_a, axes_b = list(range(a.ndim - k, a.ndim)), list(range(k))
        else:
            axes_a, axes_b = axes
            axes_a = [axes_a] if isinstance(axes_a, (int, np.integer)) else list(axes_a)
            axes_b = [axes_b] if isinstance(axes_b, (int, np.integer)) else list(axes_b)
            axes_a = [int(x) % a.ndim for x in axes_a]
            axes_b = [int(x) % b.ndim for x in axes_b]
        if len(axes_a) != len(axes_b) or any(sa[i] != sb[j] for i, j in zip(axes_a, axes_b)):
            raise ShapeError(f"tensordot: axes {axes_a} of {list(sa)} and {axes_b} of "
                             f"{list(sb)} do not match")
        free_a = [i for i in range(a.ndim) if i not in axes_a]
        free_b = [i for i in range(b.ndim) if i not in axes_b]
        k = math.prod(sa[i] for i in axes_a)
        am = _structure.reshape(_structure.transpose(a, free_a + axes_a),
                          (math.prod(sa[i] for i in free_a), k))
        bm = _structure.reshape(_structure.transpose(b, axes_b + free_b),
                          (k, math.prod(sb[i] for i in free_b)))
        out = matmul(am, bm)
        return _structure.reshape(out, [sa[i] for i in free_a] + [sb[i] for i in free_b])


# -- einsum ------------------------------------------------------------------------------
def _parse_einsum(equation: str, count: int):
    eq = equation.replace(" ", "")
    if "..." in eq:
        raise AttrError(f"einsum: ellipses are not supported ({equation!r}); write the "
                        f"batch axes out")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs = eq
        letters = lhs.replace(",", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    terms = lhs.split(",")
    if len(terms) != count:
        raise AttrError(f"einsum: {equation!r} names {len(terms)} operands, got {count}")
    for t in terms + [out]:
        if not all(c.isalpha() for c in t):
            raise AttrError(f"einsum: {equation!r} holds a character that is not a letter")
    if len(set(out)) != len(out) or any(c not in lhs for c in out):
        raise AttrError(f"einsum: bad output subscripts in {equation!r}")
    return terms, out


def _take_diagonals(x: Tensor, term: str):
    """x with repeated subscripts (ii, iji) reduced to one axis each (the diagonal)."""
    while len(set(term)) != len(term):
        c = next(ch for ch in term if term.count(ch) > 1)
        first = term.index(c)
        second = term.index(c, first + 1)
        # move the second occurrence next to the first, take the diagonal of the pair
        perm = [i for i in range(len(term)) if i not in (first, second)] + [first, second]
        y = diag_part(_structure.transpose(x, perm))
        rest = [term[i] for i in perm[:-2]]
        x, term = y, "".join(rest) + c
    return x, term


def _sum_out(x: Tensor, term: str, keep: set):
    drop = [i for i, c in enumerate(term) if c not in keep]
    if drop:
        x = _math.reduce_sum(x, axis=drop)
        term = "".join(c for i, c in enumerate(term) if i not in drop)
    return x, term


def _to_order(x: Tensor, term: str, order: str):
    if term == order:
        return x
    return _structure.transpose(x, [term.index(c) for c in order])


@_export
def einsum(equation, *inputs, name=None):
    """Einstein summation over one or two operands, as tf.einsum: matmuls ("ij,jk->ik"),
    batch matmuls ("bij,bjk->bik"), transposes ("ij->ji"), traces and diagonals ("ii->",
    "ii->i"), outer products ("i,j->ij"), reductions ("ij->i") and their mixes. Two
    operands contract in one matmul; more are contracted left to right."""
    if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)):
        inputs = tuple(inputs[0])
    if not inputs:
        raise AttrError("einsum needs at least one operand")
    terms, out = _parse_einsum(equation, len(inputs))
    with name_scope(name or "einsum"):
        xs = []
        for x, term in zip(inputs, terms):
            x = as_tensor(x)
            if x.ndim != len(term):
                raise ShapeError(f"einsum: operand {x!r} has rank {x.ndim} but "
                                 f"subscripts {term!r}")
            xs.append(_take_diagonals(x, term))
        while len(xs) > 1:
            (a, ta), (b, tb) = xs[0], xs[1]
            later = set(out).union(*(set(t) for _, t in xs[2:]))
            target = "".join(dict.fromkeys(c for c in ta + tb if c in later))
            xs = [_contract(a, ta, b, tb, target)] + xs[2:]
        x, term = xs[0]
        x, term = _sum_out(x, term, set(out))
        return _to_order(x, term, out)


def _contract(a, ta, b, tb, target):
    """(a . b, subscripts) summing every subscript not in target."""
    a, ta = _sum_out(a, ta, set(tb) | set(target))
    b, tb = _sum_out(b, tb, set(ta) | set(target))
    sa, sb = static_shape(a, "einsum"), static_shape(b, "einsum")
    size = {c: sa[i] for i, c in enumerate(ta)}
    for i, c in enumerate(tb):
        if c in size and size[c] != sb[i]:
            raise ShapeError(f"einsum: subscript {c!r} has size {size[c]} in one operand "
                             f"and {sb[i]} in the other")
        size[c] = sb[i]
    batch = [c for c in ta if c in tb and c in target]
    summed = [c for c in ta if c in tb and c not in target]
    free_a = [c for c in ta if c not in tb]
    free_b = [c for c in tb if c not in ta]
    prod = lambda cs: math.prod(size[c] for c in cs)   # noqa: E731
    am = _structure.reshape(_to_order(a, ta, "".join(batch + free_a + summed)),
                      [size[c] for c in batch] + [prod(free_a), prod(summed)])
    bm = _structure.reshape(_to_order(b, tb, "".join(batch + summed + free_b)),
                      [size[c] for c in batch] + [prod(summed), prod(free_b)])
    y = matmul(am, bm)
    y = _structure.reshape(y, [size[c] for c in batch + free_a + free_b])
    return y, "".join(batch + free_a + free_b)


def _axes(axis, rank) -> tuple | None:
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(int(a) % rank for a in axes)


@_export
def norm(tensor, ord="euclidean", axis=None, keepdims=None, name=None):
    """The vector or matrix norm, as tf.norm. ord: "euclidean" / "fro" / 2 (the
    2-norm of the flattened axes), 1, np.inf, or a positive p. axis: None (all, as one
    vector), an int (vector norms) or a pair of ints (matrix norms: "fro"/"euclidean",
    1 (max column sum), np.inf (max row sum))."""
    with scoped(name, "norm"):
        x = as_tensor(tensor)
        keep = bool(keepdims)
        axes = _axes(axis, x.ndim)
        if axes is not None and len(axes) == 2 and ord in (1, np.inf):
            rows, cols = axes
            if ord == 1:    # max over columns of the column sums
                inner, outer = rows, cols
            else:
                inner, outer = cols, rows
            sums = _math.reduce_sum(_math.abs(x), axis=inner, keepdims=True)
            out = _math.reduce_max(sums, axis=outer, keepdims=True)
            return out if keep else _structure.squeeze(out, axis=list(axes))
        if axes is not None and len(axes) > 2:
            raise AttrError(f"norm: axis must be None, an int or a pair, got {axis!r}")
        if axes is not None and len(axes) == 2 and ord not in ("euclidean", "fro"):
            raise AttrError(f"norm: matrix norm ord must be 'fro', 'euclidean', 1 or "
                            f"np.inf, got {ord!r}")
        if ord in ("euclidean", "fro", 2, 2.0):
            return _math.sqrt(_math.reduce_sum(_math.square(x), axis=axes, keepdims=keep))
        if ord == 1:
            return _math.reduce_sum(_math.abs(x), axis=axes, keepdims=keep)
        if ord == np.inf:
            return _math.reduce_max(_math.abs(x), axis=axes, keepdims=keep)
        if isinstance(ord, (int, float)) and ord > 0:
            p = float(ord)
            return _math.pow(_math.reduce_sum(_math.pow(_math.abs(x), p), axis=axes,
                                              keepdims=keep), 1.0 / p)
        raise AttrError(f"norm: ord must be 'euclidean', 'fro', 1, 2, np.inf or a "
                        f"positive number, got {ord!r}")
