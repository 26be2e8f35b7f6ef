"""TF1's tf.compat.v1.nn.static_rnn (an unrolled Python loop) against dynamic_rnn (one
scan), with and without sequence_length, and bidirectional_dynamic_rnn against torch's
bidirectional LSTM / GRU-free RNN over packed sequences (outputs, states,
gradients), with TF1's variable names and return structure."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as tf
from tests.rnn.rnn_refs import tf1_lstm_weights

torch = pytest.importorskip("torch", reason="torch is the reference of these tests")

B, T, F, H = 3, 5, 4, 6
LENGTHS = np.array([5, 2, 0], np.int32)


def _flat(state) -> list:
    return [t for s in state for t in _flat(s)] if isinstance(state, tuple) else [state]


def _x(seed=0, shape=(B, T, F)):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


@pytest.mark.parametrize("cell", ["BasicLSTMCell", "GRUCell", "multi"])
@pytest.mark.parametrize("lengths", [False, True], ids=["full", "sequence_length"])
def test_static_rnn_equals_dynamic_rnn(cell, lengths):
    def make():
        if cell == "multi":
            return tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.BasicLSTMCell(H),
                                                tf.nn.rnn_cell.GRUCell(H)])
        return getattr(tf.nn.rnn_cell, cell)(H)
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [None, T, F], name="x")
        lp = tf.placeholder(tf.int32, [None], name="lengths") if lengths else None
        static_cell, dynamic_cell = make(), make()
        outs, state = tf.compat.v1.nn.static_rnn(static_cell, tf.unstack(xp, axis=1),
                                                 dtype=tf.float32, sequence_length=lp,
                                                 scope="static")
        douts, dstate = tf.nn.dynamic_rnn(dynamic_cell, xp, sequence_length=lp,
                                          dtype=tf.float32, scope="dynamic")
        assert isinstance(outs, list) and len(outs) == T and outs[0].shape == (None, H)
        loss = tf.reduce_sum(tf.sin(tf.stack(outs, 1))) + \
            sum(tf.reduce_sum(s * s) for s in _flat(state))
        dloss = tf.reduce_sum(tf.sin(douts)) + \
            sum(tf.reduce_sum(s * s) for s in _flat(dstate))
        grads = tf.gradients(loss, static_cell.variables + [xp])
        dgrads = tf.gradients(dloss, dynamic_cell.variables + [xp])
    names = [v.name for v in static_cell.variables]
    assert names == ["static/" + v.name[len("dynamic/"):] for v in dynamic_cell.variables]
    sess = tf.Session(g, backend="numpy")
    rng = np.random.default_rng(1)
    for a, b in zip(static_cell.variables, dynamic_cell.variables):
        value = (rng.normal(size=a.shape) * 0.5).astype(np.float32)
        sess.set(a, value)
        sess.set(b, value)
    feed = {xp: _x(1)}
    if lengths:
        feed[lp] = LENGTHS
    got = sess.run([tf.stack(outs, 1), _flat(state), grads], feed)
    want = sess.run([douts, _flat(dstate), dgrads], feed)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    for a, b in zip(got[1] + got[2], want[1] + want[2]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    if lengths:
        np.testing.assert_array_equal(got[0][1, 2:], 0.0)
        np.testing.assert_array_equal(got[0][2], 0.0)


@pytest.mark.parametrize("lengths", [False, True], ids=["full", "packed"])
def test_bidirectional_dynamic_rnn_equals_torch_bidirectional_lstm(lengths):
    torch.manual_seed(3)
    ref = torch.nn.LSTM(F, H, batch_first=True, bidirectional=True)
    n = LENGTHS if lengths else np.full(B, T, np.int32)
    x = _x(3)
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [None, None, F], name="x")
        lp = tf.placeholder(tf.int32, [None], name="lengths")
        fw, bw = tf.nn.rnn_cell.LSTMCell(H), tf.nn.rnn_cell.LSTMCell(H)
        (out_fw, out_bw), (st_fw, st_bw) = tf.compat.v1.nn.bidirectional_dynamic_rnn(
            fw, bw, xp, sequence_length=lp if lengths else None, dtype=tf.float32)
        loss = tf.reduce_sum(out_fw * out_fw) + tf.reduce_sum(tf.sin(out_bw)) + \
            tf.reduce_sum(st_fw.c * st_bw.h)
        grads = tf.gradients(loss, [fw.kernel, bw.kernel, xp])
    assert [v.name for v in tf.global_variables(g)] == [
        "bidirectional_rnn/fw/lstm_cell/kernel", "bidirectional_rnn/fw/lstm_cell/bias",
        "bidirectional_rnn/bw/lstm_cell/kernel", "bidirectional_rnn/bw/lstm_cell/bias"]
    sess = tf.Session(g, backend="numpy")
    for cell, suffix in ((fw, ""), (bw, "_reverse")):
        kernel, bias = tf1_lstm_weights(ref, suffix)
        sess.set(cell.kernel, kernel)
        sess.set(cell.bias, bias)
    got = sess.run([out_fw, out_bw, st_fw.c, st_fw.h, st_bw.c, st_bw.h, *grads],
                   {xp: x, lp: n})

    rows = [i for i in range(B) if n[i] > 0]               # torch packs no empty row
    xt = torch.tensor(x, requires_grad=True)
    packed = torch.nn.utils.rnn.pack_padded_sequence(
        xt[rows], torch.tensor(n[rows]), batch_first=True, enforce_sorted=False)
    y, (hn, cn) = ref(packed)
    y, _ = torch.nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=T)
    full = lambda v, shape: torch.zeros(shape).index_put((torch.tensor(rows),), v)  # noqa: E731
    y = full(y, (B, T, 2 * H))
    hn, cn = full(hn.transpose(0, 1), (B, 2, H)), full(cn.transpose(0, 1), (B, 2, H))
    ((y[..., :H] ** 2).sum() + torch.sin(y[..., H:]).sum() +
     (cn[:, 0] * hn[:, 1]).sum()).backward()
    want = [y[..., :H], y[..., H:], cn[:, 0], hn[:, 0], cn[:, 1], hn[:, 1]]
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b.detach().numpy(), rtol=1e-5, atol=1e-6)
    gfw, gbw, gx = got[6:]
    torch_grad = lambda s: tf1_lstm_weights(  # noqa: E731
        type("G", (), {f"{k}_l0{s}": getattr(ref, f"{k}_l0{s}").grad
                       for k in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}), s)[0]
    np.testing.assert_allclose(gfw, torch_grad(""), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gbw, torch_grad("_reverse"), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    if lengths:
        np.testing.assert_array_equal(got[1][1, 2:], 0.0)    # past the length: zeros


def test_time_major_and_initial_states():
    x = _x(4)
    rng = np.random.default_rng(4)
    h0f, h0b = (rng.normal(size=(B, H)).astype(np.float32) for _ in range(2))
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [None, None, F], name="x")
        (a, b), (sa, sb) = tf.compat.v1.nn.bidirectional_dynamic_rnn(
            tf.nn.rnn_cell.GRUCell(H), tf.nn.rnn_cell.GRUCell(H), xp,
            initial_state_fw=tf.constant(h0f), initial_state_bw=tf.constant(h0b),
            time_major=True, scope="tm")
        (c, d), (sc, sd) = tf.compat.v1.nn.bidirectional_dynamic_rnn(
            tf.nn.rnn_cell.GRUCell(H), tf.nn.rnn_cell.GRUCell(H),
            tf.transpose(xp, [1, 0, 2]), initial_state_fw=tf.constant(h0f),
            initial_state_bw=tf.constant(h0b), scope="bm")
    variables = tf.global_variables(g)
    assert variables[0].name == "tm/fw/gru_cell/gates/kernel"
    sess = tf.Session(g, backend="numpy")
    half = len(variables) // 2
    for v, w in zip(variables[:half], variables[half:]):
        value = (rng.normal(size=v.shape) * 0.5).astype(np.float32)
        sess.set(v, value)
        sess.set(w, value)
    tm = np.transpose(x, (1, 0, 2))                           # (time, batch, features)
    got = sess.run([a, b, sa, sb, c, d, sc, sd], {xp: tm})
    np.testing.assert_allclose(got[0], np.transpose(got[4], (1, 0, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], np.transpose(got[5], (1, 0, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[2], got[6], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[3], got[7], rtol=1e-5, atol=1e-6)
    # the backward state is its cell's after the first step: not the forward one's
    assert not np.allclose(got[2], got[3])


def test_bad_inputs_are_clear():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, T, F])
        cell = tf.nn.rnn_cell.BasicLSTMCell(H)
        with pytest.raises(tf.FragflowError, match="a list of .batch, features. tensors"):
            tf.nn.static_rnn(cell, x, dtype=tf.float32)
        with pytest.raises(tf.FragflowError, match="empty list"):
            tf.nn.static_rnn(cell, [], dtype=tf.float32)
        with pytest.raises(tf.FragflowError, match=r"inputs\[1\] must be of rank 2"):
            tf.nn.static_rnn(cell, [x[:, 0], x], dtype=tf.float32)
        with pytest.raises(tf.FragflowError, match="same cell object"):
            tf.nn.bidirectional_dynamic_rnn(cell, cell, x, dtype=tf.float32)
        with pytest.raises(tf.FragflowError, match="sequence_length must be a vector"):
            tf.nn.bidirectional_dynamic_rnn(tf.nn.rnn_cell.GRUCell(H),
                                            tf.nn.rnn_cell.GRUCell(H), x,
                                            sequence_length=tf.zeros([B, 1], tf.int32),
                                            dtype=tf.float32)


def test_bidirectional_dynamic_rnn_on_gl_equals_numpy(gl):
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [None, None, F], name="x")
        lp = tf.placeholder(tf.int32, [None], name="lengths")
        fw = tf.nn.rnn_cell.BasicLSTMCell(H)
        (a, b), _ = tf.nn.bidirectional_dynamic_rnn(
            fw, tf.nn.rnn_cell.GRUCell(H), xp, sequence_length=lp, dtype=tf.float32)
        gk = tf.gradients(tf.reduce_sum(a * b), [fw.kernel])[0]
    feed = {xp: _x(5), lp: LENGTHS}
    want = tf.Session(g, backend="numpy", passes=[]).run([a, b, gk], feed)
    got = tf.Session(g).run([a, b, gk], feed)
    for u, v in zip(got, want):
        np.testing.assert_allclose(u, v, rtol=1e-4, atol=1e-5)


def test_zero_state_of_a_counted_batch_equals_the_default_state():
    """TF1's idiom cell.zero_state(tf.shape(x)[0], tf.float32), the batch known only
    at the feed; a batch size that is not a counted dim is a clear error."""
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [None, None, F], name="x")
        cell = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.BasicLSTMCell(H),
                                            tf.nn.rnn_cell.GRUCell(H)])
        zero = cell.zero_state(tf.shape(xp)[0], tf.float32)
        out, _ = tf.nn.dynamic_rnn(cell, xp, initial_state=zero, scope="given")
        other = tf.nn.rnn_cell.MultiRNNCell([tf.nn.rnn_cell.BasicLSTMCell(H),
                                             tf.nn.rnn_cell.GRUCell(H)])
        want, _ = tf.nn.dynamic_rnn(other, xp, dtype=tf.float32, scope="default")
        assert tf.nn.rnn_cell.GRUCell(H).zero_state(tf.constant(7)).shape == (7, H)
        with pytest.raises(tf.FragflowError, match=r"tf.shape\(x\)\[k\]"):
            tf.nn.rnn_cell.GRUCell(H).zero_state(tf.reduce_sum(tf.ones([3], tf.int32)))
    sess = tf.Session(g, backend="numpy")
    rng = np.random.default_rng(8)
    for a, b in zip(cell.variables, other.variables):
        value = (rng.normal(size=a.shape) * 0.5).astype(np.float32)
        sess.set(a, value)
        sess.set(b, value)
    got_zero, got, ref = sess.run([_flat(zero), out, want], {xp: _x(8, (2, T, F))})
    assert all(z.shape == (2, H) and not z.any() for z in got_zero)
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("lengths", [False, True], ids=["full", "sequence_length"])
def test_static_bidirectional_rnn_equals_bidirectional_dynamic_rnn(lengths):
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [None, T, F], name="x")
        lp = tf.placeholder(tf.int32, [None], name="lengths") if lengths else None
        cells = [tf.nn.rnn_cell.BasicLSTMCell(H), tf.nn.rnn_cell.GRUCell(H),
                 tf.nn.rnn_cell.BasicLSTMCell(H), tf.nn.rnn_cell.GRUCell(H)]
        outs, st_fw, st_bw = tf.compat.v1.nn.static_bidirectional_rnn(
            cells[0], cells[1], tf.unstack(xp, axis=1), dtype=tf.float32,
            sequence_length=lp, scope="static")
        (d_fw, d_bw), (dst_fw, dst_bw) = tf.nn.bidirectional_dynamic_rnn(
            cells[2], cells[3], xp, sequence_length=lp, dtype=tf.float32, scope="dynamic")
        grads = tf.gradients(tf.reduce_sum(tf.sin(tf.stack(outs, 1))), [xp])
        dgrads = tf.gradients(tf.reduce_sum(tf.sin(tf.concat([d_fw, d_bw], -1))), [xp])
    assert len(outs) == T and outs[0].shape == (None, 2 * H)
    assert cells[1].variables[0].name == "static/bw/gru_cell/gates/kernel"
    sess = tf.Session(g, backend="numpy")
    rng = np.random.default_rng(9)
    for a, b in zip(cells[0].variables + cells[1].variables,
                    cells[2].variables + cells[3].variables):
        value = (rng.normal(size=a.shape) * 0.5).astype(np.float32)
        sess.set(a, value)
        sess.set(b, value)
    feed = {xp: _x(9)}
    if lengths:
        feed[lp] = LENGTHS
    got = sess.run([tf.stack(outs, 1), st_fw.h, st_bw, grads[0]], feed)
    want = sess.run([tf.concat([d_fw, d_bw], -1), dst_fw.h, dst_bw, dgrads[0]], feed)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got[0][:, :, H:], got[0][:, ::-1, H:])
