"""dropout / recurrent_dropout of ff.keras.layers.SimpleRNN / LSTM / GRU
(frontend/layers_rnn.py): identity at inference; in training, masks drawn once per
sequence before the loop (the same at every step, per gate where Keras's
implementation 1 has one per gate), checked against a float64 numpy loop fed the
same masks, their keep statistics, fresh draws each run, and Sequential.fit
building the training ops with them."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as ff
from tests.rnn.rnn_refs import keras_loop

B, T, F, U = 3, 5, 4, 6


def _x(seed=0, shape=(B, T, F)):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _layer_graph(kind, training, **kw):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        layer = getattr(ff.keras.layers, kind)(U, return_sequences=True, **kw)
        y = layer(xp, training=training)
    return g, xp, layer, y


def _set_random(sess, layer, seed):
    rng = np.random.default_rng(seed)
    weights = [(rng.normal(size=w.shape) * 0.5).astype(np.float32) for w in layer.weights]
    for w, v in zip(layer.weights, weights):
        sess.set(w, v)
    return weights


@pytest.mark.parametrize("kind", ["SimpleRNN", "LSTM", "GRU"])
def test_inference_ignores_dropout(kind):
    x = _x(1)
    outs = []
    for kw in ({}, {"dropout": 0.5, "recurrent_dropout": 0.4}):
        g, xp, layer, y = _layer_graph(kind, False, **kw)
        assert not any(n.op.startswith("random") or "dropout" in n.op for n in g.nodes)
        sess = ff.Session(g, backend="numpy")
        _set_random(sess, layer, 1)
        outs.append(sess.run(y, {xp: x}))
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("kind,kw", [
    ("SimpleRNN", {"dropout": 0.5, "recurrent_dropout": 0.3}),
    ("LSTM", {"dropout": 0.4}),                               # implementation 2: 1 mask
    ("LSTM", {"dropout": 0.4, "recurrent_dropout": 0.3}),     # implementation 1: 4 + 4
    ("GRU", {"dropout": 0.3, "recurrent_dropout": 0.5}),
    ("GRU", {"recurrent_dropout": 0.5, "reset_after": False}),
], ids=["simple_rnn", "lstm_inputs", "lstm_both", "gru_both", "gru_reset_before"])
def test_training_output_equals_keras_equations_with_the_drawn_masks(kind, kw):
    g, xp, layer, y = _layer_graph(kind, True, **kw)
    in_masks, rec_masks = layer._last_dropout_masks
    gates = {"SimpleRNN": 1, "LSTM": 4, "GRU": 3}[kind]
    per_gate = gates if kw.get("recurrent_dropout") and kind != "SimpleRNN" else 1
    assert (in_masks is None) == (not kw.get("dropout"))
    assert (rec_masks is None) == (not kw.get("recurrent_dropout"))
    masks = [m for m in (in_masks or []) + (rec_masks or [])]
    assert len(in_masks or []) in (0, per_gate) and len(rec_masks or []) in (0, per_gate)
    sess = ff.Session(g, backend="numpy")
    weights = _set_random(sess, layer, 2)
    x = _x(2)
    got, *drawn = sess.run([y, *masks], {xp: x})
    ins = drawn[:len(in_masks or [])] or None
    recs = drawn[len(in_masks or []):] or None
    want = keras_loop(kind, x, weights, in_masks=ins, rec_masks=recs,
                      reset_after=kw.get("reset_after", True))[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got, keras_loop(kind, x, weights,
                                           reset_after=kw.get("reset_after", True))[0])
    for m, rate in [(m, kw.get("dropout")) for m in ins or []] + \
            [(m, kw.get("recurrent_dropout")) for m in recs or []]:
        assert set(np.unique(m)) <= {0.0, np.float32(1 / (1 - rate))}


def test_keep_statistics_one_mask_per_sequence_and_fresh_draws():
    """A linear SimpleRNN with identity kernels shows the masks: h_0 = x_0 * m_in,
    h_t = h_{t-1} * m_rec + x_t * m_in; with x = 1 at step 0 only, h_1 = m_in * m_rec
    and h_2 = m_in * m_rec**2 (one recurrent mask for every step)."""
    n, units = 256, 16
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, units), name="x")
        layer = ff.keras.layers.SimpleRNN(units, activation=None, use_bias=False,
                                          return_sequences=True, dropout=0.25,
                                          recurrent_dropout=0.5)
        y = layer(xp, training=True)
    sess = ff.Session(g, backend="numpy")
    sess.set(layer.kernel, np.eye(units, dtype=np.float32))
    sess.set(layer.recurrent_kernel, np.eye(units, dtype=np.float32))
    x = np.zeros((n, 3, units), np.float32)
    x[:, 0] = 1.0
    a = sess.run(y, {xp: x})
    m_in = a[:, 0]
    assert set(np.unique(m_in)) == {0.0, np.float32(1 / 0.75)}
    assert abs((m_in > 0).mean() - 0.75) < 0.03              # 4096 draws: sd 0.007
    m_rec = np.divide(a[:, 1], m_in, out=np.full_like(m_in, np.nan), where=m_in > 0)
    kept = m_rec[m_in > 0]
    assert set(np.unique(kept)) == {0.0, 2.0}
    assert abs((kept > 0).mean() - 0.5) < 0.04
    np.testing.assert_allclose(a[:, 2], m_in * np.nan_to_num(m_rec) ** 2, rtol=1e-6)
    b = sess.run(y, {xp: x})
    assert not np.array_equal(a, b)                          # a new mask each run


def test_fit_trains_with_dropout_and_predict_is_deterministic():
    ff.initializers.set_seed(0)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(96, 6, 2)).astype(np.float32)
    y = (x[:, :3].sum((1, 2)) > x[:, 3:].sum((1, 2))).astype(np.int32)
    # names fixed (a random op's stream is its node name's hash, and layer names count
    # the layers made before in the process) and the shuffling seeded: the same run in
    # any test order (it once stopped at 0.701 of the first loss under xdist)
    model = ff.Sequential([ff.keras.layers.LSTM(8, dropout=0.2, recurrent_dropout=0.2,
                                                input_shape=(6, 2), name="lstm"),
                           ff.keras.layers.Dense(2, name="dense")], backend="numpy",
                          name="model")
    model.compile(optimizer=ff.keras.optimizers.Adam(0.03),
                  loss=ff.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    before = model.predict(x[:8])
    np.testing.assert_array_equal(before, model.predict(x[:8]))
    history = model.fit(x, y, epochs=12, batch_size=32, verbose=0, seed=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.7 * losses[0], losses
    assert any("dropout" in n.op or n.op.startswith("random") for n in model.graph.nodes)
    after = model.predict(x[:8])
    np.testing.assert_array_equal(after, model.predict(x[:8]))
    assert model.evaluate(x, y, verbose=0)[1] >= 0.8


def test_bad_rates_and_stateful_are_clear():
    with pytest.raises(ff.FragflowError, match=r"GRU\(stateful=True\) is not supported"):
        ff.keras.layers.GRU(4, stateful=True)
    with pytest.raises(ff.FragflowError, match=r"dropout=\.\.\.\) must be a number"):
        ff.keras.layers.LSTM(4, dropout="half")
    layer = ff.keras.layers.LSTM(4, dropout=1.5, recurrent_dropout=-1)
    assert (layer.dropout, layer.recurrent_dropout) == (1.0, 0.0)     # Keras clips
    assert not layer.training_dependent                      # rate 1: Keras drops nothing


def test_dropout_lstm_on_gl_equals_numpy_given_its_masks(gl):
    g, xp, layer, y = _layer_graph("LSTM", True, dropout=0.3, recurrent_dropout=0.3)
    in_masks, rec_masks = layer._last_dropout_masks
    x = _x(3)
    sess = ff.Session(g)
    weights = _set_random(sess, layer, 3)
    got, *drawn = sess.run([y, *in_masks, *rec_masks], {xp: x})
    want = keras_loop("LSTM", x, weights, in_masks=drawn[:4], rec_masks=drawn[4:])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
