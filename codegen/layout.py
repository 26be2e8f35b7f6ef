"""How a tensor lives in a texture, and how kernels find elements.

Four consecutive row-major elements per RGBA texel (measured: 4.5x faster than one per
texel for elementwise work). Texels fill rows of `width` texels; the layout depends only
on the element count, so reshapes are free (the same texture, another shape).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir.errors import TensorTooLargeError
from ..ir.ops.registry import all_ops
from ..ir.types import TensorType

# Ops that keep row-major order: their output is the same texture, seen another way
# (reshape, squeeze): no kernel (codegen/lower.py, and matmul.py's render-target readers).
VIEW_OPS = frozenset(name for name, opdef in all_ops().items() if opdef.kind == "view")

ROW_TEXELS = 2048          # the longest row: square textures up to 4M floats
# The shortest row of a tensor that has more texels: llvmpipe shades 4x4 pixel blocks
# in 64x64 tiles spread over its threads, so a texture 1-2 rows tall leaves most lanes
# idle, and one a single tile wide runs on one thread. Measured (in one process,
# interleaved): rows of 2048 -> square rows of >= 128 texels took MobileNet-v1 0.25 at
# 96x96 from 13.9 to 9.8 ms and the W13 CNN training step from 11.7 to 10.2 ms.
MIN_ROW_TEXELS = 128


@dataclass(frozen=True)
class Layout:
    shape: tuple
    dtype: str
    width: int
    height: int
    # a scan step's slice or output inside a larger texture of (width, height): the
    # int uniform of this name holds the texel where it starts (runtime/control_flow.py)
    window: str = field(default="", kw_only=True)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def is_int(self) -> bool:
        """int32 and bool live in RGBA32I textures."""
        return self.dtype != "float32"

    @property
    def texture_key(self) -> tuple:
        return (self.width, self.height, "rgba32i" if self.is_int else "rgba32f")

    @property
    def nbytes(self) -> int:
        return self.width * self.height * 16


def layout_for(ttype: TensorType, max_texture_size: int, what: str = "") -> Layout:
    size = ttype.size
    texels = max(1, -(-size // 4))
    square = 1 << ((texels - 1).bit_length() + 1) // 2    # least power of two, squared >= texels
    width = min(texels, ROW_TEXELS, max(square, MIN_ROW_TEXELS), max_texture_size)
    if -(-texels // width) > max_texture_size:
        width = max_texture_size
    height = -(-texels // width)
    if height > max_texture_size:
        limit = 4 * max_texture_size * max_texture_size
        raise TensorTooLargeError(
            f"{what or 'a tensor'} of type {ttype} has {size} elements; the GPU's largest "
            f"texture ({max_texture_size}x{max_texture_size} RGBA) holds {limit}")
    return Layout(ttype.shape, ttype.dtype, width, height)


def strides(shape) -> tuple:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


@dataclass(frozen=True)
class AffineIndex:
    """source index = offset + sum(((i / s) % d) * t for (s, d, t) in terms), where i is
    the flat output index. Broadcasting, transposes and slices are all this shape."""
    offset: int
    terms: tuple          # ((out_stride, dim, in_stride), ...), outermost first
    size: int             # the range of i (the output's element count)

    @property
    def is_identity(self) -> bool:
        return self.offset == 0 and self.terms == ((1, self.size, 1),)


def affine_index(out_shape, in_strides_per_out_axis, offset: int = 0) -> AffineIndex:
    """Per output axis the source stride (0 where broadcast); merges axes that stay
    contiguous and drops size-1 axes so the GLSL is as short as it can be."""
    out_str = strides(out_shape)
    terms = [(s, d, t) for s, d, t in zip(out_str, out_shape, in_strides_per_out_axis)
             if d != 1 and t != 0]
    merged = []
    for s, d, t in terms:
        if merged:
            ps, pd, pt = merged[-1]
            if ps == s * d and pt == t * d:
                merged[-1] = (s, pd * d, t)
                continue
        merged.append((s, d, t))
    size = 1
    for d in out_shape:
        size *= d
    return AffineIndex(int(offset), tuple(merged), size)


def broadcast_index(out_shape, in_shape) -> AffineIndex:
    """Where each output element of a broadcast reads its input."""
    rank = len(out_shape)
    padded = (1,) * (rank - len(in_shape)) + tuple(in_shape)
    in_str = strides(padded)
    return affine_index(out_shape, [0 if d == 1 else st for d, st in zip(padded, in_str)])
