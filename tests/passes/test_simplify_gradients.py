"""simplify/fold_constants make the gradients' zeros_like/ones_like of static shapes
constants (no kernel), and fold what that leaves with constant inputs only. Results are
compared with the numpy executor running the graph without those passes."""
import numpy as np

import fragflow as ff

NO_SIMPLIFY = ["verify"]


def _ops_after_passes(graph, fetches, feeds=None):
    """The ops of the compiled graph; feeds: {placeholder: value} fixing the shapes."""
    feeds = feeds or {}
    fn = ff.Session(graph, backend="numpy").compile(fetches, feeds=list(feeds))
    fn(*feeds.values())
    return [node.op for node in fn.graph.nodes]


def test_gradient_seeds_and_accumulators_become_constants():
    g = ff.Graph()
    with g.as_default():
        x = ff.Variable(np.linspace(-1, 1, 10).astype(np.float32).reshape(2, 5), name="x")
        b = ff.Variable(np.ones(5, np.float32), name="b")
        loss = ff.reduce_mean(ff.square(ff.tanh(x + b)))
        grads = ff.gradients(loss, [x, b])
    ops = _ops_after_passes(g, grads)
    assert "ones_like" not in ops and "zeros_like" not in ops, ops


def test_gradients_equal_without_the_passes(gl):
    rng = np.random.default_rng(0)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 6), name="x")
        w = ff.Variable(rng.standard_normal((6, 3)).astype(np.float32), name="w")
        b = ff.Variable(rng.standard_normal(3).astype(np.float32), name="b")
        labels = ff.placeholder((4,), "int32", name="labels")
        loss = ff.reduce_mean(ff.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=ff.relu(x @ w) + b))
        grads = ff.gradients(loss, [w, b, x])
    feeds = {x: rng.standard_normal((4, 6)).astype(np.float32),
             labels: np.int32([0, 2, 1, 2])}
    want = ff.Session(g, backend="numpy", passes=NO_SIMPLIFY).run([loss, *grads], feeds)
    for sess in (ff.Session(g), ff.Session(g, backend="numpy")):
        for got_one, want_one in zip(sess.run([loss, *grads], feeds), want):
            np.testing.assert_allclose(got_one, want_one, rtol=1e-5, atol=1e-6)


def test_zeros_like_of_nan_and_of_unknown_shapes(gl):
    """zeros_like(NaN) is 0 and 0 * NaN stays NaN; a None dimension is fixed by the feed
    (the run's graph is specialised to it), so that graph folds too."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 3), name="x")
        fixed = ff.placeholder((2, 3), name="fixed")
        y = ff.zeros_like(x) + ff.ones_like(x) * 2.0
        z = ff.zeros_like(fixed) * fixed + ff.ones_like(fixed)
    feeds = {x: np.float32([[np.nan, 1, -np.inf]]),
             fixed: np.float32([[np.nan, 1, 2], [0, -0.0, 3]])}
    want = ff.Session(g, backend="numpy", passes=NO_SIMPLIFY).run([y, z], feeds)
    assert _ops_after_passes(g, [y], feeds={x: feeds[x]}) == ["constant"]
    for got_one, want_one in zip(ff.Session(g).run([y, z], feeds), want):
        np.testing.assert_array_equal(got_one, want_one)
