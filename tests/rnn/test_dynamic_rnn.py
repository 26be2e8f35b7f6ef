"""tf.nn.dynamic_rnn with TF1's cells (frontend/rnn.py) against torch's nn.RNN /
nn.LSTM with mapped weights (forward and autograd gradients), and TF1's GRUCell
(whose reset-before-matmul torch lacks) against a float64 numpy formula and finite
differences. All on the numpy executor; the GL cases run where the GL backend runs
control flow."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as tf
from tests.gradcheck import check_gradients

torch = pytest.importorskip("torch", reason="torch is the reference of these tests")

B, T, F, H = 3, 5, 4, 6


def _lstm_weights(m, layer=0):
    """torch's (i, f, g, o) LSTM weights as TF1's [x, h] kernel (i, j, f, o) and bias
    (forget_bias 1 taken out of f)."""
    def reorder(a):
        i, f, g, o = np.split(a, 4, axis=-1)
        return np.concatenate([i, g, f, o], -1)
    wih = getattr(m, f"weight_ih_l{layer}").detach().numpy()
    whh = getattr(m, f"weight_hh_l{layer}").detach().numpy()
    b = (getattr(m, f"bias_ih_l{layer}") + getattr(m, f"bias_hh_l{layer}")).detach().numpy()
    kernel = reorder(np.concatenate([wih.T, whh.T], 0))
    bias = reorder(b)
    bias[2 * H:3 * H] -= 1.0
    return kernel, bias


def _lstm_grad(m, layer=0):
    def reorder(a):
        i, f, g, o = np.split(a, 4, axis=-1)
        return np.concatenate([i, g, f, o], -1)
    wih = getattr(m, f"weight_ih_l{layer}").grad.numpy()
    whh = getattr(m, f"weight_hh_l{layer}").grad.numpy()
    return reorder(np.concatenate([wih.T, whh.T], 0))


def _inputs(seed=0, shape=(B, T, F)):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


@pytest.mark.parametrize("cls", ["BasicLSTMCell", "LSTMCell"])
def test_lstm_cells_equal_torch_lstm_forward_and_gradients(cls):
    torch.manual_seed(0)
    ref = torch.nn.LSTM(F, H, batch_first=True)
    x = _inputs()
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [None, None, F], name="x")
        cell = getattr(tf.nn.rnn_cell, cls)(H)
        outputs, state = tf.nn.dynamic_rnn(cell, xp, dtype=tf.float32)
        loss = tf.reduce_sum(outputs * outputs) + tf.reduce_sum(state.c * 0.5)
        grads = tf.gradients(loss, [cell.kernel, cell.bias, xp])
    name = "basic_lstm_cell" if cls == "BasicLSTMCell" else "lstm_cell"
    assert sorted(v.name for v in tf.global_variables(g)) == [f"rnn/{name}/bias",
                                                              f"rnn/{name}/kernel"]
    assert isinstance(state, tf.nn.rnn_cell.LSTMStateTuple)
    sess = tf.Session(g, backend="numpy")
    kernel, bias = _lstm_weights(ref)
    sess.set(cell.kernel, kernel)
    sess.set(cell.bias, bias)
    out, c, h, gk, gb, gx = sess.run([outputs, state.c, state.h, *grads], {xp: x})

    xt = torch.tensor(x, requires_grad=True)
    y, (hn, cn) = ref(xt)
    ((y * y).sum() + (cn * 0.5).sum()).backward()
    np.testing.assert_allclose(out, y.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h, hn[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(c, cn[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gk, _lstm_grad(ref), rtol=1e-4, atol=1e-5)
    bias_grad = (ref.bias_ih_l0.grad).numpy()
    i, f, gg, o = np.split(bias_grad, 4)
    np.testing.assert_allclose(gb, np.concatenate([i, gg, f, o]), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_basic_rnn_cell_equals_torch_rnn_time_major_and_initial_state():
    torch.manual_seed(1)
    ref = torch.nn.RNN(F, H)                                    # time-major
    x = _inputs(1, (T, B, F))
    h0 = _inputs(2, (B, H))
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [T, None, F], name="x")
        hp = tf.placeholder(tf.float32, [None, H], name="h0")
        cell = tf.nn.rnn_cell.BasicRNNCell(H)
        outputs, state = tf.nn.dynamic_rnn(cell, xp, initial_state=hp, time_major=True,
                                           scope="encoder")
        loss = tf.reduce_sum(tf.sin(outputs)) + tf.reduce_sum(state * state)
        gk, gh0 = tf.gradients(loss, [cell.kernel, hp])
    assert cell.kernel.name == "encoder/basic_rnn_cell/kernel"
    sess = tf.Session(g, backend="numpy")
    sess.set(cell.kernel, np.concatenate([ref.weight_ih_l0.detach().numpy().T,
                                          ref.weight_hh_l0.detach().numpy().T], 0))
    sess.set(cell.bias, (ref.bias_ih_l0 + ref.bias_hh_l0).detach().numpy())
    out, st, gkv, gh = sess.run([outputs, state, gk, gh0], {xp: x, hp: h0})
    h0t = torch.tensor(h0[None], requires_grad=True)
    y, hn = ref(torch.tensor(x), h0t)
    (torch.sin(y).sum() + (hn * hn).sum()).backward()
    np.testing.assert_allclose(out, y.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(st, hn[0].detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gkv, np.concatenate([ref.weight_ih_l0.grad.numpy().T,
                                                    ref.weight_hh_l0.grad.numpy().T], 0),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gh, h0t.grad.numpy()[0], rtol=1e-4, atol=1e-5)


def test_sequence_length_freezes_the_state_and_zeroes_outputs_as_torch_per_row():
    torch.manual_seed(2)
    ref = torch.nn.LSTM(F, H, batch_first=True)
    x = _inputs(3, (4, 6, F))
    lengths = np.array([6, 3, 1, 0], np.int32)
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [None, None, F], name="x")
        lp = tf.placeholder(tf.int32, [None], name="lengths")
        cell = tf.nn.rnn_cell.BasicLSTMCell(H)
        outputs, state = tf.nn.dynamic_rnn(cell, xp, sequence_length=lp, dtype=tf.float32)
    sess = tf.Session(g, backend="numpy")
    kernel, bias = _lstm_weights(ref)
    sess.set(cell.kernel, kernel)
    sess.set(cell.bias, bias)
    out, h, c = sess.run([outputs, state.h, state.c], {xp: x, lp: lengths})
    for row, n in enumerate(lengths):
        want = np.zeros((6, H), np.float32)
        hn = cn = np.zeros(H, np.float32)
        if n:
            y, (hn, cn) = ref(torch.tensor(x[row:row + 1, :n]))
            want[:n] = y[0].detach().numpy()
            hn, cn = hn[0, 0].detach().numpy(), cn[0, 0].detach().numpy()
        np.testing.assert_allclose(out[row], want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(h[row], hn, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(c[row], cn, rtol=1e-5, atol=1e-6)


def _gru_numpy(x, h, gk, gb, ck, cb):
    """TF1's GRUCell in float64 numpy, written from its equations."""
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))                               # noqa: E731
    outs = []
    for t in range(x.shape[1]):
        xh = np.concatenate([x[:, t], h], 1)
        r, u = np.split(sig(xh @ gk + gb), 2, axis=1)
        c = np.tanh(np.concatenate([x[:, t], r * h], 1) @ ck + cb)
        h = u * h + (1 - u) * c
        outs.append(h)
    return np.stack(outs, 1), h


def test_gru_cell_equals_its_equations_and_names_its_variables_as_tf1():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(B, T, F))
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [None, None, F], name="x")
        cell = tf.nn.rnn_cell.GRUCell(H)
        outputs, state = tf.nn.dynamic_rnn(cell, xp, dtype=tf.float32)
    assert [v.name for v in tf.global_variables(g)] == [
        "rnn/gru_cell/gates/kernel", "rnn/gru_cell/gates/bias",
        "rnn/gru_cell/candidate/kernel", "rnn/gru_cell/candidate/bias"]
    sess = tf.Session(g, backend="numpy")
    gb = sess.get(cell.gate_bias)
    np.testing.assert_array_equal(gb, np.ones(2 * H, np.float32))    # TF1's start at 1
    weights = [rng.normal(size=v.shape).astype(np.float32) * 0.5 for v in cell.variables]
    for v, w in zip(cell.variables, weights):
        sess.set(v, w)
    out, st = sess.run([outputs, state], {xp: x.astype(np.float32)})
    want, want_h = _gru_numpy(x, np.zeros((B, H)), *[w.astype(np.float64) for w in weights])
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(st, want_h, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cls", ["GRUCell", "BasicRNNCell", "BasicLSTMCell"])
def test_gradients_of_inputs_and_initial_state_against_finite_differences(cls):
    rng = np.random.default_rng(5)

    def build(x, h0):
        cell = getattr(tf.nn.rnn_cell, cls)(3)
        init = tf.nn.rnn_cell.LSTMStateTuple(h0, tf.tanh(h0)) if cls == "BasicLSTMCell" \
            else h0
        outputs, state = tf.nn.dynamic_rnn(cell, x, initial_state=init)
        last = state.h if cls == "BasicLSTMCell" else state
        return tf.concat([tf.reshape(outputs, [2, -1]), last], 1)
    check_gradients(build, {"x": rng.normal(size=(2, 4, 3)).astype(np.float32),
                            "h0": rng.normal(size=(2, 3)).astype(np.float32) * 0.5},
                    backend="numpy", rtol=2e-3, atol=2e-4)


def test_multi_rnn_cell_equals_a_two_layer_torch_lstm():
    torch.manual_seed(6)
    ref = torch.nn.LSTM(F, H, num_layers=2, batch_first=True)
    x = _inputs(6)
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [None, None, F], name="x")
        cells = [tf.nn.rnn_cell.BasicLSTMCell(H) for _ in range(2)]
        stack = tf.nn.rnn_cell.MultiRNNCell(cells)
        outputs, state = tf.nn.dynamic_rnn(stack, xp, dtype=tf.float32)
    assert [v.name for v in tf.global_variables(g)][::2] == [
        "rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel",
        "rnn/multi_rnn_cell/cell_1/basic_lstm_cell/kernel"]
    sess = tf.Session(g, backend="numpy")
    for k, cell in enumerate(cells):
        kernel, bias = _lstm_weights(ref, k)
        sess.set(cell.kernel, kernel)
        sess.set(cell.bias, bias)
    out, h1 = sess.run([outputs, state[1].h], {xp: x})
    y, (hn, _) = ref(torch.tensor(x))
    np.testing.assert_allclose(out, y.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(h1, hn[1].detach().numpy(), rtol=1e-5, atol=1e-6)


def test_the_sequence_length_is_the_feed_s_and_one_session_takes_several():
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [None, None, F], name="x")
        outputs, state = tf.nn.dynamic_rnn(tf.nn.rnn_cell.BasicRNNCell(H), xp,
                                           dtype=tf.float32)
    sess = tf.Session(g, backend="numpy")
    for steps in (1, 3, 11):
        out, st = sess.run([outputs, state], {xp: _inputs(steps, (2, steps, F))})
        assert out.shape == (2, steps, H)
        np.testing.assert_array_equal(out[:, -1], st)


def test_bad_inputs_are_clear_errors():
    g = tf.Graph()
    with g.as_default():
        cell = tf.nn.rnn_cell.BasicLSTMCell(H)
        with pytest.raises(tf.FragflowError, match=r"dynamic_rnn \(.*test_dynamic_rnn\.py:"
                           r"\d+\): inputs must be of rank 3"):
            tf.nn.dynamic_rnn(cell, tf.placeholder(tf.float32, [2, F]))
        with pytest.raises(tf.FragflowError, match="cell must be a tf.nn.rnn_cell cell"):
            tf.nn.dynamic_rnn(object(), tf.placeholder(tf.float32, [2, 3, F]))
        with pytest.raises(tf.FragflowError, match="last dimension must be known"):
            tf.nn.dynamic_rnn(cell, tf.placeholder(tf.float32, [2, 3, None]))
        with pytest.raises(tf.FragflowError, match=r"use_peepholes=\.\.\.\) is not supported"):
            tf.nn.rnn_cell.LSTMCell(4, use_peepholes=True)
    with pytest.raises(AttributeError, match="fragflow.nn.rnn_cell.*GRUCell"):
        tf.nn.rnn_cell.GRUcell  # noqa: B018


def test_dynamic_rnn_on_gl_equals_numpy(gl):
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [None, None, F], name="x")
        cell = tf.nn.rnn_cell.BasicLSTMCell(H)
        outputs, state = tf.nn.dynamic_rnn(cell, xp, dtype=tf.float32)
        loss = tf.reduce_sum(outputs * outputs)
        gk = tf.gradients(loss, [cell.kernel])[0]
    x = _inputs(7)
    want = tf.Session(g, backend="numpy", passes=[]).run([outputs, state.c, gk], {xp: x})
    got = tf.Session(g).run([outputs, state.c, gk], {xp: x})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
