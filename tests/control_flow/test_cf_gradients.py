"""ff.gradients through scan, map_fn, counted loops, while_loop with
maximum_iterations and cond (passes/autodiff/control.py), against float64 central
differences on the numpy executor (tests/gradcheck.py)."""
import numpy as np
import pytest

import fragflow as tf
from tests.gradcheck import check_gradients

RNG = np.random.default_rng(7)
X = RNG.normal(size=(4, 3)).astype(np.float32)
W = RNG.normal(size=(3,)).astype(np.float32)
H = RNG.uniform(0.2, 1.0, size=(3,)).astype(np.float32)


def _check(build, inputs, **kw):
    check_gradients(build, inputs, backend="numpy", **kw)


def test_scan_an_rnn_like_recurrence_first_and_second_order():
    _check(lambda x, w: tf.scan(lambda a, e: tf.tanh(a * w + e), x,
                                initializer=tf.zeros([3])),
           {"x": X, "w": W}, second_order=True)


def test_scan_reversed_without_an_initializer():
    _check(lambda x, w: tf.scan(lambda a, e: a * tf.sin(e) + w, x, reverse=True),
           {"x": X, "w": W})


def test_scan_of_an_rnn_cell_with_a_matrix():
    m = RNG.normal(size=(3, 3)).astype(np.float32) * 0.5

    def build(x, m):
        h = tf.scan(lambda h, e: tf.tanh(tf.matmul(h[None, :], m)[0] + e), x,
                    initializer=tf.zeros([3]))
        return h[-1]
    _check(build, {"x": X, "m": m})


def test_map_fn_and_folds():
    _check(lambda x, w: tf.map_fn(lambda r: tf.reduce_sum(r * w) * r, x), {"x": X, "w": W})
    _check(lambda x, h: tf.foldl(lambda a, e: a * e + 1.0, x, initializer=h),
           {"x": X, "h": H})
    _check(lambda x: tf.foldr(lambda a, e: a * tf.cos(e), x), {"x": X})


def test_a_counted_loop_with_an_integer_counter():
    _check(lambda w, h: tf.fori_loop(0, 5, lambda i, v: tf.sin(v) * w
                                     + tf.cast(i, tf.float32), h), {"w": W, "h": H})


@pytest.mark.parametrize("limit", [2, 3, 6])
def test_while_loop_with_maximum_iterations(limit):
    # 3 iterations unless the limit stops it first
    _check(lambda w, h: tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * w + 0.1),
                                      (0, h), maximum_iterations=limit)[1],
           {"w": W, "h": H})


def test_while_loop_with_a_data_dependent_trip_count():
    _check(lambda w, h: tf.while_loop(lambda v: tf.reduce_sum(v * v) < 50.0,
                                      lambda v: v * 1.5 + w, h, maximum_iterations=20),
           {"w": np.abs(W), "h": H})


def test_a_while_loop_without_maximum_iterations_has_no_gradient():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3], name="x")
        y = tf.while_loop(lambda v: tf.reduce_sum(v) < 5.0, lambda v: v * 2.0, x)
        with pytest.raises(tf.GradientError, match=r"while_loop 'while' \(.*"
                           r"test_cf_gradients\.py:\d+\): the gradient of a while_loop needs "
                           r"maximum_iterations"):
            tf.gradients(tf.reduce_sum(y), [x])


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_takes_the_taken_branchs_gradient(sign):
    _check(lambda w, h: tf.cond(tf.reduce_sum(h) * sign > 0, lambda: w * h * h,
                                lambda: tf.exp(w)), {"w": W, "h": H}, second_order=True)


def test_a_loop_inside_a_cond_inside_a_scan():
    def build(x, w):
        def step(a, e):
            grown = tf.cond(tf.reduce_sum(e) > 0,
                            lambda: tf.fori_loop(0, 2, lambda i, v: v * w + e, a),
                            lambda: a - e)
            return tf.tanh(grown)
        return tf.scan(step, x, initializer=tf.zeros([3]))
    _check(build, {"x": X, "w": W})


def test_back_prop_false_stops_gradients_at_the_loop():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3], name="x")
        y = tf.while_loop(lambda v: tf.reduce_sum(v) < 5.0, lambda v: v * 2.0, x,
                          back_prop=False)
        s = tf.scan(lambda a, e: a * e, x[None, :], initializer=tf.ones([3]),
                    back_prop=False)
        (gy,) = tf.gradients(tf.reduce_sum(y) + tf.reduce_sum(s), [x])
    assert gy is None


@pytest.mark.parametrize("kind", ["while_loop", "fori_loop", "map_fn"])
def test_second_order_through_loops(kind):
    builds = {
        "while_loop": (lambda w, h: tf.while_loop(
            lambda i, v: i < 3, lambda i, v: (i + 1, tf.sin(v) * w + 0.1), (0, h),
            maximum_iterations=5)[1], {"w": W, "h": H}),
        "fori_loop": (lambda w, h: tf.fori_loop(0, 3, lambda i, v: tf.sin(v) * w, h),
                      {"w": W, "h": H}),
        "map_fn": (lambda x, w: tf.map_fn(lambda r: tf.sin(r * w), x), {"x": X, "w": W}),
    }
    build, inputs = builds[kind]
    _check(build, inputs, second_order=True)
