"""Gradients of user-written GPU programs (ff.gpgpu_program): the user's gradient
function, checked against finite differences, to second order when built from ops."""
import numpy as np

from tests.gradcheck import check_gradients
from tests.ops.test_program import affine, square_add

rng = np.random.default_rng(6)


def test_program_gradients_first_and_second_order(gl):
    check_gradients(lambda x: square_add(x),
                    {"x": rng.standard_normal((3, 4)).astype(np.float32)}, second_order=True)
    check_gradients(lambda a, b: affine(a, b, scale=1.0, shift=0) * a,
                    {"a": rng.standard_normal((2, 2, 3)).astype(np.float32),
                     "b": rng.standard_normal(3).astype(np.float32)})


