"""Lowering the structure family to templates/structure.glsl.j2.

Every kernel is a gather: an output element works out which input element(s) it
reads. The scatter-like ops (gather_grad, gather_nd_grad, unsorted_segment_sum,
mirror_pad_grad) loop, per output element, over the candidate inputs that could map
to it; top_k_rank counts, per element, the elements that sort before it (top_k_select,
the two top_k ops in one, has its strategies in codegen/top_k.py). Loops are
unrolled (codegen/limits.py unroll_for) so that a fragment's four elements stay under
llvmpipe's limit of 65535 loop iterations per fragment.
"""
from __future__ import annotations

import math

from ..ir.errors import FragflowError
from ..ir.ops.structure import gather_dims
from ..ir.types import normalize_axes
from .common import make_kernel, operands, output_operand
from .environment import glsl_float, glsl_int
from .layout import affine_index, broadcast_index, strides
from .limits import loop_trips, unroll_for
from .top_k import lower_top_k_select

LANES = 4           # output elements per fragment: each runs its own loops


def _prod(dims) -> int:
    return int(math.prod(dims))


def literal(value, dtype: str) -> str:
    if dtype == "float32":
        return glsl_float(value)
    if dtype == "int32":
        return glsl_int(value)
    return "true" if value else "false"


def _samplers(node, layouts, reads):
    """Operands of the inputs the kernel reads (by input position), and a sampler name
    per position: an input used twice (gather(x, x)) is bound once."""
    ops = {o.value: o for o in operands(node, layouts)}
    chosen = []
    for i in reads:
        o = ops[node.inputs[i].name]
        if o not in chosen:
            chosen.append(o)
    return chosen, [ops[node.inputs[i].name].sampler for i in reads]


def _kernel(node, layouts, prefix, kind, reads=(0,), **context):
    inputs, names = _samplers(node, layouts, reads)
    out = output_operand(node.outputs[0], layouts)
    return make_kernel("structure.glsl.j2", prefix, node.op, [node], inputs, out,
                       kind=kind, src=names, **context)


def _loop(trips: int) -> dict:
    """Unroll factor for a per-element loop of `trips` steps (LANES run per fragment)."""
    return {"trips": trips, "unroll": unroll_for(LANES * trips)}


# -- one lowering per op -------------------------------------------------------------------
def lower_concat(node, layouts, prefix):
    axis = node.attrs["axis"] % node.inputs[0].type.rank
    shape = layouts[node.outputs[0].name].shape
    pieces, start = [], 0
    inputs, names = _samplers(node, layouts, range(len(node.inputs)))
    for v, sampler in zip(node.inputs, names):
        dim = layouts[v.name].shape[axis]
        if dim:                                       # empty inputs add nothing
            pieces.append({"sampler": sampler, "start": start, "end": start + dim, "dim": dim})
        start += dim
    inputs = [o for o in inputs if o.sampler in {p["sampler"] for p in pieces}]
    out = output_operand(node.outputs[0], layouts)
    return make_kernel("structure.glsl.j2", prefix, node.op, [node], inputs, out,
                       kind="concat", src=[], pieces=pieces, axis_dim=shape[axis],
                       inner=_prod(shape[axis + 1:]))


def _pad_axes(in_shape, out_shape, paddings):
    out_str, in_str = strides(out_shape), strides(in_shape)
    return [{"ostride": os_, "odim": od, "before": b, "after": e, "dim": d, "istride": is_,
             "padded": bool(b or e)}
            for os_, od, (b, e), d, is_ in zip(out_str, out_shape, paddings, in_shape, in_str)]


def _pad_rows(node, x, out):
    """pad_rows' context for a constant float pad of the last axis alone whose output
    rows are whole texels (an image's channels padded to a multiple of 4:
    passes/pad_channels.py), else None."""
    paddings = node.attrs["paddings"]
    if node.op != "pad" or x.dtype != "float32" or not paddings or \
            any(tuple(p) != (0, 0) for p in paddings[:-1]):
        return None
    before, _after = paddings[-1]
    out_row = out.shape[-1]
    if out_row % 4 or not x.shape[-1] or not out.size:
        return None
    return {"dim": x.shape[-1], "out_row": out_row, "before": before,
            "last_texel": (_prod(x.shape) + 3) // 4 - 1}


def lower_pad(node, layouts, prefix):
    x = layouts[node.inputs[0].name]
    out = layouts[node.outputs[0].name]
    mode = "CONSTANT" if node.op == "pad" else node.attrs["mode"]
    constant = literal(node.attrs["constant_value"], x.dtype) if node.op == "pad" else ""
    rows = _pad_rows(node, x, out)
    if rows is not None:
        return _kernel(node, layouts, prefix, "pad_rows", constant=constant, **rows)
    return _kernel(node, layouts, prefix, "pad", mode=mode, constant=constant,
                   axes=_pad_axes(x.shape, out.shape, node.attrs["paddings"]))


def lower_mirror_pad_grad(node, layouts, prefix):
    dy = layouts[node.inputs[0].name]
    out = layouts[node.outputs[0].name]
    axes = _pad_axes(out.shape, dy.shape, node.attrs["paddings"])
    # here "in" is the output (x's shape) and "out" is dy: rename for the template
    for a in axes:
        a["xstride"], a["dystride"] = a.pop("istride"), a.pop("ostride")
    padded = sum(a["padded"] for a in axes)
    combos = 3 ** padded          # centre, left mirror, right mirror per padded axis
    if LANES * combos > loop_trips():
        raise FragflowError(f"{node.where()}: mirror_pad_grad over {padded} padded axes "
                            f"needs {combos} reads per element, more than a fragment "
                            f"may loop; pad fewer axes at once")
    return _kernel(node, layouts, prefix, "mirror_pad_grad", mode=node.attrs["mode"],
                   axes=axes, combos=combos)


def lower_tile(node, layouts, prefix):
    x = layouts[node.inputs[0].name]
    out = layouts[node.outputs[0].name]
    axes = [{"ostride": os_, "odim": od, "dim": d, "istride": is_}
            for os_, od, d, is_ in zip(strides(out.shape), out.shape, x.shape, strides(x.shape))
            if d != 1]                    # size-1 axes always read coordinate 0
    return _kernel(node, layouts, prefix, "tile", axes=axes)


def lower_reverse(node, layouts, prefix):
    shape = layouts[node.inputs[0].name].shape
    axes = normalize_axes(node.attrs["axis"], len(shape))
    in_str = strides(shape)
    offset = sum((shape[a] - 1) * in_str[a] for a in axes)
    index = affine_index(shape, [-s if a in axes else s for a, s in enumerate(in_str)], offset)
    return _kernel(node, layouts, prefix, "affine", index=index)


def lower_broadcast_to(node, layouts, prefix):
    index = broadcast_index(layouts[node.outputs[0].name].shape,
                            layouts[node.inputs[0].name].shape)
    return _kernel(node, layouts, prefix, "affine", index=index)


def _gather_sizes(params_shape, indices_shape, axis, batch_dims):
    return {"B": _prod(params_shape[:batch_dims]), "M": _prod(params_shape[batch_dims:axis]),
            "N": _prod(indices_shape[batch_dims:]), "D": params_shape[axis],
            "I": _prod(params_shape[axis + 1:])}


def lower_gather(node, layouts, prefix):
    params, indices = (layouts[v.name].shape for v in node.inputs)
    axis, bd = gather_dims(params, indices, node.attrs["axis"], node.attrs["batch_dims"])
    return _kernel(node, layouts, prefix, "gather", reads=(0, 1),
                   sizes=_gather_sizes(params, indices, axis, bd))


def lower_gather_grad(node, layouts, prefix):
    _, indices, params = (layouts[v.name].shape for v in node.inputs)
    axis, bd = gather_dims(params, indices, node.attrs["axis"], node.attrs["batch_dims"])
    sizes = _gather_sizes(params, indices, axis, bd)
    return _kernel(node, layouts, prefix, "segment_sum", reads=(0, 1), sizes=sizes,
                   **_loop(sizes["N"]))


def lower_segment_sum(node, layouts, prefix):
    data, ids = (layouts[v.name].shape for v in node.inputs)
    sizes = {"B": 1, "M": 1, "N": _prod(ids), "D": node.attrs["num_segments"],
             "I": _prod(data[len(ids):])}
    return _kernel(node, layouts, prefix, "segment_sum", reads=(0, 1), sizes=sizes,
                   **_loop(sizes["N"]))


def _nd_axes(params_shape, k):
    pstr = strides(params_shape)
    return [{"index": a, "dim": params_shape[a], "stride": pstr[a]} for a in range(k)]


def lower_gather_nd(node, layouts, prefix):
    params, indices = (layouts[v.name].shape for v in node.inputs)
    k = indices[-1]
    return _kernel(node, layouts, prefix, "gather_nd", reads=(0, 1), K=k,
                   I=_prod(params[k:]), nd_axes=_nd_axes(params, k))


def lower_gather_nd_grad(node, layouts, prefix):
    _, indices, params = (layouts[v.name].shape for v in node.inputs)
    k = indices[-1]
    return _kernel(node, layouts, prefix, "gather_nd_grad", reads=(0, 1), K=k,
                   I=_prod(params[k:]), nd_axes=_nd_axes(params, k), **_loop(_prod(indices[:-1])))


def lower_one_hot(node, layouts, prefix):
    shape = layouts[node.inputs[0].name].shape
    axis = len(shape) if node.attrs["axis"] == -1 else node.attrs["axis"]
    dtype = node.attrs["dtype"]
    return _kernel(node, layouts, prefix, "one_hot", depth=node.attrs["depth"],
                   J=_prod(shape[axis:]), on=literal(node.attrs["on_value"], dtype),
                   off=literal(node.attrs["off_value"], dtype))


def lower_top_k_rank(node, layouts, prefix):
    n = layouts[node.inputs[0].name].shape[-1]
    return _kernel(node, layouts, prefix, "top_k_rank", **_loop(n))


def lower_top_k_indices(node, layouts, prefix):
    n = layouts[node.inputs[0].name].shape[-1]
    return _kernel(node, layouts, prefix, "top_k_indices", K=node.attrs["k"], **_loop(n))


def _block_axes(shape, sizes):
    """Per axis of the operand (shape) and the block (sizes): their strides and the
    largest start, dim - size (XLA's clamp)."""
    return [{"index": a, "dim": d, "size": k, "stride": s, "bstride": b, "max": d - k}
            for a, (d, k, s, b) in enumerate(zip(shape, sizes, strides(shape),
                                                  strides(sizes)))]


def lower_dynamic_slice(node, layouts, prefix):
    shape = layouts[node.inputs[0].name].shape
    return _kernel(node, layouts, prefix, "dynamic_slice", reads=(0, 1),
                   axes=_block_axes(shape, node.attrs["sizes"]))


def lower_dynamic_update_slice(node, layouts, prefix):
    shape = layouts[node.inputs[0].name].shape
    sizes = layouts[node.inputs[1].name].shape
    return _kernel(node, layouts, prefix, "dynamic_update_slice", reads=(0, 1, 2),
                   axes=_block_axes(shape, sizes))


LOWER = {
    "concat": lower_concat, "pad": lower_pad, "mirror_pad": lower_pad,
    "mirror_pad_grad": lower_mirror_pad_grad, "tile": lower_tile, "reverse": lower_reverse,
    "broadcast_to": lower_broadcast_to, "gather": lower_gather,
    "gather_grad": lower_gather_grad, "unsorted_segment_sum": lower_segment_sum,
    "gather_nd": lower_gather_nd, "gather_nd_grad": lower_gather_nd_grad,
    "one_hot": lower_one_hot, "top_k_rank": lower_top_k_rank,
    "top_k_indices": lower_top_k_indices, "top_k_select": lower_top_k_select,
    "dynamic_slice": lower_dynamic_slice,
    "dynamic_update_slice": lower_dynamic_update_slice,
}


def lower_node(node, layouts, prefix):
    return LOWER[node.op](node, layouts, prefix)
