"""A functional Keras model on token ids (Input(dtype="int32") -> Embedding -> LSTM ->
Dense): predict, evaluate and fit take int arrays as Keras does (they were cast to
float32 and refused by the int32 Input). Checked against a float64 reference built from
the model's own weights (tests/rnn/rnn_refs.py keras_loop)."""
import numpy as np
from rnn_refs import keras_loop

import fragflow as tf

keras = tf.keras


def _model():
    inp = keras.Input(shape=(6,), dtype="int32")
    emb = keras.layers.Embedding(11, 4)
    lstm = keras.layers.LSTM(5)
    dense = keras.layers.Dense(3)
    model = keras.Model(inp, dense(lstm(emb(inp))))
    return model, emb, lstm, dense


def _reference(x, emb, lstm, dense):
    table = emb.weights[0].numpy()
    k, r, b = (w.numpy() for w in lstm.weights)
    _, h, _ = keras_loop("LSTM", table[x], (k, r, b))
    w, bias = (v.numpy() for v in dense.weights)
    return h @ w + bias


def test_predict_takes_token_ids():
    model, emb, lstm, dense = _model()
    x = np.random.default_rng(3).integers(0, 11, size=(7, 6))      # int64, as numpy makes
    got = model.predict(x)
    np.testing.assert_allclose(got, _reference(x, emb, lstm, dense), rtol=1e-4, atol=1e-5)


def test_fit_and_evaluate_take_token_ids():
    model, *_ = _model()
    rng = np.random.default_rng(4)
    x, y = rng.integers(0, 11, size=(32, 6)), rng.integers(0, 3, size=(32,))
    model.compile(optimizer=keras.optimizers.Adam(0.05),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    before = model.evaluate(x, y)
    history = model.fit(x, y, epochs=3, batch_size=16, verbose=0)
    assert len(history.history["loss"]) == 3
    assert model.evaluate(x, y) < before
