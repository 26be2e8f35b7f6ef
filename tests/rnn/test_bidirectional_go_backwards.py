"""Bidirectional of a layer made with go_backwards=True: as Keras (its backward copy
gets go_backwards = not layer.go_backwards), the forward layer runs backwards and the
backward one forwards, its outputs put back in reverse order; against a float64 numpy
loop of Keras's equations (tests/rnn/rnn_refs.py)."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as ff
from tests.rnn.rnn_refs import keras_loop

B, T, F, U = 2, 5, 3, 4


@pytest.mark.parametrize("kind", ["SimpleRNN", "LSTM", "GRU"])
def test_a_layer_going_backwards_is_wrapped_with_the_directions_swapped(kind):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((B, T, F), name="x")
        layer = ff.keras.layers.Bidirectional(
            getattr(ff.keras.layers, kind)(U, return_sequences=True, go_backwards=True))
        out = layer(xp)
    assert layer.forward_layer.go_backwards and not layer.backward_layer.go_backwards
    sess = ff.Session(g, backend="numpy", passes=[])
    rng = np.random.default_rng(7)
    fw = [(rng.normal(size=w.shape) * 0.5).astype(np.float32)
          for w in layer.forward_layer.weights]
    bw = [(rng.normal(size=w.shape) * 0.5).astype(np.float32)
          for w in layer.backward_layer.weights]
    for w, v in zip(layer.weights, fw + bw):
        sess.set(w, v)
    x = rng.normal(size=(B, T, F)).astype(np.float32)
    got = sess.run(out, {xp: x})
    forward = keras_loop(kind, x, fw, go_backwards=True)[0]       # processing order
    backward = keras_loop(kind, x, bw, go_backwards=False)[0][:, ::-1]
    np.testing.assert_allclose(got, np.concatenate([forward, backward], -1),
                               rtol=1e-5, atol=1e-6)
