"""Variables whose initial value is float16 (an imported float16 model's weights) live
in RGBA16F textures on GL (half the memory, the same numbers read) until a plan writes
them: an assign's swap or Session.set turns them RGBA32F with their values kept.
Tuning.half_weight_textures of the device's tuning turns it off. Oracles: the same
session with the knob off (bit for bit), the numpy executor (training steps)."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as ff
from fragflow.runtime.device import Device

W = np.array([[0.5, -1.25, 3.0], [65504.0, 2.0 ** -24, -0.0],
              [0.1, 7.0, -2.5], [1.0, 2.0, 4.0], [np.inf, 0.0, 1.0]], np.float16)


def _graph(train: bool = False):
    """y = x[2, 5] @ w (w float16: 5 x 3, with 65504, a subnormal, -0, inf) + b
    (float32); train: an SGD step on w as well."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 5), "float32", name="x")
        w = ff.Variable(W, name="w")
        b = ff.Variable(np.array([0.25, -0.5, 1.0], np.float32), name="b")
        y = ff.matmul(x, w) + b
        fetches = [y]
        if train:
            finite = ff.matmul(x, ff.minimum(w, 100.0)) + b
            fetches.append(ff.optim.SGD(0.01).minimize(ff.reduce_sum(ff.square(finite))))
    return g, x, w, fetches


X = np.array([[1.0, 0.0, -2.0, 0.5, 0.0], [0.25, 1e-3, 3.0, -1.0, 0.0]], np.float32)


@pytest.fixture
def knob(monkeypatch):
    """Set the device's half_weight_textures for the test."""
    device = Device.get()

    def set_(on: bool):
        monkeypatch.setattr(device, "tuning", device.tuning.with_(half_weight_textures=on))
    return set_


def _formats(sess) -> dict:
    return {name: slot.texture.format for name, slot in sess._variables._slots.items()}


def test_a_float16_variable_is_an_rgba16f_texture_read_as_the_same_numbers(knob):
    results, memory = {}, {}
    for on in (True, False):
        knob(on)
        g, x, w, (y,) = _graph()
        sess = ff.Session(g)
        results[on] = sess.run(y, {x: X})
        memory[on] = sess.memory()["bytes"]
        assert _formats(sess) == {"w": "rgba16f" if on else "rgba32f", "b": "rgba32f"}
        assert np.array_equal(sess.get(w), W.astype(np.float32))
        sess.close()
    assert np.array_equal(results[True], results[False], equal_nan=True)
    texels = 4 * 1                   # w: 15 values in 4 texels of one row
    assert memory[False] - memory[True] == 8 * texels
    with np.errstate(invalid="ignore"):                         # 0 * inf: NaN
        want = X.astype(np.float64) @ W.astype(np.float64) + [0.25, -0.5, 1.0]
    np.testing.assert_allclose(results[True], want, rtol=1e-6)


def test_training_turns_the_variable_float32_and_matches_numpy(knob):
    knob(True)
    g, x, w, fetches = _graph(train=True)
    sess, ref = ff.Session(g), ff.Session(g, backend="numpy")
    for _ in range(3):
        sess.run(fetches, {x: X})
        ref.run(fetches, {x: X})
    assert _formats(sess)["w"] == "rgba32f"
    got, want = sess.get(w), ref.get(w)
    assert not np.array_equal(want, W.astype(np.float32))       # the steps moved w
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_set_turns_the_variable_float32_and_keeps_every_bit(knob):
    knob(True)
    g, x, w, (y,) = _graph()
    sess = ff.Session(g)
    sess.run(y, {x: X})
    assert _formats(sess)["w"] == "rgba16f"
    value = np.full((5, 3), 0.1, np.float32)                   # not a float16 number
    sess.set(w, value)
    assert _formats(sess)["w"] == "rgba32f"
    assert np.array_equal(sess.get(w), value)
    np.testing.assert_allclose(sess.run(y, {x: X}), X @ value + [0.25, -0.5, 1.0],
                               rtol=1e-6)


def test_the_knob_is_a_bool_and_settable_from_the_environment():
    assert ff.Tuning().half_weight_textures is True
    assert ff.Tuning().from_env("half_weight_textures=false").half_weight_textures is False
    with pytest.raises(ff.TuningError, match="half_weight_textures must be True or False"):
        ff.Tuning(half_weight_textures=1)
