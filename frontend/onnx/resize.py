"""ONNX Resize in general: every mode (nearest, linear, cubic), coordinate transformation,
nearest rounding, antialias, exclude_outside, axes, keep_aspect_ratio_policy, roi with
tf_crop_and_resize, and fractional scales, on inputs of any rank.

Resize is separable and linear in its input: along each resized axis, output j is a
weighted sum of a few input pixels (2 for linear, 4 for cubic, 1 for nearest, more
with antialias), the weights depending only on sizes and attributes. So the weights
are computed at import time, with onnx's own reference code applied to an identity
matrix (ONNX's exact semantics, rounding included), and the graph applies them with
fragflow's ops: a gather per tap and a fused multiply-add (a dense matmul when a row
has more than MAX_TAPS taps). A tf_crop_and_resize position outside the input takes
extrapolation_value. The rule in op_table.py keeps the dedicated NHWC resize kernels
for the cases they cover exactly, and calls this for the others.
"""
from __future__ import annotations

import math

import numpy as np

import fragflow.frontend as F

MAX_TAPS = 4          # rows with more taps (antialiased downscales) use a matmul


def _coefficient_function(mode, nearest_mode, cubic_coeff_a, antialias):
    """onnx's coefficient function for the mode, as its Resize op builds it."""
    from onnx.reference.ops import op_resize as R  # optional: onnx (its reference Resize)
    if mode == "nearest":
        return lambda ratio, scale: R._nearest_coeffs(ratio, mode=nearest_mode)
    if mode == "cubic":
        cubic = R._cubic_coeffs_antialias if antialias else R._cubic_coeffs
        return lambda ratio, scale: cubic(ratio, scale, A=cubic_coeff_a)
    return R._linear_coeffs_antialias if antialias else R._linear_coeffs


def axis_weights(n_in, n_out, scale, *, mode, coordinate_mode, nearest_mode="round_prefer_floor",
                 cubic_coeff_a=-0.75, antialias=False, exclude_outside=False, roi=None):
    """(W, extrapolated): output j along the axis is sum_i W[j, i] * input[i], except
    where extrapolated[j] (tf_crop_and_resize outside the input), which is
    extrapolation_value. Computed by onnx's reference 1-D resize of an identity matrix."""
    from onnx.reference.ops import op_resize as R  # optional: onnx (its reference Resize)
    coeffs = _coefficient_function(mode, nearest_mode, cubic_coeff_a, antialias)
    eye = np.eye(n_in, dtype=np.float64)

    def run(extrapolation_value):
        return R._interpolate_1d_along_axis(
            eye, 0, float(scale), int(n_out), coeffs, roi=roi,
            extrapolation_value=extrapolation_value,
            coordinate_transformation_mode=coordinate_mode,
            exclude_outside=bool(exclude_outside))
    zero, one = run(0.0), run(1.0)
    extrapolated = (one != zero).any(axis=1)
    return np.where(extrapolated[:, None], 0.0, zero), extrapolated


def plan_axes(shape, *, scales=None, sizes=None, axes=None, roi=None,
              keep_aspect_ratio_policy="stretch"):
    """[(axis, n_in, n_out, scale, roi pair or None)] for the axes that change, in
    onnx's order; as onnx's reference _interpolate_nd derives them."""
    r = len(shape)
    roi = None if roi is None or np.asarray(roi).size == 0 else [float(v) for v in
                                                                 np.asarray(roi).ravel()]
    if axes is not None:
        axes = [a % r for a in axes]
        if scales is not None:
            full = [1.0] * r
            for i, d in enumerate(axes):
                full[d] = scales[i]
            scales = full
        if sizes is not None:
            full = list(shape)
            for i, d in enumerate(axes):
                full[d] = sizes[i]
            sizes = full
        if roi is not None:
            full = [0.0] * r + [1.0] * r
            for i, d in enumerate(axes):
                full[d], full[r + d] = roi[i], roi[len(axes) + i]
            roi = full
    else:
        axes = list(range(r))
    if sizes is not None:
        scales = [sizes[i] / shape[i] for i in range(r)]
        if keep_aspect_ratio_policy != "stretch":
            pick = min if keep_aspect_ratio_policy == "not_larger" else max
            scale = pick(scales[a] for a in axes)
            scales = [scale if i in axes else 1.0 for i in range(r)]
            sizes = [int(scale * shape[i] + 0.5) if i in axes else shape[i]
                     for i in range(r)]
    else:
        sizes = list((np.asarray(scales) * np.array(shape)).astype(int))
    plan = []
    for a in axes:
        pair = None if roi is None else (roi[a], roi[a + r])
        identity = math.isclose(float(scales[a]), 1.0) and int(sizes[a]) == shape[a] and (
            pair is None or (math.isclose(pair[0], 0.0) and math.isclose(pair[1], 1.0)))
        if not identity:
            plan.append((a, int(shape[a]), int(sizes[a]), float(scales[a]), pair))
    return plan


def _along(vector, axis, rank):
    """A constant (m,) vector shaped to broadcast along axis of a rank-`rank` tensor."""
    shape = [1] * rank
    shape[axis] = -1
    return F.constant(np.asarray(vector, np.float32).reshape(shape))


def resize_axis(x, axis, weights, extrapolated, extrapolation_value):
    """x resized along axis by the (m, n) weights: gathers and a weighted sum."""
    rank = len(x.shape)
    taps = [np.flatnonzero(row) for row in weights]
    width = max((len(t) for t in taps), default=0)
    if width > MAX_TAPS:
        perm = [i for i in range(rank) if i != axis] + [axis]
        moved = F.matmul(F.transpose(x, perm), F.constant(weights.T.astype(np.float32)))
        y = F.transpose(moved, list(np.argsort(perm)))
    elif width == 0:                      # every position extrapolated
        y = F.gather(x, F.constant(np.zeros(len(weights), np.int32)), axis=axis) * 0.0
    else:
        # pad short rows with their own first tap at weight 0: no new dependency
        index = np.array([np.pad(t, (0, width - len(t)), mode="edge") if len(t) else
                          np.zeros(width, np.int64) for t in taps], np.int32)
        coeff = np.array([np.pad(row[t], (0, width - len(t))) if len(t) else
                          np.zeros(width) for row, t in zip(weights, taps)])
        y = None
        for k in range(width):
            picked = F.gather(x, F.constant(index[:, k]), axis=axis)
            if np.all(coeff[:, k] == 1.0):
                term = picked
            else:
                term = picked * _along(coeff[:, k], axis, rank)
            y = term if y is None else y + term
    if extrapolated.any():
        y = F.where(F.constant(np.broadcast_to(
            extrapolated.reshape([-1 if i == axis else 1 for i in range(rank)]),
            [len(extrapolated) if i == axis else 1 for i in range(rank)]).copy()),
            F.fill([1] * rank, float(extrapolation_value), "float32"), y)
    return y
