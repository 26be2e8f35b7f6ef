"""Gradient rules of the random op family. Only dropout is differentiable (wrt x): it
is x * mask * scale, so its gradient is dropout of dy with the same seed and stream,
which draws the same mask in the same run (and is its own gradient again, for any
order). The other
random ops are non-differentiable in their OpDefs, as in TensorFlow."""
from __future__ import annotations

from ...ir.ops.random import dropout
from .registry import gradient


@gradient("dropout")
def _dropout(node, dy):
    a = node.attrs
    # the same seed, stream and run counter: the same mask
    return [dropout(dy, a["rate"], a["noise_shape"], a["seed"], stream=a["stream"],
                    run=node.inputs[-1]), None]
