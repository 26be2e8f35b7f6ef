"""The activations by name: one table for ff.layers (Keras's names, as in
Dense(8, activation="relu")) and ff.fused (the activations a conv or matmul kernel
computes in its epilogue, ff.fused.conv2d(x, w, bias=b, activation="relu")).

>>> from fragflow.frontend.activations import ACTIVATIONS, FUSED
>>> ACTIVATIONS["relu6"].fused, ACTIVATIONS["softmax"].fused
(True, False)
>>> FUSED
('linear', 'relu', 'relu6', 'elu', 'leaky_relu', 'prelu', 'sigmoid', 'tanh')
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import ops as _ops


@dataclass(frozen=True)
class Activation:
    """fn: tensor -> tensor, what a layer applies (None: the activation needs a tensor
    argument, prelu's alpha, so layers offer it as a layer of its own, PReLU). fused:
    the fused ops (and the epilogue fusion pass) compute it inside the kernel."""
    fn: Callable | None
    fused: bool


def _swish(x):
    return x * _ops.sigmoid(x)


def _hard_sigmoid(x):
    """Keras 3's: relu6(x + 3) / 6."""
    return _ops.relu6(x + 3.0) * (1.0 / 6.0)


ACTIVATIONS = {
    "linear": Activation(lambda x: x, fused=True),
    "relu": Activation(_ops.relu, fused=True),
    "relu6": Activation(_ops.relu6, fused=True),
    "elu": Activation(_ops.elu, fused=True),
    "leaky_relu": Activation(lambda x: _ops.leaky_relu(x, 0.2), fused=True),  # Keras's alpha
    "prelu": Activation(None, fused=True),
    "sigmoid": Activation(_ops.sigmoid, fused=True),
    "tanh": Activation(_ops.tanh, fused=True),
    "selu": Activation(_ops.selu, fused=False),
    "softplus": Activation(_ops.softplus, fused=False),
    "softmax": Activation(lambda x: _ops.softmax(x, axis=-1), fused=False),
    "log_softmax": Activation(lambda x: _ops.log_softmax(x, axis=-1), fused=False),
    "exponential": Activation(_ops.exp, fused=False),
    "swish": Activation(_swish, fused=False),
    "silu": Activation(_swish, fused=False),
    # Keras 3's other names (keras.activations)
    "gelu": Activation(lambda x: _ops.gelu(x, approximate=False), fused=False),
    "softsign": Activation(_ops.softsign, fused=False),
    "hard_sigmoid": Activation(_hard_sigmoid, fused=False),
    "hard_silu": Activation(lambda x: x * _hard_sigmoid(x), fused=False),
    "hard_swish": Activation(lambda x: x * _hard_sigmoid(x), fused=False),
    "mish": Activation(lambda x: x * _ops.tanh(_ops.softplus(x)), fused=False),
    "log_sigmoid": Activation(lambda x: -_ops.softplus(-x), fused=False),
}
FUSED = tuple(name for name, a in ACTIVATIONS.items() if a.fused)
LAYER = tuple(name for name, a in ACTIVATIONS.items() if a.fn is not None)
