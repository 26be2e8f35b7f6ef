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
(a PassManager made without one) the pass turns it the plain way.

A stride-s input gradient (a transposed convolution; `tuning.conv.backprop_phases`)
is s * s stride-1 convolutions, one per output phase: output u = i + pad = q * s + r
sums dy[q - j] * w[r + s * j], so phase r correlates dy with the taps r, r + s, ...
reversed. Where the filter's size is a multiple of s every phase has as many taps,
and the phases are the output channels of one conv2d ((rh * s + rw) * C + c,
depth_to_space's order), then one interleave (reshape, transpose, reshape) and a
strided_slice where the phase grid overhangs the output (SAME with a filter of 4 at
stride 2: one row and column); otherwise s * s conv2d and a concat. Pointwise ops
after it with per-channel constants (a bias, an activation) move before the
interleave, where fuse_epilogues takes them into the convolution. Stride 2 in the
TF.js corpus (llvmpipe, in-process A/B of whole models, medians, load 14-20 on 2
cores): handdetect 8568 -> 857 ms (10x), efficientpose 19516 -> 3917 ms (5.0x),
meet 112 -> 52 ms (2.2x); selfie's transposed convolution 15.3 -> 1.4 ms of GPU time.
Kept on the gather kernel: strides that differ per axis, a filter smaller than the
stride (a phase without taps), a padding wider than the filter."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..ir.ops import conv as _conv
from ..ir.ops.registry import get_op
from ..ir.ops.shape import index_spec
from .rewrite import consumers, rebuild


def conv_backprop_input_as_conv(graph, report, tuning=None):
    """tuning: the compile's Tuning (codegen/tuning), handed in by the PassManager: its
    conv.backprop_one_gather and backprop_one_gather_max; None: no gather."""
    one_gather_max = tuning.conv.backprop_one_gather_max \
        if tuning is not None and tuning.conv.backprop_one_gather else -1

    phases_on = tuning is None or tuning.conv.backprop_phases
    users = consumers(graph)
    fetched = set(graph.outputs)
    # a value of the new graph that is an interleave of phases -> (phases value, Phases)
    interleaved: dict = {}
    # (filter, stride, phase group) -> its phase filter: layers sharing a filter share it
    filters: dict = {}

    def transform(node, inputs, new, mapping):
        if node.op != "conv2d_backprop_input":
            return _sink(node, inputs, new, interleaved, users, fetched, report) \
                if interleaved else None
        dy, w = inputs
        attrs = node.attrs
        strides, dilations, _ = _conv.conv_attrs(attrs, 2)
        if dilations != (1, 1) or not w.type.is_static:
            return None
        if strides != (1, 1):
            return _as_phases(node, dy, w, new, interleaved, filters, report) \
                if phases_on else None
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


# -- strided: s * s phase convolutions ------------------------------------------------
@dataclass(frozen=True)
class Phases:
    """A stride-s input gradient computed as its s * s phases, the phases as channels
    ((rh * s + rw) * C + c, depth_to_space's order) on a grid of rows x cols positions
    q0 + a (in units of the stride); crop: per axis where the output begins in the
    interleaved grid and its size."""
    s: int
    grid: tuple
    channels: int
    crop: tuple

    @property
    def cropped(self) -> bool:
        return any(begin or begin + size != q * self.s
                   for (begin, size), q in zip(self.crop, self.grid))


def _axis(k, s, size, dy_size, pad):
    """One spatial axis: output u = i + pad = q * s + r gathers dy[q - j] * w[r + s * j];
    phase r is a stride-1 correlation of dy with its taps reversed, f_r[m] =
    w[r + s * (J_r - 1 - m)], on the grid q = q0 .. q0 + count - 1, padded by J_r - 1 - q0
    before and count - dy_size + q0 after. None where a padding would be negative."""
    q0 = pad // s
    count = (pad + size - 1) // s - q0 + 1
    taps = [-(-(k - r) // s) for r in range(s)]
    after = count - dy_size + q0
    if after < 0 or min(taps) - 1 - q0 < 0:
        return None
    return {"taps": taps, "q0": q0, "count": count, "after": after,
            "crop": (pad % s, size)}


def _phase_taps(axis, r, s):
    """The filter's taps of phase r along one axis, reversed (f_r above)."""
    j = axis["taps"][r]
    return [r + s * (j - 1 - m) for m in range(j)]


def _phase_filter(w, axes, rh, rw, s):
    """Phase (rh, rw)'s HWIO filter of dy (in: w's out channels, out: w's in channels),
    from an array shaped as the filter (its values, or indices into it)."""
    th, tw = (_phase_taps(axes[0], rh, s), _phase_taps(axes[1], rw, s))
    return np.ascontiguousarray(w[np.ix_(th, tw)].transpose(0, 1, 3, 2))


def _filter_value(w, filt, name, new, common):
    """The filter filt(array) as a constant (w constant) or as one gather of the flat
    filter at constant indices."""
    if w.node.op == "constant":
        value = filt(np.asarray(w.node.attrs["value"], np.float32)).astype(np.float32)
        return new.add_node("constant", [], {"value": value}, exact_name=name,
                            **common).outputs[0]
    index = filt(np.arange(math.prod(w.shape), dtype=np.int32).reshape(w.shape))
    flat = new.add_node("reshape", [w], {"shape": (-1,)}, exact_name=f"{name}_flat",
                        **common).outputs[0]
    at = new.add_node("constant", [], {"value": index.astype(np.int32)},
                      exact_name=f"{name}_index", **common).outputs[0]
    return new.add_node("gather", [flat, at], {"axis": 0, "batch_dims": 0},
                        exact_name=name, **common).outputs[0]


def _as_phases(node, dy, w, new, interleaved, filters, report):
    """A stride-s conv2d_backprop_input as conv2d(s) of its phases and one interleave
    (reshape, transpose, reshape; a strided_slice where the grid overhangs the output)."""
    strides, _, _ = _conv.conv_attrs(node.attrs, 2)
    s = strides[0]
    size = tuple(node.attrs["input_size"])
    kh, kw, c, _ = w.shape
    why = None
    if strides[1] != s:
        why = f"strides {list(strides)} differ"
    elif min(kh, kw) < s:
        why = f"a filter of {kh}x{kw} taps has phases without taps at stride {s}"
    elif dy.shape[1] is None or dy.shape[2] is None:
        why = "dy's height or width is unknown"
    axes = None
    if why is None:
        win = _conv.conv_window((dy.shape[0],) + size + (c,), w.shape, node.attrs, 2)
        axes = [_axis(w.shape[i], s, size[i], dy.shape[i + 1], win.pads[i][0])
                for i in range(2)]
        if None in axes:
            why = f"its padding {list(win.pads)} is wider than the filter"
    if why is not None:
        report.append(f"{node.op} '{node.name}' keeps the gather kernel: {why}")
        return None
    common = dict(scope=node.scope, source=node.source)
    phases = [(rh, rw) for rh in range(s) for rw in range(s)]
    uniform = all(len(set(a["taps"])) == 1 for a in axes)
    parts = []
    for group in ([phases] if uniform else [[p] for p in phases]):
        rh, rw = group[0]
        tag = "phases" if uniform else f"phase{rh}{rw}"
        key = (w, s, rh, rw, uniform)
        if key not in filters:
            filters[key] = _filter_value(
                w, lambda a, group=group: np.concatenate(
                    [_phase_filter(a, axes, qh, qw, s) for qh, qw in group], axis=-1),
                f"{node.name}/{tag}_filter", new, common)
        filt = filters[key]
        pads = tuple((a["taps"][r] - 1 - a["q0"], a["after"])
                     for a, r in zip(axes, (rh, rw)))
        parts.append(new.add_node(
            "conv2d", [dy, filt], {"strides": 1, "padding": pads, "dilations": 1,
                                   "padding_taps": "skip"},
            exact_name=f"{node.name}/{tag}", **common).outputs[0])
    stacked = parts[0] if uniform else new.add_node(
        "concat", parts, {"axis": 3}, exact_name=f"{node.name}/phases",
        **common).outputs[0]
    ph = Phases(s, tuple(a["count"] for a in axes), c, tuple(a["crop"] for a in axes))
    convs = "one conv2d" if uniform else f"{s * s} conv2d"
    report.append(f"{node.op} '{node.name}' runs as {convs} of its {s * s} phases "
                  f"(taps {axes[0]['taps']} x {axes[1]['taps']}) and an interleave"
                  f"{' and a crop' if ph.cropped else ''}")
    out = _interleave(stacked, ph, node.name, new, common)
    interleaved[out] = (stacked, ph)
    return [out]


def _interleave(value, ph, name, new, common):
    """The phases (N, rows, cols, s * s * C) as the output (N, H, W, C): depth_to_space
    of block s, then the crop; the last node takes name."""
    (rows, cols), s, c = ph.grid, ph.s, ph.channels
    steps = [("reshape", {"shape": (-1, rows, cols, s, s, c)}),
             ("transpose", {"perm": (0, 1, 3, 2, 4, 5)}),
             ("reshape", {"shape": (-1, rows * s, cols * s, c)})]
    if ph.cropped:
        (bh, h), (bw, wd) = ph.crop
        steps.append(("strided_slice", {"spec": index_spec(
            (slice(None), slice(bh, bh + h), slice(bw, bw + wd)), 4)}))
    for i, (op, attrs) in enumerate(steps):
        last = i == len(steps) - 1
        value = new.add_node(op, [value], attrs,
                             exact_name=name if last else f"{name}/interleave{i}",
                             **common).outputs[0]
    return value


def _per_channel(value, ph, name, new):
    """A constant operand of an op after the interleave as one for the phases (tiled
    over them), or None where it varies along another axis than the channels."""
    if value.node.op != "constant":
        return None
    a = np.asarray(value.node.attrs["value"])
    if a.ndim > 4 or any(d != 1 for d in a.shape[:-1]):
        return None
    if a.ndim == 0 or a.shape[-1] == 1:
        return value
    if a.shape[-1] != ph.channels:
        return None
    return new.add_node("constant", [], {"value": np.tile(a, ph.s * ph.s)},
                        exact_name=name, scope=value.node.scope,
                        source=value.node.source).outputs[0]


def _sink(node, inputs, new, interleaved, users, fetched, report):
    """A pointwise op reading only an interleave (its one reader) and per-channel
    constants runs on the phases before the interleave, where fold_batch_norm and
    fuse_epilogues take it into the convolution (a bias, a scale, an activation)."""
    opdef = get_op(node.op)
    if not opdef.pointwise or opdef.kind != "kernel" or len(node.outputs) != 1:
        return None
    at = [i for i, v in enumerate(inputs) if v in interleaved]
    if len(at) != 1 or node.outputs[0].dtype != "float32":
        return None
    old = node.inputs[at[0]]
    if old in fetched or len(users.get(old, ())) != 1 or node.outputs[0].shape != old.shape:
        return None
    stacked, ph = interleaved[inputs[at[0]]]
    if node.op == "mul" and stacked.node.op == "conv2d" and \
            stacked.node.inputs[1].node.op == "constant":
        # fold_batch_norm would fold the scale into the filter: float32 weights where an
        # imported model's came as float16 or uint8, which an export stores as they came
        # (handdetect's model.bin: +788 KB); after the interleave it joins the next kernel
        return None
    operands = []
    for i, v in enumerate(inputs):
        operand = stacked if i == at[0] else \
            _per_channel(v, ph, f"{node.name}/phases_operand{i}", new)
        if operand is None:
            return None
        operands.append(operand)
    common = dict(scope=node.scope, source=node.source)
    y = new.add_node(node.op, operands, dict(node.attrs), exact_name=f"{node.name}/phases",
                     **common).outputs[0]
    report.append(f"{node.op} '{node.name}' runs on the phases, before the interleave")
    out = _interleave(y, ph, node.name, new, common)
    interleaved[out] = (y, ph)
    return [out]
