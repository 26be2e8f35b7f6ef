"""fuse_norms: LayerNorm and RMSNorm as one fused_layer_norm node (one kernel).

Found from each mean over x's last axes (keepdims) of a square, the variance, as
torch, ONNX exporters, TensorFlow and Keras write them:

    mean = mean(x)                       # LayerNorm only: RMSNorm squares x itself
    c = x - mean
    var = mean(c²)                       # square(c), pow(c, 2) or mul(c, c)
    d = var + eps                        # optional (eps 0)
    y = c * rsqrt(d)                     # or c / sqrt(d), c * reciprocal(sqrt(d)),
                                         # c * (1 / sqrt(d))
    y = y * scale                        # optional: of the normalized axes' shape
    y = y + offset                       # optional: the same

and tf.nn.batch_normalization's rewrite of the same thing, inv = rsqrt(d) [* scale],
y = x * inv + (offset - mean * inv) (or - mean * inv). Every value inside must be
read only inside (c: by the square and the product) and not be fetched. Every
variance left alone says why in the report. The kernel is codegen/norm.py's; rows
longer than the Tuning's `reduce.norm_max_width` stay as they are (each fragment
walks its row)."""
from __future__ import annotations

import numpy as np

from .rewrite import consumers, rebuild


class Rejected(Exception):
    """A candidate that is not a normalization; its message says why."""


def _scalar(value):
    """The float of a one-element float32 constant, else None."""
    node = value.node
    if node.op != "constant" or value.dtype != "float32" or value.type.size != 1:
        return None
    return float(np.asarray(node.attrs["value"]).reshape(()))


def _trailing_mean(node):
    """The first axis of a keepdims mean over its input's last axes, else None."""
    if node.op != "mean" or not node.attrs["keepdims"]:
        return None
    rank = node.inputs[0].type.rank
    axis = node.attrs["axis"]
    axes = tuple(range(rank)) if axis is None else \
        (axis,) if isinstance(axis, int) else tuple(axis)
    axes = sorted(a % rank for a in axes) if rank else []
    if not axes or axes != list(range(axes[0], rank)):
        return None
    return axes[0]


def _squared(node):
    """v where node computes v², else None."""
    if node.op == "square":
        return node.inputs[0]
    if node.op == "mul" and node.inputs[0] is node.inputs[1]:
        return node.inputs[0]
    if node.op == "pow" and _scalar(node.inputs[1]) == 2.0:
        return node.inputs[0]
    return None


def _other(node, value):
    """node's operand that is not value (node: a binary op reading value once)."""
    a, b = node.inputs
    return b if a is value else a


class _Walk:
    """The match being built: the nodes it takes and the rules they must keep."""

    def __init__(self, users, fetched):
        self.users, self.fetched, self.nodes = users, fetched, []

    def readers(self, value, what, count=1):
        if value in self.fetched:
            raise Rejected(f"{what} '{value.node.name}' is fetched")
        readers = self.users.get(value, [])
        if len(readers) != count:
            raise Rejected(f"{what} '{value.node.name}' has {len(readers)} consumers, "
                           f"not {count}")
        return readers

    def sole(self, value, what):
        return self.readers(value, what)[0]


def _affine_operand(value, x, axis):
    """Whether value can be a scale or offset of x normalized from axis: float32, its
    shape (leading 1s dropped) the end of the normalized shape."""
    if value is x or value.dtype != "float32" or not value.type.is_static:
        return False
    shape = list(value.type.shape)
    while shape and shape[0] == 1:
        shape.pop(0)
    normalized = x.type.shape[axis:]
    return tuple(shape) == tuple(normalized[len(normalized) - len(shape):])


def _rsqrt_of(walk, d, what):
    """(r, None) where the reader of d computes 1 / sqrt(d); (None, s) where it is
    sqrt(d) = s read by a division; Rejected otherwise."""
    reader = walk.sole(d, what)
    walk.nodes.append(reader)
    if reader.op == "rsqrt":
        return reader.outputs[0], None
    if reader.op != "sqrt":
        raise Rejected(f"{what} goes to {reader.op} '{reader.name}', not rsqrt or sqrt")
    s = reader.outputs[0]
    after = walk.sole(s, "the standard deviation")
    if after.op == "reciprocal" or (after.op == "div" and after.inputs[1] is s
                                    and _scalar(after.inputs[0]) == 1.0):
        walk.nodes.append(after)
        return after.outputs[0], None
    return None, s


def _match(var_mean, users, fetched, tuning) -> dict:
    """{x, scale, offset, axis, epsilon, center, nodes} for the normalization whose
    variance var_mean computes; Rejected saying why not."""
    walk = _Walk(users, fetched)
    axis = _trailing_mean(var_mean)
    if axis is None:
        raise Rejected("it is not a mean over the last axes keeping them")
    sq = var_mean.inputs[0]
    c = _squared(sq.node)
    if c is None:
        raise Rejected(f"it averages {sq.node.op} '{sq.node.name}', not a square")
    if c.dtype != "float32" or any(d is None for d in c.type.shape[axis:]):
        raise Rejected(f"its rows are {c.type}, not float32 of a known width")
    width = int(np.prod(c.type.shape[axis:]))
    if tuning is not None and width > tuning.reduce.norm_max_width:
        raise Rejected(f"its rows ({width} elements) are longer than the Tuning's "
                       f"reduce.norm_max_width ({tuning.reduce.norm_max_width})")
    walk.readers(sq, "the square")
    center = c.node.op == "sub" and _trailing_mean(c.node.inputs[1].node) == axis and \
        c.node.inputs[1].node.inputs[0] is c.node.inputs[0]
    x = c.node.inputs[0] if center else c
    mean = c.node.inputs[1] if center else None
    walk.nodes += ([mean.node, c.node] if center else []) + [sq.node, var_mean]
    d, epsilon = var_mean.outputs[0], 0.0
    reader = walk.sole(d, "the variance")
    if reader.op == "add" and _scalar(_other(reader, d)) is not None:
        epsilon = _scalar(_other(reader, d))
        if not epsilon >= 0:
            raise Rejected(f"its epsilon {epsilon} is negative")
        walk.nodes.append(reader)
        d = reader.outputs[0]
    r, s = _rsqrt_of(walk, d, "the variance plus epsilon")
    found = {"x": x, "axis": axis, "epsilon": epsilon, "center": center,
             "scale": None, "offset": None}
    if center and r is not None and len(users.get(c, [])) == 1:
        return _match_moments(walk, found, mean, r)
    if center:
        walk.readers(mean, "the mean")
    # the normalized value: c * r or c / s, c read by the square and by it
    readers = walk.readers(c, "the centred input" if center else "the input", 2) \
        if center else [n for n in users.get(c, []) if n is not sq.node]
    products = [n for n in readers if n is not sq.node and (
        (r is not None and n.op == "mul" and set(n.inputs) == {c, r}) or
        (s is not None and n.op == "div" and tuple(n.inputs) == (c, s)))]
    if not products or (r is not None and walk.sole(r, "the inverse deviation")
                        is not products[0]):
        raise Rejected("the input is not multiplied by the inverse deviation")
    y = products[0].outputs[0]
    walk.nodes.append(products[0])
    for role, op in (("scale", "mul"), ("offset", "add")):
        if y in fetched or len(users.get(y, [])) != 1:
            break
        after = users[y][0]
        if after.op != op or not _affine_operand(_other(after, y), x, axis) or \
                after.outputs[0].type.shape != y.type.shape:
            continue               # no scale (an offset may follow), or no offset
        found[role] = _other(after, y)
        walk.nodes.append(after)
        y = after.outputs[0]
    found["nodes"] = walk.nodes
    return found


def _match_moments(walk, found, mean, r) -> dict:
    """tf.nn.batch_normalization's form: inv = r [* scale], y = x * inv + shift, shift
    = offset - mean * inv or -(mean * inv)."""
    x, axis = found["x"], found["axis"]
    inv = r
    reader = walk.sole(r, "the inverse deviation") if len(walk.users.get(r, [])) == 1 \
        else None
    if reader is not None:
        if reader.op != "mul" or not _affine_operand(_other(reader, r), x, axis):
            raise Rejected(f"the inverse deviation goes to {reader.op} '{reader.name}', "
                           f"not a scale")
        found["scale"] = _other(reader, r)
        walk.nodes.append(reader)
        inv = reader.outputs[0]
    readers = walk.readers(inv, "the scaled inverse deviation", 2)
    by_x = [n for n in readers if n.op == "mul" and set(n.inputs) == {x, inv}]
    by_mean = [n for n in readers if n.op == "mul" and set(n.inputs) == {mean, inv}]
    if not by_x or not by_mean or len(walk.users.get(mean, [])) != 2:
        raise Rejected("the inverse deviation does not multiply x and the mean")
    shifted = by_mean[0].outputs[0]
    shift_node = walk.sole(shifted, "the mean times the inverse deviation")
    if shift_node.op == "neg":
        offset = None
    elif shift_node.op == "sub" and shift_node.inputs[1] is shifted and \
            _affine_operand(shift_node.inputs[0], x, axis):
        offset = shift_node.inputs[0]
    else:
        raise Rejected(f"the shift is {shift_node.op} '{shift_node.name}', not offset - "
                       f"mean * inv")
    scaled = by_x[0].outputs[0]
    total = walk.sole(scaled, "x times the inverse deviation")
    if total.op != "add" or set(total.inputs) != {scaled, shift_node.outputs[0]} or \
            walk.sole(shift_node.outputs[0], "the shift") is not total:
        raise Rejected("x * inv and the shift are not added")
    found["offset"] = offset
    walk.nodes += [by_x[0], by_mean[0], shift_node, total]
    found["nodes"] = walk.nodes
    return found


def fuse_norms(graph, report, tuning=None):
    """LayerNorm / RMSNorm → fused_layer_norm where legal (see the module)."""
    users = consumers(graph)
    fetched = set(graph.outputs)
    matches: dict = {}             # the last node -> the match
    taken: set = set()
    for node in graph.nodes:
        if _trailing_mean(node) is None or _squared(node.inputs[0].node) is None:
            continue
        try:
            found = _match(node, users, fetched, tuning)
        except Rejected as why:
            report.append(f"rejected mean '{node.name}' for a layer norm: {why}")
            continue
        if taken & set(found["nodes"]):
            continue
        taken.update(found["nodes"])
        matches[found["nodes"][-1]] = found
        kind = "layer norm" if found["center"] else "RMS norm"
        report.append(f"fused {kind} '{found['nodes'][-1].name}': "
                      + ", ".join(f"{n.op} '{n.name}'" for n in found["nodes"]))

    def transform(node, inputs, new, mapping):
        found = matches.get(node)
        if found is None:
            return None
        affine = [mapping[found[r]] for r in ("scale", "offset") if found[r] is not None]
        attrs = {"axis": found["axis"], "epsilon": found["epsilon"],
                 "center": found["center"], "has_scale": found["scale"] is not None,
                 "has_offset": found["offset"] is not None,
                 "nodes": tuple((m.name, m.op, m.source) for m in found["nodes"])}
        return new.add_node("fused_layer_norm", [mapping[found["x"]], *affine], attrs,
                            exact_name=node.name, scope=node.scope,
                            source=node.source).outputs

    skip = {n for found in matches.values() for n in found["nodes"][:-1]}
    return rebuild(graph, transform, skip)
