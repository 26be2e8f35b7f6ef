"""A conv2d whose image has C % 4 != 0 channels reads it padded to a multiple of 4 (for
speed; the compile's Tuning says where: `tuning.conv.pad_channels`).

Four elements share a texel, so with C % 4 != 0 a pixel's channels straddle texels and
the conv kernel reads its image one element at a time: an address, a texel fetch and a
pick of one of its 4 components for every channel of every tap. The stem of an image
model (C = 3) is often its dearest kernel so. With the image padded to a multiple of 4
(zeros) and the filter given zero rows for the new channels, every pixel starts a
texel, and the kernel takes its vec4 paths: one fetch a texel, 4 filter rows as a mat4.
A padded channel adds 0 * 0 = +0 to each sum, so the result is the same (-0.0 sums
aside). The pad is one kernel over the image; the padded filter of a constant filter
is a constant, otherwise a pad too. Measured in Chromium on the exported kernels alone
(BlazeFace's stem, 256x256x3 -> 128x128x24, 5x5 stride 2): SwiftShader 97 -> 48 ms
and 2.2 ms for the pad, Mesa through ANGLE 19.5 -> 11-12 ms and 1.2, one third more
products notwithstanding (docs/PERFORMANCE.md, "Channels padded to whole texels").

Left as they are: convs of fewer than `pad_channels_min_macs` multiply-adds (the pad's
launch would cost more than it saves), images whose padding would add more than a
third to the channels (C = 1, 2, 5), images of unknown channels, other dtypes."""
from __future__ import annotations

import numpy as np

from .pad_folding import conv2d_attrs
from .rewrite import FreshNames, rebuild


def _padded_channels(c: int) -> int | None:
    """C rounded up to a multiple of 4 where that adds at most C / 3 channels."""
    extra = -c % 4
    return c + extra if extra and 3 * extra <= c else None


def _macs(node, filt) -> int | None:
    out = node.outputs[0].type.shape
    if any(d is None for d in out) or any(d is None for d in filt.type.shape):
        return None
    kh, kw, c, _cout = filt.type.shape
    return int(np.prod(out, dtype=np.int64)) * kh * kw * c


def pad_channels(graph, report, tuning=None):
    """tuning: the compile's Tuning; its conv.pad_channels (off: the graph as it is) and
    conv.pad_channels_min_macs."""
    if tuning is None or not tuning.conv.pad_channels:
        return graph
    min_macs = tuning.conv.pad_channels_min_macs
    sites: dict = {}                       # conv node -> padded channels
    for node in graph.nodes:
        if conv2d_attrs(node) is None:
            continue
        image, filt = node.inputs[:2]
        if image.dtype != "float32" or filt.dtype != "float32" or image.type.rank != 4:
            continue
        c = image.type.shape[-1]
        padded = None if c is None else _padded_channels(c)
        if padded is None or filt.type.shape[2] != c:
            continue
        macs = _macs(node, filt)
        if macs is None or macs < min_macs:
            report.append(f"kept {node.op} '{node.name}' on its {c} channels: "
                          f"{macs} multiply-adds, fewer than {min_macs}")
            continue
        sites[node] = padded
        report.append(f"padded the {c} channels of {node.op} '{node.name}''s image to "
                      f"{padded}")
    if not sites:
        return graph
    names = FreshNames(graph)
    images: dict = {}                      # (new image value, channels) -> its pad

    def transform(node, inputs, new, mapping):
        if node not in sites:
            return None
        padded = sites[node]
        image, filt = inputs[0], inputs[1]
        extra = padded - image.type.shape[-1]
        key = (image, padded)
        if key not in images:
            images[key] = new.add_node(
                "pad", [image], {"paddings": ((0, 0),) * 3 + ((0, extra),),
                                 "constant_value": 0.0},
                exact_name=names.fresh(new, node.name, "channels"), scope=node.scope,
                source=node.source).outputs[0]
        if filt.node.op == "constant":
            value = np.asarray(filt.node.attrs["value"], np.float32)
            value = np.pad(value, ((0, 0), (0, 0), (0, extra), (0, 0)))
            wide = new.add_node("constant", [], {"value": value},
                                exact_name=names.fresh(new, filt.node.name, "channels"),
                                scope=node.scope, source=node.source).outputs[0]
        else:
            wide = new.add_node(
                "pad", [filt], {"paddings": ((0, 0), (0, 0), (0, extra), (0, 0)),
                                "constant_value": 0.0},
                exact_name=names.fresh(new, filt.node.name, "channels"), scope=node.scope,
                source=node.source).outputs[0]
        return new.add_node(node.op, [images[key], wide, *inputs[2:]], dict(node.attrs),
                            exact_name=node.name, scope=node.scope,
                            source=node.source).outputs

    return rebuild(graph, transform)
