"""Folding batch norm into convolution and matmul weights, for inference.

With constant statistics, batch_normalization(conv(x, w)) is conv(x, w) * inv + shift
after constant folding, where inv has one value per output channel. When w is a
constant too, the multiply moves into the weights: conv(x, w * inv) + shift — one
multiply fewer per output element, and the shift becomes the kernel's bias."""
from __future__ import annotations

import numpy as np

from ..ir.ops.fused import HEADS
from .rewrite import consumers, rebuild


def _per_channel(scale: np.ndarray, channels: int):
    """scale as a vector over the output channels, or None if it varies otherwise."""
    if scale.size != channels or scale.ndim == 0:
        return None
    if any(d != 1 for d in scale.shape[:-1]) or scale.shape[-1] != channels:
        return None
    return scale.reshape(channels)


def _scaled_weights(head, w: np.ndarray, inv: np.ndarray):
    if head.op == "conv2d":
        return w * inv                                   # HWIO: O is last
    if head.op == "depthwise_conv2d":
        kh, kw, c, m = w.shape                           # output channel = c * M + m
        return w * inv.reshape(c, m)
    if head.attrs["transpose_a"]:
        return None
    return w * (inv[:, None] if head.attrs["transpose_b"] else inv)


def fold_batch_norm(graph, report):
    users = consumers(graph)
    fetched = set(graph.outputs)
    folds: dict = {}                  # the mul node -> (head, new weights)
    for mul in graph.nodes:
        if mul.op != "mul":
            continue
        for k, value in enumerate(mul.inputs):
            head, scale = value.node, mul.inputs[1 - k].node
            if head.op not in HEADS or scale.op != "constant" or value in fetched:
                continue
            weights = head.inputs[1].node
            if weights.op != "constant" or len(users.get(value, [])) != 1:
                continue
            if mul.outputs[0].shape != value.shape or value.dtype != "float32":
                continue
            inv = _per_channel(scale.attrs["value"], value.shape[-1])
            new_w = None if inv is None else _scaled_weights(head, weights.attrs["value"],
                                                             inv)
            if new_w is not None:
                folds[mul] = (head, new_w.astype(np.float32))
                report.append(f"folded the per-channel scale '{mul.name}' into the "
                              f"weights of {head.op} '{head.name}'")
                break

    def transform(node, inputs, new, mapping):
        if node not in folds:
            return None
        head, new_w = folds[node]
        weights = new.add_node("constant", [], {"value": new_w},
                               exact_name=f"{head.inputs[1].node.name}_folded",
                               scope=head.scope, source=head.source).outputs[0]
        return new.add_node(head.op, [mapping[head.inputs[0]], weights], dict(head.attrs),
                            exact_name=node.name, scope=head.scope,
                            source=head.source).outputs

    return rebuild(graph, transform, skip={head for head, _ in folds.values()})
