"""Control flow on the GL backend (runtime/control_flow.py ControlFlowPlan) against the
numpy executor running the graph as built, on awkward cases; loop-carried values stay
on the GPU: memory is flat over many iterations, a while_loop reads back one value per
iteration and a counted loop none."""
import numpy as np
import pytest

import fragflow as tf
from fragflow.runtime import control_flow as cf

RNG = np.random.default_rng(11)


def _compare(build, feeds, rtol=1e-5, atol=1e-6):
    g = tf.Graph("gl_cf")
    with g.as_default():
        fetches = build()
    feed = {g.value(k): np.asarray(v) for k, v in feeds.items()}
    want = tf.Session(g, backend="numpy", passes=[]).run(fetches, feed)
    with tf.Session(g) as sess:
        got = sess.run(fetches, feed)
    for a, b in zip(_flat(got), _flat(want)):
        assert np.shape(a) == np.shape(b) and np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return got


def _flat(x):
    if isinstance(x, dict):
        return [v for k in sorted(x) for v in _flat(x[k])]
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _flat(item)]
    return [x]


def _x(shape=(None, 3)):
    return tf.placeholder(tf.float32, shape, name="x")


X = RNG.normal(size=(5, 3)).astype(np.float32)


@pytest.mark.parametrize("n", [0, 1, 7])
def test_while_loop_with_a_fed_trip_count_and_mixed_dtypes(gl, n):
    def build():
        x, k = _x(), tf.placeholder(tf.int32, [], name="n")
        return tf.while_loop(lambda i, v, f: i < k,
                             lambda i, v, f: (i + 1, tf.tanh(v) * 1.5 + 0.25,
                                              tf.logical_not(f)),
                             (0, x, tf.constant(True)))
    i, v, f = _compare(build, {"x": X, "n": np.int32(n)})
    assert int(i) == n and bool(f) == (n % 2 == 0)


def test_a_data_dependent_while_loop_and_unknown_batch_sizes(gl):
    def build():
        x = _x()
        return tf.while_loop(lambda v, c: tf.reduce_max(tf.abs(v)) < 50.0,
                             lambda v, c: (v * 1.7 + 0.1, c + 1), (x, 0))
    for batch in (1, 3, 6):
        _compare(build, {"x": X[:batch] if batch <= 5 else np.tile(X, (2, 1))[:batch]})


def test_nested_loops_a_loop_inside_a_cond_and_a_cond_inside_a_loop(gl):
    def build():
        x, w = _x(), tf.placeholder(tf.float32, [3], name="w")

        def outer(i, acc):
            _, inner = tf.while_loop(lambda j, a: j < i, lambda j, a: (j + 1, a * 0.5 + w),
                                     (0, acc))
            flipped = tf.cond(tf.reduce_sum(inner) > 0, lambda: inner - 1.0,
                              lambda: inner + 2.0)
            return i + 1, flipped
        looped = tf.while_loop(lambda i, a: i < 4, outer, (0, x))[1]
        return tf.cond(tf.reduce_sum(x) > 0,
                       lambda: tf.fori_loop(0, 3, lambda i, v: v * w, looped),
                       lambda: looped * 2.0)
    for sign in (1.0, -1.0):
        _compare(build, {"x": X * sign, "w": np.array([0.5, -1.0, 2.0], np.float32)})


def test_scan_map_fn_and_folds(gl):
    def build():
        x, w = _x(), tf.placeholder(tf.float32, [3], name="w")
        return (tf.scan(lambda a, e: tf.tanh(a * w + e), x, initializer=tf.zeros([3])),
                tf.scan(lambda a, e: a * 0.5 + e, x, reverse=True),
                tf.map_fn(lambda r: (tf.reduce_sum(r * w), r[::-1]), x),
                tf.foldl(lambda a, e: a + e, x), tf.foldr(lambda a, e: a * 2.0 - e, x),
                tf.fori_loop(2, 6, lambda i, v: v + tf.cast(i, tf.float32), w))
    _compare(build, {"x": X, "w": np.array([0.5, -1.0, 2.0], np.float32)})


def test_a_loop_variable_growing_under_a_shape_invariant(gl):
    def build():
        x = _x((3,))
        grown = tf.while_loop(lambda v: tf.size(v) < 20, lambda v: tf.concat([v, v * 2.0], 0),
                              [x], shape_invariants=[tf.TensorShape([None])])
        return grown, tf.reduce_sum(grown)
    grown, _ = _compare(build, {"x": X[0]})
    assert grown.shape == (24,)


def test_a_body_returning_a_variable_unchanged_and_a_swap_of_two(gl):
    def build():
        x = _x((3,))
        return tf.while_loop(lambda i, a, b, c: i < 5,
                             lambda i, a, b, c: (i + 1, b, a, c), (0, x, x * 2.0, x))
    _compare(build, {"x": X[0]})


def test_memory_is_flat_and_a_while_loop_reads_back_one_value_per_iteration(gl,
                                                                          monkeypatch):
    reads = []
    real = cf._Swapper.read
    monkeypatch.setattr(cf._Swapper, "read", lambda self, k: reads.append(k) or
                        real(self, k))
    g = tf.Graph()
    with g.as_default():
        x, n = _x(), tf.placeholder(tf.int32, [], name="n")
        y = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 0.5 + 1.0), (0, x))[1]
    with tf.Session(g) as sess:
        sess.run(y, {x: X, n: 3})
        before = sess.memory()["textures"]
        reads.clear()
        out = sess.run(y, {x: X, n: 2000})
        assert sess.memory()["textures"] == before
    assert reads == [0] * 2001            # the predicate, once per test
    np.testing.assert_allclose(out, np.full_like(X, 2.0), rtol=1e-5)


def test_a_counted_loop_reads_nothing_back_until_it_ends(gl, monkeypatch):
    reads = []
    real = cf._Swapper.read
    monkeypatch.setattr(cf._Swapper, "read", lambda self, k: reads.append(k) or
                        real(self, k))
    g = tf.Graph()
    with g.as_default():
        x = _x()
        y = tf.fori_loop(0, 500, lambda i, v: v * 0.5 + tf.cast(i, tf.float32), x)
    with tf.Session(g) as sess:
        out = sess.run(y, {x: X})
    assert reads == []
    v = X.astype(np.float64)
    for i in range(500):
        v = v * 0.5 + i
    np.testing.assert_allclose(out, v, rtol=1e-4)


def test_lowering_a_control_flow_node_to_one_kernel_list_is_a_clear_error(gl):
    from fragflow.codegen import lower
    g = tf.Graph()
    with g.as_default():
        x = _x((3,))
        tf.while_loop(lambda v: tf.reduce_sum(v) < 10.0, lambda v: v * 2.0, x)
    with pytest.raises(tf.FragflowError, match=r"while_loop 'while' \(.*test_cf_gl\.py:\d+"
                       r"\): while_loop has no kernel"):
        lower(g)


def test_empty_and_one_row_batches(gl):
    def build():
        x = _x()
        return (tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0), (0, x))[1],
                tf.scan(lambda c, e: c + e, x, initializer=tf.zeros([3])),
                tf.foldl(lambda c, e: c + e, x, initializer=tf.ones([3])))
    for rows in (0, 1):
        stacked = _compare(build, {"x": X[:rows]})[1]
        assert stacked.shape == (rows, 3)


def test_gradients_through_control_flow_on_gl(gl):
    from tests.gradcheck import check_gradients
    w = RNG.normal(size=(3,)).astype(np.float32)
    h = RNG.uniform(0.2, 1.0, size=(3,)).astype(np.float32)
    kw = {"backend": "gl", "rtol": 2e-3, "atol": 2e-4}
    check_gradients(lambda x, w: tf.scan(lambda a, e: tf.tanh(a * w + e), x,
                                         initializer=tf.zeros([3])), {"x": X, "w": w}, **kw)
    check_gradients(lambda w, h: tf.while_loop(lambda i, v: i < 3,
                                               lambda i, v: (i + 1, v * w + 0.1), (0, h),
                                               maximum_iterations=6)[1],
                    {"w": w, "h": h}, **kw)
    check_gradients(lambda w, h: tf.cond(tf.reduce_sum(h) > 0, lambda: w * h * h,
                                         lambda: tf.exp(w)), {"w": w, "h": h}, **kw)


def test_training_a_recurrence_on_gl_follows_the_numpy_executor(gl):
    xb = RNG.normal(size=(6, 4, 3)).astype(np.float32)
    yb = RNG.normal(size=(6,)).astype(np.float32)

    def losses(backend):
        g = tf.Graph()
        with g.as_default():
            x = tf.placeholder(tf.float32, [None, 4, 3], name="x")
            y = tf.placeholder(tf.float32, [None], name="y")
            w = tf.get_variable("w", [3, 5], initializer=tf.constant_initializer(0.1))
            u = tf.get_variable("u", [5, 5], initializer=tf.constant_initializer(0.05))
            steps = tf.transpose(x, [1, 0, 2])
            h = tf.foldl(lambda h, e: tf.tanh(tf.matmul(e, w) + tf.matmul(h, u)), steps,
                         initializer=tf.zeros_like(tf.matmul(steps[0], w)))
            loss = tf.reduce_mean(tf.square(tf.reduce_sum(h, 1) - y))
            train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
            with tf.Session(g, backend=backend) as sess:
                sess.run(tf.global_variables_initializer())
                return [sess.run([loss, train], {x: xb, y: yb})[0] for _ in range(5)]
    got, want = losses("gl"), losses("numpy")
    np.testing.assert_allclose(got, want, rtol=1e-4)
    assert got[-1] < got[0] * 0.8


def test_debug_mode_names_the_iteration_where_a_nan_first_appears(gl):
    g = tf.Graph()
    with g.as_default():
        x = _x((3,))
        # 5 -> log(4.7) = 1.55 -> log(1.25) = 0.22 -> log(-0.08): NaN in iteration 2
        y = tf.while_loop(lambda i, v: i < 10, lambda i, v: (i + 1, tf.log(v - 0.3)),
                          (0, x))[1]
    with pytest.raises(tf.NumericsError, match=r"while_loop 'while' \(.*test_cf_gl\.py:\d+"
                       r"\), iteration 2 \(counted from 0.*log"):
        tf.Session(g, debug=True).run(y, {x: np.array([5.0, 6.0, 7.0], np.float32)})


def test_profile_sees_the_kernels_inside_a_loop(gl):
    g = tf.Graph()
    with g.as_default():
        x = _x((3,))
        y = tf.while_loop(lambda i, v: i < 4, lambda i, v: (i + 1, tf.sin(v) * 2.0), (0, x))[1]
    with tf.Session(g) as sess:
        np.testing.assert_allclose(sess.run(y, {x: X[0]}),
                                   tf.Session(g, backend="numpy").run(y, {x: X[0]}),
                                   rtol=1e-5)
        text = str(sess.profile(y, {x: X[0]}))
    assert "sin" in text and "less" in text


def test_an_lstm_written_with_scan_matches_its_formula_and_numpy_gradients(gl):
    """A tutorial-style LSTM (one matmul for the four gates, TensorFlow's i, f, o, u
    split) over 6 steps of an unknown batch, on GL and numpy, against numpy."""
    steps, batch, d, h = 6, 4, 5, 7
    xb = RNG.normal(size=(batch, steps, d)).astype(np.float32)
    wb = (RNG.normal(size=(d + h, 4 * h)) * 0.3).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, steps, d], name="x")
        w = tf.Variable(wb, name="w")

        def cell(state, e):
            hs, cs = state
            i, f, o, u = tf.split(tf.matmul(tf.concat([e, hs], 1), w), 4, axis=1)
            cs = tf.sigmoid(f) * cs + tf.sigmoid(i) * tf.tanh(u)
            return tf.sigmoid(o) * tf.tanh(cs), cs
        xs = tf.transpose(x, [1, 0, 2])
        zeros = tf.zeros_like(tf.matmul(xs[0], w[:d, :h]))
        hs, _ = tf.scan(cell, xs, initializer=(zeros, zeros))
        loss = tf.reduce_sum(hs[-1] ** 2)
        (gw,) = tf.gradients(loss, [w])

    def sigmoid(a):
        return 1 / (1 + np.exp(-a))
    hv = cv = np.zeros((batch, h))
    for t in range(steps):
        i, f, o, u = np.split(np.concatenate([xb[:, t], hv], 1) @ wb, 4, 1)
        cv = sigmoid(f) * cv + sigmoid(i) * np.tanh(u)
        hv = sigmoid(o) * np.tanh(cv)
    got = {}
    for backend in ("numpy", "gl"):
        with tf.Session(g, backend=backend) as sess:
            got[backend] = sess.run([hs, gw], {x: xb})
        np.testing.assert_allclose(got[backend][0][-1], hv, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got["gl"][1], got["numpy"][1], rtol=1e-3, atol=1e-5)
