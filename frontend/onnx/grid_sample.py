"""ONNX GridSample (2-D and volumetric): X sampled at the grid's normalized
coordinates, nearest, (bi/tri)linear or bicubic, with zeros, border or reflection
padding and either align_corners, as onnx's reference defines them.

The grid is data, so the taps are computed by the graph: for each spatial axis, the
grid's coordinate is mapped to pixels (and clamped or reflected), and gives each tap
an integer position and a weight. Every combination of the axes' taps (1, 2^d or 4^d)
is a gather of X, laid out (N * pixels, C), at the flat position, times the product of
the weights (0 outside the image with zeros padding), and the sum is the sample.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

import fragflow.frontend as F

CUBIC_A = -0.75


def _reflect(x, low, high):
    """x reflected by the near border until inside [low, high] (onnx's _gs_reflect):
    after n whole spans past a border, the remainder r counts from that border when n
    is even, from the other one when n is odd."""
    span = max(high - low, 1e-12)

    def remainder_and_even(dx):
        n = F.floor(dx * (1.0 / span))
        return dx - n * span, F.equal(n - F.floor(n * 0.5) * 2.0, 0.0)
    r_low, even_low = remainder_and_even(low - x)
    r_high, even_high = remainder_and_even(x - high)
    below = F.where(even_low, low + r_low, high - r_low)
    above = F.where(even_high, high - r_high, low + r_high)
    return F.where(F.less(x, low), below, F.where(F.greater(x, high), above, x))


def _cubic_weights(t):
    a = CUBIC_A
    t1, t2, t3 = t + 1.0, 1.0 - t, 2.0 - t
    return [((a * t1 - 5.0 * a) * t1 + 8.0 * a) * t1 - 4.0 * a,
            ((a + 2.0) * t - (a + 3.0)) * t * t + 1.0,
            ((a + 2.0) * t2 - (a + 3.0)) * t2 * t2 + 1.0,
            ((a * t3 - 5.0 * a) * t3 + 8.0 * a) * t3 - 4.0 * a]


def _pixel(index, size, padding, low, high):
    """(clamped index, in-image mask or None) of a float tap position."""
    if padding == "zeros":
        inside = F.logical_and(F.greater_equal(index, 0.0),
                               F.less_equal(index, float(size - 1)))
        return F.clip_by_value(index, 0.0, float(size - 1)), inside
    if padding == "border":
        return F.clip_by_value(index, 0.0, float(size - 1)), None
    reflected = _reflect(index, low, high)
    # onnx truncates the reflected position toward zero
    return F.clip_by_value(F.cast(F.cast(reflected, "int32"), "float32"), 0.0,
                           float(size - 1)), None


def axis_taps(coord, size, mode, padding, align):
    """[(index, weight or None, mask or None)] of one axis for grid coordinates coord."""
    if align:
        x = (coord + 1.0) * (0.5 * (size - 1))
        low, high = 0.0, float(size - 1)
    else:
        x = ((coord + 1.0) * size - 1.0) * 0.5
        low, high = -0.5, size - 0.5
    if mode == "nearest":
        x = F.round(x)                                   # half to even, as np.rint
    if padding == "border":
        x = F.where(F.logical_or(F.less(x, low), F.greater(x, high)),
                    F.clip_by_value(x, 0.0, float(size - 1)), x)
    elif padding == "reflection":
        x = _reflect(x, low, high)
    if mode == "nearest":
        index, inside = _pixel(_trunc(x), size, padding, low, high)
        return [(index, None, inside)]
    base = F.floor(x)
    t = x - base
    if mode == "linear":
        offsets, weights = [0, 1], [1.0 - t, t]
    else:
        offsets, weights = [-1, 0, 1, 2], _cubic_weights(t)
    taps = []
    for off, w in zip(offsets, weights):
        index, inside = _pixel(base + float(off), size, padding, low, high)
        taps.append((index, w, inside))
    return taps


def _trunc(x):
    return F.cast(F.cast(x, "int32"), "float32")


def grid_sample(ctx, X, grid, mode, padding, align):
    shape = tuple(X.shape)
    if any(d is None for d in shape) or any(d is None for d in grid.shape):
        raise ctx.error("GridSample needs static shapes")
    n, c, *spatial = shape
    dims = len(spatial)
    out = list(grid.shape[1:-1])
    if grid.shape[-1] != dims or grid.shape[0] != n:
        raise ctx.error(f"grid of shape {list(grid.shape)} for an input of shape "
                        f"{list(shape)}")
    pixels, positions = math.prod(spatial), math.prod(out)
    # X as (N * pixels, C): a gather row per sample position
    perm = [0] + list(range(2, 2 + dims)) + [1]
    table = F.reshape(F.transpose(X, perm), [n * pixels, c])
    batch_base = F.constant(np.repeat(np.arange(n, dtype=np.float32) * pixels,
                                      positions).reshape(n, *out, 1))
    axes = []
    for i, size in enumerate(spatial):
        # the grid's last channel is the last spatial axis (x), the first the first
        coord = F.slice(grid, [0] * (dims + 1) + [dims - 1 - i], [-1] * (dims + 1) + [1])
        axes.append(axis_taps(coord, size, mode, padding, align))
    strides = [math.prod(spatial[i + 1:]) for i in range(dims)]
    total = None
    for combo in itertools.product(*axes):
        flat = batch_base
        weight, mask = None, None
        for (index, w, inside), stride in zip(combo, strides):
            flat = flat + index * float(stride)
            if w is not None:
                weight = w if weight is None else weight * w
            if inside is not None:
                mask = inside if mask is None else F.logical_and(mask, inside)
        picked = F.gather(table, F.reshape(F.cast(flat, "int32"), [-1]))   # (N*P, C)
        picked = F.reshape(picked, [n] + out + [c])
        if mask is not None:
            picked = F.where(mask, picked, F.zeros_like(picked))
        term = picked if weight is None else picked * weight
        total = term if total is None else total + term
    back = [0, dims + 1] + list(range(1, dims + 1))
    return F.transpose(total, back)
