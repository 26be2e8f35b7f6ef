"""A constant pad before a convolution or a max/min pool folded into the window's own
explicit padding (for speed: the pad is a kernel and a texture of its own).

conv2d (padding_taps "multiply"), depthwise_conv2d and their fused_conv forms add
0 * w at a padding tap, which is what a tap on a pad of zeros adds (0 * NaN = NaN
included), so pad(x, zeros on the spatial axes) then a window with padding (b, a)
per axis is the window over x with padding (p_b + b, p_a + a): SAME's amounts are
worked out on the padded size first. A pool never picks its padding: max_pool after a
pad of -inf (min_pool: +inf) is the pool with the sums as its padding, where each is
smaller than the window (the pool's rule: a window of padding alone has no value).

Left as they are, each with its reason in the report: a pad of the batch or channel
axes, a pad value other than 0 (+0.0 only) for a convolution or other than -inf / +inf
for max / min pool, avg_pool (padding does not count in its average, the pad's zeros
do), conv2d with padding_taps "skip" (a tap on its padding adds nothing, not 0 * w),
SAME over an input of unknown spatial size, and pool padding as wide as the window.
The pad stays where something else reads it or it is fetched."""
from __future__ import annotations

import math

from ..ir.ops import conv as _conv
from .rewrite import rebuild

# the window ops a pad folds into: op -> the pad value it takes
CONVS = ("conv2d", "depthwise_conv2d")
POOL_VALUES = {"max_pool": -math.inf, "min_pool": math.inf}


def window_of(node):
    """(op, attrs) of the window node reads its image through: the node's own, or a
    fused_conv's head; None for other nodes."""
    if node.op == "fused_conv":
        return node.attrs["conv_op"], dict(node.attrs["conv_attrs"])
    if node.op in CONVS or node.op in POOL_VALUES or node.op == "avg_pool":
        return node.op, dict(node.attrs)
    return None


def conv2d_attrs(node):
    """The conv2d attrs of a conv2d, or of a fused_conv whose head is one and whose
    operands are read as they are (no pad_last); None for other nodes."""
    window = window_of(node)
    if window is None or window[0] != "conv2d" or node.attrs.get("pad_last"):
        return None
    return window[1]


def _plus_zero(value: float) -> bool:
    """+0.0 (not -0.0): what a tap on padding adds, 0 * w."""
    return value == 0 and math.copysign(1.0, value) > 0


def _why_not(op, attrs, pad_node) -> str | None:
    """Why the pad cannot fold into a window op with attrs, or None."""
    paddings = pad_node.attrs["paddings"]
    value = float(pad_node.attrs["constant_value"])
    if len(paddings) != 4:
        return f"it pads a rank-{len(paddings)} tensor"
    if tuple(paddings[0]) != (0, 0) or tuple(paddings[-1]) != (0, 0):
        return "it pads the batch or channel axis"
    if op == "avg_pool":
        return "avg_pool averages over the real elements only, and the pad's count"
    if op in POOL_VALUES:
        if value != POOL_VALUES[op]:
            return f"{op} would pick the pad's {value} (it folds a pad of " \
                   f"{POOL_VALUES[op]} only)"
    elif op in CONVS:
        if not _plus_zero(value):
            return f"its value is {value}, not 0"
        if attrs.get("padding_taps", "multiply") != "multiply":
            return "the conv2d's padding taps add nothing (padding_taps 'skip'), " \
                   "the pad's add 0 * w"
    else:
        return f"{op} is not a convolution or max/min pool"
    if attrs["padding"] == "SAME" and \
            any(d is None for d in pad_node.outputs[0].type.shape[1:3]):
        return "SAME padding over an input of unknown spatial size"
    return None


def fold_pads(graph, report):
    """Folds pad -> conv2d / depthwise_conv2d / fused_conv / max_pool / min_pool."""
    folds: dict = {}                       # window node -> its new explicit padding
    for node in graph.nodes:
        window = window_of(node)
        if window is None or not node.inputs or node.inputs[0].node.op != "pad":
            continue
        op, attrs = window
        if op not in CONVS and op not in POOL_VALUES and op != "avg_pool":
            continue                       # a fused conv2d_backprop_filter
        pad_node = node.inputs[0].node
        why = _why_not(op, attrs, pad_node)
        if why is None:
            padded = pad_node.outputs[0].type.shape
            if op in POOL_VALUES:
                win = _conv.pool_window(padded, attrs, 2)
            else:
                win = _conv.conv_window(padded, node.inputs[1].type.shape, attrs, 2)
            pads = tuple((before + b, after + a) for (before, after), (b, a)
                         in zip(pad_node.attrs["paddings"][1:3], win.pads))
            if op in POOL_VALUES and any(b >= k or a >= k for (b, a), k
                                         in zip(pads, win.ksize)):
                why = f"the pool's padding would be {list(pads)}, not smaller than " \
                      f"its window {list(win.ksize)}"
        if why is not None:
            report.append(f"kept pad '{pad_node.name}' before {op} '{node.name}': {why}")
            continue
        folds[node] = pads
        report.append(f"folded pad '{pad_node.name}' into {op} '{node.name}': "
                      f"padding {list(pads)}")

    def transform(node, inputs, new, mapping):
        if node not in folds:
            return None
        image = mapping[node.inputs[0].node.inputs[0]]
        attrs = dict(node.attrs)
        if node.op == "fused_conv":
            conv_attrs = dict(attrs["conv_attrs"], padding=folds[node])
            attrs["conv_attrs"] = tuple(sorted(conv_attrs.items()))
        else:
            attrs["padding"] = folds[node]
        return new.add_node(node.op, [image] + inputs[1:], attrs, exact_name=node.name,
                            scope=node.scope, source=node.source).outputs
    return rebuild(graph, transform) if folds else graph


# -- a channel pad read by an epilogue -------------------------------------------------------
FUSED_HEADS = ("fused_conv", "fused_matmul")


def _channel_pad(value, out_type):
    """The amount a zero pad at the end of the last axis adds, where `value` is such a
    pad's result of the fused node's output shape (a residual shortcut whose channels
    are padded to the block's: BlazeFace), else None."""
    pad = value.node
    if pad.op != "pad" or value.dtype != "float32" or not value.type.is_static or \
            value.type.shape != out_type.shape:
        return None
    if not _plus_zero(float(pad.attrs["constant_value"])):
        return None
    *lead, last = pad.attrs["paddings"]
    if any(tuple(p) != (0, 0) for p in lead) or last[0] != 0 or last[1] <= 0:
        return None
    return int(last[1])


def fold_channel_pads(graph, report):
    """A zero pad of the last axis read by a fused matmul's or convolution's epilogue
    (at the output's shape) becomes the node's `pad_last`: the epilogue reads the pad's
    input and takes 0 past its channels (codegen/fused.py), so the pad needs no kernel
    where nothing else reads it."""
    folds: dict = {}                       # fused node -> ((operand index, amount), ...)
    for node in graph.nodes:
        if node.op not in FUSED_HEADS or node.attrs.get("conv_op") == \
                "conv2d_backprop_filter":
            continue
        out = node.outputs[0].type
        found = tuple((k, amount) for k, v in enumerate(node.inputs) if k >= 2 and
                      (amount := _channel_pad(v, out)) is not None)
        if found:
            folds[node] = found
            for k, amount in found:
                report.append(f"folded pad '{node.inputs[k].node.name}' of {amount} "
                              f"channels into {node.op} '{node.name}''s epilogue")

    def transform(node, inputs, new, mapping):
        if node not in folds:
            return None
        inputs = list(inputs)
        for k, _ in folds[node]:
            inputs[k] = mapping[node.inputs[k].node.inputs[0]]
        attrs = dict(node.attrs, pad_last=tuple(node.attrs.get("pad_last", ())) +
                     folds[node])
        return new.add_node(node.op, inputs, attrs, exact_name=node.name,
                            scope=node.scope, source=node.source).outputs
    return rebuild(graph, transform) if folds else graph
