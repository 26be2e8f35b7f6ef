"""top_k on GL, each strategy of top_k_select (codegen/top_k.py: top_k.radix, top_k.rank)
forced by the Tuning, against a float64 reference written here (stable lexsort: NaN
first, then the values descending, equal values by lower index) and against the numpy
executor running the graph as built (top_k_rank + top_k_indices, no passes). Rows with
ties across blocks, NaN, +-inf, -0.0 beside 0.0, int32's extremes, batch dims, lengths
not a multiple of 4, k = 1 and k = n. And the pass select_top_k on its own."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen.tuning import Tuning
from fragflow.ir.ops import structure as st
from tests.reference import assert_matches, run_both

# radix for every row here (small blocks: several per row, edges inside texels)
RADIX = Tuning().with_({"structure.top_k_rank_max_work": 0, "structure.top_k_block": 4})
RANK = Tuning().with_(exclude=("top_k.radix",))


def float64_top_k(x, k):
    """Indices of the k first of each last-axis row: NaN first, then by value
    descending (-0.0 == 0.0), then by index."""
    x64 = np.asarray(x, np.float64)
    rows = x64.reshape(-1, x64.shape[-1])
    out = []
    for row in rows:
        nan = np.isnan(row)
        order = np.lexsort((np.arange(row.size), -np.where(nan, 0.0, row), ~nan))
        out.append(order[:k])
    return np.array(out, np.int32).reshape(x64.shape[:-1] + (k,))


def edge_rows(rng, shape, dtype):
    if dtype == "int32":
        x = rng.integers(-3, 3, shape).astype(np.int32)
        flat = x.reshape(-1)
        flat[::7] = np.iinfo(np.int32).min
        flat[3::11] = np.iinfo(np.int32).max
        flat[5::13] = -1
        return x
    x = np.round(rng.standard_normal(shape) * 2).astype(np.float32)   # many ties
    flat = x.reshape(-1)
    flat[::17] = np.nan
    flat[4::19] = np.inf
    flat[6::23] = -np.inf
    flat[8::9] = -0.0
    flat[10::29] = np.float32(np.finfo(np.float32).max)
    flat[12::31] = -np.float32(np.finfo(np.float32).tiny)
    flat[14::37] = np.float32(np.finfo(np.float32).tiny)
    return x


CASES = [  # (label, shape, dtype, k)
    ("a row of 1001, k=100", (1001,), "float32", 100),
    ("rows 2x3 of 37, k=5", (2, 3, 37), "float32", 5),
    ("4 rows of 99, k=1", (4, 99), "float32", 1),
    ("3 rows of 22, k=n", (3, 22), "float32", 22),
    ("one element, k=1", (2, 1), "float32", 1),
    ("int32 rows of 301, k=40", (3, 301), "int32", 40),
    ("int32 row of 9, k=n", (9,), "int32", 9),
    ("all NaN, k=3", (6,), "nan", 3),
]


def _data(rng, shape, dtype):
    if dtype == "nan":
        return np.full(shape, np.nan, np.float32)
    return edge_rows(rng, shape, dtype)


def _graph(arrays):
    g = ff.Graph()
    fetches, feeds = {}, {}
    with g.as_default():
        for (label, shape, dtype, k), x in zip(CASES, arrays):
            p = ff.placeholder(shape, "int32" if dtype == "int32" else "float32",
                               name=f"x{len(feeds)}")
            feeds[p] = x
            top = ff.top_k(p, k)
            fetches[f"{label} values"] = top.values
            fetches[f"{label} indices"] = top.indices
    return g, fetches, feeds


@pytest.mark.parametrize("strategy, tuning", [("top_k.radix", RADIX), ("top_k.rank", RANK)])
def test_top_k_select_strategy_matches_float64_sort(gl, strategy, tuning):
    rng = np.random.default_rng(32)
    arrays = [_data(rng, shape, dtype) for _, shape, dtype, _ in CASES]
    g, fetches, feeds = _graph(arrays)
    out, ref = run_both(g, fetches, feeds, tuning=tuning)
    for (label, _, _, k), x in zip(CASES, arrays):
        want = float64_top_k(x, k)
        for part, expected in (("indices", want),
                               ("values", np.take_along_axis(x, want, axis=-1))):
            name = f"{label} {part}"
            assert_matches(out[name], ref[name], rtol=0, atol=0, what=f"{name} vs as built")
            assert_matches(out[name], expected, rtol=0, atol=0, what=f"{name} vs float64")
    kernels = ff.Session(g, tuning=tuning).compile(list(fetches.values()),
                                                   feeds=list(feeds)).kernels
    chosen = {k.strategy for k in kernels if k.op == "top_k_select"}
    assert chosen == {strategy}


@pytest.mark.parametrize("bits", [1, 2, 8])
def test_top_k_radix_settles_any_bits_per_round(gl, bits):
    rng = np.random.default_rng(bits)
    x = edge_rows(rng, (2, 517), "float32")
    g = ff.Graph()
    with g.as_default():
        p = ff.placeholder(x.shape, name="x")
        top = ff.top_k(p, 60)
    tuning = RADIX.with_({"structure.top_k_radix_bits": bits})
    got = ff.Session(g, tuning=tuning).run(top.indices, {p: x})
    assert_matches(got, float64_top_k(x, 60), rtol=0, atol=0, what=f"{bits} bits")


def test_top_k_radix_of_a_long_row_chooses_radix_by_default(gl):
    """The default tuning: a row of 70001 takes top_k.radix; k=37 of
    rounded values (ties everywhere)."""
    rng = np.random.default_rng(5)
    x = np.round(rng.uniform(-30, 30, (2, 70001))).astype(np.float32)
    x[1, 123] = np.nan
    g = ff.Graph()
    with g.as_default():
        p = ff.placeholder(x.shape, name="x")
        top = ff.top_k(p, 37)
    sess = ff.Session(g)
    values, indices = sess.run([top.values, top.indices], {p: x})
    want = float64_top_k(x, 37)
    assert_matches(indices, want, rtol=0, atol=0, what="indices")
    assert_matches(values, np.take_along_axis(x, want, -1), rtol=0, atol=0, what="values")
    kernels = sess.compile([top.indices], feeds=[p]).kernels
    assert {k.strategy for k in kernels if k.op == "top_k_select"} == {"top_k.radix"}


def test_top_k_radix_keeps_its_loops_under_llvmpipes_limit(gl):
    """centernet's row with 8 bits a round: blocks of 18316, a select's four slots walk
    73264 elements (past llvmpipe's 65535 loop iterations unless the lanes unroll)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 1310720)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        p = ff.placeholder(x.shape, name="x")
        top = ff.top_k(p, 100)
    tuning = Tuning().with_({"structure.top_k_radix_bits": 8})
    got = ff.Session(g, tuning=tuning).run(top.indices, {p: x})
    assert_matches(got, float64_top_k(x, 100), rtol=0, atol=0, what="8 bits, 1310720")


def test_select_top_k_makes_one_node_and_keeps_fetched_ranks():
    x = np.array([[1.0, 3.0, 2.0, 3.0], [0.0, -1.0, np.nan, 5.0]], np.float32)
    g = ff.Graph()
    with g.as_default():
        p = ff.placeholder(x.shape, name="x")
        top = ff.top_k(p, 2)
        ranks = ff.Tensor(st.top_k_rank(p.value))
    alone = ff.Session(g, backend="numpy", passes=["select_top_k"])
    built = ff.Session(g, backend="numpy", passes=[])
    for fetches in ([top.indices], [top.indices, ranks]):
        got, want = alone.run(fetches, {p: x}), built.run(fetches, {p: x})
        for a, b in zip(got, want):
            assert_matches(a, b, rtol=0, atol=0, what="select_top_k alone vs as built")
    assert_matches(want[0], np.array([[1, 3], [2, 3]], np.int32), rtol=0, atol=0,
                   what="indices")
    compiled = alone.compile([top.indices], feeds=[p]).graph
    ops = [n.op for n in compiled.nodes]
    assert "top_k_select" in ops and "top_k_rank" not in ops and "top_k_indices" not in ops
    kept = [n.op for n in alone.compile([top.indices, ranks], feeds=[p]).graph.nodes]
    assert kept.count("top_k_rank") == 1 and "top_k_select" in kept
