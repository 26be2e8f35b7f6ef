"""dropout's gradient (the only differentiable random op): the same mask times the
same scale, first and second order, against float64 central finite differences on the
numpy reference executor at the same run counter: the session's first run is run 0,
and tests/gradcheck.py's numeric_gradient evaluates every point at run 0."""
import numpy as np

import fragflow as ff
from tests.gradcheck import numeric_gradient


def test_dropout_gradient_first_and_second_order(gl):
    rng = np.random.default_rng(2)
    value = rng.standard_normal((6, 9)).astype(np.float32)
    r = rng.uniform(0.5, 1.5, value.shape).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(value.shape, name="x")
        # x * dropout(x): its second derivative runs through dropout's gradient rule
        y = ff.sum(ff.dropout(x, 0.4, noise_shape=(6, 1), seed=3) * x * r)
        (dx,) = ff.gradients(y, [x])
        z = ff.sum(dx * r)
        (ddx,) = ff.gradients(z, [x])
    with ff.Session(g) as sess:
        got, got2 = sess.run([dx, ddx], {x: value})        # one run: one mask
    np.testing.assert_allclose(got, numeric_gradient(g, y, x, {x: value}), rtol=1e-3,
                               atol=1e-4)
    np.testing.assert_allclose(got2, numeric_gradient(g, z, x, {x: value}), rtol=1e-2,
                               atol=1e-3)


def test_dropout_gradient_is_the_mask_times_the_scale(gl):
    value = np.random.default_rng(4).uniform(0.5, 1.5, (5, 40)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(value.shape, name="x")
        y = ff.dropout(x, 0.3, seed=8)
        (dx,) = ff.gradients(ff.sum(y), [x])
    with ff.Session(g) as sess:
        for _ in range(2):                                  # a fresh mask each run
            yv, dxv = sess.run([y, dx], {x: value})
            scale = np.float32(1) / (np.float32(1) - np.float32(0.3))
            np.testing.assert_array_equal(dxv, np.where(yv != 0, scale, np.float32(0)))
