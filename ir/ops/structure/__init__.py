"""The structure family: ops that assemble, cut, pad, repeat and index tensors, one
module per kind (concat.py, pad.py, rearrange.py, gather.py, one_hot.py, top_k.py,
dynamic_slice.py).

The ops {attrs} (operands), each described in its module's docstring:

    concat {axis}; pad {paddings, constant_value}; mirror_pad, mirror_pad_grad {paddings, mode}
    tile {multiples}, reverse {axis}, broadcast_to {shape}
    gather {axis, batch_dims} (params, int32 indices); gather_grad {axis, batch_dims}
        (dy, indices, params: dy summed into params' shape); gather_nd, gather_nd_grad: the
        same for index tuples; unsorted_segment_sum {num_segments} (data, int32 segment_ids)
    one_hot {depth, on_value, off_value, axis, dtype}; top_k_rank; top_k_indices {k};
        top_k_select {k} (the two in one: passes/top_k.py)
    dynamic_slice {sizes} (x, int32 starts); dynamic_update_slice (x, update, int32 starts)

Composites in frontend/ops_structure.py build stack, unstack, split, slice, TF's
strided_slice, top_k, space_to_batch_nd and batch_to_space_nd from these and shape ops.

Out-of-range indices (gather, gather_nd; negative ones too) read 0, as TensorFlow does
on GPUs (its CPU kernels raise); the scatter-like ops (gather_grad, gather_nd_grad,
unsorted_segment_sum) drop them, which keeps each the adjoint of its gather.
"""
from __future__ import annotations

from .concat import MAX_CONCAT_INPUTS, concat
from .dynamic_slice import clamped_starts, dynamic_slice, dynamic_update_slice
from .gather import (
                     gather,
                     gather_dims,
                     gather_grad,
                     gather_nd,
                     gather_nd_grad,
                     gather_shape,
                     unsorted_segment_sum,
)
from .one_hot import one_hot
from .pad import MIRROR_MODES, mirror_pad, mirror_pad_grad, mirror_source, pad
from .rearrange import broadcast_to, reverse, tile
from .top_k import top_k_indices, top_k_rank, top_k_select

__all__ = ["MAX_CONCAT_INPUTS", "MIRROR_MODES", "broadcast_to", "clamped_starts", "concat",
           "dynamic_slice", "dynamic_update_slice", "gather",
           "gather_dims", "gather_grad", "gather_nd", "gather_nd_grad", "gather_shape",
           "mirror_pad", "mirror_pad_grad", "mirror_source", "one_hot", "pad", "reverse",
           "tile", "top_k_indices", "top_k_rank", "top_k_select", "unsorted_segment_sum"]
