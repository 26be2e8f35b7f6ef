"""Keras masks through the recurrent layers (frontend/layers_rnn.py): Masking,
Embedding(mask_zero=True) and the mask= argument, against a float64 numpy loop of
Keras's rule (a masked step keeps the states; its output is the previous output,
zeros before the first kept step) for any mask, and against torch's
pack_padded_sequence for right-padded batches (final states, gradients)."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as ff
from tests.rnn.rnn_refs import keras_grads, keras_loop, keras_weights

torch = pytest.importorskip("torch", reason="torch is the reference of these tests")

B, T, F, U = 3, 5, 4, 6
TORCH = {"SimpleRNN": torch.nn.RNN, "LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU}
# a row masked at its start, one with a hole and a masked end, one all masked
MASK = np.array([[0, 0, 1, 1, 1], [1, 0, 1, 1, 0], [0, 0, 0, 0, 0]], bool)
LENGTHS = np.array([5, 2, 3])


def _x(seed=0, shape=(B, T, F)):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _random_weights(layer, seed):
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=w.shape) * 0.5).astype(np.float32) for w in layer.weights]


@pytest.mark.parametrize("kind", ["SimpleRNN", "LSTM", "GRU"])
@pytest.mark.parametrize("go_backwards", [False, True], ids=["forward", "backwards"])
def test_mask_argument_equals_keras_rule_in_numpy(kind, go_backwards):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        mp = ff.placeholder((None, None), "bool", name="mask")
        layer = getattr(ff.keras.layers, kind)(U, return_sequences=True, return_state=True,
                                               go_backwards=go_backwards)
        seq, *states = layer(xp, mask=mp)
    sess = ff.Session(g, backend="numpy")
    weights = _random_weights(layer, 1)
    for w, v in zip(layer.weights, weights):
        sess.set(w, v)
    x = _x(1)
    got = sess.run([seq, *states], {xp: x, mp: MASK})
    want_seq, h, c = keras_loop(kind, x, weights, MASK, go_backwards)
    np.testing.assert_allclose(got[0], want_seq, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], h, rtol=1e-5, atol=1e-6)
    if kind == "LSTM":
        np.testing.assert_allclose(got[2], c, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got[0], keras_loop(kind, x, weights, None, go_backwards)[0])
    np.testing.assert_array_equal(got[0][2], 0.0)           # all masked: zeros, zero state
    np.testing.assert_array_equal(got[1][2], 0.0)


def _packed_reference(kind, x, lengths, seed=0, bidirectional=False):
    torch.manual_seed(seed)
    ref = TORCH[kind](F, U, batch_first=True, bidirectional=bidirectional)
    xt = torch.tensor(x, requires_grad=True)
    packed = torch.nn.utils.rnn.pack_padded_sequence(xt, torch.tensor(lengths),
                                                     batch_first=True, enforce_sorted=False)
    y, hn = ref(packed)
    y, _ = torch.nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=T)
    return ref, xt, y, hn


@pytest.mark.parametrize("kind", ["SimpleRNN", "LSTM", "GRU"])
def test_masking_layer_final_states_and_gradients_equal_torch_packed(kind):
    x = _x(2)
    for row, n in enumerate(LENGTHS):
        x[row, n:] = 0.0                                     # right padding
    ref, xt, y, hn = _packed_reference(kind, x, LENGTHS, seed=2)
    h, c = hn if kind == "LSTM" else (hn, None)
    (torch.sin(h).sum() + (0 if c is None else (c * c).sum())).backward()

    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        layer = getattr(ff.keras.layers, kind)(U, return_state=True)
        last, *states = layer(ff.keras.layers.Masking(mask_value=0.0)(xp))
        loss = ff.reduce_sum(ff.sin(states[0])) + \
            (ff.reduce_sum(states[1] * states[1]) if kind == "LSTM" else 0.0)
        grads = ff.gradients(loss, [layer.kernel, layer.recurrent_kernel, xp])
    sess = ff.Session(g, backend="numpy")
    for w, v in zip(layer.weights, keras_weights(kind, ref)):
        sess.set(w, v)
    got = sess.run([last, *states, *grads], {xp: x})
    np.testing.assert_allclose(got[0], h[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], h[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    if kind == "LSTM":
        np.testing.assert_allclose(got[2], c[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    gk, gr, gx = got[len(states) + 1:]
    tk, tr = keras_grads(kind, ref)
    np.testing.assert_allclose(gk, tk, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gr, tr, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_embedding_mask_zero_reaches_a_stacked_lstm():
    """Embedding(mask_zero=True) -> LSTM(return_sequences) -> LSTM: the mask goes
    through the first LSTM to the second, as Keras's compute_mask."""
    ids = np.array([[3, 1, 4, 0, 0], [2, 0, 0, 0, 0], [5, 9, 2, 6, 5]], np.int32)
    g = ff.Graph()
    with g.as_default():
        ip = ff.placeholder((None, None), "int32", name="ids")
        emb = ff.keras.layers.Embedding(10, F, mask_zero=True)
        first = ff.keras.layers.LSTM(U, return_sequences=True)
        second = ff.keras.layers.LSTM(U)
        e = emb(ip)
        seq = first(e)
        out = second(seq)
    sess = ff.Session(g, backend="numpy")
    w1, w2 = _random_weights(first, 4), _random_weights(second, 5)
    for layer, ws in ((first, w1), (second, w2)):
        for w, v in zip(layer.weights, ws):
            sess.set(w, v)
    got_e, got_seq, got = sess.run([e, seq, out], {ip: ids})
    mask = ids != 0
    want_seq = keras_loop("LSTM", got_e, w1, mask)[0]
    np.testing.assert_allclose(got_seq, want_seq, rtol=1e-5, atol=1e-6)
    # padded steps repeat the last kept output (Keras's zero_output_for_mask=False)
    np.testing.assert_array_equal(got_seq[0, 3], got_seq[0, 2])
    np.testing.assert_allclose(got, keras_loop("LSTM", want_seq, w2, mask)[1],
                               rtol=1e-5, atol=1e-6)
    assert not np.allclose(got, keras_loop("LSTM", want_seq, w2, None)[1])


def test_bidirectional_with_a_mask_equals_torch_packed_bidirectional():
    x = _x(6)
    ref, _, y, hn = _packed_reference("GRU", x, LENGTHS, seed=6, bidirectional=True)
    mask = np.arange(T)[None, :] < LENGTHS[:, None]
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        layer = ff.keras.layers.Bidirectional(ff.keras.layers.GRU(
            U, return_sequences=True, return_state=True))
        seq, h_fw, h_bw = layer(xp, mask=ff.constant(mask))
    sess = ff.Session(g, backend="numpy")
    for w, v in zip(layer.forward_layer.weights, keras_weights("GRU", ref)):
        sess.set(w, v)
    for w, v in zip(layer.backward_layer.weights, keras_weights("GRU", ref, "_reverse")):
        sess.set(w, v)
    got = sess.run([seq, h_fw, h_bw], {xp: x})
    # Bidirectional's layers output zeros at masked steps, as pad_packed_sequence
    np.testing.assert_allclose(got[0], y.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], hn[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], hn[1].detach().numpy(), rtol=1e-5, atol=1e-6)


def test_masking_layer_outputs_zeros_at_masked_steps_and_a_bad_mask_is_clear():
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, 2), name="x")
        masked = ff.keras.layers.Masking(mask_value=-1.0)(xp)
    x = np.array([[[1, 2], [-1, -1], [-1, 3]]], np.float32)
    got = ff.Session(g, backend="numpy").run(masked, {xp: x})
    np.testing.assert_array_equal(got, [[[1, 2], [0, 0], [-1, 3]]])
    g = ff.Graph()
    with g.as_default(), pytest.raises(ff.ShapeError, match=r"mask must be \(batch, time\)"):
        ff.keras.layers.LSTM(3)(ff.placeholder((None, T, F)),
                                mask=ff.placeholder((None, T, 1), "bool"))


def test_masked_lstm_on_gl_equals_numpy(gl):
    x = _x(7)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        layer = ff.keras.layers.LSTM(U, return_sequences=True)
        y = layer(xp, mask=ff.constant(MASK))
        gk = ff.gradients(ff.reduce_sum(y * y), [layer.kernel])[0]
    want = ff.Session(g, backend="numpy", passes=[]).run([y, gk], {xp: x})
    got = ff.Session(g).run([y, gk], {xp: x})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
