"""Gradients of the conv family against float64 central finite differences, on GL
(tests/gradcheck.py), at small sizes (<= ~100 elements per input).

The rules are TensorFlow's: conv2d's gradients are conv2d_backprop_input and
conv2d_backprop_filter, whose own gradients are conv2d and the backprop ops again (so
second order works through a conv net); the same for conv3d and depthwise_conv2d.
max_pool's gradient is max_pool_grad (dy to the first argmax), whose gradient in dy is
max_pool_grad_grad (a gather at the argmax), whose gradient is max_pool_grad; likewise
min_pool_grad / min_pool_grad_grad and max_pool3d_grad / max_pool3d_grad_grad.
avg_pool_grad (and avg_pool3d_grad) is linear; its gradient is avg_pool.
dilation2d's gradients are dilation2d_backprop_input / dilation2d_backprop_filter
(first order only: their own gradients raise GradientError).

Pools and dilation are fed values without near-ties, so a difference of eps never
moves an argmax. Squares (f = op(...)^2) make the second-order checks non-trivial:
the gradient then depends on the inputs through dy.
"""
import numpy as np
import pytest

import fragflow as ff
from fragflow.frontend.tensor import wrap
from fragflow.ir.ops import conv as _conv
from tests.gradcheck import check_gradients, evaluator64

rng = np.random.default_rng(3)


def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def distinct(*shape):
    """Values at least 0.05 apart (no argmax moves under a finite difference)."""
    n = int(np.prod(shape))
    return (rng.permutation(n).reshape(shape) * 0.05 - n * 0.025).astype(np.float32)


def test_conv2d_gradients_first_and_second_order(gl):
    # second order runs conv2d_backprop_input's and conv2d_backprop_filter's rules
    check_gradients(lambda x, w: ff.square(ff.conv2d(x, w, strides=2, padding="SAME")),
                    {"x": normal(1, 5, 4, 2), "w": normal(3, 2, 2, 3)}, second_order=True)


def test_conv2d_dilated_explicit_padding_gradients(gl):
    check_gradients(lambda x, w: ff.conv2d(x, w, padding=[[1, 0], [2, 1]], dilations=2),
                    {"x": normal(2, 5, 5, 2), "w": normal(2, 2, 2, 4)})


def test_conv2d_backprop_ops_gradients_second_order(gl):
    """conv2d_transpose is conv2d_backprop_input; conv2d_backprop_filter is called
    through the ir builder (users reach it through ff.gradients)."""
    check_gradients(lambda dy, w: ff.conv2d_transpose(
        dy, w, [1, 5, 5, 2], strides=2, padding="SAME"),
        {"dy": normal(1, 3, 3, 3), "w": normal(2, 2, 2, 3)}, second_order=True)
    check_gradients(lambda x, dy: wrap(_conv.conv_backprop_filter(
        "conv2d", x.value, dy.value, (2, 3), strides=1, padding="VALID")),
        {"x": normal(1, 4, 5, 2), "dy": normal(1, 3, 3, 2)}, second_order=True)


def test_conv3d_gradients_second_order(gl):
    # through conv3d_backprop_input and conv3d_backprop_filter
    check_gradients(lambda x, w: ff.square(ff.conv3d(x, w, strides=[1, 2, 1],
                                                     padding="SAME")),
                    {"x": normal(1, 3, 4, 3, 2), "w": normal(2, 2, 2, 2, 2)},
                    second_order=True)


def test_depthwise_conv2d_gradients_second_order(gl):
    # through depthwise_conv2d_backprop_input and depthwise_conv2d_backprop_filter
    check_gradients(lambda x, w: ff.square(ff.depthwise_conv2d(x, w, strides=2,
                                                               padding="SAME")),
                    {"x": normal(1, 5, 5, 2), "w": normal(3, 3, 2, 2)}, second_order=True)


def test_composite_convs_gradients(gl):
    check_gradients(lambda x, w: ff.conv1d(x, w, stride=2, padding="SAME"),
                    {"x": normal(2, 7, 3), "w": normal(3, 3, 2)})
    check_gradients(lambda x, dw, pw: ff.separable_conv2d(x, dw, pw, padding="SAME"),
                    {"x": normal(1, 4, 4, 2), "dw": normal(2, 2, 2, 2),
                     "pw": normal(1, 1, 4, 3)})


@pytest.mark.parametrize("op, shape, ksize, strides, padding", [
    ("max_pool", (1, 5, 5, 2), 3, 2, "SAME"),
    ("min_pool", (2, 4, 5, 1), [2, 3], [2, 1], "VALID"),
    ("avg_pool", (1, 5, 4, 2), 3, 2, "SAME"),
    ("max_pool3d", (1, 3, 4, 3, 2), 2, 2, "SAME"),
    ("avg_pool3d", (1, 3, 4, 3, 2), 2, [1, 2, 1], "VALID"),
])
def test_pool_gradients_second_order(gl, op, shape, ksize, strides, padding):
    """max_pool_grad / max_pool_grad_grad, min_pool_grad / min_pool_grad_grad,
    max_pool3d_grad / max_pool3d_grad_grad, avg_pool_grad, avg_pool3d_grad."""
    fn = getattr(ff, op)
    check_gradients(lambda x: ff.square(fn(x, ksize, strides, padding)),
                    {"x": distinct(*shape)}, second_order=True)


def test_dilation2d_gradients(gl):
    # dilation2d_backprop_input and dilation2d_backprop_filter route dy to the argmax
    check_gradients(lambda x, w: ff.dilation2d(x, w, strides=2, padding="SAME",
                                               dilations=1),
                    {"x": distinct(1, 5, 5, 2), "w": distinct(2, 2, 2) * 0.01})


def test_dilation2d_second_order_is_reported_as_missing():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 4, 4, 1))
        w = ff.placeholder((2, 2, 1))
        (dx,) = ff.gradients(ff.sum(ff.square(ff.dilation2d(x, w, 1, "SAME"))), [x])
        with pytest.raises(ff.GradientError, match="dilation2d_backprop_input.*not "
                                                   "implemented"):
            ff.gradients(ff.sum(dx), [x])


def test_hessian_vector_product_of_a_tiny_conv_net(gl):
    """H v of loss(w, b) = mean(max_pool(relu(conv2d(x, w) + b))) against central
    differences of its gradient along v (in float64 on the numpy executor). Its own
    seeded data: with the module's shared generator the data depended on which tests
    ran before in the same worker, and a relu kink or max_pool tie within eps of a
    point makes the central difference straddle two slopes."""
    local = np.random.default_rng(12)

    def normal(*shape):
        return local.standard_normal(shape).astype(np.float32)
    x_val = normal(2, 6, 6, 2)
    w_val, b_val = normal(3, 3, 2, 4) * 0.5, normal(4) * 0.1
    v_val, u_val = normal(3, 3, 2, 4), normal(4)
    g = ff.Graph()
    with g.as_default():
        x = ff.constant(x_val)
        w = ff.placeholder(w_val.shape, name="w")
        b = ff.placeholder(b_val.shape, name="b")
        h = ff.relu(ff.conv2d(x, w, padding="SAME") + b)
        loss = ff.mean(ff.square(ff.max_pool(h, 2, 2, "VALID")))
        gw, gb = ff.gradients(loss, [w, b])
        dot = ff.sum(gw * ff.constant(v_val)) + ff.sum(gb * ff.constant(u_val))
        hv_w, hv_b = ff.gradients(dot, [w, b])
    feeds = {w: w_val, b: b_val}
    with ff.Session(g) as sess:
        got_w, got_b = sess.run([hv_w, hv_b], feeds)
    eps = 1e-4
    grad_w = evaluator64(g, gw, feeds)
    grad_b = evaluator64(g, gb, feeds)
    plus = {w: w_val + eps * v_val, b: b_val + eps * u_val}
    minus = {w: w_val - eps * v_val, b: b_val - eps * u_val}
    want_w = (grad_w(plus) - grad_w(minus)) / (2 * eps)
    want_b = (grad_b(plus) - grad_b(minus)) / (2 * eps)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-3, atol=1e-4)
    assert np.abs(want_w).max() > 1e-2       # a Hessian that is not trivially zero
