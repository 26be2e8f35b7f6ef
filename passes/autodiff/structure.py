"""Gradient rules of the structure family (TensorFlow's). Every op here is linear in
its data, so each rule's result is built from the op's adjoint, and the adjoint's own
rule is the forward op again: second order works through the same table.

    concat          slices of dy          pad             a slice of dy
    mirror_pad      mirror_pad_grad       mirror_pad_grad mirror_pad
    tile            sum over the tiles    reverse         reverse
    broadcast_to    sum_like              gather          gather_grad
    gather_grad     gather                gather_nd       gather_nd_grad
    gather_nd_grad  gather_nd             unsorted_segment_sum  gather
    dynamic_slice   dynamic_update_slice of dy into zeros
    dynamic_update_slice  operand: dy with zeros over the block; update: dynamic_slice

The int32 starts of the dynamic ops get no gradient. one_hot, top_k_rank,
top_k_indices and top_k_select give integers: they are non-differentiable
(top_k's values are a gather, whose gradient scatters dy to the chosen indices)."""
from __future__ import annotations

from ...ir.errors import GradientError
from ...ir.ops import structure as _st
from ...ir.ops.common import apply
from ...ir.ops.shape import reshape
from .build import reduce, sum_like, zeros_like
from .registry import gradient


def _slice(x, spec):
    return apply("strided_slice", [x], {"spec": tuple(spec)})


@gradient("concat")
def _concat(node, dy):
    axis = node.attrs["axis"] % dy.type.rank
    grads, start = [], 0
    for v in node.inputs:
        dim = v.shape[axis]
        if dim is None:
            raise GradientError(f"{node.where()}: the gradient of concat needs the sizes "
                                f"along axis {axis}; '{v.name}' has an unknown size there")
        spec = [("range", None, None, 1)] * dy.type.rank
        spec[axis] = ("range", start, start + dim, 1)
        grads.append(_slice(dy, spec))
        start += dim
    return grads


@gradient("pad")
def _pad(node, dy):
    spec = [("range", b, -e if e else None, 1) for b, e in node.attrs["paddings"]]
    return [_slice(dy, spec)]


@gradient("mirror_pad")
def _mirror_pad(node, dy):
    return [_st.mirror_pad_grad(dy, node.attrs["paddings"], node.attrs["mode"])]


@gradient("mirror_pad_grad")
def _mirror_pad_grad(node, dy):
    return [_st.mirror_pad(dy, node.attrs["paddings"], node.attrs["mode"])]


@gradient("tile")
def _tile(node, dy):
    # dy seen as [m0, d0, m1, d1, ...]: summing over the m axes adds up the tiles
    x = node.inputs[0]
    if not x.type.is_static:
        raise GradientError(f"{node.where()}: the gradient of tile needs the input's "
                            f"shape, {x.type}, to be known when the graph is built")
    split = []
    for m, d in zip(node.attrs["multiples"], x.shape):
        split += [m, d]
    summed = reduce("sum", reshape(dy, split), axis=tuple(range(0, len(split), 2)))
    return [summed]


@gradient("reverse")
def _reverse(node, dy):
    return [_st.reverse(dy, node.attrs["axis"])]


@gradient("broadcast_to")
def _broadcast_to(node, dy):
    return [sum_like(dy, node.inputs[0])]


@gradient("gather")
def _gather(node, dy):
    params, indices = node.inputs
    return [_st.gather_grad(dy, indices, params, node.attrs["axis"],
                            node.attrs["batch_dims"]), None]


@gradient("gather_grad")
def _gather_grad(node, dy):
    _, indices, _ = node.inputs
    return [_st.gather(dy, indices, node.attrs["axis"], node.attrs["batch_dims"]), None, None]


@gradient("gather_nd")
def _gather_nd(node, dy):
    params, indices = node.inputs
    return [_st.gather_nd_grad(dy, indices, params), None]


@gradient("gather_nd_grad")
def _gather_nd_grad(node, dy):
    return [_st.gather_nd(dy, node.inputs[1]), None, None]


@gradient("unsorted_segment_sum")
def _segment_sum(node, dy):
    # each data row went to segment ids[row] (or nowhere): read the gradient back from
    # there; gather's zero for out-of-range ids matches the dropped rows
    return [_st.gather(dy, node.inputs[1], axis=0), None]



@gradient("dynamic_slice")
def _dynamic_slice(node, dy):
    x, starts = node.inputs
    return [_st.dynamic_update_slice(zeros_like(x), dy, starts), None]


@gradient("dynamic_update_slice")
def _dynamic_update_slice(node, dy):
    _, update, starts = node.inputs
    return [_st.dynamic_update_slice(dy, zeros_like(update), starts),
            _st.dynamic_slice(dy, starts, update.shape), None]
