"""conv2d_backprop_input as a convolution (for speed).

With stride 1 and no dilation, the input gradient of a convolution is itself a
convolution: dy correlated with the filter turned 180 degrees (spatially reversed, in
and out channels swapped), padded by k - 1 - pad on each side. The forward
convolution's kernel has vec4 fast paths that the scatter-shaped backprop kernel lacks,
so training graphs run this way (measured on llvmpipe: the digits CNN's step's
slowest kernel, 16 ms, becomes a few ms)."""
from __future__ import annotations

from ..ir.ops import conv as _conv
from ..ir.ops.shape import index_spec
from .rewrite import rebuild


def conv_backprop_input_as_conv(graph, report):
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
        flipped = new.add_node(
            "strided_slice", [w],
            {"spec": index_spec((slice(None, None, -1), slice(None, None, -1)), 4)},
            exact_name=f"{node.name}/flip", **common).outputs[0]
        turned = new.add_node("transpose", [flipped], {"perm": (0, 1, 3, 2)},
                              exact_name=f"{node.name}/swap_channels", **common).outputs[0]
        report.append(f"{node.op} '{node.name}' runs as conv2d with the filter turned "
                      f"180 degrees, padding {list(pads)}")
        # padding_taps "skip": a tap on the padding stands for a product that does not
        # exist (dy outside its image), so it adds nothing, NaN weight or not
        return new.add_node("conv2d", [dy, turned],
                            {"strides": 1, "padding": pads, "dilations": 1,
                             "padding_taps": "skip"},
                            exact_name=node.name, **common).outputs
    return rebuild(graph, transform)
