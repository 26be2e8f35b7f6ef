"""Divisions by constants in kernels' address arithmetic (codegen/environment.py
quotient, split_index; knob elementwise.float_division, on in the webgl profile):
(x + 0.5) times the divisor's reciprocal in float32, floored, against integer division
for every x near a multiple of the divisor up to the bound, emulated with numpy's
IEEE float32 (what GLSL's highp float is), and the forms each profile writes. The
kernels themselves run under the webgl profile in tests/webgl and
tests/ops/test_conv_filter_panel.py."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen.environment import FLOAT_DIVISION_BOUND, quotient, split_index
from fragflow.codegen.tuning import tuning_with


def _float_quotient(x: np.ndarray, c: int) -> np.ndarray:
    r = np.float32(1.0 / c)
    return ((x.astype(np.float32) + np.float32(0.5)) * r).astype(np.int64)


@pytest.mark.parametrize("c", [3, 6, 7, 54, 125, 193, 1000, 9313, 65535, 1 << 21 | 1])
def test_float_quotient_is_exact_below_the_bound(c):
    multiples = np.arange(0, FLOAT_DIVISION_BOUND, c, dtype=np.int64)
    x = np.concatenate([multiples, multiples - 1, multiples + 1, [FLOAT_DIVISION_BOUND - 1]])
    x = x[(x >= 0) & (x < FLOAT_DIVISION_BOUND)]
    assert np.array_equal(_float_quotient(x, c), x // c)


def test_the_bound_is_needed():
    """Past 2^23 the float form is wrong for some divisor (so the bound is not slack)."""
    wrong = 0
    for c in (3, 7, 54, 193, 9313):
        x = np.arange(1 << 24, (1 << 24) + 4 * c * 64, dtype=np.int64)
        wrong += int((_float_quotient(x, c) != x // c).sum())
    assert wrong > 0


def test_forms_per_profile():
    with tuning_with(ff.Tuning.named("webgl")):
        assert quotient("t", 256, 1 << 30) == "((t) >> 8)"
        assert quotient("t", 250, 1 << 20).startswith("int((float(t) + 0.5) * ")
        assert quotient("t", 250, FLOAT_DIVISION_BOUND + 1) == "((t) / 250)"
        assert split_index("t", 64, 1 << 30, "y_", "x_") == \
            "int y_ = ((t) >> 6); int x_ = (t) & 63;"
    with tuning_with(ff.Tuning.named("llvmpipe")):
        assert quotient("t", 250, 1 << 20) == "((t) / 250)"
        assert split_index("t", 250, 1 << 20, "y_", "x_") == \
            "int y_ = ((t) / 250); int x_ = (t) - y_ * 250;"
