"""examples/rnn_digits.py: digits read row by row (8 steps of 8 pixels) by a TF1
dynamic_rnn script and a Keras Sequential([LSTM(32), Dense(10)]), Adam 0.01, batch
64, 10 epochs, on the numpy executor, reach the accuracy TensorFlow and torch reach.

The bars, measured on this data and split (train_digits.py's: seed 0, 80 / 20, 360
test images), seeds 0, 1, 2, 10 epochs:

    TensorFlow 2.21 Keras Sequential([LSTM(32), Dense(10)]), Adam(0.01), batch 64:
        0.942, 0.922, 0.897 (mean 0.920)
    (TF 2.21's tf.compat.v1.nn.rnn_cell.BasicLSTMCell is gone with Keras 3, so the TF1
    script has no TensorFlow figure; torch with TF1's initialisation stands in:)
    torch nn.LSTM(8, 32) + Linear, TF1 BasicLSTMCell's init (glorot on [x, h],
    forget bias 1), Adam(0.01): 0.931, 0.917, 0.914 (mean 0.920)
    torch, Keras's init (glorot, orthogonal, unit_forget_bias): 0.939, 0.944, 0.919
        (mean 0.934)
    fragflow (this example): TF1 script 0.944, 0.950, 0.933 (mean 0.943); Keras
        0.961, 0.939, 0.939 (mean 0.946)

The test runs seed 0 and asks for TensorFlow's mean less 0.02 (seed to seed the
figures move by +-0.02)."""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TENSORFLOW_KERAS_MEAN = 0.920          # measured as above
TORCH_TF1_INIT_MEAN = 0.920


@pytest.fixture(scope="module")
def example():
    if importlib.util.find_spec("sklearn") is None:
        pytest.skip("the examples extra (scikit-learn: its digits file) is missing")
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    try:
        import rnn_digits
    finally:
        sys.path.pop(0)
    return rnn_digits


def test_the_digits_are_read_as_8_steps_of_8_pixels(example):
    (x_train, y_train), (x_test, y_test) = example.load_digits()
    assert x_train.shape == (1437, 8, 8) and x_test.shape == (360, 8, 8)
    assert 0.0 <= x_train.min() and x_train.max() <= 1.0
    assert sorted(set(y_train.tolist())) == list(range(10))


def test_tf1_dynamic_rnn_script_reaches_tensorflow_s_accuracy(example, capsys):
    accuracy = example.tf1_script(example.load_digits(), epochs=10, backend="numpy")
    print(capsys.readouterr().out)
    assert accuracy >= TORCH_TF1_INIT_MEAN - 0.02, accuracy


def test_keras_lstm_reaches_tensorflow_s_accuracy(example):
    accuracy = example.keras_model(example.load_digits(), epochs=10, backend="numpy")
    assert accuracy >= TENSORFLOW_KERAS_MEAN - 0.02, accuracy
