"""The passes and side effects in loops and branches (issue 31): each pass on its own
(the numpy executor on the graph as built against the graph after that one pass) must
not merge, hoist, drop or duplicate an assign, a random draw or a print. TensorFlow's
rule they keep: every side effect in a body happens once per iteration, in a branch
only when it is taken, whatever the graph optimizer does."""
import io

import numpy as np
import pytest

import fragflow as tf
from fragflow.runtime import driver
from tests.reference import reference_session


def _effects(build, passes, feeds_list):
    """Run build()'s graph on the numpy executor with `passes` (None: the default
    pipeline) over feeds_list: (each run's fetches, the variables after, what printed)."""
    stream = io.StringIO()
    g = tf.Graph()
    with g.as_default():
        fetches, variables, feeds = build(stream)
    out = []
    with tf.Session(g, backend="numpy", passes=passes) as sess:
        for f in feeds_list:
            out.append(sess.run(fetches, {feeds[k]: v for k, v in f.items()}))
        values = sess.run(variables)
    return out, values, stream.getvalue()


def _same(build, name, feeds_list=({},)):
    """The graph as built and after pass `name` alone have the same effects."""
    before = _effects(build, [], feeds_list)
    after = _effects(build, [name], feeds_list)
    for a, b in zip(before[0] + [before[1]], after[0] + [after[1]]):
        for x, y in zip(a if isinstance(a, list) else [a], b if isinstance(b, list) else [b]):
            np.testing.assert_array_equal(x, y)
    assert before[2] == after[2]
    return before


def _twins(stream):
    """Two identical loops and, in one body, identical prints and draws: CSE's bait."""
    v = tf.Variable(0.0, name="v")

    def body(i, acc):
        tf.print("tick", i, output_stream=stream)
        tf.print("tick", i, output_stream=stream)
        a = tf.random.uniform([3], seed=5)
        b = tf.random.uniform([3], seed=5)
        v.assign_add(1.0)
        return i + 1, acc + a - b
    loops = [tf.while_loop(lambda i, a: i < 2, body, (0, tf.zeros([3])))[1]
             for _ in range(2)]
    return loops, [v], {}


def test_cse_merges_no_print_draw_or_assign():
    outs, (v,), printed = _same(_twins, "cse")
    assert printed == "tick 0\ntick 0\ntick 1\ntick 1\n" * 2       # both loops, twice
    assert np.abs(outs[0][0]).max() > 0          # two draws of one seed: two streams
    assert v == 4.0                              # the second loop after the first: +4


def _constant_loop(stream):
    """Every input a constant: folding may compute the loop before any run."""
    count = tf.Variable(0, name="count")

    def body(i):
        tf.print("i =", i, output_stream=stream)
        count.assign_add(i)
        return i + 1
    return [tf.while_loop(lambda i: i < 3, body, [0])], [count], {}


def test_folding_keeps_each_runs_prints_and_assigns():
    outs, (count,), printed = _same(_constant_loop, "fold_constants", ({}, {}))
    assert printed == "i = 0\ni = 1\ni = 2\n" * 2                  # every run prints
    assert count == 6                                              # 0+1+2, twice


def _unused_effects(stream):
    """A body whose assign and print feed nothing it returns; the fetch reads only the
    loop's result."""
    v = tf.Variable(1.0, name="v")
    x = tf.placeholder(tf.float32, [], name="x")

    def body(i):
        v.assign(v * x)
        tf.print("body", i, output_stream=stream)
        return i + 1
    n = tf.while_loop(lambda i: i < 3, body, [0])
    tf.while_loop(lambda i: i < 3, lambda i: (tf.print("never", output_stream=stream),
                                              i + 1)[1], [0])          # not fetched
    return [n], [v], {"x": x}


def test_pruning_keeps_effects_the_fetch_does_not_read():
    # prune (every Session runs it, then the pipeline sweeps dead nodes in bodies) cuts
    # the graph to what the fetch needs: the loop's assign and print stay, the loop
    # not fetched runs nothing (TF1: an op not fetched does not run)
    for passes in ([], None):
        _, (v,), printed = _effects(_unused_effects, passes, ({"x": 2.0},))
        assert printed == "body 0\nbody 1\nbody 2\n", passes
        assert v == 8.0, passes


@pytest.mark.parametrize("taken", [True, False])
def test_select_conds_keeps_a_branchs_effects_to_the_branch_taken(taken):
    def build(stream):
        p = tf.placeholder(tf.bool, [], name="p")
        x = tf.placeholder(tf.float32, [3], name="x")
        v = tf.Variable(0.0, name="v")
        k = tf.Variable(0, name="k")

        def yes():
            tf.print("taken", output_stream=stream)
            k.assign_add(1)
            return v.assign_add(2.0) + x

        y = tf.cond(p, yes, lambda: x * 3.0)
        return [y], [v, k], {"p": p, "x": x}
    feeds = ({"p": taken, "x": np.float32([1, 2, 3])},)
    outs, (v, k), printed = _same(build, "select_conds", feeds)
    assert (v, k, printed) == ((2.0, 1, "taken\n") if taken else (0.0, 0, ""))
    # and the cond did become a select: no cond node is left
    g = tf.Graph()
    with g.as_default():
        (y,), _, feeds_ = build(io.StringIO())
    opt = driver.optimize(g, [y.value], {f.value: f.value.type for f in feeds_.values()},
                          passes=["select_conds"])
    assert not any(n.op == "cond" for n in opt.graph.nodes)


def test_the_default_pipeline_on_gl_keeps_every_effect(gl):
    stream = io.StringIO()
    g = tf.Graph()
    with g.as_default():
        loops, (v,), _ = _twins(stream)
    with reference_session(g) as ref:
        want = ref.run(loops)
        want_v = ref.run(v)
    expected = stream.getvalue()
    stream.seek(0)
    stream.truncate()
    with tf.Session(g) as sess:
        got = sess.run(loops)
        assert sess.run(v) == want_v
    assert stream.getvalue() == expected
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
