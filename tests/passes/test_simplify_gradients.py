"""simplify/fold_constants make the gradients' zeros_like/ones_like of static shapes
constants (no kernel), and fold what that leaves with constant inputs only. Results are
compared with the numpy executor running the graph without those passes."""
import numpy as np
import pytest

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


@pytest.mark.parametrize("ksize, strides, padding", [(2, 2, "VALID"), (3, 2, "SAME"),
                                                     (3, 1, "SAME"), (2, 1, "VALID")])
def test_relu_mask_moves_before_max_pool_grad(gl, ksize, strides, padding):
    """relu -> max_pool: the ReLU's gradient mask is applied to the pool's dy (pooled
    size) instead of after max_pool_grad, with the same gradients: ties at zero (whole
    windows of negatives), overlapping windows, SAME padding, odd sizes, batch 1."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 7, 5, 3), name="x")
        p = ff.max_pool(ff.relu(x), ksize, strides, padding=padding)
        up = ff.placeholder(p.shape, name="up")
        loss = ff.reduce_sum(p * up)
        (dx,) = ff.gradients(loss, [x])
    rng = np.random.default_rng(ksize * 10 + strides)
    xb = rng.standard_normal((1, 7, 5, 3)).astype(np.float32)
    xb[0, :3, :3, 0] = -1.0                            # a window of negatives: ties at 0
    xb[0, 4:, :, 1] = 0.0                              # zeros
    xb[0, 2, 2, 2] = xb[0, 2, 3, 2] = 0.75             # a tie above zero
    upb = rng.uniform(-2, 2, p.shape).astype(np.float32)
    feeds = {x: xb, up: upb}
    ops = _ops_after_passes(g, [dx], feeds)
    assert ops[-1] == "max_pool_grad", ops           # no mask after it: before it
    want = ff.Session(g, backend="numpy", passes=NO_SIMPLIFY).run(dx, feeds)
    for sess in (ff.Session(g), ff.Session(g, backend="numpy")):
        # (overlapping windows sum their dy in another order: an ulp)
        np.testing.assert_allclose(sess.run(dx, feeds), want, rtol=1e-6, atol=1e-7)


def test_relu_mask_stays_after_a_max_pool_grad_used_elsewhere(gl):
    """Fetching the gradient at the ReLU's output too (the max_pool_grad itself): the
    rewrite would compute max_pool_grad twice, so the mask stays where it was."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 4, 4, 2), name="x")
        r = ff.relu(x)
        p = ff.max_pool(r, 2, 2)
        loss = ff.reduce_sum(p * p)
        (dr,), (dx,) = ff.gradients(loss, [r]), ff.gradients(loss, [x])   # cse: one
    xb = np.random.default_rng(3).standard_normal((2, 4, 4, 2)).astype(np.float32)
    ops = _ops_after_passes(g, [dr, dx], {x: xb})
    assert ops.count("max_pool_grad") == 1, ops
    want = ff.Session(g, backend="numpy", passes=NO_SIMPLIFY).run([dr, dx], {x: xb})
    for got_one, want_one in zip(ff.Session(g).run([dr, dx], {x: xb}), want):
        np.testing.assert_array_equal(got_one, want_one)
