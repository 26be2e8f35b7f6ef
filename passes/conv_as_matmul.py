"""A conv2d whose one window is its whole image as a matmul (for speed; the compile's
Tuning says where: `tuning.conv.whole_window_matmul`).

A detector's or regressor's head often ends in a convolution whose filter is as big as
its image, VALID: one output pixel, a dense layer written as a conv (iris' 2x2x128 ->
213, facemesh's 3x3x32 -> 1404). The conv kernels give each output texel a fragment
that sums the whole window alone: 54 fragments for iris' 213 outputs, a sum of 512
products each, few fragments and long chains. As the matmul of the image's rows
[N, H*W*C] and the filter's [H*W*C, COUT] (the same sums: HWIO flattens in the image's
order) it runs matmul's kernels for short, wide products (matmul.lanes: the sum split
among lanes). Drawn alone in Chromium, iris' head (2x2x128 -> 213 with its bias): conv
3.8 ms, matmul 1.5 on SwiftShader; 1.9 and 0.5 on Mesa through ANGLE.

A fused_conv (an importer's _FusedConv2D) becomes a fused_matmul with the same steps,
its extra operands reshaped from [.., 1, 1, COUT]'s broadcast to [N, COUT]'s. The
result is reshaped back to [N, 1, 1, COUT] (a view)."""
from __future__ import annotations

import numpy as np

from ..ir.ops import conv as _conv
from .pad_folding import conv2d_attrs
from .rewrite import FreshNames, rebuild


def _whole_window(node) -> bool:
    """Whether a conv2d / conv2d fused_conv has one window, the whole image of more than
    one pixel, no padding. (A 1x1 conv of a 1x1 image, a squeeze-and-excite block's,
    is already a matmul to the conv kernels, pointwise: as a matmul, movenet-multipose
    ran 0.83-0.90x as fast.)"""
    attrs = conv2d_attrs(node)
    if attrs is None:
        return False
    x, w = node.inputs[0].type, node.inputs[1].type
    if x.rank != 4 or not x.is_static or not w.is_static or x.dtype != "float32":
        return False
    win = _conv.conv_window(x.shape, w.shape, attrs, 2)
    return tuple(win.out_size) == (1, 1) and tuple(w.shape[:2]) == tuple(x.shape[1:3]) \
        and all(p == (0, 0) for p in win.pads) and x.shape[1] * x.shape[2] > 1


def _row_shape(shape: tuple, n: int) -> tuple | None:
    """An epilogue operand's shape broadcasting to [N, 1, 1, COUT] as one broadcasting
    to [N, COUT] (its batch and channel axes), or None."""
    full = (1,) * (4 - len(shape)) + tuple(shape)
    if len(full) != 4 or full[1] != 1 or full[2] != 1:
        return None
    return (full[0], full[3]) if len(shape) else ()


def conv_as_matmul(graph, report, tuning=None):
    """tuning: the compile's Tuning; its conv.whole_window_matmul (off: the graph as it
    is)."""
    if tuning is None or not tuning.conv.whole_window_matmul:
        return graph
    sites = set()
    for node in graph.nodes:
        if not _whole_window(node):
            continue
        n = node.inputs[0].type.shape[0]
        if node.op == "fused_conv" and any(_row_shape(v.type.shape, n) is None
                                           for v in node.inputs[2:]):
            report.append(f"kept {node.op} '{node.name}': an epilogue operand is not "
                          f"per batch and channel")
            continue
        sites.add(node)
        x, w = node.inputs[0].type.shape, node.inputs[1].type.shape
        report.append(f"{node.op} '{node.name}' ({'x'.join(map(str, w))} over its whole "
                      f"{x[1]}x{x[2]} image) as a matmul")
    if not sites:
        return graph
    names = FreshNames(graph)

    def transform(node, inputs, new, mapping):
        if node not in sites:
            return None
        image, filt = inputs[0], inputs[1]
        n, h, w, c = image.type.shape
        cout = filt.type.shape[-1]
        where = dict(scope=node.scope, source=node.source)

        def reshape(value, shape, base):
            if value.node.op == "constant":
                array = np.asarray(value.node.attrs["value"]).reshape(shape)
                return new.add_node("constant", [], {"value": array},
                                    exact_name=names.fresh(new, base, "rows"),
                                    **where).outputs[0]
            return new.add_node("reshape", [value], {"shape": tuple(shape)},
                                exact_name=names.fresh(new, base, "rows"),
                                **where).outputs[0]

        rows = reshape(image, (n, h * w * c), node.name)
        weights = reshape(filt, (h * w * c, cout), filt.node.name)
        if node.op == "conv2d":
            product = new.add_node("matmul", [rows, weights], {},
                                   exact_name=names.fresh(new, node.name, "matmul"),
                                   **where).outputs[0]
        else:
            extra = [v if v.type.rank <= 1 else
                     reshape(v, _row_shape(v.type.shape, n), v.node.name)
                     for v in inputs[2:]]
            product = new.add_node(
                "fused_matmul", [rows, weights, *extra],
                {"steps": node.attrs["steps"], "transpose_a": False, "transpose_b": False,
                 "nodes": node.attrs.get("nodes", ())},
                exact_name=names.fresh(new, node.name, "matmul"), **where).outputs[0]
        return new.add_node("reshape", [product], {"shape": (n, 1, 1, cout)},
                            exact_name=node.name, **where).outputs

    return rebuild(graph, transform)
