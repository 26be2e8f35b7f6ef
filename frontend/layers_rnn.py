"""Keras's recurrent layers, ff.keras.layers.SimpleRNN, LSTM and GRU, on one `scan`
over time each (frontend/rnn.py `recurrence`). Weights are Keras's, in its gate
orders (LSTM i, f, c, o; GRU z, r, h, reset_after=True by default), initialized as
Keras does, so trained Keras weights load one to one (docs/TENSORFLOW.md "Recurrent
networks" has the shapes). Inputs are (batch, time, features), time possibly unknown
until the feed; return_sequences, return_state, go_backwards, initial_state, masks
(Masking, Embedding(mask_zero=True) or the mask= argument), dropout and
recurrent_dropout (masks drawn once per sequence, before the loop; with
recurrent_dropout_per_step=True, a fragflow option, drawn afresh at every step inside
the loop) and Bidirectional as Keras; stateful=True is refused.

>>> import numpy as np, fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     x = ff.placeholder((None, None, 3), name="x")
...     y = ff.keras.layers.LSTM(4)(x)
>>> y.shape
(None, 4)
"""
from __future__ import annotations

import copy
import inspect

import numpy as np

from ..ir.errors import AttrError, ShapeError
from ..ir.graph import get_default_graph
from ..ir.source import user_location
from . import initializers as _init, layers as _layers, ops as _ops
from .layers import (
    CALLS,
    Layer,
    _activation_name,
    activation_fn,
    keras_mask,
    layer_from_config,
    set_keras_mask,
)
from .rnn import RNNError, recurrence
from .tensor import Tensor, as_tensor_value, wrap

__all__ = ["SimpleRNN", "LSTM", "GRU", "Bidirectional", "Masking", "RNN", "SimpleRNNCell",
           "LSTMCell", "GRUCell", "StackedRNNCells"]


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else wrap(as_tensor_value(x))


def _rate(value, what, layer):
    """Keras's dropout rates: clipped to [0, 1]; only 0 < rate < 1 drops anything."""
    try:
        return min(1.0, max(0.0, float(value)))
    except (TypeError, ValueError):
        raise AttrError(f"{layer}({what}=...) must be a number in [0, 1), got "
                        f"{value!r}") from None


def _call_pending(layer, call, inputs, mask, training, initial_state) -> tuple:
    """(outputs, mask) of Layer.__call__ `call` on a recurrent layer's inputs (x, or
    [x, *initial_state]), with the mask (the one that came with x by default) and the
    initial states left in layer._pending while it builds its graph."""
    if isinstance(inputs, (list, tuple)):
        inputs, states = inputs[0], list(inputs[1:])
        initial_state = states or initial_state
    x = _tensor(inputs)
    if mask is None:
        mask = keras_mask(x)
    layer._pending = (mask, initial_state)
    try:
        return call(x, training=training), mask
    finally:
        layer._pending = (None, None)


class _Recurrent(Layer):
    """What SimpleRNN, LSTM and GRU share: the loop over time and the outputs."""

    gates = 1
    default_recurrent_activation = "sigmoid"
    keras_name = "rnn"               # Keras's default names: simple_rnn, lstm, gru

    def __init__(self, units, activation="tanh", recurrent_activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", return_sequences=False, return_state=False,
                 go_backwards=False, dropout=0.0, recurrent_dropout=0.0, stateful=False,
                 unroll=False, seed=None, zero_output_for_mask=False, **kwargs):
        what = type(self).__name__
        if stateful:
            raise AttrError(f"{what}(stateful=True) is not supported: fragflow's recurrent "
                            f"layers start every batch from zeros (stateful=False); carry a "
                            f"state across batches with return_state=True and "
                            f"initial_state=[...] of the next call")
        if kwargs.pop("time_major", False):
            raise AttrError(f"{what}(time_major=True) is not supported: give "
                            f"(batch, time, features) inputs")
        implementation = kwargs.pop("implementation", 2)
        if implementation not in (1, 2):
            raise AttrError(f"{what}(implementation=...) must be 1 or 2, got "
                            f"{implementation!r}")
        self.dropout = _rate(dropout, "dropout", what)
        self.recurrent_dropout = _rate(recurrent_dropout, "recurrent_dropout", what)
        # fragflow's option: a recurrent dropout mask per step (Keras: one per sequence)
        self.recurrent_dropout_per_step = bool(kwargs.pop("recurrent_dropout_per_step",
                                                          False))
        # Keras: recurrent dropout runs implementation 1, one mask per gate
        self.implementation = 1 if self.recurrent_dropout else int(implementation)
        self.unroll = bool(unroll)        # the same values either way: one scan
        self.seed = seed
        self.zero_output_for_mask = bool(zero_output_for_mask)
        self.stateful = False
        self._pending = (None, None)
        self._rec_masks = None
        for key in ("kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
                    "activity_regularizer", "kernel_constraint", "recurrent_constraint",
                    "bias_constraint"):
            if kwargs.pop(key, None) is not None:
                raise AttrError(f"{type(self).__name__}({key}=...) is not supported")
        super().__init__(**kwargs)
        if kwargs.get("name") is None:
            self.name = self.keras_name
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

    def get_config(self) -> dict:
        """Keras's keys; recurrent_dropout_per_step, fragflow's own option, only where it
        is set (Keras's from_config would refuse the key, so a default layer's config
        stays one Keras reads)."""
        config = super().get_config()
        if self.recurrent_dropout_per_step:
            config["recurrent_dropout_per_step"] = True
        return config

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

    @property
    def training_dependent(self) -> bool:
        """Whether training=True builds other ops (dropout): Sequential.fit then
        builds the layers again for training, as for Dropout."""
        return 0.0 < self.dropout < 1.0 or 0.0 < self.recurrent_dropout < 1.0

    def __call__(self, inputs, mask=None, training=False, initial_state=None):
        """Keras's call: mask (batch, time) bool, True where a step counts (by default
        the mask of Masking / Embedding(mask_zero=True) that made inputs);
        initial_state: the list of states ([h] or, for LSTM, [h, c]). inputs may be
        the list [x, *initial_state]."""
        out, mask = _call_pending(self, super().__call__, inputs, mask, training,
                                  initial_state)
        if mask is not None and self.return_sequences:
            set_keras_mask(out[0] if isinstance(out, list) else out, _tensor(mask))
        return out

    def _dropout_masks(self, like, width, rate, count):
        """count masks (batch, width) of Keras's dropout (0 or 1 / (1 - rate)), drawn
        once for the whole sequence, outside the loop (bodies draw no random values)."""
        ones = _ops.zeros_like(_ops.slice(like, [0, 0], [-1, 1])) + _ops.ones([width])
        return [_ops.dropout(ones, rate, seed=None if self.seed is None else
                             int(self.seed) + k) for k in range(count)]

    def _mask_count(self):
        return self.gates if self.implementation == 1 else 1

    def _masks_per_step(self, h):
        """recurrent_dropout_per_step: the step's masks, drawn in the loop's body (a
        random op there draws afresh every iteration: frontend/control_effects.py)."""
        return self._dropout_masks(h, self.units, self.recurrent_dropout, self._mask_count())

    def _step_rec_masks(self, h):
        masks = self._rec_masks
        return masks(h) if callable(masks) else masks

    def _project(self, x, masks):
        """x @ kernel (+ the input bias) for every step at once; with dropout masks,
        (x * mask_g) @ kernel_g per gate g (one mask for all gates: implementation 2)."""
        if masks is None:
            xw = _ops.matmul(x, self.kernel)
        elif len(masks) == 1:
            xw = _ops.matmul(x * _ops.expand_dims(masks[0], 1), self.kernel)
        else:
            n = self.units
            xw = _ops.concat([_ops.matmul(x * _ops.expand_dims(m, 1), _ops.slice(
                self.kernel, [0, g * n], [-1, n])) for g, m in enumerate(masks)], -1)
        if self.bias is not None and self._input_bias() is not None:
            xw = xw + self._input_bias()
        return xw

    def _recurrent(self, h, kernel, masks):
        """h @ kernel, or with recurrent dropout masks (h * mask_g) @ kernel_g per gate
        g of kernel's columns (one mask: (h * mask) @ kernel)."""
        if masks is None:
            return _ops.matmul(h, kernel)
        if len(masks) == 1:
            return _ops.matmul(h * masks[0], kernel)
        n = self.units
        return _ops.concat([_ops.matmul(h * masks[g], _ops.slice(kernel, [0, g * n],
                                                                [-1, n]))
                            for g in range(kernel.shape[-1] // n)], -1)

    def call(self, x, training=False):
        mask, initial_state = self._pending
        if x.dtype != "float32":
            x = _ops.cast(x, "float32")
        first = _ops.gather(_ops.transpose(x, [1, 0, 2]), 0)       # (batch, features)
        in_masks = self._dropout_masks(first, x.shape[-1], self.dropout,
                                       self._mask_count()) \
            if training and 0.0 < self.dropout < 1.0 else None
        self._rec_masks = None
        if training and 0.0 < self.recurrent_dropout < 1.0:
            self._rec_masks = self._dropout_masks(
                first, self.units, self.recurrent_dropout, self._mask_count()) \
                if not self.recurrent_dropout_per_step else self._masks_per_step
        self._last_dropout_masks = (in_masks, self._rec_masks)     # what tests check
        xw = self._project(x, in_masks)             # every step's input part, one matmul
        xw = _ops.transpose(xw, [1, 0, 2])          # time-major for the scan
        steps = None
        if mask is not None:
            steps = _ops.transpose(self._check_mask(mask, x), [1, 0])   # (time, batch)
        if self.go_backwards:
            xw = _ops.reverse(xw, [0])
            steps = None if steps is None else _ops.reverse(steps, [0])
        row = _ops.gather(xw, 0)
        zeros = _ops.zeros_like(_ops.slice(row, [0, 0], [-1, 1])) + _ops.zeros([self.units])
        state = self._initial(zeros) if initial_state is None else \
            self._given_state(initial_state)
        try:
            outputs, state = recurrence(self.step, xw, state, name=self.name, mask=steps,
                                        zero_output=self.zero_output_for_mask,
                                        output_size=self.units)
        finally:
            self._rec_masks = None
        last = self._output_of(state)
        out = _ops.transpose(outputs, [1, 0, 2]) if self.return_sequences else last
        if not self.return_state:
            return out
        return [out, *self._state_list(state)]

    def _check_mask(self, mask, x):
        mask = _tensor(mask)
        if len(mask.shape) != 2:
            raise ShapeError(f"{type(self).__name__} '{self.name}': mask must be (batch, "
                             f"time), got shape {list(mask.shape)} for inputs of shape "
                             f"{list(x.shape)}")
        for got, want in zip(mask.shape, x.shape[:2]):
            if got is not None and want is not None and got != want:
                raise ShapeError(f"{type(self).__name__} '{self.name}': mask of shape "
                                 f"{list(mask.shape)} for inputs of shape "
                                 f"{list(x.shape)}")
        return _ops.cast(mask, "float32")

    def _given_state(self, initial_state):
        states = list(initial_state) if isinstance(initial_state, (list, tuple)) \
            else [initial_state]
        want = len(self._state_list(self._initial(None)))
        if len(states) != want:
            raise RNNError(f"{type(self).__name__} '{self.name}': initial_state needs "
                           f"{want} tensor(s) (batch, {self.units}), got {len(states)}")
        states = [_tensor(s) for s in states]
        for s in states:
            if len(s.shape) != 2 or s.shape[-1] not in (None, self.units):
                raise ShapeError(f"{type(self).__name__} '{self.name}': an initial state "
                                 f"must be (batch, {self.units}), got {list(s.shape)}")
        states = [s if s.dtype == "float32" else _ops.cast(s, "float32") for s in states]
        return self._from_list(states)

    def _from_list(self, states):
        return states[0]

    def _initial(self, zeros):
        return zeros

    def _output_of(self, state):
        return state

    def _state_list(self, state):
        return [state]

    def compute_output_shape(self, input_shape) -> tuple:
        batch, time = input_shape[0], input_shape[1]
        return (batch, time, self.units) if self.return_sequences else (batch, self.units)



class SimpleRNN(_Recurrent):
    """Keras's SimpleRNN: h = activation(x W + h_prev U + b) (tanh by default)."""

    keras_name = "simple_rnn"

    def __init__(self, units, activation="tanh", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", return_sequences=False, return_state=False,
                 go_backwards=False, **kwargs):
        super().__init__(units, activation, None, use_bias, kernel_initializer,
                         recurrent_initializer, bias_initializer, return_sequences,
                         return_state, go_backwards, **kwargs)

    def _mask_count(self):
        return 1                                    # Keras: one mask, whatever the gates

    def get_config(self) -> dict:
        config = super().get_config()
        del config["recurrent_activation"]          # SimpleRNN has none
        return config

    def step(self, xw, h):
        h = activation_fn(self.activation)(
            xw + self._recurrent(h, self.recurrent_kernel, self._step_rec_masks(h)))
        return h, h


class LSTM(_Recurrent):
    """Keras's LSTM: z = x W + h_prev U + b split into i, f, c, o;
    c = f * c_prev + i * activation(c), h = o * activation(c), the gates through
    recurrent_activation (sigmoid). return_state gives [output, h, c]."""

    gates = 4
    keras_name = "lstm"

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
        z = xw + self._recurrent(h, self.recurrent_kernel, self._step_rec_masks(h))
        i, f, g, o = _ops.split(z, 4, axis=-1)
        c = rec(f) * c + rec(i) * act(g)
        h = rec(o) * act(c)
        return h, (h, c)

    def _output_of(self, state):
        return state[0]

    def _state_list(self, state):
        return [state[0], state[1]]

    def _from_list(self, states):
        return (states[0], states[1])


class GRU(_Recurrent):
    """Keras's GRU: gates z, r, h; reset_after=True (TF2's default) applies the reset
    gate after the recurrent matmul, h~ = tanh(x W_h + b_h + r * (h_prev U_h + b'_h));
    h = z * h_prev + (1 - z) * h~."""

    gates = 3
    keras_name = "gru"

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
        masks = self._step_rec_masks(h)              # recurrent dropout: one per gate
        if self.reset_after:
            hu = self._recurrent(h, self.recurrent_kernel, masks)
            if self.bias is not None:
                hu = hu + _ops.gather(self.bias, 1)
            h_z, h_r, h_h = _ops.split(hu, 3, axis=-1)
            z, r = rec(x_z + h_z), rec(x_r + h_r)
            cand = act(x_h + r * h_h)
        else:
            u_zr = _ops.slice(self.recurrent_kernel, [0, 0], [-1, 2 * n])
            u_h = _ops.slice(self.recurrent_kernel, [0, 2 * n], [-1, n])
            h_z, h_r = _ops.split(self._recurrent(h, u_zr, masks), 2, axis=-1)
            z, r = rec(x_z + h_z), rec(x_r + h_r)
            h_h = h if masks is None else h * masks[-1]
            cand = act(x_h + _ops.matmul(r * h_h, u_h))
        h = z * h + (1.0 - z) * cand
        return h, h


class Masking(Layer):
    """Keras's Masking: a step whose features all equal mask_value is masked (the
    recurrent layers after it skip it) and its features are set to 0."""

    def __init__(self, mask_value=0.0, **kwargs):
        super().__init__(**kwargs)
        self.mask_value = float(mask_value)

    def call(self, x, training=False):
        keep = _ops.reduce_any(_ops.not_equal(x, self.mask_value), axis=-1)
        out = x * _ops.expand_dims(_ops.cast(keep, x.dtype), -1)
        set_keras_mask(out, keep)
        return out


_MERGE_MODES = ("concat", "sum", "mul", "ave", None)


def _fresh_copy(layer, name, **changes):
    """A new, unbuilt layer of layer's class and arguments (Keras rebuilds the wrapped
    layer from its config): its own weights, named name."""
    clone = type(layer).__new__(type(layer))
    clone.__dict__.update(layer.__dict__, built=False, graph=None, _requested_name=None,
                          _trainable_weights=[], _non_trainable_weights=[], updates=[],
                          name=name, **changes)
    if isinstance(layer, RNN):               # its own cell: its own weights
        if getattr(layer.cell, "built", False):
            raise AttrError(f"Bidirectional: the cell of RNN '{layer.name}' is already "
                            f"built (its weights made); give an RNN of a new cell")
        clone.cell = copy.deepcopy(layer.cell)
    return clone


def _forget_call(out, x):
    """Drop the record of an inner layer's call, so that ff.Model lists the wrapper,
    not the layers it calls."""
    if isinstance(out, Tensor):
        entries = CALLS.get(out.graph, {}).get(out.value, [])
        entries[:] = [e for e in entries if e[1] is not x.value]


class Bidirectional(Layer):
    """Keras's Bidirectional(layer, merge_mode='concat', backward_layer=None): layer
    over the sequence and a copy of it (or backward_layer) over the reversed sequence,
    their outputs merged by concat (on the features), sum, mul, ave, or None (the list
    [forward, backward]). With return_sequences the backward outputs are put back in
    time order; with return_state the states follow the output, the forward layer's
    then the backward one's. The weights are 'bidirectional/forward_lstm/kernel', ...,
    then 'bidirectional/backward_lstm/...'."""

    def __init__(self, layer, merge_mode="concat", weights=None, backward_layer=None,
                 **kwargs):
        layer = layer_from_config(layer)          # a layer, or Keras's serialized form
        if backward_layer is not None:
            backward_layer = layer_from_config(backward_layer)
        if not isinstance(layer, _Recurrent):
            raise AttrError(f"Bidirectional needs a recurrent layer (SimpleRNN, LSTM, GRU), "
                            f"got {type(layer).__name__}")
        if backward_layer is not None and not isinstance(backward_layer, _Recurrent):
            raise AttrError(f"Bidirectional's backward_layer must be a recurrent layer, "
                            f"got {type(backward_layer).__name__}")
        if merge_mode not in _MERGE_MODES:
            raise AttrError(f"Bidirectional: merge_mode must be one of 'concat', 'sum', "
                            f"'mul', 'ave' or None, got {merge_mode!r}")
        if weights is not None:
            raise AttrError("Bidirectional(weights=...) is not supported: set the weights "
                            "with sess.set after the first call")
        super().__init__(**kwargs)
        base = layer.name[len("forward_"):] if layer.name.startswith("forward_") \
            else layer.name
        self.forward_layer = _fresh_copy(layer, "forward_" + base)
        if backward_layer is None:
            self.backward_layer = _fresh_copy(layer, "backward_" + base,  # Keras: flipped
                                              go_backwards=not layer.go_backwards)
        else:
            self.backward_layer = backward_layer
        fw, bw = self.forward_layer, self.backward_layer
        if fw.go_backwards == bw.go_backwards:
            raise AttrError(f"Bidirectional: the forward and backward layers must go in "
                            f"opposite directions, both have go_backwards="
                            f"{fw.go_backwards}")
        for attr in ("return_sequences", "return_state"):
            if getattr(fw, attr) != getattr(bw, attr):
                raise AttrError(f"Bidirectional: forward and backward layers differ in "
                                f"{attr} ({getattr(fw, attr)} and {getattr(bw, attr)})")
        for sub in (fw, bw):                 # Keras: masked steps output zeros here
            sub.zero_output_for_mask = sub.return_sequences
        self.merge_mode = merge_mode
        self.return_sequences, self.return_state = fw.return_sequences, fw.return_state

    @property
    def layer(self):
        return self.forward_layer

    @property
    def trainable_weights(self) -> list:
        if not self.trainable:
            return []
        return self.forward_layer.trainable_weights + self.backward_layer.trainable_weights

    @property
    def non_trainable_weights(self) -> list:
        subs = self.forward_layer.weights + self.backward_layer.weights
        return subs if not self.trainable else \
            self.forward_layer.non_trainable_weights + \
            self.backward_layer.non_trainable_weights

    @property
    def weights(self) -> list:
        return self.forward_layer.weights + self.backward_layer.weights

    @property
    def training_dependent(self) -> bool:
        return self.forward_layer.training_dependent or \
            self.backward_layer.training_dependent

    def __call__(self, inputs, mask=None, training=False, initial_state=None):
        """Keras's call: mask (batch, time), initial_state the forward states then the
        backward ones (inputs may be [x, *initial_state])."""
        out, mask = _call_pending(self, super().__call__, inputs, mask, training,
                                  initial_state)
        if mask is not None and self.return_sequences and isinstance(out, Tensor):
            set_keras_mask(out, _tensor(mask))
        return out

    def call(self, x, training=False):
        mask, initial_state = self._pending
        fw_state = bw_state = None
        if initial_state is not None:
            states = list(initial_state)
            if len(states) % 2:
                raise RNNError(f"Bidirectional '{self.name}': initial_state needs the "
                               f"forward layer's states then the backward one's (an even "
                               f"number), got {len(states)}")
            fw_state, bw_state = states[:len(states) // 2], states[len(states) // 2:]
        y = self.forward_layer(x, mask=mask, training=training, initial_state=fw_state)
        _forget_call(y, x)
        y_rev = self.backward_layer(x, mask=mask, training=training,
                                    initial_state=bw_state)
        _forget_call(y_rev, x)
        states = []
        if self.return_state:
            states = list(y[1:]) + list(y_rev[1:])
            y, y_rev = y[0], y_rev[0]
        if self.return_sequences:
            y_rev = _ops.reverse(y_rev, [1])
        if self.merge_mode == "concat":
            out = _ops.concat([y, y_rev], -1)
        elif self.merge_mode == "sum":
            out = y + y_rev
        elif self.merge_mode == "ave":
            out = (y + y_rev) / 2.0
        elif self.merge_mode == "mul":
            out = y * y_rev
        else:
            return [y, y_rev, *states]
        return [out, *states] if self.return_state else out

    def compute_output_shape(self, input_shape) -> tuple:
        shape = self.forward_layer.compute_output_shape(input_shape)
        if self.merge_mode == "concat":
            shape = (*shape[:-1], 2 * shape[-1])
        return shape

    def get_config(self) -> dict:
        """Keras 3's: merge_mode and both layers serialized ({"class_name", "config"})."""
        config = {"name": self.name, "trainable": self.trainable, "dtype": self.dtype,
                  "merge_mode": self.merge_mode}
        for key, sub in (("layer", self.forward_layer), ("backward_layer",
                                                         self.backward_layer)):
            config[key] = {"module": "keras.layers", "class_name": type(sub).__name__,
                           "config": sub.get_config(), "registered_name": None}
        return config

    def __repr__(self):
        return f"<ff.layers.Bidirectional '{self.name}' of {self.forward_layer!r}>"


# -- Keras's generic RNN(cell) and its cells --------------------------------------------
_REFUSED_CELL_ARGS = ("kernel_regularizer", "recurrent_regularizer", "bias_regularizer",
                      "kernel_constraint", "recurrent_constraint", "bias_constraint")


class _Cell(Layer):
    """What SimpleRNNCell, LSTMCell and GRUCell share: one step of SimpleRNN / LSTM /
    GRU. The cell holds a layer of that class (its core) and runs the core's step on the
    core's weights, so RNN(LSTMCell(n)) is LSTM(n): the same weights, names and loop."""

    layer_class: type = _Recurrent
    keras_name = "rnn_cell"

    def __init__(self, units, layer_args, kwargs):
        what = type(self).__name__
        for key in _REFUSED_CELL_ARGS:
            if kwargs.pop(key, None) is not None:
                raise AttrError(f"{what}({key}=...) is not supported")
        core_args = {k: kwargs.pop(k) for k in ("implementation",) if k in kwargs}
        super().__init__(**kwargs)
        if kwargs.get("name") is None:
            self.name = self.keras_name
        self._core = self.layer_class(units, **layer_args, **core_args)
        self.units = self._core.units
        self._step_masks = None            # (input, recurrent) dropout masks, set by RNN

    def __getattr__(self, name):
        """The core's settings (activation, dropout, kernel, ...) read as the cell's."""
        if name.startswith("_") or "_core" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["_core"], name)

    @property
    def state_size(self):
        return self.units

    @property
    def output_size(self) -> int:
        return self.units

    def build(self, input_shape):
        """input_shape: one step's, (batch, features)."""
        if len(input_shape) != 2 or input_shape[-1] is None:
            raise ShapeError(f"{type(self).__name__} '{self.name}' needs steps of shape "
                             f"(batch, features) with known features, got "
                             f"{list(input_shape)}")
        self._core.build((input_shape[0], None, input_shape[-1]))
        self._trainable_weights = self._core._trainable_weights   # one list, the core's
        self.kernel, self.recurrent_kernel = self._core.kernel, self._core.recurrent_kernel
        self.bias = self._core.bias
        self.built = True

    def __call__(self, inputs, states=None, training=False):
        """Keras's cell(inputs, states): one step, (output, new_states)."""
        x = _tensor(inputs)
        if states is None:
            raise RNNError(f"{type(self).__name__} '{self.name}' is called as "
                           f"cell(inputs, states): states is missing")
        graph = x.graph
        if not self.built:
            self._claim_name(graph)
            self.graph = graph
            with graph.as_default(), graph.name_scope(self._scope()):
                self.build(tuple(x.shape))
        with graph.as_default(), graph.name_scope(self._scope()):
            return self.call(x, states, training=training)

    def call(self, inputs, states, training=False):
        """(output, new_states) of one step: states the list of the cell's states ([h],
        LSTMCell [h, c]); a bare tensor gives a bare tensor back (SimpleRNN, GRU)."""
        core = self._core
        nested = isinstance(states, (list, tuple))
        states = [_tensor(s) for s in (states if nested else [states])]
        if len(states) != len(core._state_list(core._initial(None))):
            raise RNNError(f"{type(self).__name__} '{self.name}' needs "
                           f"{len(core._state_list(core._initial(None)))} state(s), got "
                           f"{len(states)}")
        x = _tensor(inputs)
        if x.dtype != "float32":
            x = _ops.cast(x, "float32")
        in_masks, rec_masks = self._step_masks or self._draw_masks(x, states[0],
                                                                   training)
        xw = self._project(x, in_masks)
        core._rec_masks = rec_masks
        try:
            out, new = core.step(xw, core._from_list(states))
        finally:
            core._rec_masks = None
        new = core._state_list(new)
        return out, (new if nested or len(new) > 1 else new[0])

    def _draw_masks(self, x, h, training):
        """A call of its own (not in RNN's loop) with training=True draws its masks."""
        core = self._core
        if not training:
            return None, None
        count = core._mask_count()
        return (core._dropout_masks(x, x.shape[-1], core.dropout, count)
                if 0.0 < core.dropout < 1.0 else None,
                core._dropout_masks(h, self.units, core.recurrent_dropout, count)
                if 0.0 < core.recurrent_dropout < 1.0 else None)

    def _project(self, x, masks):
        """x (batch, features) @ kernel + the input bias, masks as the core's _project."""
        core, n = self._core, self.units
        if masks is None:
            xw = _ops.matmul(x, core.kernel)
        elif len(masks) == 1:
            xw = _ops.matmul(x * masks[0], core.kernel)
        else:
            xw = _ops.concat([_ops.matmul(x * m, _ops.slice(core.kernel, [0, g * n],
                                                              [-1, n]))
                              for g, m in enumerate(masks)], -1)
        if core.bias is not None and core._input_bias() is not None:
            xw = xw + core._input_bias()
        return xw

    def get_initial_state(self, batch_size=None):
        """Keras's: the list of zero states, each (batch_size, units)."""
        if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool):
            raise RNNError(f"{type(self).__name__}.get_initial_state(batch_size) needs "
                           f"a Python int, got {batch_size!r}")
        count = len(self._core._state_list(self._core._initial(None)))
        return [_ops.zeros((int(batch_size), self.units)) for _ in range(count)]

    @property
    def training_dependent(self) -> bool:
        return self._core.training_dependent

    def get_config(self) -> dict:
        return {"units": self.units, "activation": self._core.activation,
                "use_bias": self._core.use_bias, "dropout": self._core.dropout,
                "recurrent_dropout": self._core.recurrent_dropout}


class SimpleRNNCell(_Cell):
    """Keras's SimpleRNNCell: one step of SimpleRNN, for RNN(cell)."""

    layer_class = SimpleRNN
    keras_name = "simple_rnn_cell"

    def __init__(self, units, activation="tanh", use_bias=True,
                 kernel_initializer="glorot_uniform", recurrent_initializer="orthogonal",
                 bias_initializer="zeros", dropout=0.0, recurrent_dropout=0.0, seed=None,
                 **kwargs):
        super().__init__(units, dict(
            activation=activation, use_bias=use_bias, kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer, bias_initializer=bias_initializer,
            dropout=dropout, recurrent_dropout=recurrent_dropout, seed=seed), kwargs)


class LSTMCell(_Cell):
    """Keras's LSTMCell: one step of LSTM, states [h, c]."""

    layer_class = LSTM
    keras_name = "lstm_cell"

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid",
                 use_bias=True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros",
                 unit_forget_bias=True, dropout=0.0, recurrent_dropout=0.0, seed=None,
                 **kwargs):
        super().__init__(units, dict(
            activation=activation, recurrent_activation=recurrent_activation,
            use_bias=use_bias, kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer, bias_initializer=bias_initializer,
            unit_forget_bias=unit_forget_bias, dropout=dropout,
            recurrent_dropout=recurrent_dropout, seed=seed), kwargs)

    @property
    def state_size(self):
        return [self.units, self.units]


class GRUCell(_Cell):
    """Keras's GRUCell: one step of GRU (reset_after=True by default)."""

    layer_class = GRU
    keras_name = "gru_cell"

    def __init__(self, units, activation="tanh", recurrent_activation="sigmoid",
                 use_bias=True, kernel_initializer="glorot_uniform",
                 recurrent_initializer="orthogonal", bias_initializer="zeros",
                 dropout=0.0, recurrent_dropout=0.0, reset_after=True, seed=None,
                 **kwargs):
        super().__init__(units, dict(
            activation=activation, recurrent_activation=recurrent_activation,
            use_bias=use_bias, kernel_initializer=kernel_initializer,
            recurrent_initializer=recurrent_initializer, bias_initializer=bias_initializer,
            dropout=dropout, recurrent_dropout=recurrent_dropout, reset_after=reset_after,
            seed=seed), kwargs)


def _check_cell(cell, where):
    """A cell is anything with call(inputs, states) and state_size (Keras's rule)."""
    if not callable(getattr(cell, "call", None)) or not hasattr(cell, "state_size"):
        raise AttrError(f"{where} ({user_location()}) needs a cell with a call(inputs, "
                        f"states) method and a state_size attribute (or a list of such "
                        f"cells), got {type(cell).__name__}")


def _sizes(size, cell):
    """state_size as ints: an int, or a (nested) list of them."""
    if isinstance(size, (list, tuple)):
        return [_sizes(s, cell) for s in size]
    try:
        if isinstance(size, bool):
            raise TypeError
        return int(size)
    except (TypeError, ValueError):
        raise AttrError(f"cell {type(cell).__name__} ({user_location()}): state_size must "
                        f"be an int or a list of ints (states of shape (batch, size)), "
                        f"got {size!r}") from None


def _output_size(cell) -> int:
    """Keras's: output_size, else the first state's size."""
    size = getattr(cell, "output_size", None)
    if size is None:
        size = _sizes(cell.state_size, cell)
        while isinstance(size, list):
            size = size[0]
    return int(size)


def _takes_training(cell) -> bool:
    try:
        return "training" in inspect.signature(cell.call).parameters
    except (TypeError, ValueError):
        return False


def _leaves(tree) -> list:
    if isinstance(tree, (list, tuple)):
        return [leaf for t in tree for leaf in _leaves(t)]
    return [tree]


def _rebuild(like, leaves):
    """leaves in like's nesting (lists)."""
    it = iter(leaves)

    def go(t):
        return [go(s) for s in t] if isinstance(t, (list, tuple)) else next(it)
    return go(like)


class StackedRNNCells(Layer):
    """Keras's StackedRNNCells(cells): the cells one after the other in each step, each
    one's output the next one's input; state_size the list of the cells' (RNN([c1, c2])
    makes one). Its cells' weights are named by cell: 'rnn/lstm_cell/kernel',
    'rnn/lstm_cell_1/kernel', ..."""

    def __init__(self, cells, **kwargs):
        cells = list(cells)
        if not cells:
            raise AttrError("StackedRNNCells needs at least one cell")
        for cell in cells:
            _check_cell(cell, "StackedRNNCells")
        super().__init__(**kwargs)
        if kwargs.get("name") is None:
            self.name = "stacked_rnn_cells"
        taken = set()
        for cell in cells:                   # Keras's names: lstm_cell, lstm_cell_1, ...
            base, n = getattr(cell, "name", type(cell).__name__), 0
            name = base
            while name in taken:
                n += 1
                name = f"{base}_{n}"
            taken.add(name)
            if isinstance(cell, Layer):
                cell.name = name
        self.cells = cells

    @property
    def state_size(self):
        return [c.state_size for c in self.cells]

    @property
    def output_size(self) -> int:
        return _output_size(self.cells[-1])

    @property
    def trainable_weights(self) -> list:
        return [w for c in self.cells for w in getattr(c, "trainable_weights", [])] \
            if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        if not self.trainable:
            return self.weights
        return [w for c in self.cells for w in getattr(c, "non_trainable_weights", [])]

    @property
    def weights(self) -> list:
        return [w for c in self.cells for w in getattr(c, "weights", [])]

    def build(self, input_shape):
        graph = get_default_graph()
        for cell in self.cells:
            if not getattr(cell, "built", False) and callable(getattr(cell, "build",
                                                                      None)):
                with graph.name_scope(getattr(cell, "name", type(cell).__name__)):
                    cell.build(tuple(input_shape))
                cell.built = True
            input_shape = (input_shape[0], _output_size(cell))
        self.built = True

    def call(self, inputs, states, training=False):
        """Keras's: each cell on the previous one's output and its own states."""
        new_states = []
        for cell, state in zip(self.cells, states):
            is_list = isinstance(state, (list, tuple))
            state = list(state) if is_list else [state]
            kw = {"training": training} if _takes_training(cell) else {}
            inputs, state = cell.call(inputs, state, **kw)
            if not isinstance(state, (list, tuple)):
                state = [state]
            new_states.append(state[0] if len(state) == 1 and not is_list
                              else list(state))
        return inputs, new_states

    def get_config(self) -> dict:
        return {"cells": [{"class_name": type(c).__name__,
                           "config": c.get_config() if hasattr(c, "get_config") else {}}
                          for c in self.cells]}


class RNN(_Recurrent):
    """Keras's RNN(cell, return_sequences=False, return_state=False, go_backwards=False,
    stateful=False, unroll=False, zero_output_for_mask=False): any cell (SimpleRNNCell,
    LSTMCell, GRUCell, StackedRNNCells, a list of cells, or a user's Layer with
    state_size and call(inputs, states)) over the time axis, in one scan. A built-in cell
    runs its layer's loop: RNN(LSTMCell(n)) is LSTM(n), with the input projection out of
    the loop; other cells run call(x_t, states) in the scan's body. unroll=True runs the
    same scan (the same values). Weights: the cell's, under the RNN's name without a
    cell level ('rnn/kernel', as LSTM's 'lstm/kernel'); a stack's under each cell's
    name ('rnn/lstm_cell/kernel', 'rnn/lstm_cell_1/kernel')."""

    def __init__(self, cell, return_sequences=False, return_state=False,
                 go_backwards=False, stateful=False, unroll=False,
                 zero_output_for_mask=False, **kwargs):
        if stateful:
            raise AttrError(f"RNN(stateful=True) ({user_location()}) is not supported: "
                            f"fragflow's recurrent layers start every batch from zeros "
                            f"(stateful=False); carry a state across batches with "
                            f"return_state=True and initial_state=[...] of the next call")
        if kwargs.pop("time_major", False):
            raise AttrError(f"RNN(time_major=True) ({user_location()}) is not supported: give "
                            f"(batch, time, features) inputs")
        if isinstance(cell, (list, tuple)):
            cell = StackedRNNCells(cell)
        _check_cell(cell, "RNN")
        _sizes(cell.state_size, cell)
        Layer.__init__(self, **kwargs)
        if kwargs.get("name") is None:
            self.name = "rnn"
        self.cell = cell
        self.return_sequences = bool(return_sequences)
        self.return_state = bool(return_state)
        self.go_backwards = bool(go_backwards)
        self.unroll = bool(unroll)            # the same values either way: one scan
        self.zero_output_for_mask = bool(zero_output_for_mask)
        self.stateful = False
        self._pending = (None, None)

    @property
    def units(self) -> int:
        return _output_size(self.cell)

    @property
    def state_size(self):
        return self.cell.state_size

    @property
    def trainable_weights(self) -> list:
        return list(getattr(self.cell, "trainable_weights", [])) if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        if not self.trainable:
            return self.weights
        return list(getattr(self.cell, "non_trainable_weights", []))

    @property
    def weights(self) -> list:
        return list(getattr(self.cell, "weights", []))

    def _cells(self) -> list:
        return list(self.cell.cells) if isinstance(self.cell, StackedRNNCells) \
            else [self.cell]

    @property
    def training_dependent(self) -> bool:
        return any(getattr(c, "training_dependent", False) for c in self._cells())

    def build(self, input_shape):
        if len(input_shape) != 3 or input_shape[-1] is None:
            raise ShapeError(f"RNN '{self.name}' needs inputs of shape (batch, time, "
                             f"features) with known features, got {list(input_shape)}")
        if not getattr(self.cell, "built", False) and callable(getattr(self.cell, "build",
                                                                       None)):
            self.cell.build((input_shape[0], input_shape[-1]))   # one step's shape
            self.cell.built = True

    def call(self, x, training=False):
        core, (mask, initial_state) = getattr(self.cell, "_core", None), self._pending
        # the layer's own loop; but its last output is the last state, where Keras's
        # RNN gives the last step's output (zeros if masked, with zero_output_for_mask)
        if isinstance(self.cell, _Cell) and not (
                self.zero_output_for_mask and mask is not None and
                not self.return_sequences):
            if initial_state is not None:            # RNN's message, not LSTM's
                row = _ops.gather(_ops.transpose(x, [1, 0, 2]), 0)
                initial_state = _leaves(self._given(initial_state,
                                                    self._zero_state(self.cell, row)))
            saved = dict(core.__dict__)
            core.__dict__.update(name=self.name, return_sequences=self.return_sequences,
                                 return_state=self.return_state,
                                 go_backwards=self.go_backwards,
                                 zero_output_for_mask=self.zero_output_for_mask,
                                 _pending=(mask, initial_state))
            try:
                return core.call(x, training=training)
            finally:
                self._last_dropout_masks = core.__dict__.get("_last_dropout_masks")
                core.__dict__.clear()
                core.__dict__.update(saved)
        return self._generic(x, training)

    def _zero_state(self, cell, row):
        """The cell's initial states: zeros (batch, size) shaped as its state_size (a
        cell's own get_initial_state(batch_size) when it has one)."""
        if isinstance(cell, _Cell):
            return [_zeros_like_rows(row, cell.units)
                    for _ in _leaves(_sizes(cell.state_size, cell))]
        if isinstance(cell, StackedRNNCells):
            return [self._zero_state(c, row) for c in cell.cells]
        own = getattr(cell, "get_initial_state", None)
        if callable(own):
            batch = row.shape[0]
            return own(batch_size=batch if batch is not None else _ops.shape(row)[0])

        def zeros(size):
            return [zeros(s) for s in size] if isinstance(size, list) else \
                _zeros_like_rows(row, size)
        return zeros(_sizes(cell.state_size, cell))

    def _generic(self, x, training):
        mask, initial_state = self._pending
        cell = self.cell
        if x.dtype != "float32":
            x = _ops.cast(x, "float32")
        xt = _ops.transpose(x, [1, 0, 2])                       # time-major for the scan
        steps = None
        if mask is not None:
            steps = _ops.transpose(self._check_mask(mask, x), [1, 0])   # (time, batch)
        if self.go_backwards:
            xt = _ops.reverse(xt, [0])
            steps = None if steps is None else _ops.reverse(steps, [0])
        row = _ops.gather(xt, 0)                                # (batch, features)
        zero = self._zero_state(cell, row)
        if not isinstance(zero, (list, tuple)):
            zero = [zero]
        zero = _rebuild(zero, [_tensor(s) for s in _leaves(zero)])
        state = zero if initial_state is None else self._given(initial_state, zero)
        kw = {"training": training} if _takes_training(cell) else {}
        what = f"RNN '{self.name}' ({user_location()}): cell {type(cell).__name__}"

        def step(x_t, states):
            result = cell.call(x_t, states, **kw)
            if not isinstance(result, (list, tuple)) or len(result) != 2:
                raise RNNError(f"{what}: call(inputs, states) must return "
                               f"(output, new_states), got {type(result).__name__}")
            out, new = result
            new = _leaves(new if isinstance(new, (list, tuple)) else [new])
            old = _leaves(states)
            if len(new) != len(old):
                raise RNNError(f"{what} returned {len(new)} state(s) for the "
                               f"{len(old)} of its state_size")
            new = [_tensor(s) for s in new]
            for a, b in zip(new, old):
                if tuple(a.shape[1:]) != tuple(b.shape[1:]):
                    raise ShapeError(f"{what} returned a state of shape "
                                     f"{list(a.shape)} for one of shape {list(b.shape)}")
            return _tensor(out), _rebuild(states, new)

        self._set_step_masks(row, training)
        try:
            outputs, final = recurrence(step, xt, state, name=self.name, mask=steps,
                                        zero_output=self.zero_output_for_mask,
                                        output_size=_output_size(cell))
        finally:
            for c in self._cells():
                if isinstance(c, _Cell):
                    c._step_masks = None
        # the last step's output: a masked step repeats the previous one (or is zeros
        # with zero_output_for_mask), as Keras's last_output
        last = _ops.gather(_ops.reverse(outputs, [0]), 0)
        out = _ops.transpose(outputs, [1, 0, 2]) if self.return_sequences else last
        if not self.return_state:
            return out
        return [out, *final]

    def _set_step_masks(self, row, training):
        """The built-in cells' dropout masks, drawn once per sequence before the loop
        (bodies draw no random values)."""
        width = row.shape[-1]
        for c in self._cells():
            if isinstance(c, _Cell):
                core, count = c._core, c._core._mask_count()
                c._step_masks = (
                    core._dropout_masks(row, width, core.dropout, count)
                    if training and 0.0 < core.dropout < 1.0 else None,
                    core._dropout_masks(row, c.units, core.recurrent_dropout, count)
                    if training and 0.0 < core.recurrent_dropout < 1.0 else None)
            width = _output_size(c)

    def _given(self, initial_state, zero):
        """initial_state (nested as the states, or flat) in the states' nesting."""
        given = _leaves(list(initial_state) if isinstance(initial_state, (list, tuple))
                        else [initial_state])
        want = _leaves(zero)
        if len(given) != len(want):
            raise RNNError(f"RNN '{self.name}' ({user_location()}): initial_state needs "
                           f"{len(want)} tensor(s) (the cell's state_size "
                           f"{self.cell.state_size}), got {len(given)}")
        given = [_tensor(s) for s in given]
        for g, w in zip(given, want):
            if len(g.shape) != 2 or g.shape[-1] not in (None, w.shape[-1]):
                raise ShapeError(f"RNN '{self.name}' ({user_location()}): an initial "
                                 f"state must be (batch, {w.shape[-1]}), got "
                                 f"{list(g.shape)}")
        given = [g if g.dtype == "float32" else _ops.cast(g, "float32") for g in given]
        return _rebuild(zero, given)

    def compute_output_shape(self, input_shape) -> tuple:
        batch, time = input_shape[0], input_shape[1]
        return (batch, time, self.units) if self.return_sequences else (batch, self.units)

    def get_config(self) -> dict:
        return {"cell": {"class_name": type(self.cell).__name__,
                         "config": self.cell.get_config()
                         if hasattr(self.cell, "get_config") else {}},
                "return_sequences": self.return_sequences,
                "return_state": self.return_state, "go_backwards": self.go_backwards,
                "unroll": self.unroll}

    def __repr__(self):
        return f"<ff.layers.RNN '{self.name}' of {type(self.cell).__name__}>"


def _zeros_like_rows(row, width):
    col = _ops.zeros_like(_ops.slice(row, [0, 0], [-1, 1]))            # (batch, 1)
    return col + _ops.zeros([int(width)])


# ff.layers (ff.keras.layers) holds them: fragflow.frontend imports this module, as
# layers.py cannot (this module imports it)
for _cls in (SimpleRNN, LSTM, GRU, Bidirectional, Masking, RNN, SimpleRNNCell, LSTMCell,
             GRUCell, StackedRNNCells):
    setattr(_layers, _cls.__name__, _cls)
_layers.__all__ += [n for n in __all__ if n not in _layers.__all__]
