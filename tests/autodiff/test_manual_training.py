"""A two-layer MLP and a small CNN trained with plain ff.gradients and manual updates
(w.assign(w - lr * dw)) reduce their loss identically on GL and on numpy: 1e-4
relative over 20 steps."""
import numpy as np
import pytest

import fragflow as ff

rng = np.random.default_rng(21)


def mlp(g):
    with g.as_default():
        x = ff.placeholder((16, 6), name="x")
        y = ff.placeholder((16, 3), name="y")
        w1 = ff.Variable(rng.standard_normal((6, 12)).astype(np.float32) * 0.5, name="w1")
        b1 = ff.Variable(np.zeros(12, np.float32), name="b1")
        w2 = ff.Variable(rng.standard_normal((12, 3)).astype(np.float32) * 0.5, name="w2")
        with ff.name_scope("mlp"):
            h = ff.tanh(x @ w1 + b1)
            loss = ff.mean(ff.softmax_cross_entropy_with_logits(y, h @ w2))
    x_data = rng.standard_normal((16, 6)).astype(np.float32)
    y_data = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 16)]
    return loss, [w1, b1, w2], {x: x_data, y: y_data}


def cnn(g):
    with g.as_default():
        x = ff.placeholder((4, 6, 6, 2), name="x")
        y = ff.placeholder((4,), "int32", name="y")
        k = ff.Variable(rng.standard_normal((3, 3, 2, 4)).astype(np.float32) * 0.3, name="k")
        b = ff.Variable(np.zeros(4, np.float32), name="b")
        d = ff.Variable(rng.standard_normal((3, 3, 4, 1)).astype(np.float32) * 0.3, name="d")
        w = ff.Variable(rng.standard_normal((36, 2)).astype(np.float32) * 0.3, name="w")
        with ff.name_scope("cnn"):
            h = ff.relu(ff.conv2d(x, k, padding="SAME") + b)
            h = ff.max_pool(ff.depthwise_conv2d(h, d, padding="SAME"), 2, 2, "VALID")
            logits = ff.reshape(h, (4, 36)) @ w
            loss = ff.mean(ff.sparse_softmax_cross_entropy_with_logits(y, logits))
    x_data = rng.standard_normal((4, 6, 6, 2)).astype(np.float32)
    y_data = rng.integers(0, 2, 4).astype(np.int32)
    return loss, [k, b, d, w], {x: x_data, y: y_data}


@pytest.mark.parametrize("model", [mlp, cnn])
def test_manual_training_matches_on_gl_and_numpy(model, gl):
    g = ff.Graph(model.__name__)
    loss, variables, feeds = model(g)
    with g.as_default():
        grads = ff.gradients(loss, variables)
        step = [v.assign(v - 0.1 * dv) for v, dv in zip(variables, grads)]
    losses = {}
    for backend in ("numpy", "gl"):
        with ff.Session(g, backend=backend) as sess:
            fn = sess.compile([loss, *step], feeds=list(feeds))
            losses[backend] = np.array([fn(*feeds.values())[0] for _ in range(20)])
    assert losses["numpy"][-1] < 0.8 * losses["numpy"][0]          # it learns
    np.testing.assert_allclose(losses["gl"], losses["numpy"], rtol=1e-4)
