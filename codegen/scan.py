"""cumsum as a scan in log passes (templates/reduce.glsl.j2's cumsum kernel and a
reduce_tree pass).

An element's running sum walks back to the start of its slice, which costs a long axis
its length per element. Instead the axis is cut into blocks of B elements (the tuning's
scan_block_contiguous, or scan_block_strided: a contiguous axis sums whole texels, a
quarter of the fetches of a strided one, whose lanes fetch one element at a time):

    block sums   one tree pass (window B) sums each block;
    offsets      the exclusive running sums of the block sums (the same scan, again,
                 over an axis B times shorter, down to one block);
    final        each element's running sum within its block, plus its block's offset.

Reversed scans reverse each step (the offset of a block is the sum of the blocks after
it). An element walks at most B elements, so each kernel's loops stay far below
llvmpipe's 65535 iterations for any axis length.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .layout import affine_index, strides
from .limits import unroll_for
from .operands import Operand
from .reduce_tree import Pass, TreeBuilder, bind_inputs, emit_pass, pass_params, template_context


def cumsum_kernels(node, x: Operand, out: Operand, axis: int, exclusive: bool,
                   reverse: bool, prefix: str, layouts: dict | None = None,
                   blocks: tuple = (64, 16)) -> list:
    """blocks: the block lengths along a contiguous axis and along a strided one."""
    builder = TreeBuilder(node, prefix, "cumsum", layouts)
    scan(builder, x, out, axis, exclusive, reverse, blocks)
    return builder.kernels


def scan(builder: TreeBuilder, x: Operand, out: Operand, axis: int, exclusive: bool,
         reverse: bool, blocks: tuple) -> Operand:
    """The kernels writing cumsum(x, axis, exclusive, reverse) into out."""
    shape = x.layout.shape
    length = shape[axis]
    outer, inner = math.prod(shape[:axis]), math.prod(shape[axis + 1:])
    block = blocks[0] if inner == 1 else blocks[1]
    if length <= block:
        return _final(builder, x, out, axis, exclusive, reverse, length, None)
    step = Pass(outer, length, inner, block)
    sums = builder.scratch((outer, step.out_length, inner), x.dtype, x.layout)
    bound = bind_inputs([x])
    emit_pass(builder, bound, sums, pass_params(bound, sums, step, "sum"))
    offsets = builder.scratch(sums.layout.shape, x.dtype, x.layout)
    scan(builder, sums, offsets, 1, True, reverse, blocks)
    return _final(builder, x, out, axis, exclusive, reverse, block, offsets)


@dataclass(frozen=True, kw_only=True)
class ScanKernelParams:
    """A kernel of running sums within blocks (templates/reduce.glsl.j2's cumsum), in the
    order the kernel header prints them."""
    kind: str = "cumsum"
    contiguous: bool        # along a contiguous axis: whole texels, a lane per texel
    exclusive: bool
    reverse: bool
    block: int              # the running sums restart every `block` positions
    blocks: int             # blocks along the axis
    offsets: Operand | None  # the running sums of the blocks before (after) each
    unroll: int
    count: int              # the axis length
    stride: int             # its stride in the input
    start_index: object     # the affine map to an element's slice's start

    @property
    def direction(self) -> int:
        """1 forward, -1 reversed: a lane steps on from lane c - direction's sum."""
        return -1 if self.reverse else 1

    @property
    def offsets_from(self) -> str:
        """Which blocks a block's offset sums."""
        return "after" if self.reverse else "before"

    @property
    def main(self) -> str:
        """templates/reduce_cumsum.glsl.j2's main macro."""
        return "cumsum_contiguous_main" if self.contiguous else "cumsum_strided_main"


def _final(builder, x, out, axis, exclusive, reverse, block, offsets):
    """Running sums within blocks of `block` elements, plus offsets[block] if given."""
    shape = x.layout.shape
    in_strides = strides(shape)
    start_strides = [0 if a == axis else s for a, s in enumerate(in_strides)]
    # Along a contiguous axis one lane per texel sums whole texels, four a trip (a
    # sixteenth of the trips); elsewhere each lane walks its own range.
    contiguous = in_strides[axis] == 1
    trips = block // 16 + 8 if contiguous else block
    bound = bind_inputs([x] + ([offsets] if offsets is not None else []))
    params = ScanKernelParams(
        contiguous=contiguous, exclusive=exclusive, reverse=reverse, block=block,
        blocks=-(-shape[axis] // block),
        offsets=bound[offsets.value] if offsets is not None else None,
        unroll=unroll_for(trips), count=shape[axis], stride=in_strides[axis],
        start_index=affine_index(shape, start_strides))
    return builder.add("reduce.glsl.j2", list(bound.values()), out,
                       **template_context(params))
