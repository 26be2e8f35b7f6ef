"""ff.train: TensorFlow 1's optimizer classes (tf.train.*Optimizer) as aliases of
ff.optim's (same arguments, same update formulas).

>>> import fragflow as ff
>>> ff.train.AdamOptimizer is ff.optim.Adam
True
"""
from __future__ import annotations

import numpy as np

from ...ir.graph import get_default_graph as _default_graph
from .. import ops as _ops, optim as _optim, saver as _saver
from ..tensor import Variable as _Variable
from ._missing import install as _install

Optimizer = _optim.Optimizer
GradientDescentOptimizer = _optim.GradientDescent
MomentumOptimizer = _optim.Momentum
AdamOptimizer = _optim.Adam
AdamaxOptimizer = _optim.Adamax
AdagradOptimizer = _optim.Adagrad
AdadeltaOptimizer = _optim.Adadelta
RMSPropOptimizer = _optim.RMSProp
Saver, latest_checkpoint = _saver.Saver, _saver.latest_checkpoint
checkpoint_exists, get_checkpoint_state = _saver.checkpoint_exists, _saver.get_checkpoint_state

def get_or_create_global_step(graph=None):
    """The graph's step counter: an int32 Variable named "global_step" (not trainable),
    made on first use. Pass it to minimize(loss, global_step=...) to count steps."""
    graph = graph if graph is not None else _default_graph()
    if "global_step" in graph and graph.node("global_step").op == "variable":
        return _Variable(graph.node("global_step").outputs[0])
    with graph.as_default(), graph.name_scope("/"):
        return _Variable(np.int32(0), name="global_step", trainable=False)


def get_global_step(graph=None):
    """The graph's "global_step" Variable, or None if none was made."""
    graph = graph if graph is not None else _default_graph()
    if "global_step" in graph and graph.node("global_step").op == "variable":
        return _Variable(graph.node("global_step").outputs[0])
    return None


create_global_step = get_or_create_global_step


def exponential_decay(learning_rate, global_step, decay_steps, decay_rate, staircase=False,
                      name=None):
    """learning_rate * decay_rate ** (global_step / decay_steps) (the exponent floored
    with staircase), a tensor to give an optimizer, as tf.train.exponential_decay."""
    with _ops.name_scope(name or "ExponentialDecay"):
        p = _ops.cast(global_step, "float32") / float(decay_steps)
        if staircase:
            p = _ops.floor(p)
        return learning_rate * _ops.pow(float(decay_rate), p)


__all__ = ["get_or_create_global_step", "get_global_step", "create_global_step",
           "exponential_decay", "Optimizer", "GradientDescentOptimizer", "MomentumOptimizer",
           "AdamOptimizer", "AdamaxOptimizer", "AdagradOptimizer", "AdadeltaOptimizer",
           "RMSPropOptimizer", "Saver", "latest_checkpoint", "checkpoint_exists",
           "get_checkpoint_state"]
_install(globals(), "fragflow.train")
