"""Control flow on GL keeps its values on the GPU (runtime/control_flow.py): uploads
and readbacks counted with a spy on the textures' upload and readback, per iteration
(the difference between two trip counts) and per stage; memory flat over 10,000
iterations; results against the numpy executor running the graph as built."""
import numpy as np
import pytest

import fragflow as tf
from fragflow.runtime import control_flow as cf
from tests.control_flow.helpers import check_close, count_calls, graph_of

RNG = np.random.default_rng(25)


@pytest.fixture
def trips(gl, monkeypatch):
    """Counts of texture uploads and readbacks (every one the runtime makes), and of
    the GPU copies control flow draws instead."""
    from fragflow.runtime import gl_resources
    counts = {"uploads": 0, "readbacks": 0, "copies": 0}
    count_calls(monkeypatch, gl_resources.Texture, "upload", counts, "uploads")
    count_calls(monkeypatch, gl_resources.Texture, "readback", counts, "readbacks")
    count_calls(monkeypatch, cf._GPUCopy, "_draw", counts, "copies")
    return counts


def _session(build, shapes):
    return graph_of(build, shapes, "trips")


def _counted(trips, sess, fetches, feed):
    """One run's results and its counts (after a first run that built the plans)."""
    sess.run(fetches, feed)
    trips.update(uploads=0, readbacks=0, copies=0)
    out = sess.run(fetches, feed)
    return out, dict(trips)


_check = check_close


def _scan_rnn(x, w):
    """A scan with slices and ys whose sizes are not multiples of 4 (texels shared by
    two steps), a second elems of int32, a second ys of int32 and a reverse scan."""
    k = tf.cast(x[:, 0, 0] * 10.0, tf.int32)
    ys, counts = tf.scan(lambda acc, e: (tf.tanh(tf.matmul(e[0], w) + acc[0]),
                                         acc[1] + e[1]),
                         (x, k), initializer=(tf.zeros((3, 7)), tf.constant(1)))
    back = tf.scan(lambda a, e: a * 0.5 + e, x, reverse=True)
    return [ys, counts, back, tf.reduce_sum(ys, axis=0) * 2.0]


@pytest.mark.parametrize("steps", [1, 5, 37])
def test_a_scan_uploads_and_reads_back_nothing_per_step(trips, steps):
    g, feeds, fetches = _session(_scan_rnn, {"x": (tf.float32, (steps, 3, 5)),
                                             "w": (tf.float32, (5, 7))})
    feed = {feeds["x"]: RNG.normal(size=(steps, 3, 5)).astype(np.float32),
            feeds["w"]: RNG.normal(size=(5, 7)).astype(np.float32)}
    want = tf.Session(g, backend="numpy", passes=[]).run(fetches, feed)
    with tf.Session(g) as sess:
        got, counts = _counted(trips, sess, fetches, feed)
    _check(got, want)
    # each feed once (x by the scans that read it; w once); one readback per fetch
    assert counts["readbacks"] == len(fetches)
    assert counts["uploads"] <= 4
    assert counts["copies"] >= steps * 3         # the slices and ys, on the GPU


def test_per_step_counts_do_not_grow_with_the_steps(trips):
    counts = []
    for steps in (4, 40):
        g, feeds, fetches = _session(_scan_rnn, {"x": (tf.float32, (steps, 3, 5)),
                                                 "w": (tf.float32, (5, 7))})
        feed = {feeds["x"]: RNG.normal(size=(steps, 3, 5)).astype(np.float32),
                feeds["w"]: RNG.normal(size=(5, 7)).astype(np.float32)}
        with tf.Session(g) as sess:
            counts.append(_counted(trips, sess, fetches, feed)[1])
    assert counts[0]["uploads"] == counts[1]["uploads"]
    assert counts[0]["readbacks"] == counts[1]["readbacks"]


def _loops(x, n):
    """The loops whose textures cannot swap: a body returning a variable unchanged and
    swapping two, and a loop nested in a body."""
    swapped = tf.while_loop(lambda i, a, b, c: i < n, lambda i, a, b, c: (i + 1, b, a, c),
                            (0, x, x * 2.0, x))

    def outer(i, acc):
        _, inner = tf.while_loop(lambda j, a: j < 3, lambda j, a: (j + 1, a * 0.5 + 1.0),
                                 (0, acc))
        return i + 1, inner
    nested = tf.while_loop(lambda i, a: i < n, outer, (0, x))
    return [list(swapped), list(nested)]


@pytest.mark.parametrize("part, reads_per_iteration", [(0, 1), (1, 1 + 4)])
def test_fallback_loops_copy_on_the_gpu(trips, part, reads_per_iteration):
    g, feeds, fetches = _session(_loops, {"x": (tf.float32, (5, 3)),
                                          "n": (tf.int32, ())})
    fetches = fetches[part]
    ref = tf.Session(g, backend="numpy", passes=[])
    counts = []
    with tf.Session(g) as sess:
        for n in (3, 13):
            feed = {feeds["x"]: RNG.normal(size=(5, 3)).astype(np.float32),
                    feeds["n"]: np.int32(n)}
            got, c = _counted(trips, sess, fetches, feed)
            _check(got, ref.run(fetches, feed))
            counts.append(c)
    # per iteration: no upload, only the predicates' readbacks (the inner loop's four)
    assert counts[1]["uploads"] == counts[0]["uploads"]
    assert counts[1]["readbacks"] - counts[0]["readbacks"] == 10 * reads_per_iteration
    assert counts[1]["copies"] > counts[0]["copies"]


def test_stages_hand_textures_over_and_compute_upstream_once(trips):
    def build(x, n):
        u = tf.exp(tf.matmul(x, tf.transpose(x))) * 0.01    # upstream work, read thrice
        r = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 0.5 + u), (0, u))[1]
        # a reduction in a branch: a cond, not a select (passes/cond_select.py)
        c = tf.cond(tf.reduce_sum(r) > 0, lambda: r + tf.reduce_max(u), lambda: r - u)
        return [c * 2.0 + u]
    g, feeds, fetches = _session(build, {"x": (tf.float32, (5, 3)), "n": (tf.int32, ())})
    x = RNG.normal(size=(5, 3)).astype(np.float32)
    ref = tf.Session(g, backend="numpy", passes=[])
    with tf.Session(g) as sess:
        fn = sess.compile(fetches, feeds=[feeds["x"], feeds["n"]])
        for n in (4, 0):
            fn(x, np.int32(n))
            trips.update(uploads=0, readbacks=0, copies=0)
            got = fn(x, np.int32(n))
            _check(got, ref.run(fetches, {feeds["x"]: x, feeds["n"]: np.int32(n)}))
            # x and n uploaded once; read back: the loop's tests, the cond's
            # predicate and the fetch; nothing between the stages
            assert trips["uploads"] == 2
            assert trips["readbacks"] == (n + 1) + 1 + 1
        # the matmul runs in one stage only, not in each stage that reads u
        subs = fn._last.plan._plans.values()
        matmuls = [k for sub in subs for k in getattr(sub.plan, "kernels", ())
                   if "matmul" in k.op]
    assert len(matmuls) == 1


def test_memory_is_flat_over_ten_thousand_iterations(gl):
    def build(x, n, e):
        swapped = tf.while_loop(lambda i, a, b: i < n, lambda i, a, b: (i + 1, b, a),
                                (0, x, x * 2.0))
        scanned = tf.scan(lambda a, r: a * 0.5 + r, e)
        return [swapped[1], scanned[-1]]
    g, feeds, fetches = _session(build, {"x": (tf.float32, (5, 3)), "n": (tf.int32, ()),
                                         "e": (tf.float32, (None, 3))})
    x = RNG.normal(size=(5, 3)).astype(np.float32)
    held = []
    for steps in (10, 10_000):
        feed = {feeds["x"]: x, feeds["n"]: np.int32(steps),
                feeds["e"]: np.tile(x[:1], (steps, 1))}
        with tf.Session(g) as sess:
            sess.run(fetches, feed)
            held.append(sess.memory()["textures"])
            got = sess.run(fetches, feed)
            held.append(sess.memory()["textures"])
        np.testing.assert_allclose(got[0], x, rtol=1e-6)
        np.testing.assert_allclose(got[1], x[0] * (2.0 - 0.5 ** (steps - 1)), rtol=1e-5)
    assert held == [held[0]] * 4          # the same textures for 10 and 10,000 steps


def test_texel_draws_cover_a_range_exactly():
    for lo in range(0, 13):
        for hi in range(lo + 1, 18):
            written = set()
            for tlo, thi, mask in cf._texel_draws(lo, hi):
                for t in range(tlo, thi):
                    for c in range(4):
                        if mask[c]:
                            assert 4 * t + c not in written
                            written.add(4 * t + c)
            assert written == set(range(lo, hi)), (lo, hi)


def test_sub_plans_a_run_hands_on_are_not_released_under_it(gl, monkeypatch):
    """With room for one sub-plan, a run's stages, loops and branches still keep the
    textures they handed on until the run ends; the loop growing under
    shape_invariants (the host's path) has its plans released as it goes."""
    monkeypatch.setattr(cf, "MAX_SUB_PLANS", 1)

    def build(x, n):
        u = tf.tanh(x) * 2.0
        r = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 0.5 + u), (0, u))[1]
        s = tf.scan(lambda a, e: a * 0.5 + e, r)
        c = tf.cond(tf.reduce_sum(s) > 0, lambda: s + tf.reduce_mean(u), lambda: s - u)
        grown = tf.while_loop(lambda v: tf.size(v) < 40, lambda v: tf.concat([v, v], 0),
                              [x[0]], shape_invariants=[tf.TensorShape([None])])
        return [c * 2.0 + u, grown]
    g, feeds, fetches = _session(build, {"x": (tf.float32, (5, 3)), "n": (tf.int32, ())})
    feed = {feeds["x"]: RNG.normal(size=(5, 3)).astype(np.float32),
            feeds["n"]: np.int32(3)}
    want = tf.Session(g, backend="numpy", passes=[]).run(fetches, feed)
    with tf.Session(g) as sess:
        for _ in range(2):
            _check(sess.run(fetches, feed), want)
        fn = sess.compile(fetches, feeds=[feeds["x"], feeds["n"]])
        fn(feed[feeds["x"]], np.int32(3))
        loops = [key[1] for key in fn._last.plan._plans if key[0] == "while"]
    assert len(loops) == len(set(loops)) == 2    # one plan each: not one per shape
