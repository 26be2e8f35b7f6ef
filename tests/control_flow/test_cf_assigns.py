"""Assigns inside cond branches and loop bodies (issue 31), TensorFlow 2's semantics for
resource variables (tf.compat.v1 scripts under TF 2.x: control flow v2):

- a branch's assigns happen only when it is taken (tf.cond);
- a body's happen once per iteration, in order, and a read later in the same
  iteration sees the new value (tf.while_loop, tf.scan, tf.map_fn);
- the node's final values are the variables' values after the run;
- gradients are unaffected: an assign has no gradient, a read passes its gradient to
  the variable.

Expected values are worked out from those rules in float64; each case runs on the
numpy executor as built (passes=[]) and on GL (every pass), which must agree."""
import numpy as np
import pytest

import fragflow as tf
from tests.reference import assert_matches, reference_session


def _runs(g, fetches, feeds_list, backend):
    """The fetches of each run in turn, then the variables' values after each, in one
    session."""
    sess = reference_session(g) if backend == "numpy" else tf.Session(g)
    out = []
    with sess:
        for feeds in feeds_list:
            out.append(sess.run(fetches, feeds))
    return out


def _check(g, fetches, feeds_list, want):
    """want: one list of float64 values per run; numpy (as built) and GL both match."""
    for backend in ("numpy", "gl"):
        got = _runs(g, fetches, feeds_list, backend)
        for k, (run_got, run_want) in enumerate(zip(got, want)):
            for a, b in zip(run_got, run_want):
                assert_matches(np.asarray(a), np.asarray(b, np.asarray(a).dtype),
                               rtol=1e-6, what=f"{backend} run {k}")


def test_a_branchs_assign_happens_only_when_the_branch_is_taken(gl):
    # TF: tf.cond runs only the taken branch; its control dependency runs the assign
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [], name="x")
        p = tf.placeholder(tf.bool, [], name="p")
        v = tf.Variable(10.0, name="v")

        def taken():
            with tf.control_dependencies([v.assign_add(5.0)]):
                return tf.identity(x) * 2.0
        y = tf.cond(p, taken, lambda: x - 1.0)
        read = tf.identity(v)
    runs = [{x: 3.0, p: True}, {x: 3.0, p: False}, {x: 4.0, p: True}]
    # fetch y then v in the next run (a run's reads see the value from its start)
    want = [[6.0, 10.0], [2.0, 15.0], [8.0, 15.0]]
    _check(g, [y, read], runs, want)
    with reference_session(g) as sess:
        sess.run(y, {x: 1.0, p: False})
        assert sess.run(v) == 10.0                 # the branch not taken: no assign


def test_a_bodys_assign_happens_once_per_iteration_and_a_later_read_sees_it(gl):
    # TF2 resource variables: v.assign(v * 2) then `acc + v` reads the doubled value
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(1.0, name="v")

        def body(i, acc):
            before = acc + v * 0.5                  # read before the assign: old value
            v.assign(v * 2.0)
            return i + 1, before + v                # read after it: the new value
        _, acc = tf.while_loop(lambda i, a: i < 3, body, (0, 0.0))
    want, value = [], 1.0
    for _ in range(2):
        total = 0.0
        for _ in range(3):
            total += value * 0.5
            value *= 2.0
            total += value
        want.append([total])
    _check(g, [acc], [{}, {}], want)
    with reference_session(g) as sess:
        sess.run(acc)
        assert sess.run(v) == 8.0


def test_assigns_in_a_body_apply_in_order(gl):
    # assign then assign_add then assign_sub in one iteration, each seeing the last
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(2.0, name="v")
        count = tf.Variable(0, name="count")

        def body(i):
            v.assign(v * 3.0)
            v.assign_add(1.0)
            tf.assign_sub(v, 0.5)
            count.assign_add(1)
            return i + 1
        n = tf.while_loop(lambda i: i < 4, body, [0])
    value = 2.0
    for _ in range(4):
        value = value * 3.0 + 1.0 - 0.5
    for backend in ("numpy", "gl"):
        sess = reference_session(g) if backend == "numpy" else tf.Session(g)
        with sess:
            assert sess.run(n) == 4
            assert_matches(sess.run(v), np.float32(value), what=backend)
            assert sess.run(count) == 4


def test_scan_and_map_fn_bodies_assign_once_per_element(gl):
    # TF: tf.scan / tf.map_fn run fn once per element, in order
    elems = np.float32([1.0, 2.0, 4.0, 8.0])
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [4], name="x")
        total = tf.Variable(0.0, name="total")
        calls = tf.Variable(0.0, name="calls")

        def step(acc, e):
            new = total.assign_add(e)               # the running total, as assigned
            return acc + new
        s = tf.scan(step, x, initializer=0.0)
        m = tf.map_fn(lambda e: e * calls.assign_add(1.0), x)
    running = np.cumsum(elems.astype(np.float64))
    want_s = np.cumsum(running)
    want_m = elems * np.arange(1, 5)
    for backend in ("numpy", "gl"):
        sess = reference_session(g) if backend == "numpy" else tf.Session(g)
        with sess:
            got_s, got_m = sess.run([s, m], {x: elems})
            assert_matches(got_s, want_s.astype(np.float32), what=backend)
            assert_matches(got_m, want_m.astype(np.float32), what=backend)
            assert sess.run(total) == 15.0 and sess.run(calls) == 4.0


def test_a_cond_inside_a_body_assigns_on_the_iterations_it_is_taken(gl):
    g = tf.Graph()
    with g.as_default():
        evens = tf.Variable(0.0, name="evens")

        def body(i):
            tf.cond(tf.equal(i % 2, 0), lambda: evens.assign_add(1.0),
                    lambda: tf.identity(evens))
            return i + 1
        n = tf.while_loop(lambda i: i < 5, body, [0])
    for backend in ("numpy", "gl"):
        sess = reference_session(g) if backend == "numpy" else tf.Session(g)
        with sess:
            sess.run(n)
            assert sess.run(evens) == 3.0           # i = 0, 2, 4
            sess.run(n)
            assert sess.run(evens) == 6.0


def test_an_optimizer_update_in_a_branch_applies_only_when_taken():
    # the gradients computed outside, applied inside: TF1's conditional update step
    g = tf.Graph()
    with g.as_default():
        p = tf.placeholder(tf.bool, [], name="p")
        w = tf.Variable(1.0, name="w")
        (gw,) = tf.gradients(tf.square(w - 3.0), [w])
        opt = tf.train.MomentumOptimizer(0.25, 0.5)
        step = tf.cond(p, lambda: opt.apply_gradients([(gw, w)]), lambda: tf.no_op())
    with reference_session(g) as sess:
        want_w, acc = 1.0, 0.0
        for taken in (True, False, True):
            sess.run(step, {p: taken})
            if taken:
                acc = 0.5 * acc + 2.0 * (want_w - 3.0)
                want_w -= 0.25 * acc
            assert sess.run(w) == pytest.approx(want_w, abs=1e-6)


def test_gradients_are_unaffected_by_assigns():
    # TF: an assign has no gradient; a read after it passes its gradient to the variable
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [], name="x")
        v = tf.Variable(3.0, name="v")
        u = tf.Variable(0.0, name="u")

        def body(i, y):
            u.assign(y * 10.0)                      # no gradient through here
            v.assign(v * 2.0)
            return i + 1, y + v * x
        _, y = tf.while_loop(lambda i, y: i < 2, body, (0, 0.0), maximum_iterations=2)
        gv, gx = tf.gradients(y, [v, x])
    with reference_session(g) as sess:
        got = sess.run([y, gv, gx], {x: 2.0})
    # y = 2 v0 x + 4 v0 x; each read of v counts as v itself: dy/dv = 2x, dy/dx = 6 v0
    np.testing.assert_allclose(got, [36.0, 4.0, 18.0])


def test_an_assign_keeps_an_infinite_variable_finite_to_read():
    # the read's gradient path must not turn -inf - -inf into a nan
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3], name="x")
        best = tf.Variable(-np.inf, name="best")
        out = tf.scan(lambda a, e: best.assign(tf.maximum(best, e)), x, initializer=0.0)
    with reference_session(g) as sess:
        np.testing.assert_array_equal(sess.run(out, {x: [1.0, -2.0, 5.0]}), [1.0, 1.0, 5.0])
        assert sess.run(best) == 5.0


def test_minimize_inside_a_body_is_refused_clearly():
    g = tf.Graph()
    with g.as_default():
        w = tf.Variable(1.0, name="w")

        def body(i):
            tf.train.GradientDescentOptimizer(0.1).minimize(tf.square(w))
            return i + 1
        with pytest.raises(tf.FragflowError, match=r"test_cf_assigns\.py:\d+\) is computed "
                           r"inside a loop's body or a branch.*apply_gradients"):
            tf.while_loop(lambda i: i < 3, body, [0])


def test_switch_case_and_case_assign_in_the_branch_chosen_only():
    # tf.switch_case / tf.case: nested conds, only the chosen function runs; the second
    # reads the first's assign (TF2's program order between the two)
    g = tf.Graph()
    with g.as_default():
        k = tf.placeholder(tf.int32, [], name="k")
        v = tf.Variable(0.0, name="v")
        first = tf.switch_case(k, [lambda: v.assign_add(1.0), lambda: v.assign_add(10.0),
                                   lambda: tf.identity(v)])
        second = tf.case([(k > 1, lambda: v.assign_sub(100.0))],
                         default=lambda: tf.identity(v))
    want = [(1.0, 1.0, 1.0), (11.0, 11.0, 11.0), (11.0, -89.0, -89.0)]
    with reference_session(g) as sess:
        for kk, (a, b, after) in enumerate(want):
            assert sess.run([first, second], {k: kk}) == [a, b]
            assert sess.run(v) == after


def test_control_dependencies_in_a_body_order_a_read_after_the_assign(gl):
    # TF1 scripts write `with tf.control_dependencies([assign]): read`: the read sees the
    # assigned value in that iteration (TF2 orders it so even without the block)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [2], name="x")
        v = tf.Variable(np.zeros(2, np.float32), name="v")

        def body(i, acc):
            step = v.assign(v + x * tf.cast(i + 1, tf.float32))
            with tf.control_dependencies([step]):
                seen = tf.identity(v)
            return i + 1, acc + seen
        _, acc = tf.while_loop(lambda i, a: i < 3, body, (0, tf.zeros([2])))
    xs = np.float32([1.0, -0.5])
    # v after iteration k: x * (1 + ... + k); acc: the sum of those over k = 1..3
    want = xs.astype(np.float64) * (1 + 3 + 6)
    _check(g, [acc], [{x: xs}], [[want]])


def test_batch_norms_moving_averages_update_only_when_training_is_fed_true(gl):
    # TF1's tf.layers.batch_normalization(training=is_training): its UPDATE_OPS are
    # smart_cond(training, assign, variable): a run fed False changes nothing
    data = np.random.default_rng(0).normal(2.0, 3.0, size=(16, 3)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 3], name="x")
        training = tf.placeholder(tf.bool, [], name="training")
        h = tf.layers.batch_normalization(x, training=training, momentum=0.9, name="bn")
        with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):
            out = tf.identity(h)
        moving = [v for v in tf.global_variables() if "moving_mean" in v.name][0]
    mean = data.astype(np.float64).mean(0)
    for backend in ("numpy", "gl"):
        sess = reference_session(g) if backend == "numpy" else tf.Session(g)
        with sess:
            sess.run(out, {x: data, training: False})
            np.testing.assert_array_equal(sess.run(moving), np.zeros(3, np.float32))
            sess.run(out, {x: data, training: True})
            sess.run(out, {x: data, training: True})
            np.testing.assert_allclose(sess.run(moving), (1 - 0.9 ** 2) * mean, rtol=1e-5)


def test_a_later_loop_or_cond_reads_what_an_earlier_loop_assigned(gl):
    # TF2's automatic control dependencies: stateful ops run in program order, so a
    # second loop reading v sees the first loop's assigns (a plain read outside any
    # loop sees the value from the run's start, fragflow's rule for every assign)
    g = tf.Graph()
    with g.as_default():
        v = tf.Variable(1.0, name="v")
        first = tf.fori_loop(0, 3, lambda i, a: a + v.assign(v * 2.0), 0.0)
        second = tf.fori_loop(0, tf.constant(2), lambda i, a: a + v, 0.0)
        third = tf.cond(second > 0, lambda: v + 0.5, lambda: v - 0.5)
        plain = tf.identity(v)
    # first: 2 + 4 + 8; then v = 8: second 16, third 8.5; plain: 1
    _check(g, [first, second, third, plain], [{}], [[14.0, 16.0, 8.5, 1.0]])
