"""tf.cond, tf.scan, tf.map_fn, tf.foldl / tf.foldr and ff.fori_loop on the numpy
executor, against TensorFlow's semantics written as Python loops."""
import numpy as np
import pytest

import fragflow as tf
from fragflow.ir.ops import control
from tests.control_flow.helpers import both, run

RNG = np.random.default_rng(25)
X = RNG.normal(size=(5, 3)).astype(np.float32)
W = RNG.normal(size=(3,)).astype(np.float32)


def _xw():
    return (tf.placeholder(tf.float32, [None, 3], name="x"),
            tf.placeholder(tf.float32, [3], name="w"))


# -- cond ---------------------------------------------------------------------------------
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_cond_gives_the_taken_branch(sign):
    def build():
        x, w = _xw()
        return tf.cond(tf.reduce_sum(x) * sign > 0, lambda: (x * w, tf.constant(1)),
                       lambda: (x - 1.0, tf.constant(2)))
    out, which = both(build, {"x": X, "w": W})
    taken = X.sum() * sign > 0
    np.testing.assert_allclose(out, X * W if taken else X - 1.0)
    assert int(which) == (1 if taken else 2)


def test_cond_runs_only_the_taken_branch(monkeypatch):
    ran = []
    real = control.run_subgraph

    def spy(graph, args, fd=np.float32):
        ran.append(graph.name)
        return real(graph, args, fd)
    monkeypatch.setattr(control, "run_subgraph", spy)

    def build():
        x = tf.placeholder(tf.float32, [], name="p")
        # the false branch would loop a billion times if it ran
        return tf.cond(x > 0, lambda: x + 1.0,
                       lambda: tf.while_loop(lambda v: v < 1e30, lambda v: v + 1.0, [x],
                                             maximum_iterations=10 ** 9))
    assert float(run(build, {"p": np.float32(2.0)}, passes=[])) == 3.0
    assert len(ran) == 1


def test_a_loop_inside_a_cond_and_a_cond_inside_a_loop():
    def build():
        x = tf.placeholder(tf.float32, [], name="p")

        def halve_or_triple(v):
            return tf.cond(tf.equal(tf.math.floormod(v, 2.0), 0.0), lambda: v / 2.0,
                           lambda: v * 3.0 + 1.0)
        steps = tf.while_loop(lambda v, n: v > 1.0, lambda v, n: (halve_or_triple(v), n + 1),
                              (x, 0))[1]
        return tf.cond(x > 0, lambda: steps, lambda: tf.constant(-1))
    for start in (6, 27, 1, -3):
        v, n = float(start), 0
        while v > 1:
            v, n = (v / 2 if v % 2 == 0 else 3 * v + 1), n + 1
        assert int(both(build, {"p": np.float32(start)})) == (n if start > 0 else -1)


def test_cond_errors_name_the_cond_and_the_line():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3], name="x")
        with pytest.raises(tf.FragflowError, match=r"cond 'cond' \(.*test_cf_cond_scan\.py:"
                           r"\d+\): its true branch returns \(\., \.\) and its false branch "
                           r"\."):
            tf.cond(x[0] > 0, lambda: (x, x), lambda: x)
        with pytest.raises(tf.DTypeError, match=r"cond 'c2' \(.*test_cf_cond_scan\.py:\d+\)"
                           r".*true branch returns float32 and the false branch int32"):
            tf.cond(x[0] > 0, lambda: x, lambda: tf.cast(x, tf.int32), name="c2")
        with pytest.raises(tf.DTypeError, match=r"cond 'cond' \(.*test_cf_cond_scan\.py:"
                           r"\d+\): its predicate must be a bool scalar"):
            tf.cond(x[0], lambda: x, lambda: x)
        with pytest.raises(tf.ShapeError, match=r"predicate must be a scalar"):
            tf.cond(x > 0, lambda: x, lambda: x)
        with pytest.raises(tf.ShapeError, match=r"true branch returns shape \(3,\) and the "
                           r"false branch \(2,\)"):
            tf.cond(x[0] > 0, lambda: x, lambda: x[:2])


def test_a_python_bool_predicate_is_a_constant():
    assert float(both(lambda: tf.cond(False, lambda: tf.constant(1.0),
                                      lambda: tf.constant(2.0)))) == 2.0


# -- scan and its relatives -----------------------------------------------------------------
def _scan_reference(fn, elems, init, reverse=False):
    order = range(len(elems) - 1, -1, -1) if reverse else range(len(elems))
    acc, out = init, [None] * len(elems)
    for i in order:
        acc = fn(acc, elems[i])
        out[i] = acc
    return np.stack(out)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_with_an_initializer(reverse):
    def build():
        x, w = _xw()
        return tf.scan(lambda a, e: tf.tanh(a * w + e), x, initializer=tf.zeros([3]),
                       reverse=reverse)
    want = _scan_reference(lambda a, e: np.tanh(a * W + e), X, np.zeros(3, np.float32),
                           reverse)
    np.testing.assert_allclose(both(build, {"x": X, "w": W}), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_without_an_initializer_starts_from_the_first_element(reverse):
    def build():
        x, _ = _xw()
        return tf.scan(lambda a, e: a * 0.5 + e, x, reverse=reverse)
    rows = X[::-1] if reverse else X
    acc, want = rows[0], [rows[0]]
    for e in rows[1:]:
        acc = acc * 0.5 + e
        want.append(acc)
    want = np.stack(want)[::-1] if reverse else np.stack(want)
    np.testing.assert_allclose(both(build, {"x": X}), want, rtol=1e-6)


def test_scan_of_nested_elems_and_accumulators():
    def build():
        x, w = _xw()
        n = tf.placeholder(tf.int32, [None], name="n")
        return tf.scan(lambda acc, e: {"s": acc["s"] + e[0], "c": acc["c"] + e[1]},
                       (x, n), initializer={"s": tf.zeros([3]), "c": tf.constant(0)})
    nb = np.arange(5, dtype=np.int32)
    out = both(build, {"x": X, "n": nb, "w": W})
    np.testing.assert_allclose(out["s"], np.cumsum(X, axis=0), rtol=1e-6)
    np.testing.assert_array_equal(out["c"], np.cumsum(nb))


def test_a_scan_of_zero_elements_stacks_nothing():
    def build():
        x, w = _xw()
        return tf.scan(lambda a, e: a + e * w, x, initializer=tf.ones([3])), \
            tf.foldl(lambda a, e: a + e, x, initializer=tf.ones([3]))
    stacked, folded = both(build, {"x": np.zeros((0, 3), np.float32), "w": W})
    assert stacked.shape == (0, 3)
    np.testing.assert_array_equal(folded, np.ones(3))


def test_map_fn_over_rows_and_nested_outputs():
    def build():
        x, w = _xw()
        return tf.map_fn(lambda r: (tf.reduce_sum(r * w), r[::-1]), x)
    dots, flipped = both(build, {"x": X, "w": W})
    np.testing.assert_allclose(dots, (X * W).sum(axis=1), rtol=1e-5)
    np.testing.assert_array_equal(flipped, X[:, ::-1])


def test_foldl_and_foldr():
    def build():
        x, _ = _xw()
        return (tf.foldl(lambda a, e: a * 2.0 + e, x),
                tf.foldr(lambda a, e: a * 2.0 + e, x),
                tf.foldl(lambda a, e: a - e, x, initializer=tf.ones([3])))
    left, right, minus = both(build, {"x": X})
    acc = X[0]
    for e in X[1:]:
        acc = acc * 2 + e
    np.testing.assert_allclose(left, acc, rtol=1e-5)
    acc = X[-1]
    for e in X[-2::-1]:
        acc = acc * 2 + e
    np.testing.assert_allclose(right, acc, rtol=1e-5)
    np.testing.assert_allclose(minus, 1 - X.sum(axis=0), rtol=1e-5)


@pytest.mark.parametrize("lower, upper", [(0, 4), (2, 7), (3, 3), (5, 1)])
def test_fori_loop_counted_and_with_tensor_bounds(lower, upper):
    def body(i, v):
        return v * 0.5 + tf.cast(i, tf.float32)

    def build():
        _, w = _xw()
        lo = tf.placeholder(tf.int32, [], name="lo")
        return (tf.fori_loop(lower, upper, body, w),
                tf.fori_loop(lo, upper, body, w))
    v = W.copy()
    for i in range(lower, upper):
        v = v * np.float32(0.5) + np.float32(i)
    counted, bounded = both(build, {"w": W, "lo": np.int32(lower)})
    np.testing.assert_allclose(counted, v, rtol=1e-6)
    np.testing.assert_allclose(bounded, v, rtol=1e-6)


def test_a_counted_loop_is_a_scan_and_a_tensor_bound_a_while_loop():
    g = tf.Graph()
    with g.as_default():
        lo = tf.placeholder(tf.int32, [], name="lo")
        a = tf.fori_loop(0, 3, lambda i, v: v + 1.0, tf.zeros([2]))
        b = tf.fori_loop(lo, 3, lambda i, v: v + 1.0, tf.zeros([2]))
    assert a.op.op == "scan" and a.op.attrs["length"] == 3
    assert b.op.op == "while_loop"


def test_scan_errors_name_the_scan_and_the_line():
    g = tf.Graph()
    with g.as_default():
        x, _ = _xw()
        with pytest.raises(tf.FragflowError, match=r"scan 'scan' \(.*test_cf_cond_scan\.py:"
                           r"\d+\): fn returns \(\., \.\) but the accumulator is \."):
            tf.scan(lambda a, e: (a, e), x, initializer=tf.zeros([3]))
        with pytest.raises(tf.ShapeError, match=r"scan 'scan' \(.*test_cf_cond_scan\.py:"
                           r"\d+\).*carried value 0 has shape \(3,\) before an iteration "
                           r"and \(2,\)"):
            tf.scan(lambda a, e: a[:2], x, initializer=tf.zeros([3]))
        with pytest.raises(tf.ShapeError, match=r"elems of different lengths \[2, 3\]"):
            tf.map_fn(lambda e: e[0] + e[1], (tf.zeros([2]), tf.zeros([3])))


def test_a_one_tensor_list_comes_back_bare_unless_strict():
    def build(strict):
        return lambda: tf.cond(tf.constant(True), lambda: [tf.constant(1.0)],
                               lambda: [tf.constant(2.0)], strict=strict)
    assert float(run(build(False))) == 1.0
    assert [float(v) for v in run(build(True))] == [1.0]


# -- case and switch_case (nested conds) ---------------------------------------------------
def test_case_takes_the_first_true_predicate_else_the_default():
    def build():
        x = tf.placeholder(tf.float32, [], name="p")
        return tf.case([(x < 0.0, lambda: x * 10.0), (x < 5.0, lambda: x + 100.0)],
                       default=lambda: tf.constant(-1.0)), \
            tf.case([(x < 0.0, lambda: [x * 10.0]), (x < 5.0, lambda: [x + 100.0])])
    for p, first, second in ((-2.0, -20.0, -20.0), (3.0, 103.0, 103.0),
                             (9.0, -1.0, 109.0)):
        got = both(build, {"p": np.float32(p)})
        assert [float(v) for v in got] == [first, second]


@pytest.mark.parametrize("index, want", [(0, 1.0), (1, 2.0), (2, 3.0), (7, -1.0),
                                         (-1, -1.0)])
def test_switch_case_runs_the_indexed_branch_else_the_default(index, want):
    def build():
        i = tf.placeholder(tf.int32, [], name="i")
        return (tf.switch_case(i, [lambda: tf.constant(1.0), lambda: tf.constant(2.0),
                                   lambda: tf.constant(3.0)],
                               default=lambda: tf.constant(-1.0)),
                tf.switch_case(i, {0: lambda: tf.constant(5), 3: lambda: tf.constant(6)}))
    got, no_default = both(build, {"i": np.int32(index)})
    assert float(got) == want
    assert int(no_default) == (5 if index == 0 else 6)


def test_switch_case_needs_an_int32_scalar_index():
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(tf.FragflowError, match=r"switch_case 'switch_case' \(.*"
                           r"test_cf_cond_scan\.py:\d+\): branch_index must be an int32 "
                           r"scalar"):
            tf.switch_case(tf.constant(1.0), [lambda: tf.constant(1.0)])
