"""fused_layer_norm's gradients (taken through the ops it stands for, ir/ops/fused.py
decompose_layer_norm) on GL against finite differences, first and second order."""
import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients

rng = np.random.default_rng(34)


@pytest.mark.parametrize("center", [True, False])
def test_fused_layer_norm_gradients_match_finite_differences(center, gl):
    inputs = {"x": rng.standard_normal((3, 6)), "w": rng.uniform(0.5, 1.5, 6),
              "b": rng.standard_normal(6)}

    def build(x, w, b):
        return ff.fused.layer_norm(x, w, b, epsilon=1e-3, center=center)
    check_gradients(build, inputs, rtol=2e-3, atol=2e-4)


def test_fused_layer_norm_second_order_gradients(gl):
    inputs = {"x": rng.standard_normal((2, 5)), "w": rng.uniform(0.5, 1.5, 5)}

    def build(x, w):
        return ff.fused.layer_norm(x, w, epsilon=1e-2)
    check_gradients(build, inputs, rtol=3e-3, atol=3e-4, second_order=True)
