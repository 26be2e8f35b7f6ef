"""codegen/matmul.py's kernel choice at its thresholds, written for the mutants that
`make mutation` found alive (tests/mutation/run.py): use_blocked takes float32
products of at least blocked_min_macs multiply-adds (Tuning.matmul), counted as outputs x k, and
lanes_path leaves a sum longer than its share of the loop budget to the element
loop. Hand values from those rules, on operand records as codegen sees them."""
import math
from types import SimpleNamespace

from fragflow.codegen import matmul
from fragflow.codegen.limits import active
from fragflow.codegen.tuning import Tuning

KNOBS = Tuning().matmul                   # the llvmpipe profile's, active outside lowering


def operand(shape, dtype="float32"):
    layout = SimpleNamespace(shape=tuple(shape), dtype=dtype, size=math.prod(shape))
    return SimpleNamespace(dtype=dtype, layout=layout)


def test_blocked_from_blocked_min_macs_products_on():
    k = KNOBS.blocked_min_macs // (64 * 64)          # 64 x 64 outputs, k products each
    a, b, out = operand((64, k)), operand((k, 64)), operand((64, 64))
    assert matmul.use_blocked(a, b, out, k)
    assert not matmul.use_blocked(a, b, out, k - 1)


def test_blocked_only_for_float32_operands():
    k = KNOBS.blocked_min_macs // (64 * 64)
    out = operand((64, 64))
    for a_dtype, b_dtype in (("float32", "float32"), ("int32", "float32"),
                             ("float32", "int32")):
        a, b = operand((64, k), a_dtype), operand((k, 64), b_dtype)
        assert matmul.use_blocked(a, b, out, k) == (a_dtype == b_dtype == "float32")


def _lanes(k):
    a, b, out = operand((1, k)), operand((k, 3)), operand((1, 3))
    return matmul.lanes_path(False, False, (), 1, 3, k, a, b, out)


def test_lanes_take_a_sum_within_their_share_of_the_loop_budget():
    trips = active().loop_trips // KNOBS.lanes_loop_share   # texels of k one fragment reads
    assert _lanes(33).path == "window"
    assert _lanes(4 * trips).path == "window"
    assert _lanes(4 * trips + 1) is None
