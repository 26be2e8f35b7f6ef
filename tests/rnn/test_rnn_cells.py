"""Keras's generic RNN(cell) and its cells (frontend/layers_rnn.py): SimpleRNNCell,
LSTMCell, GRUCell, StackedRNNCells and a user's own cell (the Keras guide's
MinimalRNNCell), against the float64 Keras loop of rnn_refs.py, numpy formulas and
torch's autograd, on the numpy executor and GL."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as ff
from tests.rnn.rnn_refs import keras_grads, keras_loop, keras_weights

L = ff.keras.layers
B, T, F, U = 3, 5, 4, 4
KINDS = {"SimpleRNN": L.SimpleRNNCell, "LSTM": L.LSTMCell, "GRU": L.GRUCell}
# a row masked at its start, one with a hole and a masked end, one all masked
MASK = np.array([[0, 0, 1, 1, 1], [1, 0, 1, 1, 0], [0, 0, 0, 0, 0]], bool)
BACKENDS = ["numpy", "gl"]


def _x(seed=0, shape=(B, T, F)):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _set_random(sess, weights, seed):
    rng = np.random.default_rng(seed)
    values = [(rng.normal(size=w.shape) * 0.5).astype(np.float32) for w in weights]
    for w, v in zip(weights, values):
        sess.set(w, v)
    return values


def _session(g, backend):
    return ff.Session(g, backend=backend) if backend == "numpy" else ff.Session(g)


class MinimalRNNCell(L.Layer):
    """The Keras guide's custom cell ("Working with RNNs"), as written there (with
    tf.matmul for backend.dot)."""

    def __init__(self, units, **kwargs):
        self.units = units
        self.state_size = units
        super().__init__(**kwargs)

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units),
                                      initializer="uniform", name="kernel")
        self.recurrent_kernel = self.add_weight(shape=(self.units, self.units),
                                                initializer="uniform",
                                                name="recurrent_kernel")
        self.built = True

    def call(self, inputs, states):
        prev_output = states[0]
        h = ff.matmul(inputs, self.kernel)
        output = h + ff.matmul(prev_output, self.recurrent_kernel)
        return output, [output]


def _minimal_ref(x, k, r, mask=None, h0=None):
    h = np.zeros((x.shape[0], r.shape[0])) if h0 is None else np.asarray(h0, np.float64)
    outs = []
    for t in range(x.shape[1]):
        new = x[:, t].astype(np.float64) @ k + h @ r
        if mask is not None:
            on = mask[:, t][:, None]
            new, y = np.where(on, new, h), np.where(on, new, outs[-1] if outs else 0.0)
        else:
            y = new
        h = new
        outs.append(y)
    return np.stack(outs, 1), h


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_rnn_of_cell_equals_keras_loop(kind, backend):
    x = _x()
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        layer = L.RNN(KINDS[kind](U), return_sequences=True, return_state=True,
                      go_backwards=True)
        seq, *states = layer(xp)
    assert [w.name for w in layer.weights] == ["rnn/kernel", "rnn/recurrent_kernel",
                                               "rnn/bias"]
    assert len(states) == (2 if kind == "LSTM" else 1)
    sess = _session(g, backend)
    weights = _set_random(sess, layer.weights, 1)
    got = sess.run([seq, *states], {xp: x})
    ys, h, c = keras_loop(kind, x, weights, go_backwards=True)
    want = [ys, h] + ([c] if kind == "LSTM" else [])
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", list(KINDS))
def test_rnn_of_cell_equals_its_layer_with_mask_and_initial_state(kind):
    x = _x(2)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        mp = ff.placeholder((None, None), "bool", name="mask")
        n = 2 if kind == "LSTM" else 1
        h0 = [ff.placeholder((None, U), name=f"h{i}") for i in range(n)]
        rnn = L.RNN(KINDS[kind](U), return_sequences=True, return_state=True)
        layer = getattr(L, kind)(U, return_sequences=True, return_state=True)
        a = rnn(xp, mask=mp, initial_state=h0)
        b = layer(xp, mask=mp, initial_state=h0)
    assert [w.name.split("/")[1] for w in rnn.weights] == \
        [w.name.split("/")[1] for w in layer.weights]
    sess = ff.Session(g, backend="numpy")
    weights = _set_random(sess, rnn.weights, 3)
    for w, v in zip(layer.weights, weights):
        sess.set(w, v)
    init = [np.random.default_rng(5 + i).normal(size=(B, U)).astype(np.float32)
            for i in range(n)]
    feed = {xp: x, mp: MASK, **dict(zip(h0, init))}
    got, same = sess.run(a, feed), sess.run(b, feed)
    ys, h, c = keras_loop(kind, x, weights, mask=MASK, initial=init * (3 - n))
    for u, v, w in zip(got, same, [ys, h, c][:1 + n]):
        np.testing.assert_array_equal(u, v)
        np.testing.assert_allclose(u, w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stacked_cells_equal_two_stacked_layers(backend):
    x = _x(4)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        layer = L.RNN(L.StackedRNNCells([L.LSTMCell(U), L.GRUCell(U + 1)]),
                      return_sequences=True, return_state=True)
        seq, lstm_state, gru_state = layer(xp)
        listed = L.RNN([L.LSTMCell(U), L.LSTMCell(U)], name="listed")
        last = listed(xp)
    assert [w.name for w in layer.weights] == [
        f"rnn/{c}/{w}" for c in ("lstm_cell", "gru_cell")
        for w in ("kernel", "recurrent_kernel", "bias")]
    assert [w.name for w in listed.weights][::3] == ["listed/lstm_cell/kernel",
                                                    "listed/lstm_cell_1/kernel"]
    assert len(lstm_state) == 2 and len(gru_state) == 1      # Keras 3: nested per cell
    sess = _session(g, backend)
    weights = _set_random(sess, layer.weights, 6)
    w2 = _set_random(sess, listed.weights, 7)
    got = sess.run([seq, *lstm_state, *gru_state, last], {xp: x})
    ys1, h1, c1 = keras_loop("LSTM", x, weights[:3])
    ys2, h2, _ = keras_loop("GRU", ys1, weights[3:])
    for a, b in zip(got, [ys2, h1, c1, h2]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    z1, _, _ = keras_loop("LSTM", x, w2[:3])
    _, z2, _ = keras_loop("LSTM", z1, w2[3:])
    np.testing.assert_allclose(got[-1], z2, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_custom_python_cell_against_numpy_with_mask_and_initial_state(backend):
    x = _x(8)
    h0 = np.random.default_rng(9).normal(size=(B, U)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        mp = ff.placeholder((None, None), "bool", name="mask")
        hp = ff.placeholder((None, U), name="h0")
        layer = L.RNN(MinimalRNNCell(U), return_sequences=True, return_state=True)
        seq, h = layer(xp)
        mseq, mh = layer(xp, mask=mp, initial_state=[hp])
    assert [w.name for w in layer.weights] == ["rnn/kernel", "rnn/recurrent_kernel"]
    sess = _session(g, backend)
    init = sess.run(layer.weights)          # 'uniform': Keras's RandomUniform(-0.05, 0.05)
    assert all(np.abs(v).max() <= 0.05 and np.abs(v).max() > 0 for v in init)
    k, r = _set_random(sess, layer.weights, 10)
    got = sess.run([seq, h, mseq, mh], {xp: x, mp: MASK, hp: h0})
    ys, hn = _minimal_ref(x, k, r)
    mys, mhn = _minimal_ref(x, k, r, MASK, h0)
    for a, b in zip(got, [ys, hn, mys, mhn]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("stacked", [False, True], ids=["cell", "stack_of_one"])
def test_gradients_through_rnn_of_lstm_cell_equal_torch(stacked, backend):
    torch = pytest.importorskip("torch", reason="torch is the reference")
    torch.manual_seed(0)
    ref = torch.nn.LSTM(F, U, batch_first=True)
    x = _x(11)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        cell = L.LSTMCell(U)
        layer = L.RNN([cell] if stacked else cell, return_sequences=True,
                      return_state=True)
        seq, *states = layer(xp)
        if stacked:                        # the generic loop: cell.call in the body
            states = states[0]
        loss = ff.reduce_sum(seq * seq) + ff.reduce_sum(ff.sin(states[1]))
        grads = ff.gradients(loss, [cell.kernel, cell.recurrent_kernel, xp])
    sess = _session(g, backend)
    for w, v in zip(layer.weights, keras_weights("LSTM", ref)):
        sess.set(w, v)
    gk, gr, gx = sess.run(grads, {xp: x})
    xt = torch.tensor(x, requires_grad=True)
    y, (_, c) = ref(xt)
    ((y * y).sum() + torch.sin(c).sum()).backward()
    tk, tr = keras_grads("LSTM", ref)
    np.testing.assert_allclose(gk, tk, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gr, tr, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("go_backwards", [False, True], ids=["forward", "backwards"])
@pytest.mark.parametrize("zero_output", [False, True], ids=["repeat", "zeros"])
def test_masks_through_the_generic_loop_equal_keras_rule(zero_output, go_backwards):
    x = _x(12)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        masked = L.Masking(0.0)(xp)
        layer = L.RNN([L.GRUCell(U)], return_sequences=True, return_state=True,
                      zero_output_for_mask=zero_output, go_backwards=go_backwards)
        seq, (h,) = layer(masked)
        last = L.RNN(L.GRUCell(U), zero_output_for_mask=zero_output,   # not a stack
                     go_backwards=go_backwards, name="last")
        out = last(masked)
    assert ff.keras.layers.Masking is L.Masking
    sess = ff.Session(g, backend="numpy")
    weights = _set_random(sess, layer.weights, 13)
    feed = x * MASK[:, :, None]                    # Masking(0.0) reads these zeros
    for w, v in zip(last.weights, weights):
        sess.set(w, v)
    got = sess.run([seq, h, out], {xp: feed})
    ys, hn, _ = keras_loop("GRU", feed, weights, mask=MASK, zero_output=zero_output,
                           go_backwards=go_backwards)
    np.testing.assert_allclose(got[0], ys, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[1], hn, rtol=1e-5, atol=1e-5)
    # the output without return_sequences: the last step's (Keras's last_output)
    np.testing.assert_allclose(got[2], ys[:, -1], rtol=1e-5, atol=1e-5)


def test_cell_called_on_its_own_is_one_step():
    x = _x(14)
    g = ff.Graph()
    with g.as_default():
        xt = ff.placeholder((None, F), name="x_t")
        h, c = ff.placeholder((None, U), name="h"), ff.placeholder((None, U), name="c")
        cell = L.LSTMCell(U)
        out, (h1, c1) = cell(xt, [h, c])
        zeros = cell.get_initial_state(batch_size=B)
    assert cell.state_size == [U, U] and cell.output_size == U
    assert [w.name for w in cell.weights] == ["lstm_cell/kernel",
                                              "lstm_cell/recurrent_kernel",
                                              "lstm_cell/bias"]
    sess = ff.Session(g, backend="numpy")
    weights = _set_random(sess, cell.weights, 15)
    h0, c0 = _x(16, (B, U)), _x(17, (B, U))
    got = sess.run([out, h1, c1, *zeros], {xt: x[:, 0], h: h0, c: c0})
    _, hn, cn = keras_loop("LSTM", x[:, :1], weights, initial=[h0, c0])
    for a, b in zip(got[:3], [hn, hn, cn]):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert all(z.shape == (B, U) and not z.any() for z in got[3:])


def test_bidirectional_rnn_of_cell_has_two_sets_of_weights():
    x = _x(18)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        layer = L.Bidirectional(L.RNN(L.GRUCell(U)))
        y = layer(xp)
    assert y.shape == (None, 2 * U)
    assert [w.name for w in layer.weights] == [
        f"bidirectional/{d}_rnn/{w}" for d in ("forward", "backward")
        for w in ("kernel", "recurrent_kernel", "bias")]
    sess = ff.Session(g, backend="numpy")
    weights = _set_random(sess, layer.weights, 19)
    _, hf, _ = keras_loop("GRU", x, weights[:3])
    _, hb, _ = keras_loop("GRU", x, weights[3:], go_backwards=True)
    np.testing.assert_allclose(sess.run(y, {xp: x}), np.concatenate([hf, hb], -1),
                               rtol=1e-5, atol=1e-5)


def test_dropout_of_stacked_cells_is_drawn_once_per_sequence():
    x = _x(20)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        layer = L.RNN([L.SimpleRNNCell(U, dropout=0.5, recurrent_dropout=0.5, seed=1)],
                      return_sequences=True)
        train, infer = layer(xp, training=True), layer(xp, training=False)
    assert layer.training_dependent
    sess = ff.Session(g, backend="numpy")
    weights = _set_random(sess, layer.weights, 21)
    got_train, got_infer = sess.run([train, infer], {xp: x})
    ys, _, _ = keras_loop("SimpleRNN", x, weights)
    np.testing.assert_allclose(got_infer, ys, rtol=1e-5, atol=1e-5)
    # step 0 (h_prev = 0, so no recurrent mask acts): each row's output is Keras's
    # tanh((x * m) W + b) for one of the 2^F input masks m of 0 and 1 / (1 - 0.5)
    assert not np.allclose(got_train, ys)
    k, r, b = weights
    first = np.tanh(x[:, 0] @ k + b)                       # h_prev = 0: no rec mask
    step0 = [np.tanh((x[:, 0] * m) @ k + b) for m in
             (np.array(bits) * 2.0 for bits in np.ndindex(*(2,) * F))]
    assert not np.allclose(got_train[:, 0], first)
    for row in range(B):
        assert min(np.abs(s[row] - got_train[row, 0]).max() for s in step0) < 1e-5


def test_bad_cells_and_arguments_are_clear_errors():
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        here = r"\(.*test_rnn_cells\.py:[0-9]+\)"        # the user's line
        with pytest.raises(ff.FragflowError, match=rf"stateful=True\) {here} is not"):
            L.RNN(L.LSTMCell(U), stateful=True)
        with pytest.raises(ff.FragflowError, match="state_size"):
            L.RNN(L.Dense(U))
        with pytest.raises(ff.FragflowError, match=rf"{here}: initial_state needs 2"):
            L.RNN(L.LSTMCell(U))(xp, initial_state=[ff.zeros((B, U))])

        class WrongStates(MinimalRNNCell):
            def call(self, inputs, states):
                out, _ = super().call(inputs, states)
                return out, [out, out]
        with pytest.raises(ff.FragflowError, match=rf"{here}: cell WrongStates returned 2 state"):
            L.RNN(WrongStates(U))(xp)

        class NoTuple(MinimalRNNCell):
            def call(self, inputs, states):
                return super().call(inputs, states)[0]
        with pytest.raises(ff.FragflowError, match=r"must return \(output, new_states\)"):
            L.RNN(NoTuple(U))(xp)
        with pytest.raises(ff.FragflowError, match="unexpected keyword"):
            L.LSTMCell(U, return_sequences=True)
    assert L.RNN(L.LSTMCell(U), unroll=True).unroll


def test_rnn_of_cell_trains_in_sequential():
    rng = np.random.default_rng(22)
    x = rng.normal(size=(24, T, F)).astype(np.float32)
    y = (x[:, :, 0].sum(1, keepdims=True) > 0).astype(np.float32)
    model = ff.keras.Sequential([L.RNN(L.LSTMCell(U), input_shape=(T, F)),
                                 L.Dense(1, activation="sigmoid")])
    model.compile(optimizer=ff.keras.optimizers.Adam(0.05), loss="binary_crossentropy")
    hist = model.fit(x, y, epochs=10, batch_size=24, verbose=0)
    assert len(model.get_weights()) == 5               # the cell's 3 and Dense's 2
    assert hist.history["loss"][-1] < 0.8 * hist.history["loss"][0]   # 0.73 -> 0.53
