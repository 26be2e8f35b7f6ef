"""fused_attention's gradients (taken through the five ops it stands for, ir/ops/fused.py
decompose_attention) on GL against finite differences, first and second order."""
import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients

rng = np.random.default_rng(35)


@pytest.mark.parametrize("masked", [False, "add", "subtract"])
def test_fused_attention_gradients_match_finite_differences(masked, gl):
    inputs = {"q": rng.standard_normal((2, 3, 4)), "k": rng.standard_normal((2, 5, 4)),
              "v": rng.standard_normal((2, 5, 3))}
    if masked:
        inputs["mask"] = rng.standard_normal((3, 5))

    def build(q, k, v, mask=None):
        return ff.fused.attention(q, k, v, mask=mask, scale=2.0,
                                  subtract_mask=masked == "subtract")
    check_gradients(build, inputs, rtol=2e-3, atol=2e-4)


def test_fused_attention_second_order_gradients(gl):
    inputs = {"q": rng.standard_normal((1, 3, 4)), "k": rng.standard_normal((1, 4, 4)),
              "v": rng.standard_normal((1, 4, 2))}

    def build(q, k, v):
        return ff.fused.attention(q, k, v, scale=0.5, divide=False)
    check_gradients(build, inputs, rtol=2e-3, atol=2e-4, second_order=True)


def test_gradients_with_the_head_transposes_folded_in(gl):
    """v as [B, Lk, H, Dv] and the result as [B, Lq, H, Dv] (v_heads, out_heads)."""
    inputs = {"q": rng.standard_normal((1, 2, 3, 4)), "k": rng.standard_normal((1, 2, 5, 4)),
              "v": rng.standard_normal((1, 5, 2, 3))}

    def build(q, k, v):
        return ff.fused.attention(q, k, v, scale=2.0, v_heads=True, out_heads=True)
    check_gradients(build, inputs, rtol=2e-3, atol=2e-4)


def test_gradients_with_every_head_transpose_folded_in(gl):
    """q, k and v as [B, L, H, D] too (q_heads, k_heads)."""
    inputs = {"q": rng.standard_normal((1, 3, 2, 4)), "k": rng.standard_normal((1, 5, 2, 4)),
              "v": rng.standard_normal((1, 5, 2, 3))}

    def build(q, k, v):
        return ff.fused.attention(q, k, v, scale=2.0, q_heads=True, k_heads=True,
                                  v_heads=True, out_heads=True)
    check_gradients(build, inputs, rtol=2e-3, atol=2e-4)


def test_gradients_with_q_k_v_as_columns_of_one_value(gl):
    """q, k and v as column slices of one x [B, L, W] (q_columns, ...: a merged
    projection's, passes/merge_matmuls.py): x's gradient gathers all three."""
    inputs = {"x": rng.standard_normal((1, 4, 22))}

    def build(x):
        return ff.fused.attention(x, x, x, scale=2.0, q_heads=True, k_heads=True,
                                  v_heads=True, out_heads=True, q_columns=(1, 2, 3),
                                  k_columns=(8, 2, 3), v_columns=(14, 2, 4))
    check_gradients(build, inputs, rtol=2e-3, atol=2e-4)
