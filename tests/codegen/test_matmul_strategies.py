"""Every strategy of codegen/matmul.py's TABLE that takes a product, each run on GL
(Tuning.prefer naming it) against numpy in float64: N % 4 != 0, A or B or both
transposed, batches with broadcasting, x @ x, a K that the blocked kernels split
among fragments, a 1x1 product, int32 operands. Which strategies apply is asserted
under the llvmpipe profile and with the size thresholds lowered to 1 (LOW), where
the blocked and packed kernels take small products too."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen import matmul
from fragflow.codegen.layout import layout_for
from fragflow.codegen.strategy import applicable
from fragflow.codegen.tuning import tuning_with
from tests.reference import assert_matches

LOW = ff.Tuning().with_({"matmul.blocked_min_macs": 1, "matmul.packed_min_macs": 1,
                         "matmul.packed_min_rows": 1})
ALL = ("matmul.packed", "matmul.blocked", "matmul.lanes", "matmul.plain")
BIG = ("matmul.packed", "matmul.blocked", "matmul.plain")       # no lanes kernel
SMALL = ("matmul.lanes", "matmul.plain")

# label: (A's shape, B's shape, transpose_a, transpose_b, dtype, applicable under the
# llvmpipe profile, applicable under LOW)
CASES = {
    "n_not_4": ((7, 12), (12, 5), False, False, "float32", SMALL, ALL),
    "transposed_a": ((12, 7), (12, 6), True, False, "float32", SMALL, ALL),
    "transposed_b": ((7, 12), (10, 12), False, True, "float32", SMALL, ALL),
    "both_transposed": ((12, 7), (10, 12), True, True, "float32", ("matmul.plain",), BIG),
    "batched_broadcast": ((2, 1, 5, 8), (3, 8, 6), False, False, "float32",
                          ("matmul.plain",), BIG),
    "x_at_x": ((9, 9), None, False, False, "float32", SMALL, ALL),
    # 8 x 12 outputs: few blocks, so the blocked kernels split K = 3001
    "split_k": ((8, 3001), (3001, 12), False, False, "float32",
                ("matmul.blocked", "matmul.plain"), BIG),
    "tiny": ((1, 1), (1, 1), False, False, "float32", ("matmul.plain",), BIG),
    # 1 << 22 multiply-adds or more: packed from packed_min_rows (32) output rows, or
    # with fewer where B's rows are not whole texels (its panel makes them so)
    "one_row": ((1, 1024), (1024, 4096), False, False, "float32",
                ("matmul.blocked", "matmul.plain"), BIG),
    "one_row_b_rows_not_texels": ((1, 1024), (1024, 4097), False, False, "float32",
                                  ALL, ALL),
    "rows_31_transposed_b": ((31, 256), (532, 256), False, True, "float32",
                             ("matmul.blocked", "matmul.lanes", "matmul.plain"), ALL),
    "rows_32": ((32, 256), (256, 512), False, False, "float32", BIG, BIG),
    "int32": ((6, 8), (8, 4), False, False, "int32", ("matmul.plain",), ("matmul.plain",)),
}


def _graph(label):
    sa, sb, ta, tb, dtype, _, _ = CASES[label]
    rng = np.random.default_rng(len(label))
    values = [rng.integers(-9, 10, s).astype(dtype) if dtype == "int32"
              else rng.standard_normal(s).astype(np.float32) for s in (sa, sb) if s]
    g = ff.Graph()
    with g.as_default():
        holders = [ff.placeholder(v.shape, dtype, name=f"in{i}") for i, v in enumerate(values)]
        y = ff.matmul(holders[0], holders[-1], transpose_a=ta, transpose_b=tb)
    return g, y, dict(zip(holders, values))


def _applicable(label, tuning) -> tuple:
    """The names of the strategies that take the case's matmul node, in table order."""
    g, _, _ = _graph(label)
    node = next(n for n in g.nodes if n.op == "matmul")
    layouts = {v.name: layout_for(v.type, 16384) for n in g.nodes for v in n.outputs}
    with tuning_with(tuning):
        site = matmul.site_of(node, layouts, "k0")
        return tuple(s.name for s, _ in applicable(matmul.TABLE, site, tuning=tuning))


@pytest.mark.parametrize("label", CASES)
def test_which_strategies_apply(label):
    assert _applicable(label, ff.Tuning()) == CASES[label][5]
    assert _applicable(label, LOW) == CASES[label][6]


@pytest.mark.parametrize("label, name", [(label, name) for label in CASES
                                         for name in CASES[label][6]])
def test_each_strategy_matches_numpy(gl, label, name):
    g, y, feeds = _graph(label)
    _, _, ta, tb, dtype, _, _ = CASES[label]
    with ff.Session(g, tuning=LOW.with_(prefer=(name,))) as sess:
        fn = sess.compile([y], feeds=list(feeds))
        assert {k.strategy for k in fn.kernels} == {name}, [k.name for k in fn.kernels]
        got, = fn(*feeds.values())
    a, b = (v.astype(np.float64) for v in feeds.values()) if len(feeds) == 2 else \
        [next(iter(feeds.values())).astype(np.float64)] * 2
    a = np.swapaxes(a, -1, -2) if ta else a
    b = np.swapaxes(b, -1, -2) if tb else b
    want = a @ b
    if dtype == "int32":
        np.testing.assert_array_equal(got, want.astype(np.int32))
    else:
        assert_matches(got, want.astype(np.float32), rtol=1e-5,
                       scale=np.abs(a) @ np.abs(b), what=f"{label} by {name}")
