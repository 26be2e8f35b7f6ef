"""Recurrent networks on the control-flow ops: tf.nn.dynamic_rnn,
bidirectional_dynamic_rnn, static_rnn and static_bidirectional_rnn (unrolled), with
TF1's cells (tf.nn.rnn_cell.BasicRNNCell, BasicLSTMCell, LSTMCell, GRUCell, MultiRNNCell), and
the loop that ff.keras.layers.SimpleRNN / LSTM / GRU (frontend/layers_rnn.py) run.

One recurrence is one `scan` node over the time axis (its length may be known only at
feed time); the input's part of every gate is one matmul over all steps outside the
loop; a (time, batch) mask (sequence_length, Keras's masks) is scanned beside it.
Weights and gate orders are TF1's (docs/TENSORFLOW.md "Recurrent networks").

>>> import numpy as np, fragflow as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     x = tf.placeholder(tf.float32, [None, None, 3])
...     cell = tf.nn.rnn_cell.BasicLSTMCell(5)
...     outputs, state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
>>> sorted(v.name for v in tf.global_variables(g))
['rnn/basic_lstm_cell/bias', 'rnn/basic_lstm_cell/kernel']
>>> sess = tf.Session(g, backend="numpy")
>>> sess.run(outputs, {x: np.ones((2, 7, 3), np.float32)}).shape
(2, 7, 5)
"""
from __future__ import annotations

import collections

import numpy as np

from ..ir.errors import AttrError, FragflowError, ShapeError
from ..ir.source import user_location
from . import initializers as _init, ops as _ops
from .control_flow import _scan_core, flatten, unflatten
from .tensor import Tensor, as_tensor_value, wrap
from .tf1 import get_variable, variable_scope

__all__ = ["dynamic_rnn", "static_rnn", "bidirectional_dynamic_rnn",
           "static_bidirectional_rnn", "RNNCell",
           "BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell", "MultiRNNCell",
           "LSTMStateTuple", "recurrence", "reverse_sequence"]


class RNNError(FragflowError, ValueError):
    """A recurrent layer or dynamic_rnn given inputs it cannot run (rank, unknown
    feature size, a state of the wrong structure)."""


LSTMStateTuple = collections.namedtuple("LSTMStateTuple", ("c", "h"))
LSTMStateTuple.__doc__ = "TF1's LSTM state: (c, h), the cell state and the output."


def _tensor(x) -> Tensor:
    return x if isinstance(x, Tensor) else wrap(as_tensor_value(x))


def _zeros_rows(like, width):
    """Zeros of shape (batch, width) for like of shape (batch, ...): batch may be unknown
    until the feed."""
    col = _ops.zeros_like(_ops.slice(like, [0, 0], [-1, 1]))            # (batch, 1)
    return col + _ops.zeros([int(width)])


def _steps_like(xw, axis=0):
    """int32 (time, batch) index of each step along xw's axis (0: time, 1: batch), for a
    time-major xw (time, batch, ...) whose sizes may be known only at the feed."""
    ones = _ops.zeros_like(xw[:, :, 0]) + 1.0 if len(xw.shape) == 3 else \
        _ops.zeros_like(xw) + 1.0
    return _ops.cast(_ops.cumsum(ones, axis=axis) - 1.0, "int32")


def _lengths(sequence_length, name, where):
    lengths = _ops.cast(_tensor(sequence_length), "int32")
    if len(lengths.shape) != 1:
        raise RNNError(f"{name} ({where}): sequence_length must be a vector (batch,), "
                       f"got shape {list(lengths.shape)}")
    return lengths


def sequence_mask_like(xw, sequence_length, name="rnn", where=None):
    """float32 (time, batch): 1 where step t < sequence_length[b], for the time-major
    xw (time, batch, ...)."""
    lengths = _lengths(sequence_length, name, where or user_location())
    return _ops.cast(_ops.less(_steps_like(xw), _ops.expand_dims(lengths, 0)), "float32")


def reverse_sequence(x, sequence_length, time_major=True):
    """tf.reverse_sequence for the RNNs: each row's first sequence_length[b] steps in
    reverse order, the steps past it where they are (x (time, batch, ...), or (batch,
    time, ...) with time_major=False)."""
    x = _tensor(x)
    if not time_major:
        x = _ops.transpose(x, [1, 0] + list(range(2, len(x.shape))))
    lengths = _lengths(sequence_length, "reverse_sequence", user_location())
    t, b = _steps_like(x), _steps_like(x, axis=1)
    n = _ops.expand_dims(lengths, 0) + t * 0
    src = _ops.where(_ops.less(t, n), n - 1 - t, t)
    out = _ops.gather_nd(x, _ops.stack([src, b], -1))
    if not time_major:
        out = _ops.transpose(out, [1, 0] + list(range(2, len(x.shape))))
    return out


def recurrence(step, xw, state, sequence_length=None, reverse=False, name="rnn",
               mask=None, zero_output=None, output_size=None):
    """The loop of a recurrent layer: for each step t of the time-major xw
    (time, batch, ...), `output, state = step(xw[t], state)` (state: a nested structure
    of (batch, n) tensors), in one scan.

    mask (time, batch), 1 or 0 (bool or float): at a step where a row's mask is 0 its
    state is carried unchanged and its output is zero (zero_output=True) or the
    previous step's output (zero_output=False, Keras's masking: zeros before the first
    step kept; needs output_size). sequence_length (batch,) is the mask t < length,
    zero_output by default (TF's dynamic_rnn). reverse: from the last step to the first
    (outputs stay at their step's position). Returns (outputs (time, batch, units),
    final state)."""
    where = user_location()
    if sequence_length is not None:
        if mask is not None:
            raise RNNError(f"{name} ({where}): give sequence_length or mask, not both")
        mask = sequence_mask_like(xw, sequence_length, name, where)
        zero_output = True if zero_output is None else zero_output
    leaves, tree = flatten(state)
    n = len(leaves)
    if mask is None:
        def body(carry, x_t):
            out, new = step(x_t, carry)
            return new, out
        final, _, ys = _scan_core(body, tree, [_tensor(v).value for v in leaves],
                                  ("leaf",), [xw.value], reverse, None, name,
                                  f"recurrence '{name}'", where, carry_is_y=False)
        return wrap(ys[0]), unflatten(tree, [wrap(v) for v in final])

    mask = _tensor(mask)
    if len(mask.shape) != 2:
        raise RNNError(f"{name} ({where}): the mask must be (time, batch), got shape "
                       f"{list(mask.shape)}")
    m = _ops.expand_dims(_ops.cast(mask, "float32"), 2)           # (time, batch, 1)
    zero_output = bool(zero_output)
    if not zero_output:
        if output_size is None:
            raise RNNError(f"{name}: masking that repeats the previous output needs "
                           f"the output size")
        row = _ops.gather(xw, 0)
        leaves = list(leaves) + [_zeros_rows(row, output_size)]
        tree = ("seq", list, (tree, ("leaf",)))
    elem_leaves, elem_tree = flatten((xw, m))

    def masked(carry, elems):
        x_t, m_t = elems
        old, prev = (carry, None) if zero_output else carry
        out, new = step(x_t, old)
        new_flat, new_tree = flatten(new)
        old_flat, _ = flatten(old)
        # where, not m * a + (1 - m) * b: a masked step's inf or NaN stays out
        on = _ops.greater(m_t, 0.5)                                    # (batch, 1)
        keep = [_ops.where(on, a, b) for a, b in zip(new_flat, old_flat)]
        kept = unflatten(new_tree, keep)
        if zero_output:
            return kept, _ops.where(on, out, _ops.zeros_like(out))
        y = _ops.where(on, out, prev)
        return [kept, y], y

    final, _, ys = _scan_core(masked, tree, [_tensor(v).value for v in leaves],
                              elem_tree, [v.value for v in elem_leaves], reverse, None,
                              name, f"recurrence '{name}'", where, carry_is_y=False)
    final = [wrap(v) for v in final]
    state_tree = tree if zero_output else tree[2][0]
    return wrap(ys[0]), unflatten(state_tree, final[:n])


def _counted_rows(batch_size):
    """(n, 1) zeros for a scalar tensor n that tf.shape counted (`tf.shape(x)[k]` of a
    dim known only at the feed, or a constant): fragflow's shapes come from the feed,
    not from tensor values, so the zeros are shaped like the line tf.shape counted."""
    part = batch_size.value
    node = part.node
    if node.op == "strided_slice" and len(node.attrs["spec"]) == 1 and \
            node.attrs["spec"][0][0] == "index" and node.inputs[0].node.op == "concat":
        part = node.inputs[0].node.inputs[node.attrs["spec"][0][1]]   # tf.shape's dim k
        if part.node.op == "expand_dims":
            part = part.node.inputs[0]
    if part.node.op == "constant" and part.shape == ():
        return _ops.zeros([int(np.asarray(part.node.attrs["value"])), 1])
    if part.node.op == "sum" and part.node.inputs[0].node.op == "ones_like":
        line = wrap(part.node.inputs[0])                      # what tf.shape counted
        return _ops.expand_dims(_ops.zeros_like(_ops.cast(line, "float32")), 1)
    raise RNNError(f"zero_state ({user_location()}): a tensor batch_size must be "
                   f"tf.shape(x)[k] of a tensor (fragflow shapes come from the feed, not "
                   f"from values); got {batch_size!r}: give an int, or leave initial_state "
                   f"out of dynamic_rnn")


# -- TF1's cells ---------------------------------------------------------------------------
def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_") \
        .replace("r_n_n", "rnn").replace("l_s_t_m", "lstm").replace("g_r_u", "gru")


class RNNCell:
    """TF1's RNNCell: `output, new_state = cell(inputs, state)` on one step of
    (batch, features) inputs; dynamic_rnn runs it over a sequence. Its variables are
    made on the first call (or by dynamic_rnn), under the current variable scope and
    the cell's name: 'rnn/basic_lstm_cell/kernel'."""

    gates = 1
    base_name = "rnn_cell"

    def __init__(self, num_units, activation=None, reuse=None, name=None, dtype=None,
                 kernel_initializer=None, bias_initializer=None):
        if int(num_units) <= 0:
            raise AttrError(f"{type(self).__name__} needs a positive num_units, got "
                            f"{num_units}")
        self.num_units = int(num_units)
        self.activation = activation or _ops.tanh
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer
        self.name = name
        self.built = False
        self.variables: list = []

    @property
    def state_size(self):
        return self.num_units

    @property
    def output_size(self):
        return self.num_units

    def zero_state(self, batch_size, dtype="float32"):
        """The state of zeros for batch_size rows: an int, or a scalar tensor counting
        a tensor's rows (`tf.shape(x)[0]`, TF1's idiom)."""
        rows = _counted_rows(batch_size) if isinstance(batch_size, Tensor) else None

        def z():
            if rows is not None:
                return rows + _ops.zeros([self.num_units])
            return _ops.zeros([int(batch_size), self.num_units])
        return self._state(z)

    def _state(self, make):
        return make()

    # variables ------------------------------------------------------------------
    def build(self, input_depth):
        """Make the variables for inputs of input_depth features."""
        if self.built:
            if input_depth != self.input_depth:
                raise ShapeError(f"{self.name}: built for inputs of {self.input_depth} "
                                 f"features, given {input_depth}")
            return
        if input_depth is None:
            raise RNNError(f"{type(self).__name__}: the inputs' last dimension must be "
                           f"known (got None)")
        self.input_depth = int(input_depth)
        with variable_scope(self.name, default_name=self.base_name) as scope:
            self.name = scope.name.rsplit("/", 1)[-1]
            self.scope_name = scope.name
            self._make_variables(self.input_depth)
        self.built = True

    def _var(self, name, shape, initializer):
        var = get_variable(name, shape, initializer=initializer)
        self.variables.append(var)
        return var

    def _make_variables(self, depth):
        self.kernel = self._var("kernel", [depth + self.num_units,
                                           self.gates * self.num_units],
                                self.kernel_initializer)
        self.bias = self._var("bias", [self.gates * self.num_units],
                              self.bias_initializer or _init.zeros)

    @property
    def trainable_variables(self):
        return list(self.variables)

    @property
    def weights(self):
        return list(self.variables)

    # the step, in two parts: the input's share of the gates for every step at once,
    # then the recurrence ----------------------------------------------------------
    def project(self, x):
        """x (..., input_depth) @ the kernel's input rows + bias."""
        wx = _ops.slice(self.kernel, [0, 0], [self.input_depth, -1])
        return _ops.matmul(x, wx) + self.bias

    def _recurrent_kernel(self):
        return _ops.slice(self.kernel, [self.input_depth, 0], [-1, -1])

    def recur(self, xw, state):
        """(output, new state) from the projected input xw and the state."""
        pre = xw + _ops.matmul(state, self._recurrent_kernel())
        out = self.activation(pre)
        return out, out

    def __call__(self, inputs, state, scope=None):
        inputs = _tensor(inputs)
        if not self.built:
            if scope is not None:
                with variable_scope(scope):
                    self.build(inputs.shape[-1])
            else:
                self.build(inputs.shape[-1])
        return self.recur(self.project(inputs), state)

    def __repr__(self):
        return f"<tf.nn.rnn_cell.{type(self).__name__} {self.num_units} units>"


class BasicRNNCell(RNNCell):
    """TF1's tf.nn.rnn_cell.BasicRNNCell: h = activation([x, h] @ kernel + bias)
    (tanh by default)."""

    base_name = "basic_rnn_cell"


class BasicLSTMCell(RNNCell):
    """TF1's tf.nn.rnn_cell.BasicLSTMCell: [x, h] @ kernel + bias gives the gates
    i, j, f, o; c = c * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j),
    h = tanh(c) * sigmoid(o). The state is LSTMStateTuple(c, h)."""

    gates = 4
    base_name = "basic_lstm_cell"

    def __init__(self, num_units, forget_bias=1.0, state_is_tuple=True, activation=None,
                 reuse=None, name=None, dtype=None, **kwargs):
        super().__init__(num_units, activation, reuse, name, dtype, **kwargs)
        if not state_is_tuple:
            raise AttrError(f"{type(self).__name__}(state_is_tuple=False) is not "
                            f"supported (TF1 deprecated it): use the default, "
                            f"LSTMStateTuple(c, h)")
        self.forget_bias = float(forget_bias)

    @property
    def state_size(self):
        return LSTMStateTuple(self.num_units, self.num_units)

    def _state(self, make):
        return LSTMStateTuple(make(), make())

    def recur(self, xw, state):
        c, h = state
        pre = xw + _ops.matmul(h, self._recurrent_kernel())
        i, j, f, o = _ops.split(pre, 4, axis=1)
        new_c = c * _ops.sigmoid(f + self.forget_bias) + _ops.sigmoid(i) * self.activation(j)
        new_h = self.activation(new_c) * _ops.sigmoid(o)
        return new_h, LSTMStateTuple(new_c, new_h)


class LSTMCell(BasicLSTMCell):
    """TF1's tf.nn.rnn_cell.LSTMCell (BasicLSTMCell's equations and weights, named
    lstm_cell; initializer= for the kernel). Peepholes, cell_clip and num_proj are
    not supported."""

    base_name = "lstm_cell"

    def __init__(self, num_units, use_peepholes=False, cell_clip=None, initializer=None,
                 num_proj=None, proj_clip=None, num_unit_shards=None,
                 num_proj_shards=None, forget_bias=1.0, state_is_tuple=True,
                 activation=None, reuse=None, name=None, dtype=None, **kwargs):
        for arg, value in (("use_peepholes", use_peepholes), ("cell_clip", cell_clip),
                           ("num_proj", num_proj), ("proj_clip", proj_clip)):
            if value:
                raise AttrError(f"LSTMCell({arg}=...) is not supported; fragflow's "
                                f"LSTMCell is BasicLSTMCell's equations")
        super().__init__(num_units, forget_bias, state_is_tuple, activation, reuse, name,
                         dtype, kernel_initializer=initializer, **kwargs)


class GRUCell(RNNCell):
    """TF1's tf.nn.rnn_cell.GRUCell: r, u = sigmoid([x, h] @ gates/kernel + gates/bias)
    (gates/bias starts at 1), c = tanh([x, r * h] @ candidate/kernel + candidate/bias),
    h = u * h + (1 - u) * c."""

    gates = 3
    base_name = "gru_cell"

    def _make_variables(self, depth):
        n = self.num_units
        with variable_scope("gates"):
            self.gate_kernel = self._var("kernel", [depth + n, 2 * n],
                                         self.kernel_initializer)
            self.gate_bias = self._var("bias", [2 * n], self.bias_initializer or
                                       _init.Constant(1.0))
        with variable_scope("candidate"):
            self.candidate_kernel = self._var("kernel", [depth + n, n],
                                              self.kernel_initializer)
            self.candidate_bias = self._var("bias", [n], self.bias_initializer or
                                            _init.zeros)

    def project(self, x):
        d = self.input_depth
        gx = _ops.matmul(x, _ops.slice(self.gate_kernel, [0, 0], [d, -1])) + self.gate_bias
        cx = _ops.matmul(x, _ops.slice(self.candidate_kernel, [0, 0], [d, -1])) + \
            self.candidate_bias
        return _ops.concat([gx, cx], -1)

    def recur(self, xw, state):
        n, d = self.num_units, self.input_depth
        gx, cx = _ops.split(xw, [2 * n, n], axis=-1)
        gates = _ops.sigmoid(gx + _ops.matmul(state, _ops.slice(self.gate_kernel, [d, 0],
                                                                [-1, -1])))
        r, u = _ops.split(gates, 2, axis=1)
        c = self.activation(cx + _ops.matmul(r * state, _ops.slice(
            self.candidate_kernel, [d, 0], [-1, -1])))
        new_h = u * state + (1.0 - u) * c
        return new_h, new_h


class MultiRNNCell(RNNCell):
    """TF1's tf.nn.rnn_cell.MultiRNNCell: cells stacked, each one's output the next
    one's input; the state is the tuple of theirs. Variables:
    'rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel', ..."""

    base_name = "multi_rnn_cell"

    def __init__(self, cells, state_is_tuple=True):
        cells = list(cells)
        if not cells:
            raise AttrError("MultiRNNCell needs at least one cell")
        if len({id(c) for c in cells}) != len(cells):
            raise AttrError("MultiRNNCell was given the same cell object twice; make one "
                            "cell per layer ([BasicLSTMCell(n) for _ in range(k)])")
        self.cells = cells
        self.name = None
        self.built = False
        self.variables = []
        self.num_units = cells[-1].output_size

    @property
    def state_size(self):
        return tuple(c.state_size for c in self.cells)

    @property
    def output_size(self):
        return self.cells[-1].output_size

    def zero_state(self, batch_size, dtype="float32"):
        return tuple(c.zero_state(batch_size, dtype) for c in self.cells)

    def build(self, input_depth):
        if self.built:
            return
        with variable_scope(self.name, default_name=self.base_name) as scope:
            self.name = scope.name.rsplit("/", 1)[-1]
            depth = input_depth
            for k, cell in enumerate(self.cells):
                with variable_scope(f"cell_{k}"):
                    cell.build(depth)
                depth = cell.output_size
                self.variables.extend(cell.variables)
        self.input_depth = input_depth
        self.built = True

    def project(self, x):
        return self.cells[0].project(x)

    def recur(self, xw, state):
        out, new = self.cells[0].recur(xw, state[0])
        states = [new]
        for cell, s in zip(self.cells[1:], state[1:]):
            out, new = cell.recur(cell.project(out), s)
            states.append(new)
        return out, tuple(states)


# -- dynamic_rnn ---------------------------------------------------------------------------
def dynamic_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None,
                parallel_iterations=None, swap_memory=False, time_major=False,
                scope=None):
    """TF1's tf.nn.dynamic_rnn: cell run over the time axis of inputs ((batch, time,
    features), or (time, batch, features) with time_major=True) in one scan.

    Returns (outputs, state): outputs (batch, time, cell.output_size) (time-major if
    inputs are), state the cell's final state (for an LSTM, LSTMStateTuple(c, h)).
    sequence_length (batch,): past a row's length, its outputs are zero and its state
    is the one at its length. The variables live under variable scope `scope` or
    'rnn': 'rnn/basic_lstm_cell/kernel'."""
    where = user_location()
    if not isinstance(cell, RNNCell):
        raise RNNError(f"dynamic_rnn ({where}): cell must be a tf.nn.rnn_cell cell "
                       f"(BasicRNNCell, BasicLSTMCell, LSTMCell, GRUCell, MultiRNNCell), "
                       f"got {type(cell).__name__}")
    if not isinstance(inputs, Tensor) and isinstance(inputs, (list, tuple, dict)):
        raise RNNError(f"dynamic_rnn ({where}): inputs must be one tensor (nested inputs "
                       f"are not supported)")
    x = _tensor(inputs)
    if len(x.shape) != 3:
        raise RNNError(f"dynamic_rnn ({where}): inputs must be of rank 3 (batch, time, "
                       f"features), got shape {list(x.shape)}")
    if x.dtype != "float32":
        x = _ops.cast(x, "float32")
    with variable_scope(scope if scope is not None else "rnn") as vs:
        cell.build(x.shape[-1])
        xw = cell.project(x)                               # every step's input gates
        if not time_major:
            xw = _ops.transpose(xw, [1, 0, 2])
        if initial_state is None:
            state = _zero_state_like(cell, xw)
        else:
            state = initial_state
            _check_state(cell, state, where)
        with _ops.name_scope("while/"):
            outputs, final = recurrence(cell.recur, xw, state, sequence_length,
                                        name=vs.name.rsplit("/", 1)[-1])
    if not time_major:
        outputs = _ops.transpose(outputs, [1, 0, 2])
    return outputs, final


def _zero_state_like(cell, xw):
    """The cell's zero state, its batch taken from xw (time, batch, ...)."""
    row = _ops.gather(xw, 0) if xw.shape[0] != 0 else None
    if row is None:
        raise RNNError("dynamic_rnn over 0 steps needs an initial_state")

    def make(size):
        return _zeros_rows(row, size)

    def build(size):
        if isinstance(size, tuple):
            return type(size)(*[build(s) for s in size]) if hasattr(size, "_fields") \
                else tuple(build(s) for s in size)
        return make(size)
    return build(cell.state_size)


def _check_state(cell, state, where):
    want = flatten(cell.state_size)[0]
    got = flatten(state)[0]
    if len(want) != len(got):
        raise RNNError(f"dynamic_rnn ({where}): initial_state has {len(got)} tensors, "
                       f"the cell's state {len(want)} ({cell.state_size})")


# -- static_rnn, bidirectional_dynamic_rnn --------------------------------------------------
def static_rnn(cell, inputs, initial_state=None, dtype=None, sequence_length=None,
               scope=None):
    """TF1's tf.compat.v1.nn.static_rnn: the cell unrolled over a Python list of
    (batch, features) inputs, one step of ops per element (no loop). Returns (outputs,
    a list of (batch, cell.output_size), the final state). sequence_length (batch,):
    as dynamic_rnn's, past a row's length its output is zero and its state the one at
    its length. The variables are dynamic_rnn's ('rnn/basic_lstm_cell/kernel')."""
    where = user_location()
    if not isinstance(cell, RNNCell):
        raise RNNError(f"static_rnn ({where}): cell must be a tf.nn.rnn_cell cell, got "
                       f"{type(cell).__name__}")
    if isinstance(inputs, Tensor) or not isinstance(inputs, (list, tuple)):
        raise RNNError(f"static_rnn ({where}): inputs must be a list of (batch, "
                       f"features) tensors, one per step (tf.unstack(x, axis=1)), got "
                       f"{type(inputs).__name__}")
    if not inputs:
        raise RNNError(f"static_rnn ({where}): inputs is an empty list")
    xs = [_tensor(x) for x in inputs]
    xs = [x if x.dtype == "float32" else _ops.cast(x, "float32") for x in xs]
    for k, x in enumerate(xs):
        if len(x.shape) != 2:
            raise RNNError(f"static_rnn ({where}): inputs[{k}] must be of rank 2 (batch, "
                           f"features), got shape {list(x.shape)}")
    with variable_scope(scope if scope is not None else "rnn"):
        cell.build(xs[0].shape[-1])
        if initial_state is None:
            state = _zero_state_like(cell, _ops.expand_dims(xs[0], 0))
        else:
            state = initial_state
            _check_state(cell, state, where)
        lengths = None if sequence_length is None else \
            _lengths(sequence_length, "static_rnn", where)
        outputs = []
        for t, x in enumerate(xs):
            out, new = cell.recur(cell.project(x), state)
            if lengths is not None:
                on = _ops.expand_dims(_ops.less(np.int32(t), lengths), 1)     # (batch, 1)
                flat_new, new_tree = flatten(new)
                flat_old, _ = flatten(state)
                new = unflatten(new_tree, [_ops.where(on, a, b)
                                           for a, b in zip(flat_new, flat_old)])
                out = _ops.where(on, out, _ops.zeros_like(out))
            outputs.append(out)
            state = new
    return outputs, state


def bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=None,
                              initial_state_fw=None, initial_state_bw=None, dtype=None,
                              parallel_iterations=None, swap_memory=False,
                              time_major=False, scope=None):
    """TF1's tf.compat.v1.nn.bidirectional_dynamic_rnn: dynamic_rnn of cell_fw over
    inputs and of cell_bw over each row's first sequence_length steps reversed (the
    whole sequence without sequence_length). Returns ((output_fw, output_bw),
    (state_fw, state_bw)); output_bw is in the inputs' time order. Variables under
    'bidirectional_rnn/fw/...' and 'bidirectional_rnn/bw/...'."""
    where = user_location()
    for what, cell in (("cell_fw", cell_fw), ("cell_bw", cell_bw)):
        if not isinstance(cell, RNNCell):
            raise RNNError(f"bidirectional_dynamic_rnn ({where}): {what} must be a "
                           f"tf.nn.rnn_cell cell, got {type(cell).__name__}")
    if cell_fw is cell_bw:
        raise RNNError(f"bidirectional_dynamic_rnn ({where}): cell_fw and cell_bw are the "
                       f"same cell object; make one cell per direction")
    x = _tensor(inputs)
    if len(x.shape) != 3:
        raise RNNError(f"bidirectional_dynamic_rnn ({where}): inputs must be of rank 3, "
                       f"got shape {list(x.shape)}")
    time_axis = 0 if time_major else 1

    def flip(t):
        if sequence_length is None:
            return _ops.reverse(t, [time_axis])
        return reverse_sequence(t, sequence_length, time_major)

    with variable_scope(scope if scope is not None else "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            out_fw, state_fw = dynamic_rnn(cell_fw, x, sequence_length, initial_state_fw,
                                           dtype, time_major=time_major, scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            out_rev, state_bw = dynamic_rnn(cell_bw, flip(x), sequence_length,
                                            initial_state_bw, dtype,
                                            time_major=time_major, scope=bw_scope)
        out_bw = flip(out_rev)
    return (out_fw, out_bw), (state_fw, state_bw)


def static_bidirectional_rnn(cell_fw, cell_bw, inputs, initial_state_fw=None,
                             initial_state_bw=None, dtype=None, sequence_length=None,
                             scope=None):
    """TF1's tf.compat.v1.nn.static_bidirectional_rnn: static_rnn of cell_fw over the
    list inputs and of cell_bw over each row's first sequence_length steps reversed.
    Returns (outputs, state_fw, state_bw), outputs the list of concat([fw, bw], 1) per
    step, in the inputs' order; variables 'bidirectional_rnn/fw/...', '.../bw/...'."""
    where = user_location()
    if cell_fw is cell_bw:
        raise RNNError(f"static_bidirectional_rnn ({where}): cell_fw and cell_bw are the "
                       f"same cell object; make one cell per direction")
    if isinstance(inputs, Tensor) or not isinstance(inputs, (list, tuple)) or not inputs:
        raise RNNError(f"static_bidirectional_rnn ({where}): inputs must be a non-empty "
                       f"list of (batch, features) tensors, one per step")

    def flip(steps):
        if sequence_length is None:
            return list(steps)[::-1]
        stacked = _ops.stack([_tensor(s) for s in steps], 0)        # (time, batch, ...)
        return _ops.unstack(reverse_sequence(stacked, sequence_length), axis=0)

    with variable_scope(scope if scope is not None else "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            out_fw, state_fw = static_rnn(cell_fw, inputs, initial_state_fw, dtype,
                                          sequence_length, scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            rev, state_bw = static_rnn(cell_bw, flip(inputs), initial_state_bw, dtype,
                                       sequence_length, scope=bw_scope)
    outputs = [_ops.concat([a, b], 1) for a, b in zip(out_fw, flip(rev))]
    return outputs, state_fw, state_bw
