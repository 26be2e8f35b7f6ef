"""Gradients of the resize ops against float64 central finite differences, on GL.

A resize is linear in its images, so the check squares its output: the second-order
gradient then runs through the gradient ops' own rules (resize_bilinear_grad's and
resize_nearest_neighbor_grad's: the forward resizes) and back through the resizes'
(the gradient ops): both adjoints are exercised."""
import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients

FLAGS = [(False, False), (True, False), (False, True)]
CASES = [((3, 4), (5, 7)),      # upscale, non-integer
         ((5, 6), (2, 4)),      # downscale
         ((1, 2), (3, 3))]      # 1-pixel high input


@pytest.mark.parametrize("op", ["resize_bilinear", "resize_nearest_neighbor"])
@pytest.mark.parametrize("flags", FLAGS, ids=["legacy", "align_corners", "half_pixel"])
def test_resize_gradients_and_the_gradient_ops_gradients(gl, op, flags):
    rng = np.random.default_rng(7)
    ac, hp = flags
    for hw, size in CASES:
        x = rng.standard_normal((2, *hw, 2)).astype(np.float32)
        check_gradients(lambda t: ff.square(getattr(ff, op)(t, size, ac, hp)), {"x": x},
                        second_order=True)


def test_int32_images_take_no_gradient(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 2, 2, 1), name="x")
        ints = ff.cast(x, "int32")
        y = ff.cast(ff.resize_nearest_neighbor(ints, (3, 3)), "float32") + \
            ff.resize_bilinear(x, (3, 3))
        (dx,) = ff.gradients(ff.sum(y), [x])
    with ff.Session(g) as sess:
        got = sess.run(dx, {x: np.ones((1, 2, 2, 1), np.float32)})
    # only the bilinear path carries a gradient: each input pixel's share of 9 ones
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        want = sess.run(dx, {x: np.ones((1, 2, 2, 1), np.float32)})
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got.sum(), 9.0, rtol=1e-6)
