"""codegen/reduce_tree.py's pass planning, written for the mutants that `make mutation`
found alive (tests/mutation/run.py): the window of a long reduction along rows (at
least 4 x window_min), the render targets of a first pass down columns when the
tuning's column_targets allows two, and a texel pass that steps whole rows. Hand values from
the rules in the module's docstrings."""
from types import SimpleNamespace

import fragflow as ff
from fragflow.codegen import reduce_tree
from fragflow.codegen.reduce_tree import Pass
from fragflow.codegen.tuning.reduce import ReduceTuning

WINDOW_MIN = ReduceTuning().window_min


def test_a_long_row_reduction_takes_windows_of_four_times_window_min():
    # 2^20 elements to 1: the fragments would want windows of 16; rows take 1024
    assert reduce_tree.choose_window(1, 1 << 20, 1) == 4 * WINDOW_MIN
    # down columns the least window is WINDOW_MIN itself
    assert reduce_tree.choose_window(1, 1 << 20, 4) == WINDOW_MIN


def source(width, dtype="float32"):
    return SimpleNamespace(dtype=dtype, layout=SimpleNamespace(width=width))


def test_two_column_targets_when_column_targets_is_two():
    step = Pass(outer=1, length=4096, inner=8, window=256)   # two column texels
    two = ff.Tuning().with_({"reduce.column_targets": 2})
    assert reduce_tree.column_targets(step, source(8), "sum", two) == 2
    one = ff.Tuning().with_({"reduce.column_targets": 1})    # "1: none"
    assert reduce_tree.column_targets(step, source(8), "sum", one) == 1


def test_a_window_of_whole_rows_steps_rows():
    # a 2-D source 8 texels wide, windows of 32 texels: each window is 4 whole rows
    step = Pass(outer=1, length=64, inner=4, window=32)
    assert reduce_tree.row_run(step, source(8), plain_source=True) == "rows"
    assert reduce_tree.row_run(step, source(64), plain_source=True) == "within"
    step = Pass(outer=1, length=72, inner=4, window=24)   # 24 is no multiple of 16
    assert reduce_tree.row_run(step, source(16), plain_source=True) == ""
