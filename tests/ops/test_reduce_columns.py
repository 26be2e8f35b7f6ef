"""Reductions down 4-aligned columns whose first pass writes render targets in 4 x 2
blocks of fragments (codegen/reduce_tree.lane_blocks), against the numpy executor:
several column groups and windows, batches (outer > 1), a fragment count short of
the texture (padding fragments), NaN, sums of exp (softmax / logsumexp down columns),
and the W11 shape itself."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen import reduce_tree
from tests.ops.test_reduce_tree import SHRUNK
from tests.reference import assert_matches, run_both

RTOL = 1e-4


@pytest.fixture
def small_windows():
    """The tuning of windows of 4-8 elements: a few hundred rows take a tree of column
    passes."""
    return SHRUNK


def column_kernels(shape, axis, tuning=None):
    """The kernels of a sum over axis of a float tensor of shape."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(shape, name="x")
        y = ff.sum(x, axis=axis)
    with ff.Session(g, tuning=tuning) as sess:
        fn = sess.compile([y], feeds=[x])
        fn(np.zeros(shape, np.float32))
        return fn.kernels


def test_lane_blocks_apply_to_even_tall_targets_only():
    Layout = reduce_tree.Layout
    assert reduce_tree.lane_blocks(Layout((912,), "float32", 64, 4))
    assert not reduce_tree.lane_blocks(Layout((40,), "float32", 4, 3))
    assert not reduce_tree.lane_blocks(Layout((24,), "float32", 2, 4))
    assert not reduce_tree.lane_blocks(None)
    # targets get an even height, rows of a multiple of 4 texels, a few texels more
    assert reduce_tree.lane_block_layout(Layout((2192,), "float32", 256, 3)) == \
        Layout((2192,), "float32", 140, 4)
    assert reduce_tree.lane_block_layout(Layout((912,), "float32", 64, 4)) == \
        Layout((912,), "float32", 64, 4)
    assert reduce_tree.lane_block_layout(Layout((40,), "float32", 4, 3)) == \
        Layout((40,), "float32", 4, 3)                     # tiny: left as it is


def test_column_sums_in_lane_blocks_match_numpy(gl, small_windows):
    rng = np.random.default_rng(31)
    batch = rng.uniform(-2, 2, (3, 300, 64)).astype(np.float32)   # 228 of 256 fragments
    wide = rng.uniform(-2, 2, (301, 128)).astype(np.float32)      # a window cut short
    wide[7, 9] = np.nan                                           # NaN sticks in its column
    wide[200, 13] = np.inf
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(batch.shape, name="x")
        z = ff.placeholder(wide.shape, name="z")
        fetches = {"sum": ff.sum(x, 1), "mean": ff.mean(x, 1, keepdims=True),
                   "max": ff.max(x, 1), "min": ff.min(z, 0),
                   "prod": ff.prod(x * 0.01 + 1, 1), "logsumexp": ff.reduce_logsumexp(x, 1),
                   "softmax": ff.softmax(x, 1), "log_softmax": ff.log_softmax(z, 0),
                   "nan sum": ff.sum(z, 0), "nan max": ff.max(z, 0),
                   "batch and rows": ff.sum(x, (0, 1))}
    out, ref = run_both(g, fetches, {x: batch, z: wide}, tuning=small_windows)
    scales = {"sum": np.abs(batch).sum(1), "mean": np.abs(batch).mean(1, keepdims=True),
              "batch and rows": np.abs(batch).sum((0, 1))}
    for label in fetches:
        assert_matches(out[label], ref[label], rtol=RTOL, scale=scales.get(label), what=label)
    assert np.isnan(out["nan sum"][9]) and out["nan sum"][13] == np.inf
    assert np.isnan(out["nan max"][9]) and np.isfinite(out["nan max"][:9]).all()
    np.testing.assert_allclose(out["max"], batch.max(1))
    # batch: targets 64 x 4 texels; wide: 64 x 3 made 40 x 4; (37, 32): 10 texels, 4 x 3
    for shape, axis, blocks in ((batch.shape, 1, True), (wide.shape, 0, True),
                                ((37, 32), 0, False)):
        first, second = column_kernels(shape, axis, small_windows)[:2]
        assert first.output_layers > 1
        assert ("xy.y >> 1" in first.source) == ("block_position" in second.source) == blocks


def test_columns_longer_than_the_loop_limit(gl):
    """70,001 rows (past llvmpipe's 65,535 loop iterations), 16 columns: four targets,
    their texture reshaped for lane blocks."""
    data = np.random.default_rng(7).uniform(-2, 2, (70001, 16)).astype(np.float32)
    data[69999, 3] = np.nan
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        fetches = {"sum": ff.sum(x, 0), "max": ff.max(x, 0), "mean": ff.mean(x, 0)}
    out, ref = run_both(g, fetches, {x: data})
    for label in fetches:
        scale = np.abs(data).sum(0) / (data.shape[0] if label == "mean" else 1)
        assert_matches(out[label], ref[label], rtol=RTOL,
                       scale=None if label == "max" else scale, what=label)
    assert np.isnan(out["sum"][3]) and np.isfinite(out["sum"][4:]).all()
    first = column_kernels(data.shape, 0)[0]
    assert first.output_layers == 4 and "xy.y >> 1" in first.source


def test_w11_column_sums(gl):
    """The benchmark's shape with the planner's own windows (4096 rows: windows of 256,
    eight targets, 512 fragments in a 128 x 4 texture)."""
    data = np.random.default_rng(11).standard_normal((4096, 1024)).astype(np.float32)
    data[4000, 1023] = np.nan                   # the last column, the last window
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        y = ff.sum(x, axis=0)
    with ff.Session(g) as sess:
        fn = sess.compile([y], feeds=[x])
        (got,) = fn(data)
        first = fn.kernels[0]
    want = data.sum(0, dtype=np.float64)
    assert_matches(got, want.astype(np.float32), rtol=RTOL, scale=np.abs(data).sum(0),
                   what="column sums")
    assert np.isnan(got[1023]) and np.isfinite(got[:1023]).all()
    assert first.output_layers == 8 and "xy.y >> 1" in first.source
