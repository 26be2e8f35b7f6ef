"""ff.keras.layers.SimpleRNN / LSTM / GRU (frontend/layers_rnn.py) against torch's
nn.RNN / nn.LSTM / nn.GRU with mapped weights, forward and gradients; GRU with
reset_after=False against a float64 numpy formula; training through Sequential.fit
and the functional API."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients

torch = pytest.importorskip("torch", reason="torch is the reference of these tests")

B, T, F, U = 3, 5, 4, 6


def _x(seed=0, shape=(B, T, F)):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def _torch_weights(kind, m):
    """Keras's (kernel, recurrent_kernel, bias) from a torch module's, gates reordered:
    LSTM (i, f, g, o) is Keras's order; GRU torch (r, z, n) is Keras's (z, r, h)."""
    wih, whh = m.weight_ih_l0.detach().numpy(), m.weight_hh_l0.detach().numpy()
    bih, bhh = m.bias_ih_l0.detach().numpy(), m.bias_hh_l0.detach().numpy()
    if kind == "GRU":
        def order(a):
            r, z, n = np.split(a, 3, axis=0)
            return np.concatenate([z, r, n], 0)
        return order(wih).T, order(whh).T, np.stack([order(bih), order(bhh)])
    return wih.T, whh.T, bih + bhh


def _torch_grads(kind, m):
    wih, whh = m.weight_ih_l0.grad.numpy(), m.weight_hh_l0.grad.numpy()
    if kind == "GRU":
        def order(a):
            r, z, n = np.split(a, 3, axis=0)
            return np.concatenate([z, r, n], 0)
        return order(wih).T, order(whh).T
    return wih.T, whh.T


TORCH = {"SimpleRNN": lambda: torch.nn.RNN(F, U, batch_first=True),
         "LSTM": lambda: torch.nn.LSTM(F, U, batch_first=True),
         "GRU": lambda: torch.nn.GRU(F, U, batch_first=True)}


@pytest.mark.parametrize("kind", ["SimpleRNN", "LSTM", "GRU"])
@pytest.mark.parametrize("go_backwards", [False, True], ids=["forward", "backwards"])
def test_layers_equal_torch_forward_and_gradients(kind, go_backwards):
    torch.manual_seed(0)
    ref = TORCH[kind]()
    x = _x()
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        layer = getattr(ff.keras.layers, kind)(U, return_sequences=True, return_state=True,
                                               go_backwards=go_backwards)
        seq, *states = layer(xp)
        loss = ff.reduce_sum(seq * seq) + ff.reduce_sum(ff.sin(states[-1]))
        grads = ff.gradients(loss, [layer.kernel, layer.recurrent_kernel, xp])
    assert [w.name for w in layer.weights] == [f"{layer.name}/kernel",
                                               f"{layer.name}/recurrent_kernel",
                                               f"{layer.name}/bias"]
    sess = ff.Session(g, backend="numpy")
    for w, value in zip(layer.weights, _torch_weights(kind, ref)):
        sess.set(w, value)
    got = sess.run([seq, *states, *grads], {xp: x})

    xt = torch.tensor(x, requires_grad=True)
    y, hn = ref(torch.flip(xt, [1]) if go_backwards else xt)
    h, c = hn if kind == "LSTM" else (hn, None)
    last = c if kind == "LSTM" else h
    ((y * y).sum() + torch.sin(last).sum()).backward()
    want = [y, h[0]] + ([c[0]] if kind == "LSTM" else [])
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-5, atol=1e-6)
    gk, gr, gx = got[len(want):]
    tk, tr = _torch_grads(kind, ref)
    np.testing.assert_allclose(gk, tk, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gr, tr, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_gru_reset_before_equals_its_equations():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(B, T, F))
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, T, F), name="x")
        layer = ff.keras.layers.GRU(U, reset_after=False, return_sequences=True)
        y = layer(xp)
    assert tuple(layer.bias.shape) == (3 * U,)
    sess = ff.Session(g, backend="numpy")
    k, r, b = [rng.normal(size=w.shape) * 0.5 for w in layer.weights]
    for w, v in zip(layer.weights, (k, r, b)):
        sess.set(w, v.astype(np.float32))
    got = sess.run(y, {xp: x.astype(np.float32)})
    sig = lambda v: 1 / (1 + np.exp(-v))                                  # noqa: E731
    h, want = np.zeros((B, U)), []
    for t in range(T):
        xz, xr, xh = np.split(x[:, t] @ k + b, 3, axis=1)
        rz, rr, _ = np.split(h @ r, 3, axis=1)
        z, rg = sig(xz + rz), sig(xr + rr)
        cand = np.tanh(xh + (rg * h) @ r[:, 2 * U:])
        h = z * h + (1 - z) * cand
        want.append(h)
    np.testing.assert_allclose(got, np.stack(want, 1), rtol=1e-5, atol=1e-5)


def test_defaults_shapes_and_initial_weights_are_keras():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 7, F), name="x")
        lstm = ff.keras.layers.LSTM(U)
        assert lstm(x).shape == (None, U)
        gru = ff.keras.layers.GRU(U, return_sequences=True)
        assert gru(x).shape == (None, 7, U)
        rnn = ff.keras.layers.SimpleRNN(U, return_state=True, use_bias=False)
        out, h = rnn(x)
        assert out.shape == h.shape == (None, U)
    assert tuple(gru.bias.shape) == (2, 3 * U)                  # reset_after=True: TF2's
    assert rnn.bias is None and len(rnn.weights) == 2
    sess = ff.Session(g, backend="numpy")
    bias = sess.get(lstm.bias)
    np.testing.assert_array_equal(bias, np.r_[np.zeros(U), np.ones(U), np.zeros(2 * U)])
    rec = sess.get(lstm.recurrent_kernel)                       # orthogonal blocks
    np.testing.assert_allclose(rec @ rec.T, np.eye(U), atol=1e-5)
    assert lstm.count_params() == 4 * U * (F + U + 1)
    assert gru.count_params() == 3 * U * (F + U + 2)


def test_recurrent_activation_and_activation_are_used():
    torch.manual_seed(3)
    x = _x(3)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, T, F), name="x")
        a = ff.keras.layers.SimpleRNN(U, activation="relu")
        b = ff.keras.layers.SimpleRNN(U, activation="tanh")
        ya, yb = a(xp), b(xp)
    sess = ff.Session(g, backend="numpy")
    ref = torch.nn.RNN(F, U, nonlinearity="relu", batch_first=True)
    for layer in (a, b):
        for w, v in zip(layer.weights, _torch_weights("SimpleRNN", ref)):
            sess.set(w, v)
    got_a, got_b = sess.run([ya, yb], {xp: x})
    np.testing.assert_allclose(got_a, ref(torch.tensor(x))[0][:, -1].detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    assert not np.allclose(got_a, got_b)


@pytest.mark.parametrize("kind", ["SimpleRNN", "LSTM", "GRU"])
def test_input_gradients_against_finite_differences(kind):
    def build(x):
        ff.initializers.set_seed(0)
        return getattr(ff.keras.layers, kind)(3, return_sequences=True)(x)
    check_gradients(build, {"x": _x(4, (2, 4, 3))}, backend="numpy", rtol=2e-3, atol=2e-4)


def _sequence_task(n=96, seed=0):
    """Which half of a 6-step sequence holds the larger sum (two classes)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 6, 2)).astype(np.float32)
    y = (x[:, :3].sum((1, 2)) > x[:, 3:].sum((1, 2))).astype(np.int32)
    return x, y


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_sequential_fit_trains_a_recurrent_model(kind):
    ff.initializers.set_seed(0)
    x, y = _sequence_task()
    model = ff.Sequential([getattr(ff.keras.layers, kind)(8, input_shape=(6, 2)),
                           ff.keras.layers.Dense(2)], backend="numpy")
    model.compile(optimizer=ff.keras.optimizers.Adam(0.03),
                  loss=ff.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    before = model.evaluate(x, y, verbose=0)
    history = model.fit(x, y, epochs=12, batch_size=32, verbose=0)
    after = model.evaluate(x, y, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.6 * losses[0], losses
    assert after[1] >= 0.85 and after[0] < before[0], (before, after)


def test_functional_model_with_a_stacked_lstm_trains():
    ff.initializers.set_seed(1)
    x, y = _sequence_task(seed=1)
    inp = ff.keras.Input((6, 2))
    h = ff.keras.layers.LSTM(8, return_sequences=True)(inp)
    h = ff.keras.layers.GRU(8)(h)
    out = ff.keras.layers.Dense(2)(h)
    model = ff.keras.Model(inp, out, backend="numpy")
    model.compile(optimizer="adam",
                  loss=ff.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, y, epochs=8, batch_size=32, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < losses[0], losses
    assert len(model.trainable_weights) == 3 + 3 + 2


def test_unsupported_arguments_and_bad_inputs_are_clear():
    with pytest.raises(ff.FragflowError, match=r"LSTM\(stateful=True\) is not supported"):
        ff.keras.layers.LSTM(4, stateful=True)
    with pytest.raises(ff.FragflowError, match="positive number of units"):
        ff.keras.layers.GRU(0)
    with pytest.raises(TypeError, match="did you mean 'units'"):
        ff.keras.layers.LSTM(units=4, unit=3)
    g = ff.Graph()
    with g.as_default(), pytest.raises(ff.ShapeError, match=r"\(batch, time, features\)"):
        ff.keras.layers.LSTM(4)(ff.placeholder((None, 3)))
    with pytest.raises(AttributeError, match="ConvLSTM2D.*Bidirectional"):
        ff.keras.layers.ConvLSTM2D  # noqa: B018


def test_keras_lstm_on_gl_equals_numpy(gl):
    ff.initializers.set_seed(2)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        layer = ff.keras.layers.LSTM(U, return_sequences=True)
        y = layer(xp)
        gk = ff.gradients(ff.reduce_sum(y * y), [layer.kernel])[0]
    x = _x(8)
    want = ff.Session(g, backend="numpy", passes=[]).run([y, gk], {xp: x})
    got = ff.Session(g).run([y, gk], {xp: x})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind", ["SimpleRNN", "LSTM", "GRU"])
def test_initial_state_argument_and_list_input_equal_torch(kind):
    """layer(x, initial_state=[h0(, c0)]) and Keras's list form layer([x, h0(, c0)])
    against torch's (h0(, c0)), forward and the gradient wrt h0."""
    torch.manual_seed(5)
    ref = TORCH[kind]()
    rng = np.random.default_rng(5)
    h0, c0 = (rng.normal(size=(B, U)).astype(np.float32) for _ in range(2))
    x = _x(5)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, None, F), name="x")
        hp = ff.placeholder((None, U), name="h0")
        states = [hp, ff.constant(c0)] if kind == "LSTM" else [hp]
        layer = getattr(ff.keras.layers, kind)(U, return_sequences=True)
        y = layer(xp, initial_state=states)
        y_list = layer([xp, *states])
        gh = ff.gradients(ff.reduce_sum(ff.sin(y)), [hp])[0]
    sess = ff.Session(g, backend="numpy")
    for w, value in zip(layer.weights, _torch_weights(kind, ref)):
        sess.set(w, value)
    got, got_list, got_gh = sess.run([y, y_list, gh], {xp: x, hp: h0})
    h0t = torch.tensor(h0[None], requires_grad=True)
    init = (h0t, torch.tensor(c0[None])) if kind == "LSTM" else h0t
    want = ref(torch.tensor(x), init)[0]
    torch.sin(want).sum().backward()
    np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got_list, got)
    np.testing.assert_allclose(got_gh, h0t.grad.numpy()[0], rtol=1e-4, atol=1e-5)
    with g.as_default(), pytest.raises(ff.FragflowError, match="initial_state needs"):
        layer(xp, initial_state=states + [hp])
