"""Keras's recurrent layers, ff.keras.layers.SimpleRNN, LSTM and GRU, on one `scan`
over time each (frontend/rnn.py `recurrence`). Weights are Keras's, in its gate
orders (LSTM i, f, c, o; GRU z, r, h, reset_after=True by default), initialized as
Keras does, so trained Keras weights load one to one (docs/TENSORFLOW.md "Recurrent
networks" has the shapes). Inputs are (batch, time, features), time possibly unknown
until the feed; return_sequences, return_state and go_backwards as Keras. Masking,
dropout and stateful=True are not supported.

>>> import numpy as np, fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     x = ff.placeholder((None, None, 3), name="x")
...     y = ff.keras.layers.LSTM(4)(x)
>>> y.shape
(None, 4)
"""
from __future__ import annotations

import numpy as np

from ..ir.errors import AttrError, ShapeError
from . import initializers as _init, layers as _layers, ops as _ops
from .layers import Layer, _activation_name, activation_fn
from .rnn import recurrence

__all__ = ["SimpleRNN", "LSTM", "GRU"]

_UNSUPPORTED = ("dropout", "recurrent_dropout", "stateful", "unroll", "time_major")


class _Recurrent(Layer):
    """What SimpleRNN, LSTM and GRU share: the loop over time and the outputs."""

    gates = 1
    default_recurrent_activation = "sigmoid"

    def __init__(self, units, activation="tanh", recurrent_activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", return_sequences=False, return_state=False,
                 go_backwards=False, **kwargs):
        for key in _UNSUPPORTED:
            if kwargs.pop(key, None):
                raise AttrError(f"{type(self).__name__}({key}=...) is not supported by "
                                f"fragflow's recurrent layers")
        for key in ("kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
                    "activity_regularizer", "kernel_constraint", "recurrent_constraint",
                    "bias_constraint"):
            if kwargs.pop(key, None) is not None:
                raise AttrError(f"{type(self).__name__}({key}=...) is not supported")
        super().__init__(**kwargs)
        if int(units) <= 0:
            raise AttrError(f"{type(self).__name__} needs a positive number of units, got "
                            f"{units}")
        self.units = int(units)
        self.activation = _activation_name(activation)
        self.recurrent_activation = _activation_name(
            recurrent_activation or self.default_recurrent_activation)
        self.use_bias = bool(use_bias)
        self.kernel_initializer = kernel_initializer
        self.recurrent_initializer = recurrent_initializer
        self.bias_initializer = bias_initializer
        self.return_sequences = bool(return_sequences)
        self.return_state = bool(return_state)
        self.go_backwards = bool(go_backwards)

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ShapeError(f"{type(self).__name__} '{self.name}' needs inputs of shape "
                             f"(batch, time, features) with known features, got "
                             f"{list(input_shape)}")
        n = self.gates * self.units
        self.kernel = self.add_weight("kernel", (input_shape[-1], n), self.kernel_initializer)
        self.recurrent_kernel = self.add_weight("recurrent_kernel", (self.units, n),
                                                self.recurrent_initializer)
        self.bias = self.add_weight("bias", self._bias_shape(), self._bias_init()) \
            if self.use_bias else None

    def _bias_shape(self):
        return (self.gates * self.units,)

    def _bias_init(self):
        return self.bias_initializer

    def _input_bias(self):
        return self.bias

    def call(self, x, training=False):
        if x.dtype != "float32":
            x = _ops.cast(x, "float32")
        xw = _ops.matmul(x, self.kernel)            # every step's input part, one matmul
        if self.bias is not None and self._input_bias() is not None:
            xw = xw + self._input_bias()
        xw = _ops.transpose(xw, [1, 0, 2])          # time-major for the scan
        if self.go_backwards:
            xw = _ops.reverse(xw, [0])
        row = _ops.gather(xw, 0)
        zeros = _ops.zeros_like(_ops.slice(row, [0, 0], [-1, 1])) + _ops.zeros([self.units])
        outputs, state = recurrence(self.step, xw, self._initial(zeros), name=self.name)
        last = self._output_of(state)
        out = _ops.transpose(outputs, [1, 0, 2]) if self.return_sequences else last
        if not self.return_state:
            return out
        return [out, *self._state_list(state)]

    def _initial(self, zeros):
        return zeros

    def _output_of(self, state):
        return state

    def _state_list(self, state):
        return [state]

    def compute_output_shape(self, input_shape) -> tuple:
        batch, time = input_shape[0], input_shape[1]
        return (batch, time, self.units) if self.return_sequences else (batch, self.units)

    def get_config(self) -> dict:
        return {"units": self.units, "return_sequences": self.return_sequences,
                "return_state": self.return_state, "go_backwards": self.go_backwards}


class SimpleRNN(_Recurrent):
    """Keras's SimpleRNN: h = activation(x W + h_prev U + b) (tanh by default)."""

    def __init__(self, units, activation="tanh", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", return_sequences=False, return_state=False,
                 go_backwards=False, **kwargs):
        super().__init__(units, activation, None, use_bias, kernel_initializer,
                         recurrent_initializer, bias_initializer, return_sequences,
                         return_state, go_backwards, **kwargs)

    def step(self, xw, h):
        h = activation_fn(self.activation)(xw + _ops.matmul(h, self.recurrent_kernel))
        return h, h


class LSTM(_Recurrent):
    """Keras's LSTM: z = x W + h_prev U + b split into i, f, c, o;
    c = f * c_prev + i * activation(c), h = o * activation(c), the gates through
    recurrent_activation (sigmoid). return_state gives [output, h, c]."""

    gates = 4

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid",
                 use_bias=True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros",
                 unit_forget_bias=True, return_sequences=False, return_state=False,
                 go_backwards=False, **kwargs):
        super().__init__(units, activation, recurrent_activation, use_bias,
                         kernel_initializer, recurrent_initializer, bias_initializer,
                         return_sequences, return_state, go_backwards, **kwargs)
        self.unit_forget_bias = bool(unit_forget_bias)

    def _bias_init(self):
        if not self.unit_forget_bias:
            return self.bias_initializer
        base, units = _init.get(self.bias_initializer), self.units

        def init(shape):
            value = np.array(base((units,)), np.float32)
            return np.concatenate([value, np.ones(units, np.float32),
                                   np.array(base((2 * units,)), np.float32)])
        return init

    def _initial(self, zeros):
        return (zeros, zeros)                           # (h, c)

    def step(self, xw, state):
        h, c = state
        act, rec = activation_fn(self.activation), activation_fn(self.recurrent_activation)
        z = xw + _ops.matmul(h, self.recurrent_kernel)
        i, f, g, o = _ops.split(z, 4, axis=-1)
        c = rec(f) * c + rec(i) * act(g)
        h = rec(o) * act(c)
        return h, (h, c)

    def _output_of(self, state):
        return state[0]

    def _state_list(self, state):
        return [state[0], state[1]]


class GRU(_Recurrent):
    """Keras's GRU: gates z, r, h; reset_after=True (TF2's default) applies the reset
    gate after the recurrent matmul, h~ = tanh(x W_h + b_h + r * (h_prev U_h + b'_h));
    h = z * h_prev + (1 - z) * h~."""

    gates = 3

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid",
                 use_bias=True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros",
                 return_sequences=False, return_state=False, go_backwards=False,
                 reset_after=True, **kwargs):
        super().__init__(units, activation, recurrent_activation, use_bias,
                         kernel_initializer, recurrent_initializer, bias_initializer,
                         return_sequences, return_state, go_backwards, **kwargs)
        self.reset_after = bool(reset_after)

    def _bias_shape(self):
        return (2, 3 * self.units) if self.reset_after else (3 * self.units,)

    def _input_bias(self):
        return _ops.gather(self.bias, 0) if self.reset_after else self.bias

    def step(self, xw, h):
        act, rec = activation_fn(self.activation), activation_fn(self.recurrent_activation)
        n = self.units
        x_z, x_r, x_h = _ops.split(xw, 3, axis=-1)
        if self.reset_after:
            hu = _ops.matmul(h, self.recurrent_kernel)
            if self.bias is not None:
                hu = hu + _ops.gather(self.bias, 1)
            h_z, h_r, h_h = _ops.split(hu, 3, axis=-1)
            z, r = rec(x_z + h_z), rec(x_r + h_r)
            cand = act(x_h + r * h_h)
        else:
            u_zr = _ops.slice(self.recurrent_kernel, [0, 0], [-1, 2 * n])
            u_h = _ops.slice(self.recurrent_kernel, [0, 2 * n], [-1, n])
            h_z, h_r = _ops.split(_ops.matmul(h, u_zr), 2, axis=-1)
            z, r = rec(x_z + h_z), rec(x_r + h_r)
            cand = act(x_h + _ops.matmul(r * h, u_h))
        h = z * h + (1.0 - z) * cand
        return h, h


# ff.layers (ff.keras.layers) holds them: fragflow.frontend imports this module, as
# layers.py cannot (this module imports it)
for _cls in (SimpleRNN, LSTM, GRU):
    setattr(_layers, _cls.__name__, _cls)
_layers.__all__ += [n for n in __all__ if n not in _layers.__all__]
