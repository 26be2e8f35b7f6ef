"""Keras masks through the layers that support masking (frontend/layers.py
supports_masking: Dense, Activation, Dropout, BatchNormalization, Softmax, ReLU), as
Keras's supports_masking = True layers pass theirs on: an RNN after
Embedding(mask_zero=True) -> Dense, or Masking -> Dropout(training=True), skips the
masked steps. Against a float64 numpy loop of Keras's rule fed the layer's input."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as ff
from tests.rnn.rnn_refs import keras_loop

L = ff.keras.layers
IDS = np.array([[3, 1, 4, 0, 0], [0, 0, 2, 7, 1], [5, 0, 6, 0, 2]], np.int32)


def _random_weights(layer, seed):
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=w.shape) * 0.5).astype(np.float32) for w in layer.weights]


@pytest.mark.parametrize("middle", ["Dense", "Activation", "Dropout", "ReLU",
                                    "BatchNormalization", "Softmax"])
def test_a_mask_reaches_the_rnn_through_layers_that_support_masking(middle):
    g = ff.Graph()
    with g.as_default():
        ids = ff.placeholder((None, 5), "int32", name="ids")
        mid = {"Dense": lambda: L.Dense(4), "Activation": lambda: L.Activation("tanh"),
               "Dropout": lambda: L.Dropout(0.5), "ReLU": L.ReLU,
               "BatchNormalization": L.BatchNormalization, "Softmax": L.Softmax}[middle]()
        h = mid(L.Embedding(8, 4, mask_zero=True)(ids))
        lstm = L.LSTM(6, return_sequences=True, return_state=True)
        seq, state_h, state_c = lstm(h)
    sess = ff.Session(g, backend="numpy", passes=[])
    weights = _random_weights(lstm, 2)
    for w, v in zip(lstm.weights, weights):
        sess.set(w, v)
    fed, got = sess.run(h, {ids: IDS}), sess.run([seq, state_h, state_c], {ids: IDS})
    want_seq, want_h, want_c = keras_loop("LSTM", fed, weights, IDS != 0)
    np.testing.assert_allclose(got[0], want_seq, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want_h, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], want_c, rtol=1e-5, atol=1e-6)
    # the mask matters here: without it the loop gives other values
    assert not np.allclose(got[0], keras_loop("LSTM", fed, weights)[0], atol=1e-3)


def test_dropout_while_training_keeps_the_mask_of_masking():
    x = np.random.default_rng(0).normal(size=(2, 5, 3)).astype(np.float32)
    x[0, 3:] = 0.0
    x[1, :2] = 0.0
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((2, 5, 3), name="x")
        dropped = L.Dropout(0.5, seed=3)(L.Masking(0.0)(xp), training=True)
        rnn = L.SimpleRNN(4)
        last = rnn(dropped)
    sess = ff.Session(g, backend="numpy", passes=[])
    weights = _random_weights(rnn, 5)
    for w, v in zip(rnn.weights, weights):
        sess.set(w, v)
    fed, got = sess.run([dropped, last], {xp: x})
    _, want, _ = keras_loop("SimpleRNN", fed, weights, np.any(x != 0, axis=-1))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_layers_without_masking_support_keep_no_mask():
    g = ff.Graph()
    with g.as_default():
        ids = ff.placeholder((3, 5), "int32", name="ids")
        flat = L.Flatten()(L.Embedding(8, 4, mask_zero=True)(ids))
    from fragflow.frontend.layers import keras_mask
    assert keras_mask(flat) is None
