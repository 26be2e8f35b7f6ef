"""Passes along 4-aligned rows that read whole texels into four lane partials
(codegen/reduce_tree.py texel_pass) and step along source rows in texture coordinates
(row_run), on GL against the numpy reference executor: rows that do and do not fit the
windows, windows within a row and spanning whole rows, batches, 1-element axes, an
axis longer than 65,535 elements, NaN and infinities, int32, and the reductions built
on these passes (mean, logsumexp, softmax, whose max and sum of exp along 4-aligned
rows stay four lane partials a row). Sizes not a multiple of 4 keep the
one-window-per-lane pass: tests/ops/test_reduce_tree.py.
"""
import math

import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen import reduce_tree
from fragflow.codegen.layout import layout_for
from fragflow.codegen.operands import Operand
from fragflow.ir.types import TensorType
from tests.gradcheck import check_gradients
from tests.ops.test_reduce_tree import REDUCTIONS, SHRUNK, check_all, kernels_of, scale_of

inf, nan = np.inf, np.nan


@pytest.fixture
def small_windows():
    """The tuning of windows of 8 texels: small inputs take texel passes, row runs and
    trees."""
    return SHRUNK


def first_pass(shape, axes):
    return reduce_tree.plan(shape, axes, whole_texels=True)[0][0]


def run_kind(shape, axes) -> str:
    """row_run of the first pass over a float tensor of `shape` in its own layout."""
    layout = layout_for(TensorType(shape, "float32"), 16384)
    operand = Operand(sampler="x0", value="x", layout=layout, type="")
    return reduce_tree.row_run(first_pass(shape, axes), operand, True)


# --- the planner (no GL) ----------------------------------------------------------------

def test_a_long_4_aligned_row_is_reduced_as_whole_texels():
    step = first_pass((4 << 20,), (0,))
    old = reduce_tree.plan((4 << 20,), (0,))[0][0]
    # the same fragments, each reading one run of texels instead of four
    assert (step.mode, step.inner, step.length) == ("strided4", 4, (4 << 20) // 4)
    assert step.out_size == old.out_size and step.window == old.window


@pytest.mark.parametrize("shape, axes", [
    ((4 << 20,), (0,)), ((3, 70004), (1,)), ((2, 8192), (1,)), ((1, 4100, 1), (1,)),
    ((8, 2048, 4), (1, 2)), ((1 << 20,), (0,)), ((16, 4096), (0, 1)),
])
def test_texel_passes_end_the_tree_in_as_many_passes(shape, axes):
    texels = reduce_tree.plan(shape, axes, whole_texels=True)
    lanes = reduce_tree.plan(shape, axes)
    assert len(texels) <= len(lanes)
    final = math.prod(d for a, d in enumerate(shape) if a not in axes)
    assert texels[-1][0].out_size == final
    for step, out_groups in texels:
        assert math.prod(s for s, _ in out_groups) == step.out_size


def test_rows_not_4_aligned_and_finishing_passes_keep_their_lanes():
    assert first_pass((3, 70001), (1,)).inner == 1           # not 4-aligned
    assert first_pass((1024, 1000), (1,)).inner == 1         # one pass finishes the row
    assert reduce_tree.plan((4 << 20,), (0,))[0][0].inner == 1   # argmax's plan


def test_row_runs_where_windows_fit_the_rows():
    assert run_kind((4 << 20,), (0,)) == "within"      # 1024-texel rows, 1024-texel windows
    assert run_kind((1 << 20,), (0,)) == "rows"        # 512-texel rows
    assert run_kind((4, 1 << 18), (1,)) == "rows"      # batch: rows a multiple of windows
    assert run_kind((3, 70004), (1,)) == ""            # windows across rows


# --- on GL --------------------------------------------------------------------------------

def test_reductions_through_texel_passes(gl, small_windows):
    rng = np.random.default_rng(30)
    cases = {
        "fit": rng.uniform(-2, 2, (2, 64)).astype(np.float32),      # row runs, batch
        "flat": rng.uniform(-2, 2, 256).astype(np.float32),         # row runs, 3 passes
        "ragged": rng.uniform(-2, 2, (3, 100)).astype(np.float32),  # windows across rows
        "ones": rng.uniform(-2, 2, (1, 132, 1)).astype(np.float32),   # 1-element axes
        "batch": rng.uniform(-2, 2, (2, 3, 64)).astype(np.float32),
        "rows": rng.uniform(-2, 2, (4, 512)).astype(np.float32),    # windows = whole rows
    }
    g = ff.Graph()
    with g.as_default():
        fetches, scales, feeds, holders = {}, {}, {}, {}
        for name, data in cases.items():
            x = ff.placeholder(data.shape, name=name)
            feeds[x] = data
            axis = -1 if name != "ones" else 1
            for op, fn in REDUCTIONS.items():
                data_in = x * 0.05 + 1 if op == "prod" else x
                label = f"{op} {name}"
                fetches[label] = fn(data_in, axis=axis, keepdims=name == "ones")
                scales[label] = scale_of(op, data, axis, name == "ones")
            fetches[f"sum {name} all"] = ff.sum(x)
            scales[f"sum {name} all"] = scale_of("sum", data, None)
            fetches[f"logsumexp {name}"] = ff.reduce_logsumexp(x, axis)
            fetches[f"softmax {name}"] = ff.softmax(x, axis)
            fetches[f"argmax {name}"] = ff.argmax(x, axis)
            holders[name] = x
    check_all(g, fetches, feeds, scales, tuning=small_windows)
    # the first pass of a row sum keeps four lane partials per window
    kernels = kernels_of(g, fetches["sum fit"], holders["fit"], small_windows)
    assert len(kernels) == 2 and kernels[0].output.layout.shape == (2, 2, 4)


def test_nan_infinities_and_int32_through_texel_passes(gl, small_windows):
    rng = np.random.default_rng(31)
    data = rng.uniform(-3, 3, (6, 64)).astype(np.float32)
    data[0, 50] = nan                       # NaN in a late window
    data[1, 2] = inf
    data[2, :] = -inf                       # only -inf
    data[3, 5], data[3, 63] = inf, -inf     # inf - inf: NaN for sums
    data[4, 0] = nan
    ints = rng.integers(-2 ** 31, 2 ** 31 - 1, (3, 64), dtype=np.int64).astype(np.int32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        xi = ff.placeholder(ints.shape, "int32", name="xi")
        fetches = {f"{op} {axis}": fn(x, axis=axis)
                   for op, fn in REDUCTIONS.items() for axis in (None, 1)}
        fetches["logsumexp"] = ff.reduce_logsumexp(x, 1)
        fetches["softmax"] = ff.softmax(x, 1)
        fetches["log_softmax"] = ff.log_softmax(x, 1)
        fetches.update({f"{op} int {axis}": fn(xi, axis=axis)
                        for op, fn in REDUCTIONS.items() for axis in (None, 1)})
    out = check_all(g, fetches, {x: data, xi: ints}, tuning=small_windows)
    assert np.isnan(out["max 1"][[0, 4]]).all() and out["max 1"][1] == inf
    assert np.isnan(out["sum 1"][3]) and out["logsumexp"][2] == -inf


def test_long_rows_at_the_real_windows(gl):
    """The planner's own windows: a row run within rows (4M elements, as benchmark W9),
    runs over whole rows with a batch, and windows across rows over > 65,535 elements."""
    rng = np.random.default_rng(32)
    flat = rng.uniform(-2, 2, 4 << 20).astype(np.float32)
    flat[3_000_000] = nan
    batch = rng.uniform(-2, 2, (4, 1 << 16)).astype(np.float32)
    ragged = (rng.standard_normal((3, 70004)) * 4).astype(np.float32)
    ragged[1, 69_999] = nan                  # a NaN row, through a two-pass partial tree
    ints = rng.integers(-2 ** 31, 2 ** 31 - 1, (4, 1 << 16), dtype=np.int64).astype(np.int32)
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder(flat.shape, name="a")
        b = ff.placeholder(batch.shape, name="b")
        c = ff.placeholder(ragged.shape, name="c")
        d = ff.placeholder(ints.shape, "int32", name="d")     # row runs on an int texture
        fetches = {"sum flat": ff.sum(a), "sum flat finite": ff.sum(a[:3_000_000]),
                   "max flat": ff.max(a), "mean batch": ff.mean(b, 1),
                   "min batch": ff.min(b, 1), "sum ragged": ff.sum(c, 1),
                   "logsumexp ragged": ff.reduce_logsumexp(c, 1),
                   "softmax ragged": ff.softmax(c), "log_softmax ragged": ff.log_softmax(c),
                   "sum ints": ff.sum(d, 1), "max ints": ff.max(d, 1), "sum ints all": ff.sum(d)}
    scales = {"sum flat finite": scale_of("sum", flat[:3_000_000], None),
              "mean batch": scale_of("mean", batch, 1), "sum ragged": scale_of("sum", ragged, 1)}
    out = check_all(g, fetches, {a: flat, b: batch, c: ragged, d: ints}, scales)
    assert np.isnan(out["sum flat"]) and np.isnan(out["max flat"])
    assert np.isnan(out["softmax ragged"][1]).all() and not np.isnan(out["softmax ragged"][0]).any()


# --- softmax from lane partials (reduce_tree.softmax_kernels) -------------------------------

def test_softmax_rows_reduce_into_lane_partials(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1024, 1000), name="x")
        y = ff.softmax(x)
    kernels = kernels_of(g, y, x)
    # the max and the sum of exp: four partials (one texel) per row, folded by the last
    assert [k.output.layout.shape for k in kernels[:2]] == [(1024, 4), (1024, 4)]
    assert len(kernels) == 3


def test_softmax_gradients_through_lane_partials(gl, small_windows):
    x = np.random.default_rng(33).standard_normal((3, 16)).astype(np.float32)
    check_gradients(lambda t: ff.softmax(t, 1) * ff.log_softmax(t, -1), {"x": x},
                    tuning=small_windows)
