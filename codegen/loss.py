"""Lowering the loss family (ir/ops/loss.py) to templates/loss.glsl.j2.

A classifier's logits are short rows (a few to a few hundred classes): each fragment
then walks its rows for their max and sum of exponentials itself, one kernel in all
(the loss: one row per output element; the gradient: the texel's rows, at most two for
four or more classes). Where that walk would cost more than a few launches (the same
measure as softmax's direct kernel, elements x row length), each row's max and sum come
first from the reduction passes of codegen/reduce_tree.py, which the last kernel reads."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .common import make_kernel, operands, output_operand
from .reduce_tree import TreeBuilder, fields_of, knobs, tree_reduce


@dataclass(frozen=True, kw_only=True)
class LossParams:
    """templates/loss.glsl.j2's kernel: "direct" (each fragment walks its rows) or
    "stats" (it reads their max and sum of exp from reduction passes)."""
    kind: str
    grad: bool              # the gradient, not the loss
    classes: int            # the logits' last axis


def lower_node(node, layouts, prefix):
    ins = operands(node, layouts)
    out = output_operand(node.outputs[0], layouts)
    logits = ins[0]
    shape = logits.layout.shape
    classes = shape[-1]
    rows = math.prod(shape[:-1])
    grad = node.op.endswith("_grad")
    if rows * classes * classes <= knobs().direct_softmax_work:
        return make_kernel("loss.glsl.j2", prefix, node.op, [node], ins, out,
                           **fields_of(LossParams(kind="direct", grad=grad, classes=classes)))
    builder = TreeBuilder(node, prefix, node.op, layouts)
    kept = tuple(shape[:-1]) or (1,)
    axis = len(shape) - 1
    row_max = builder.scratch(kept, "float32", logits.layout)
    tree_reduce(builder, logits, row_max, (axis,), "max")
    total = builder.scratch(kept, "float32", logits.layout)
    tree_reduce(builder, logits, total, (axis,), "sumexp", shift=row_max)
    builder.add("loss.glsl.j2", ins + [row_max, total], out,
                **fields_of(LossParams(kind="stats", grad=grad, classes=classes)))
    return builder.kernels
