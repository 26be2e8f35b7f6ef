"""Dilated pools (MaxPool, AveragePool, LpPool with dilations), which fragflow's pool
kernels do not have, as per-axis taps.

A pool's window is a box, and max and sum over a box are max and sum over each axis in
turn. Along one axis of size n, output o reads input o * stride - pad_begin + j *
dilation for each tap j < kernel: a gather per tap (the index vector a constant), taps
outside the input masked (-inf for max, 0 for sums), then an elementwise max or sum,
which fusion merges. The mean divides by the count of taps inside the input (or inside
the padded input with count_include_pad), an outer product of per-axis counts known at
import time.
"""
from __future__ import annotations

import math

import numpy as np

import fragflow.frontend as F


def axis_windows(n, k, s, d, pads, ceil_mode):
    """(out, begin pad, end pad) of one spatial axis with explicit pads, as ONNX defines
    them."""
    span = (k - 1) * d + 1
    b, e = pads
    if ceil_mode:
        out = math.ceil((n + b + e - span) / s) + 1
        if (out - 1) * s >= n + b:        # a last window that starts in the padding
            out -= 1
    else:
        out = (n + b + e - span) // s + 1
    return out, b, e


def _shaped(vector, axis, rank, dtype=np.float32):
    shape = [1] * rank
    shape[axis] = -1
    return np.asarray(vector, dtype).reshape(shape)


def pool_axis(x, axis, n, k, s, d, out, b, e, kind):
    """x reduced over one axis's windows: kind "max" (invalid taps -inf) or "sum"
    (invalid taps 0). A tap is invalid outside the input, and ignored past the padded
    input's end."""
    rank = len(x.shape)
    total = None
    for j in range(k):
        index = np.arange(out) * s - b + j * d
        valid = (index >= 0) & (index < n) & (index < n + e)
        if not valid.any():
            continue
        picked = F.gather(x, F.constant(np.clip(index, 0, n - 1).astype(np.int32)),
                          axis=axis)
        if not valid.all():
            fill = -np.inf if kind == "max" else 0.0
            picked = F.where(F.constant(_shaped(valid, axis, rank, np.bool_)), picked,
                             F.fill([1] * rank, fill, "float32"))
        if total is None:
            total = picked
        else:
            total = F.maximum(total, picked) if kind == "max" else total + picked
    return total


def counts(n, k, s, d, out, b, e, include_pad):
    """How many taps of each output window lie in the input (or in the padded input)."""
    index = np.arange(out)[:, None] * s - b + np.arange(k)[None, :] * d
    low, high = (-b, n + e) if include_pad else (0, n)
    return ((index >= low) & (index < high)).sum(axis=1)


def dilated_pool(t, kind, kernel, strides, dilations, pads, ceil_mode, include_pad=False,
                 p=None):
    """An N-C-spatial pool by taps: kind "max", "avg" or "lp" (with p)."""
    rank = len(t.shape)
    spatial = range(2, rank)
    y = F.pow(F.abs(t), float(p)) if kind == "lp" else t
    divisor = None
    for axis, k, s, d, pair in zip(spatial, kernel, strides, dilations, pads):
        n = t.shape[axis]
        out, b, e = axis_windows(n, k, s, d, pair, ceil_mode)
        y = pool_axis(y, axis, n, k, s, d, out, b, e, "max" if kind == "max" else "sum")
        if kind == "avg":
            c = _shaped(1.0 / np.maximum(counts(n, k, s, d, out, b, e, include_pad), 1),
                        axis, rank)
            divisor = c if divisor is None else divisor * c
    if kind == "avg":
        return y * F.constant(divisor.astype(np.float32))
    if kind == "lp":
        return F.pow(y, 1.0 / float(p))
    return y
