"""Static evaluation through the op records' numpy references.

A node whose inputs are all known at import (numpy arrays) is evaluated at import: its
rule runs in a scratch graph on those arrays as constants, and the numpy executor (the
graph as built, no passes) computes the result, so the value is exactly what the rule's
ops compute on the GPU, and shape arithmetic (Shape, StridedSlice, Pack, Cast, ...)
never reaches it. Formats with an evaluator of their own (ONNX's reference) may use it
instead."""
from __future__ import annotations

import math

import numpy as np

from ...ir.graph import Graph
from ..session import Session
from ..tensor import Tensor

FOLD_LIMIT = 1 << 20     # elements in (and out): bigger static results are left to the graph


def foldable(inputs) -> bool:
    """Whether a node with these table values may be folded: all numpy arrays, small."""
    return bool(inputs) and all(isinstance(x, np.ndarray) for x in inputs) \
        and sum(x.size for x in inputs) <= FOLD_LIMIT


def evaluate(build):
    """build() run in a scratch graph and evaluated there: its results (a value, list
    or tuple of Tensors or arrays) as numpy arrays; None when a result is not a small
    tensor (the caller then builds the node in the real graph)."""
    scratch = Graph("static")
    with scratch.as_default():
        results = build()
    many = isinstance(results, (list, tuple))
    results = list(results) if many else [results]
    fetch = [r for r in results if isinstance(r, Tensor)]
    if any(r is not None and not isinstance(r, (Tensor, np.ndarray)) for r in results):
        return None
    if any(None in r.shape or math.prod(r.shape) > FOLD_LIMIT for r in fetch):
        return None
    values = iter(Session(scratch, backend="numpy", passes=[]).run(fetch)) if fetch \
        else iter(())
    out = [np.asarray(next(values)) if isinstance(r, Tensor) else r for r in results]
    return out if many else out[0]
