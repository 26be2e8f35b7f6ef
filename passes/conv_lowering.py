"""conv2d_backprop_input as a convolution (for speed).

With stride 1 and no dilation, the input gradient of a convolution is itself a
convolution: dy correlated with the filter turned 180 degrees (spatially reversed, in
and out channels swapped), padded by k - 1 - pad on each side. The forward
convolution's kernel has vec4 fast paths that the scatter-shaped backprop kernel lacks,
so training graphs run this way (measured on llvmpipe: the digits CNN's step's
slowest kernel, 16 ms, becomes a few ms).

The turned filter is one gather of the flat filter at constant indices instead of a
strided_slice and a transpose where the Tuning the pass is given says so
(`tuning.conv.backprop_one_gather`, filters up to `backprop_one_gather_max` elements):
one launch fewer. W13's conv2 input gradient (dy 64x4x4x16, filter 3x3x8x16), turn +
conv + stitch with a readback, in-process A/B medians 769 -> 684 us. Without a Tuning
(a PassManager made without one) the pass turns it the plain way."""
from __future__ import annotations

import math

import numpy as np

from ..ir.ops import conv as _conv
from ..ir.ops.shape import index_spec
from .rewrite import rebuild


def conv_backprop_input_as_conv(graph, report, tuning=None):
    """tuning: the compile's Tuning (codegen/tuning), handed in by the PassManager: its
    conv.backprop_one_gather and backprop_one_gather_max; None: no gather."""
    one_gather_max = tuning.conv.backprop_one_gather_max \
        if tuning is not None and tuning.conv.backprop_one_gather else -1

    def transform(node, inputs, new, mapping):
        if node.op != "conv2d_backprop_input":
            return None
        dy, w = inputs
        attrs = node.attrs
        strides, dilations, _ = _conv.conv_attrs(attrs, 2)
        if strides != (1, 1) or dilations != (1, 1) or not w.type.is_static:
            return None
        x_shape = (dy.shape[0],) + tuple(attrs["input_size"]) + (w.shape[2],)
        win = _conv.conv_window(x_shape, w.shape, attrs, 2)
        k = w.shape[:2]
        pads = tuple((k[i] - 1 - before, k[i] - 1 - after)
                     for i, (before, after) in enumerate(win.pads))
        if any(p < 0 for pair in pads for p in pair):
            return None
        common = dict(scope=node.scope, source=node.source)
        if math.prod(w.shape) <= one_gather_max:
            # one gather of the flat filter at constant indices: one kernel, not a
            # strided_slice and a transpose (W13's conv2 input gradient: -1 launch)
            index = np.arange(math.prod(w.shape), dtype=np.int32).reshape(w.shape)
            index = np.ascontiguousarray(index[::-1, ::-1].transpose(0, 1, 3, 2))
            flat = new.add_node("reshape", [w], {"shape": (-1,)},
                                exact_name=f"{node.name}/flat_filter", **common).outputs[0]
            at = new.add_node("constant", [], {"value": index},
                              exact_name=f"{node.name}/turned_index", **common).outputs[0]
            turned = new.add_node("gather", [flat, at], {"axis": 0, "batch_dims": 0},
                                  exact_name=f"{node.name}/turn", **common).outputs[0]
        else:
            flipped = new.add_node(
                "strided_slice", [w],
                {"spec": index_spec((slice(None, None, -1), slice(None, None, -1)), 4)},
                exact_name=f"{node.name}/flip", **common).outputs[0]
            turned = new.add_node("transpose", [flipped], {"perm": (0, 1, 3, 2)},
                                  exact_name=f"{node.name}/swap_channels",
                                  **common).outputs[0]
        report.append(f"{node.op} '{node.name}' runs as conv2d with the filter turned "
                      f"180 degrees, padding {list(pads)}")
        # padding_taps "skip": a tap on the padding stands for a product that does not
        # exist (dy outside its image), so it adds nothing, NaN weight or not
        return new.add_node("conv2d", [dy, turned],
                            {"strides": 1, "padding": pads, "dilations": 1,
                             "padding_taps": "skip"},
                            exact_name=node.name, **common).outputs
    return rebuild(graph, transform)
