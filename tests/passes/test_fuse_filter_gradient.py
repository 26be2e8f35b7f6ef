"""A conv2d filter's gradient takes an epilogue (passes/fusion.py with
ir/ops/fused.CONV_HEADS): SGD's update of the filter runs in the filter gradient's
kernel (the blocked kernel's stitch, or the generic kernel), not as a kernel of its own.
Against the numpy executor after training steps, and the fused node against the
unfused graph on GL: the blocked path (with image and row splits) and the generic one,
C and COUT % 4 != 0, stride 2, NaN in dy; Adam's gradients (three readers) stay
unfused."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches


def _tuning(blocked):
    return ff.Tuning().with_({"matmul.blocked_min_macs": 1 if blocked else 1 << 40})


def _step_kernels(sess, fetches, feeds):
    return [k.op for k in sess.compile(fetches, feeds=feeds).kernels]


@pytest.mark.parametrize("blocked", [True, False])
@pytest.mark.parametrize("x_shape, w_shape, strides", [
    ((64, 8, 8, 1), (3, 3, 1, 8), 1),          # W13's conv1 (row splits)
    ((16, 4, 4, 8), (3, 3, 8, 16), 1),         # W13's conv2 shape (image splits)
    ((3, 7, 5, 3), (3, 2, 3, 5), 2),           # awkward channels, stride 2
])
def test_sgd_update_in_the_filter_gradient_kernel(gl, blocked, x_shape, w_shape, strides):
    tuning = ff.Tuning().with_({"matmul.blocked_min_macs": 1 if blocked else 1 << 40})
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    x = rng.standard_normal(x_shape).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x_shape, name="x")
        w = ff.Variable(rng.standard_normal(w_shape).astype(np.float32) * 0.3, name="w")
        y = ff.conv2d(xp, w, strides=strides, padding="SAME")
        loss = ff.reduce_mean(ff.square(y - 0.5))
        step = ff.optim.SGD(0.1).minimize(loss)
    gl_sess = ff.Session(g, tuning=tuning)
    ref = ff.Session(g, backend="numpy", passes=[])
    ops = _step_kernels(gl_sess, [step, loss], [xp])
    assert "fused_conv2d_backprop_filter" + ("_stitch" if blocked else "") in ops, ops
    assert "fused(mul,sub)" not in ops, ops                         # no update kernel
    for _ in range(3):
        got = gl_sess.run([step, loss], {xp: x})[1]
        want = ref.run([step, loss], {xp: x})[1]
        assert_matches(np.float32(got), np.float32(want), rtol=1e-4, atol=1e-5)
    assert_matches(gl_sess.get(w), ref.get(w), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("blocked", [True, False])
def test_fused_filter_gradient_with_nan_dy_matches_unfused(gl, blocked):
    tuning = _tuning(blocked)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((4, 6, 6, 4)).astype(np.float32)
    w0 = rng.standard_normal((3, 3, 4, 8)).astype(np.float32)
    dy = rng.standard_normal((4, 6, 6, 8)).astype(np.float32)
    dy[0, 0, 0, 3] = np.nan
    g = ff.Graph()
    with g.as_default():
        xp, dyp = ff.placeholder(x.shape, name="x"), ff.placeholder(dy.shape, name="dy")
        w = ff.placeholder(w0.shape, name="w")
        dw = ff.gradients([ff.conv2d(xp, w, padding="SAME")], [w], grad_ys=[dyp])[0]
        new_w = w - 0.1 * dw
    feeds = {xp: x, dyp: dy, w: w0}
    with ff.Session(g, tuning=tuning) as sess:
        ops = _step_kernels(sess, [new_w], list(feeds))
        got = sess.run(new_w, feeds)
    assert ops[0] == "fused_conv2d_backprop_filter", ops
    with ff.Session(g, passes=["verify"], tuning=tuning) as plain:
        want = plain.run(new_w, feeds)
    assert np.isnan(want).any()
    assert_matches(got, want, rtol=1e-5, atol=1e-4)


def test_adam_keeps_its_gradient_unfused(gl):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((8, 5, 5, 2), name="x")
        w = ff.Variable(np.ones((3, 3, 2, 4), np.float32), name="w")
        loss = ff.reduce_sum(ff.conv2d(xp, w, padding="SAME"))
        step = ff.optim.Adam(1e-3).minimize(loss)
    with ff.Session(g) as sess:
        ops = _step_kernels(sess, [step], [xp])
    assert "conv2d_backprop_filter" in ops or "conv2d_backprop_filter_stitch" in ops, ops
