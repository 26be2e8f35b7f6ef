"""Gradients of dynamic_slice and dynamic_update_slice (passes/autodiff/structure.py) on
GL against float64 central finite differences, first and second order: dynamic_slice ->
dynamic_update_slice of dy into zeros, whose update gradient is dynamic_slice again and
whose operand gradient is dy with zeros over the block. Starts in range, negative and
past the end (clamped: the gradient goes where the clamped block read)."""
import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients

rng = np.random.default_rng(5)


def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def starts_of(values):
    return ff.constant(np.array(values, np.int32))


@pytest.mark.parametrize("starts", [(1, 2), (-3, 0), (7, 9)])
def test_dynamic_slice_gradient(gl, starts):
    check_gradients(lambda x: ff.square(ff.dynamic_slice(x, starts_of(starts), [2, 3])),
                    {"x": normal(3, 5)}, second_order=True)


@pytest.mark.parametrize("starts", [(1, 2), (-1, 8)])
def test_dynamic_update_slice_gradient(gl, starts):
    check_gradients(lambda x, u: ff.square(ff.dynamic_update_slice(x, u * 2.0,
                                                                   starts_of(starts))),
                    {"x": normal(3, 5), "u": normal(2, 2)}, second_order=True)


def test_dynamic_slice_of_scalar_starts_gradient(gl):
    # starts as a list of scalar tensors and ints, the graph computing one of them
    def f(x):
        i = ff.constant(np.int32(4)) - 3
        return ff.square(ff.dynamic_slice(x, [i, 0, 2], [1, 2, 3])) * 3.0
    check_gradients(f, {"x": normal(2, 3, 6)}, second_order=True)
