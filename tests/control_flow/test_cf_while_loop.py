"""tf.while_loop (ir/ops/control.py while_loop, frontend/control_flow.py) on the numpy
executor, against TensorFlow's semantics written as Python loops."""
import collections

import numpy as np
import pytest

import fragflow as tf
from tests.control_flow.helpers import both, run


def test_a_counter_and_a_sum_as_tensorflow_computes_them():
    i, total = both(lambda: tf.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + i),
                                          (0, 0)))
    assert (int(i), int(total)) == (5, sum(range(5)))
    assert i.dtype == np.int32


def test_zero_iterations_return_the_initial_values():
    def build():
        x = tf.placeholder(tf.float32, [3], name="x")
        return tf.while_loop(lambda v: tf.reduce_sum(v) > 100.0, lambda v: v * 2.0, [x])
    xb = np.array([1.0, -2.0, 0.5], np.float32)
    out = both(build, {"x": xb})
    np.testing.assert_array_equal(out, xb)       # TF1: one loop var comes back bare


def test_a_data_dependent_trip_count():
    def build():
        x = tf.placeholder(tf.float32, [2], name="x")
        n = tf.constant(0)
        return tf.while_loop(lambda v, n: tf.reduce_sum(v) < 100.0,
                             lambda v, n: (v * 2.0 + 1.0, n + 1), (x, n))
    for xb in ([1.0, 1.0], [30.0, 40.0], [200.0, 0.0], [-1.0, 3.0]):
        v, n = np.array(xb, np.float32), 0
        while v.sum() < 100.0:
            v, n = v * np.float32(2) + np.float32(1), n + 1
        got_v, got_n = both(build, {"x": np.array(xb, np.float32)})
        np.testing.assert_allclose(got_v, v, rtol=1e-6)
        assert int(got_n) == n


def test_maximum_iterations_stops_the_loop_an_int_or_a_tensor():
    def build(limit):
        return lambda: tf.while_loop(lambda i: i < 100, lambda i: i + 1, [0],
                                     maximum_iterations=limit)
    assert int(both(build(7))) == 7
    assert int(both(build(0))) == 0
    assert int(both(build(1000))) == 100
    assert int(both(lambda: tf.while_loop(
        lambda i: i < 100, lambda i: i + 1, [0],
        maximum_iterations=tf.placeholder(tf.int32, [], name="m")), {"m": 9})) == 9


def test_nested_structures_of_mixed_dtypes_keep_their_structure():
    Pair = collections.namedtuple("Pair", "a b")

    def build():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        init = (tf.constant(0), {"h": x, "flag": tf.constant(True)},
                [Pair(tf.zeros([2]), tf.constant(1))])

        def body(i, state, pairs):
            p = pairs[0]
            return (i + 1, {"h": state["h"] * 0.5, "flag": tf.logical_not(state["flag"])},
                    [Pair(p.a + tf.reduce_sum(state["h"], axis=0), p.b * 2)])
        return tf.while_loop(lambda i, s, p: i < 3, body, init)
    xb = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    i, state, pairs = both(build, {"x": xb})
    h, a = xb.copy(), np.zeros(2, np.float32)
    for _ in range(3):
        a, h = a + h.sum(axis=0), h * 0.5
    assert int(i) == 3
    np.testing.assert_allclose(state["h"], h)
    assert bool(state["flag"]) is False and state["flag"].dtype == np.bool_
    assert isinstance(pairs, list) and isinstance(pairs[0], Pair)
    np.testing.assert_allclose(pairs[0].a, a)
    assert int(pairs[0].b) == 8


def test_unknown_batch_dims_take_the_feeds_size():
    def build():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        out = tf.while_loop(lambda k, v: k < 2, lambda k, v: (k + 1, tf.tanh(v) + 1.0),
                            (0, x))[1]
        return out, tf.shape(out)
    for batch in (1, 5, 0):
        xb = np.linspace(-2, 2, batch * 3, dtype=np.float32).reshape(batch, 3)
        out, shape = both(build, {"x": xb})
        np.testing.assert_allclose(out, np.tanh(np.tanh(xb) + 1) + 1, rtol=1e-6)
        assert list(shape) == [batch, 3]


def test_nested_loops_capture_values_two_levels_up():
    def build():
        w = tf.placeholder(tf.float32, [2], name="w")

        def outer(i, acc):
            _, inner = tf.while_loop(lambda j, a: j < i, lambda j, a: (j + 1, a + w * 2.0),
                                     (0, acc))
            return i + 1, inner
        return tf.while_loop(lambda i, a: i < 4, outer, (0, tf.zeros([2])))[1]
    wb = np.array([1.0, -0.5], np.float32)
    # sum over i < 4 of i inner steps of + 2w: 2w * (0 + 1 + 2 + 3)
    np.testing.assert_allclose(both(build, {"w": wb}), 2 * wb * 6)


def test_a_growing_loop_variable_with_a_shape_invariant():
    def build():
        v = tf.constant([1.0])
        return tf.while_loop(lambda v: tf.size(v) < 5, lambda v: tf.concat([v, v * 2.0], 0),
                             [v], shape_invariants=[tf.TensorShape([None])])
    np.testing.assert_array_equal(run(build), [1, 2, 2, 4, 2, 4, 4, 8])


def test_a_body_changing_a_shape_is_a_shape_error_naming_the_variable_and_line():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(tf.ShapeError, match=r"while_loop 'while' \(.*test_cf_while_loop"
                           r"\.py:\d+\).*loop_vars\[1\] has shape \(1,\) before an "
                           r"iteration and \(2,\) after it.*shape_invariants"):
            tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.concat([v, v], 0)),
                          (0, tf.constant([1.0])))


def test_a_body_changing_a_dtype_or_the_structure_is_an_error():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(tf.DTypeError, match=r"while_loop 'w1' \(.*test_cf_while_loop"
                           r"\.py:\d+\).*loop_vars\[1\] is int32 before .* float32 after"):
            tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.cast(v, tf.float32)),
                          (0, 1), name="w1")
        with pytest.raises(tf.FragflowError, match=r"while_loop 'while' \(.*"
                           r"test_cf_while_loop\.py:\d+\): its body returns \(\., \., \.\) "
                           r"but loop_vars is \(\., \.\)"):
            tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v, v), (0, 1.0))


def test_a_predicate_must_be_a_bool_scalar():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3], name="x")
        with pytest.raises(tf.DTypeError, match=r"while_loop 'while' \(.*test_cf_while_loop"
                           r"\.py:\d+\): its condition must return a bool scalar"):
            tf.while_loop(lambda v: tf.reduce_sum(v), lambda v: v + 1.0, [x])
        with pytest.raises(tf.ShapeError, match=r"test_cf_while_loop\.py:\d+\): its "
                           r"condition must return a scalar predicate, it returns shape \(3,\)"):
            tf.while_loop(lambda v: v > 0.0, lambda v: v + 1.0, [x])


def test_a_random_draw_in_a_condition_is_refused_clearly():
    # TF runs a condition once more than the body: a side effect there has no place
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(tf.FragflowError, match=r"random_uniform.*test_cf_while_loop"
                           r"\.py:\d+\).*inside while_loop 'while''s condition is not "
                           r"supported"):
            tf.while_loop(lambda v: tf.reduce_sum(v) < tf.random.uniform([]) * 3.0,
                          lambda v: v + 1.0, [tf.zeros([2])])


def test_a_variable_made_in_a_body_lives_in_the_outer_graph():
    g = tf.Graph()
    with g.as_default():
        def body(v):
            w = tf.get_variable("w", [2], initializer=tf.ones_initializer())
            return v + w
        out = tf.while_loop(lambda v: tf.reduce_sum(v) < 5.0, body, [tf.zeros([2])])
        assert "w" in g
        with tf.Session(g, backend="numpy") as sess:
            sess.run(tf.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(out), [3.0, 3.0])


def test_a_summary_inside_a_body_is_refused_rather_than_dropped():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3], name="x")

        def body(v):
            tf.summary.scalar("v", tf.reduce_sum(v))
            return v * 2.0
        with pytest.raises(tf.FragflowError, match=r"tf\.summary inside a loop or branch "
                           r".*not supported"):
            tf.while_loop(lambda v: tf.reduce_sum(v) < 10.0, body, x)
