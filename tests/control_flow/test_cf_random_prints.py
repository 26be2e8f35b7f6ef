"""Random draws and prints inside loop bodies and cond branches (issue 31).

TensorFlow's behaviour each test checks:
- a random op in a tf.while_loop / tf.scan body draws fresh values at every iteration
  and every run, the same ones for a seed in every session (as outside loops);
- tf.print / tf.Print in a body run once per iteration, in order, with that
  iteration's values; in a cond branch only when the branch is taken.

GL (every pass) is compared with the numpy executor on the graph as built."""
import io

import numpy as np
import pytest

import fragflow as tf
from tests.reference import reference_session


def _uniform_loop(seed=7):
    g = tf.Graph()
    with g.as_default():
        def body(i, acc):
            row = tf.random.uniform([6], seed=seed)
            return i + 1, tf.concat([acc[1:], tf.expand_dims(row, 0)], 0)
        _, rows = tf.while_loop(lambda i, a: i < 4, body, (0, tf.zeros([4, 6])))
    return g, rows


def test_a_random_op_in_a_body_draws_afresh_each_iteration_and_each_run():
    g, rows = _uniform_loop()
    with reference_session(g) as sess:
        first, second = sess.run(rows), sess.run(rows)
    assert len({tuple(r) for r in first}) == 4                  # one draw per iteration
    assert not np.array_equal(first, second)                    # and per run
    assert ((first >= 0) & (first < 1)).all()
    with reference_session(g) as again:                         # reproducible per seed
        np.testing.assert_array_equal(again.run(rows), first)
    other, other_rows = _uniform_loop(seed=8)
    with reference_session(other) as sess:
        assert not np.array_equal(sess.run(other_rows), first)


def test_gl_draws_the_same_values_as_the_numpy_executor_in_a_body(gl):
    g, rows = _uniform_loop()
    with reference_session(g) as ref, tf.Session(g) as sess:
        for _ in range(2):
            np.testing.assert_array_equal(sess.run(rows), ref.run(rows))


def test_dropout_in_a_scan_body_draws_a_mask_per_step(gl):
    # tf.nn.dropout and Keras's Dropout(training=True) in tf.scan: a new mask each step
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [5, 64], name="x")
        layer = tf.keras.layers.Dropout(0.5, seed=3)
        ys = tf.scan(lambda acc, row: tf.nn.dropout(row, rate=0.5, seed=1)
                     + layer(row, training=True), x, initializer=tf.zeros([64]))
    xs = np.ones((5, 64), np.float32)
    with reference_session(g) as ref, tf.Session(g) as sess:
        want = ref.run(ys, {x: xs})
        np.testing.assert_array_equal(sess.run(ys, {x: xs}), want)
    assert set(np.unique(want)) <= {0.0, 2.0, 4.0}
    assert len({tuple(r) for r in want}) == 5


def test_recurrent_dropout_per_step_draws_a_mask_at_every_step(gl):
    # Keras draws one recurrent mask per sequence; recurrent_dropout_per_step asks for
    # one per step. h_t = 1 + (h_{t-1} * m_t) @ I shows each step's mask m_t.
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2, 12, 1], name="x")
        eye = tf.keras.initializers.Constant(np.eye(32, dtype=np.float32))
        layer = tf.keras.layers.SimpleRNN(
            32, activation=None, kernel_initializer="zeros", recurrent_initializer=eye,
            bias_initializer="ones", recurrent_dropout=0.5, recurrent_dropout_per_step=True,
            return_sequences=True, seed=3)
        y = layer(x, training=True)
    xs = np.zeros((2, 12, 1), np.float32)
    with reference_session(g) as ref, tf.Session(g) as sess:
        h = ref.run(y, {x: xs})
        np.testing.assert_array_equal(sess.run(y, {x: xs}), h)
    masks = (h[:, 1:] - 1.0) / h[:, :-1]
    assert set(np.unique(masks)) == {0.0, 2.0}
    assert len({tuple(m) for m in masks[0]}) > 6                 # not one mask for all


@pytest.mark.parametrize("cls", ["SimpleRNN", "LSTM", "GRU"])
def test_recurrent_dropout_per_step_is_in_the_config_only_where_set(cls):
    klass = getattr(tf.keras.layers, cls)
    per_step = klass(4, recurrent_dropout=0.5, recurrent_dropout_per_step=True)
    config = per_step.get_config()
    assert config["recurrent_dropout_per_step"] is True
    assert klass.from_config(config).recurrent_dropout_per_step is True
    # a default layer's config is Keras's: Keras's from_config refuses unknown keys
    assert "recurrent_dropout_per_step" not in klass(4, recurrent_dropout=0.5).get_config()


def _printing_loop(stream):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        v = tf.Variable(0.0, name="v")

        def body(i, y):
            v.assign_add(1.0)
            tf.print("step", i, "y", y, "v", v, output_stream=stream)
            tf.cond(i % 2 > 0, lambda: tf.print("odd", i, output_stream=stream),
                    lambda: tf.identity(i))
            return i + 1, y * 2.0
        _, y = tf.while_loop(lambda i, y: i < 3, body, (0, x))
    return g, x, y


PRINTED = ("step 0 y [1 -2] v 1\nstep 1 y [2 -4] v 2\nodd 1\nstep 2 y [4 -8] v 3\n")


def test_a_print_in_a_body_runs_once_per_iteration_in_order(gl):
    for backend in ("numpy", "gl"):
        stream = io.StringIO()
        g, x, y = _printing_loop(stream)
        sess = reference_session(g) if backend == "numpy" else tf.Session(g)
        with sess:
            np.testing.assert_array_equal(sess.run(y, {x: [1.0, -2.0]}), [8.0, -16.0])
            assert stream.getvalue() == PRINTED, backend
            sess.run(y, {x: [1.0, -2.0]})
            assert stream.getvalue() == PRINTED + PRINTED.replace("v 1", "v 4").replace(
                "v 2", "v 5").replace("v 3", "v 6"), backend


def test_a_print_in_a_branch_runs_only_when_taken():
    stream = io.StringIO()
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder(tf.bool, [], name="p")
        y = tf.cond(p, lambda: tf.Print(tf.constant(1.0), [tf.constant(7)], "yes "),
                    lambda: tf.identity(tf.print("no", output_stream=stream) * 0.0 + 2.0))
    with reference_session(g) as sess:
        assert sess.run(y, {p: False}) == 2.0 and stream.getvalue() == "no\n"
        assert sess.run(y, {p: True}) == 1.0 and stream.getvalue() == "no\n"


def test_tf_Print_in_a_scan_counts_first_n_over_iterations(capsys):
    # TF1's tf.Print: first_n counts the op's executions, one per step here; a reverse
    # scan runs its steps from the last element
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [4], name="x")
        ys = tf.scan(lambda a, e: tf.Print(a + e, [e], "e=", first_n=3), x,
                     initializer=0.0, reverse=True)
    with reference_session(g) as sess:
        np.testing.assert_array_equal(sess.run(ys, {x: [1.0, 2.0, 3.0, 4.0]}),
                                      [10.0, 9.0, 7.0, 4.0])
    assert capsys.readouterr().err == "e=[4]\ne=[3]\ne=[2]\n"


def test_dropouts_gradient_in_a_body_uses_each_steps_own_mask():
    # TF: dropout's gradient is dy * mask * scale with the mask of the forward draw;
    # per step here, so d sum(ys) / dx = ys / x row by row
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [4, 32], name="x")
        ys = tf.scan(lambda a, row: tf.nn.dropout(row, rate=0.5, seed=4), x,
                     initializer=tf.zeros([32]))
        (gx,) = tf.gradients(tf.reduce_sum(ys), [x])
    xs = np.random.default_rng(3).uniform(1.0, 2.0, (4, 32)).astype(np.float32)
    with reference_session(g) as sess:
        got_ys, got_gx = sess.run([ys, gx], {x: xs})
    np.testing.assert_allclose(got_gx, got_ys / xs, rtol=1e-6)
    assert len({tuple(r) for r in got_gx}) == 4


def test_keras_gaussian_noise_in_a_body_draws_afresh_each_iteration(gl):
    # Keras's GaussianNoise(stddev)(x, training=True): x + N(0, stddev^2), per iteration
    g = tf.Graph()
    with g.as_default():
        layer = tf.keras.layers.GaussianNoise(0.5, seed=2)

        def body(i, rows):
            noise = layer(tf.zeros([1, 512]), training=True)
            return i + 1, tf.concat([rows[1:], noise], 0)
        _, rows = tf.while_loop(lambda i, r: i < 3, body, (0, tf.zeros([3, 512])))
        still = tf.keras.layers.GaussianNoise(0.5)(tf.ones([4]), training=False)
    with reference_session(g) as ref, tf.Session(g) as sess:
        want = ref.run(rows)
        np.testing.assert_allclose(sess.run(rows), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(ref.run(still), np.ones(4, np.float32))
    assert len({tuple(r) for r in want}) == 3
    assert abs(want.mean()) < 0.05 and abs(want.std() - 0.5) < 0.05


def test_prints_in_nested_scans_run_in_the_order_the_steps_run():
    stream = io.StringIO()
    g = tf.Graph()
    with g.as_default():
        def outer(a, e):
            tf.print("outer", e, output_stream=stream)
            inner = tf.scan(lambda b, f: (tf.print("inner", f, output_stream=stream),
                                          b + f)[1], tf.ones([2]) * e, initializer=0.0)
            return a + tf.reduce_sum(inner)
        total = tf.foldl(outer, tf.constant([1.0, 2.0]), initializer=0.0)
    with reference_session(g) as sess:
        assert sess.run(total) == 9.0                  # (1 + 2) * 1 + (2 + 4)
    assert stream.getvalue() == "outer 1\ninner 1\ninner 1\nouter 2\ninner 2\ninner 2\n"


def test_a_print_in_a_while_loop_nested_in_a_loop_is_refused_clearly():
    # each outer iteration would print a number of rows known only at run time
    g = tf.Graph()
    with g.as_default():
        def outer(i):
            tf.while_loop(lambda j: j < i, lambda j: (tf.print("j", j), j + 1)[1], [0])
            return i + 1
        with pytest.raises(tf.FragflowError, match=r"while_loop 'while' \(.*"
                           r"test_cf_random_prints\.py:\d+\): its body prints a value of "
                           r"shape \(None,\).*not supported"):
            tf.while_loop(lambda i: i < 3, outer, [0])
