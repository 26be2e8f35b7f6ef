"""ONNX DFT as matmuls with constant cosine and sine matrices along its axis: the
signal's length is static, so X_k = sum_j x_j e^(-+2 pi i jk / L) is two real matmuls
per part (the imaginary part of a real signal is zero and skipped)."""
from __future__ import annotations

import numpy as np

import fragflow.frontend as F


def dft(ctx, t, axis, length, inverse, onesided):
    """t: (..., n at axis, ..., 1 or 2); the result (..., K at axis, ..., 2)."""
    rank = len(t.shape)
    if t.shape[-1] not in (1, 2):
        raise ctx.error(f"DFT's last axis holds 1 (real) or 2 (complex) values, got "
                        f"{t.shape[-1]}")
    axis = axis % rank
    if axis == rank - 1:
        raise ctx.error("DFT along the real/imaginary axis")
    n = t.shape[axis]
    if n is None:
        raise ctx.error("DFT needs a static signal length")
    length = None if length is None else int(length)
    if inverse and onesided:
        length = 2 * (n - 1) if length is None else length
        if length < 1:
            raise ctx.error(f"DFT of length {length}")
        ctx.check_elements([min(n, length // 2 + 1), length], "the DFT matrix")
        return _irfft(t, axis, n, length)
    length = n if length is None else length
    if length < 1:
        raise ctx.error(f"DFT of length {length}")
    out = length // 2 + 1 if onesided else length
    ctx.check_elements([length, out], "the DFT matrix")
    j, k = np.arange(length)[:, None], np.arange(out)[None, :]
    theta = (2.0 * np.pi / length) * ((j * k) % length) * (1.0 if inverse else -1.0)
    scale = 1.0 / length if inverse else 1.0
    cos = (np.cos(theta) * scale)[:min(n, length)].astype(np.float32)   # (used j, K)
    sin = (np.sin(theta) * scale)[:min(n, length)].astype(np.float32)
    parts, perm = _parts(t, axis, min(n, length))
    xr = parts[0]
    real = F.matmul(xr, F.constant(cos))
    imag = F.matmul(xr, F.constant(sin))
    if len(parts) == 2:
        xi = parts[1]
        real = real - F.matmul(xi, F.constant(sin))
        imag = imag + F.matmul(xi, F.constant(cos))
    back = list(np.argsort(perm))
    y = F.stack([F.transpose(real, back), F.transpose(imag, back)], axis=-1)
    return y


def _parts(t, axis, keep):
    """The real (and imaginary) parts with the signal's axis last, its first `keep`
    entries; and the permutation that moved it."""
    rank = len(t.shape)
    perm = [d for d in range(rank - 1) if d != axis] + [axis]
    parts = []
    for p in range(t.shape[-1]):
        part = F.reshape(F.slice(t, [0] * (rank - 1) + [p], [-1] * (rank - 1) + [1]),
                         list(t.shape[:-1]))
        part = F.transpose(part, perm)
        if t.shape[axis] > keep:
            part = F.slice(part, [0] * (rank - 1), [-1] * (rank - 2) + [keep])
        parts.append(part)
    return parts, perm


def _irfft(t, axis, n, length):
    """The real inverse of one-sided frequencies (numpy's irfft): the missing half is
    the conjugate of the given one, so each frequency but 0 and L/2 counts twice."""
    used = min(n, length // 2 + 1)
    k, j = np.arange(used)[:, None], np.arange(length)[None, :]
    twice = np.where((k == 0) | (2 * k == length), 1.0, 2.0)
    theta = (2.0 * np.pi / length) * ((j * k) % length)
    cos = (twice * np.cos(theta) / length).astype(np.float32)
    sin = (-twice * np.sin(theta) / length).astype(np.float32)
    parts, perm = _parts(t, axis, used)
    y = F.matmul(parts[0], F.constant(cos))
    if len(parts) == 2:
        y = y + F.matmul(parts[1], F.constant(sin))
    return F.expand_dims(F.transpose(y, list(np.argsort(perm))), -1)
