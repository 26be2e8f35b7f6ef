"""Gradients of softmax, log_softmax, reduce_logsumexp, cumsum, local_response_
normalization and the composites of frontend/ops_nn.py against float64 central finite
differences, on GL; second order where the op is twice differentiable here.

Tolerances as in test_basic_gradients.py: first order rtol 1e-3 / atol 1e-4, second
order 10x that."""
import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients

rng = np.random.default_rng(11)


def normal(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_gradient(gl, axis):
    check_gradients(lambda x: ff.softmax(x, axis), {"x": normal(3, 5)}, second_order=True)


@pytest.mark.parametrize("axis", [-1, 1])
def test_log_softmax_gradient(gl, axis):
    check_gradients(lambda x: ff.log_softmax(x, axis), {"x": normal(2, 3, 4)},
                    second_order=True)


@pytest.mark.parametrize("axis,keepdims", [(None, False), ((0, 2), True), (1, False)])
def test_logsumexp_gradient(gl, axis, keepdims):
    check_gradients(lambda x: ff.reduce_logsumexp(x, axis, keepdims),
                    {"x": normal(2, 3, 5, scale=2.0)}, second_order=True)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumsum_gradient(gl, exclusive, reverse):
    # cumsum is linear: the second order is zero, and checked once below
    check_gradients(lambda x: ff.cumsum(x, 1, exclusive, reverse), {"x": normal(3, 5)})


def test_cumsum_second_order_through_a_product(gl):
    check_gradients(lambda x: ff.cumsum(x * x, 0, reverse=True), {"x": normal(5, 2)},
                    second_order=True)


@pytest.mark.parametrize("kw", [dict(depth_radius=2, bias=1.0, alpha=0.5, beta=0.75),
                                dict(depth_radius=1, bias=2.0, alpha=1.0, beta=0.5),
                                dict(depth_radius=4, bias=0.5, alpha=0.2, beta=1.0)])
def test_local_response_normalization_gradient(gl, kw):
    check_gradients(lambda x: ff.local_response_normalization(x, **kw),
                    {"x": normal(1, 2, 1, 6)})


def test_lrn_has_no_second_order_gradient():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 1, 1, 4), name="x")
        (dx,) = ff.gradients(ff.sum(ff.lrn(x, 1)), [x])
        with pytest.raises(ff.GradientError, match="second-order.*lrn_grad.*not implemented"):
            ff.gradients(ff.sum(dx), [x])


@pytest.mark.parametrize("which", ["mean", "variance"])
def test_moments_gradient(gl, which):
    def build(x):
        mean, variance = ff.moments(x, axes=[0, 2])
        return mean if which == "mean" else variance
    check_gradients(build, {"x": normal(3, 2, 4)}, second_order=True)


def test_batch_normalization_gradient(gl):
    check_gradients(lambda x, m, v, o, s: ff.batch_normalization(x, m, v, o, s, 1e-3),
                    {"x": normal(4, 3), "mean": normal(3),
                     "variance": rng.uniform(0.5, 2, 3).astype(np.float32),
                     "offset": normal(3), "scale": normal(3)}, second_order=True)


def test_softmax_cross_entropy_gradient_wrt_labels_and_logits(gl):
    labels = rng.uniform(0, 1, (3, 4)).astype(np.float32)
    labels /= labels.sum(axis=1, keepdims=True)
    check_gradients(lambda z, x: ff.softmax_cross_entropy_with_logits(z, x),
                    {"labels": labels, "logits": normal(3, 4)}, second_order=True)


def test_sparse_softmax_cross_entropy_gradient(gl):
    labels = np.array([2, 0, 3], np.int32)
    check_gradients(lambda x: ff.sparse_softmax_cross_entropy_with_logits(
        ff.constant(labels), x), {"logits": normal(3, 4)}, second_order=True)


def test_sigmoid_cross_entropy_gradient_including_zero_logits(gl):
    logits = np.array([[0.0, 1.5, -0.7], [-2.0, 0.0, 3.0]], np.float32)
    labels = rng.uniform(0, 1, (2, 3)).astype(np.float32)
    check_gradients(lambda z, x: ff.sigmoid_cross_entropy_with_logits(labels=z, logits=x),
                    {"labels": labels, "logits": logits}, second_order=True)
