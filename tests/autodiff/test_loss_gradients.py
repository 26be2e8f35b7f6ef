"""Gradients of the loss family (ir/ops/loss.py) against float64 central finite
differences, on GL: sparse_softmax_cross_entropy (first and second order, through
ff.sparse_softmax_cross_entropy_with_logits) and sparse_softmax_cross_entropy_grad in
its logits and its dy (first and second order: its own rule, passes/autodiff/loss.py).
Tolerances as in test_basic_gradients.py."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.frontend.tensor import wrap
from fragflow.ir.ops.loss import sparse_softmax_cross_entropy_grad
from tests.gradcheck import check_gradients

rng = np.random.default_rng(12)


@pytest.mark.parametrize("rows, classes", [(5, 7), (1, 3), (4, 1), (3, 130)])
def test_sparse_softmax_cross_entropy_gradient(gl, rows, classes):
    labels = rng.integers(0, classes, rows).astype(np.int32)
    check_gradients(lambda x: ff.sparse_softmax_cross_entropy_with_logits(
                        ff.constant(labels), x),
                    {"logits": rng.standard_normal((rows, classes)).astype(np.float32)},
                    second_order=True)


@pytest.mark.parametrize("shape, classes", [((5,), 7), ((2, 3), 4), ((), 6)])
def test_sparse_softmax_cross_entropy_grad_gradient(gl, shape, classes):
    labels = np.asarray(rng.integers(0, classes, shape), np.int32)
    check_gradients(
        lambda x, dy: wrap(sparse_softmax_cross_entropy_grad(
            x.value, ff.constant(labels).value, dy.value)),
        {"logits": rng.standard_normal(shape + (classes,)).astype(np.float32),
         "dy": rng.uniform(-2, 2, shape).astype(np.float32)}, second_order=True)
