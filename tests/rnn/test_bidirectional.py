"""ff.keras.layers.Bidirectional (frontend/layers_rnn.py) against torch's
nn.RNN / nn.LSTM / nn.GRU with bidirectional=True and mapped weights: outputs, states
(Keras's order: the forward layer's then the backward one's) and gradients, every
merge mode, a backward_layer of its own, weight names, training in a model."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as ff
from tests.rnn.rnn_refs import keras_grads, keras_weights

torch = pytest.importorskip("torch", reason="torch is the reference of these tests")

B, T, F, U = 3, 5, 4, 6
TORCH = {"SimpleRNN": torch.nn.RNN, "LSTM": torch.nn.LSTM, "GRU": torch.nn.GRU}


def _x(seed=0, shape=(B, T, F)):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _set(sess, layer, ref, kind):
    for w, v in zip(layer.forward_layer.weights, keras_weights(kind, ref)):
        sess.set(w, v)
    for w, v in zip(layer.backward_layer.weights, keras_weights(kind, ref, "_reverse")):
        sess.set(w, v)


def _build(kind, merge_mode="concat", **kw):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        layer = ff.keras.layers.Bidirectional(getattr(ff.keras.layers, kind)(U, **kw),
                                              merge_mode=merge_mode)
        out = layer(xp)
    return g, xp, layer, out


@pytest.mark.parametrize("kind", ["SimpleRNN", "LSTM", "GRU"])
def test_concat_sequences_states_and_gradients_equal_torch_bidirectional(kind):
    torch.manual_seed(0)
    ref = TORCH[kind](F, U, batch_first=True, bidirectional=True)
    g, xp, layer, out = _build(kind, return_sequences=True, return_state=True)
    seq, *states = out
    n = 2 if kind == "LSTM" else 1
    assert len(states) == 2 * n and seq.shape == (None, None, 2 * U)
    with g.as_default():
        loss = ff.reduce_sum(seq * seq) + ff.reduce_sum(ff.sin(states[0])) + \
            ff.reduce_sum(ff.cos(states[n]))
        fw, bw = layer.forward_layer, layer.backward_layer
        grads = ff.gradients(loss, [fw.kernel, fw.recurrent_kernel, bw.kernel,
                                    bw.recurrent_kernel, xp])
    sess = ff.Session(g, backend="numpy")
    _set(sess, layer, ref, kind)
    x = _x()
    got = sess.run([seq, *states, *grads], {xp: x})

    xt = torch.tensor(x, requires_grad=True)
    y, hn = ref(xt)
    h, c = hn if kind == "LSTM" else (hn, None)
    ((y * y).sum() + torch.sin(h[0]).sum() + torch.cos(h[1]).sum()).backward()
    # Keras's state order: forward (h, c) then backward (h, c)
    want = [y, h[0]] + ([c[0]] if c is not None else []) + [h[1]] + \
        ([c[1]] if c is not None else [])
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-5, atol=1e-6)
    gfk, gfr, gbk, gbr, gx = got[len(want):]
    for a, b in zip((gfk, gfr, gbk, gbr), keras_grads(kind, ref) +
                    keras_grads(kind, ref, "_reverse")):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["sum", "mul", "ave", None, "concat"])
def test_merge_modes_of_the_last_outputs(mode):
    torch.manual_seed(1)
    ref = torch.nn.GRU(F, U, batch_first=True, bidirectional=True)
    g, xp, layer, out = _build("GRU", merge_mode=mode)
    sess = ff.Session(g, backend="numpy")
    _set(sess, layer, ref, "GRU")
    x = _x(1)
    got = sess.run(out, {xp: x})
    hn = ref(torch.tensor(x))[1].detach().numpy().astype(np.float64)
    fwd, bwd = hn[0], hn[1]          # the backward layer's last output: after step 0
    want = {"sum": fwd + bwd, "mul": fwd * bwd, "ave": (fwd + bwd) / 2,
            "concat": np.concatenate([fwd, bwd], -1), None: [fwd, bwd]}[mode]
    if mode is None:
        assert isinstance(got, list) and len(got) == 2
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert tuple(layer.compute_output_shape((None, T, F))) == \
            ((None, 2 * U) if mode == "concat" else (None, U))


def test_weights_are_named_as_keras_and_backward_layer_is_used():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, T, F), name="x")
        bi = ff.keras.layers.Bidirectional(ff.keras.layers.LSTM(U))
        bi(x)
        back = ff.keras.layers.GRU(3, go_backwards=True, name="back")
        bi2 = ff.keras.layers.Bidirectional(ff.keras.layers.GRU(U), backward_layer=back,
                                            merge_mode="concat")
        y2 = bi2(x)
    assert [w.name for w in bi.weights] == [
        "bidirectional/forward_lstm/kernel", "bidirectional/forward_lstm/recurrent_kernel",
        "bidirectional/forward_lstm/bias", "bidirectional/backward_lstm/kernel",
        "bidirectional/backward_lstm/recurrent_kernel", "bidirectional/backward_lstm/bias"]
    assert bi.count_params() == 2 * 4 * U * (F + U + 1)
    assert bi2.backward_layer is back and y2.shape == (None, U + 3)
    assert [w.name for w in bi2.weights][3:] == ["bidirectional_1/back/kernel",
                                                 "bidirectional_1/back/recurrent_kernel",
                                                 "bidirectional_1/back/bias"]


def test_bad_arguments_are_clear():
    lstm = ff.keras.layers.LSTM
    with pytest.raises(ff.FragflowError, match="merge_mode must be one of"):
        ff.keras.layers.Bidirectional(lstm(4), merge_mode="max")
    with pytest.raises(ff.FragflowError, match="needs a recurrent layer"):
        ff.keras.layers.Bidirectional(ff.keras.layers.Dense(4))
    with pytest.raises(ff.FragflowError, match="opposite directions"):
        ff.keras.layers.Bidirectional(lstm(4), backward_layer=lstm(4))
    with pytest.raises(ff.FragflowError, match="differ in return_sequences"):
        ff.keras.layers.Bidirectional(lstm(4), backward_layer=lstm(
            4, go_backwards=True, return_sequences=True))
    g = ff.Graph()
    with g.as_default(), pytest.raises(ff.FragflowError, match="even number"):
        x = ff.placeholder((None, T, F))
        h = ff.zeros([B, 4])
        ff.keras.layers.Bidirectional(lstm(4))(x, initial_state=[h, h, h])


def test_initial_state_halves_go_to_each_direction():
    torch.manual_seed(2)
    ref = torch.nn.LSTM(F, U, batch_first=True, bidirectional=True)
    rng = np.random.default_rng(2)
    h0, c0 = (rng.normal(size=(2, B, U)).astype(np.float32) for _ in range(2))
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        layer = ff.keras.layers.Bidirectional(ff.keras.layers.LSTM(U, return_sequences=True))
        # Keras's order: [h_fw, c_fw, h_bw, c_bw]
        out = layer(xp, initial_state=[ff.constant(h0[0]), ff.constant(c0[0]),
                                       ff.constant(h0[1]), ff.constant(c0[1])])
    sess = ff.Session(g, backend="numpy")
    _set(sess, layer, ref, "LSTM")
    x = _x(2)
    want = ref(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))[0].detach().numpy()
    np.testing.assert_allclose(sess.run(out, {xp: x}), want, rtol=1e-5, atol=1e-6)


def test_a_bidirectional_model_trains_and_lists_its_weights_once():
    ff.initializers.set_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 6, 2)).astype(np.float32)
    y = (x[:, 0, 0] > x[:, -1, 0]).astype(np.int32)      # needs both ends of the sequence
    inp = ff.keras.Input((6, 2))
    h = ff.keras.layers.Bidirectional(ff.keras.layers.GRU(6))(inp)
    out = ff.keras.layers.Dense(2)(h)
    model = ff.keras.Model(inp, out, backend="numpy")
    assert len(model.trainable_weights) == 3 + 3 + 2
    model.compile(optimizer=ff.keras.optimizers.Adam(0.03),
                  loss=ff.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    losses = model.fit(x, y, epochs=10, batch_size=32, verbose=0).history["loss"]
    assert losses[-1] < 0.7 * losses[0], losses


def test_bidirectional_lstm_on_gl_equals_numpy(gl):
    ff.initializers.set_seed(3)
    g, xp, layer, out = _build("LSTM", return_sequences=True)
    with g.as_default():
        gk = ff.gradients(ff.reduce_sum(out * out), [layer.backward_layer.kernel])[0]
    x = _x(3)
    want = ff.Session(g, backend="numpy", passes=[]).run([out, gk], {xp: x})
    got = ff.Session(g).run([out, gk], {xp: x})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
