"""Reductions, softmax and logsumexp as trees of passes (codegen/reduce_tree.py) on GL
against the numpy reference executor, on shapes that take several passes: axes longer
than llvmpipe's 65,535 loop iterations, sizes not a multiple of 4, 1-element axes,
batches, every kind of pass (contiguous rows, 4-aligned columns, other strides),
NaN / inf inputs, int32; gradients against finite differences.

Trees of small tensors: the `small_windows` tuning shrinks the planner's windows so that
a 5x37 tensor takes as many passes as a long axis does (cheap to run, cheap to differentiate
numerically). Every distinct kernel costs a shader compile (~80 ms): graphs are few
and hold many fetches.
"""
import math

import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen import reduce_tree
from fragflow.codegen.limits import DESKTOP
from fragflow.codegen.tuning.reduce import ReduceTuning
from tests.gradcheck import check_gradients
from tests.reference import assert_matches, run_both

RTOL = 1e-4
inf, nan = np.inf, np.nan
REDUCTIONS = {"sum": ff.sum, "mean": ff.mean, "max": ff.max, "min": ff.min,
              "prod": ff.prod}


# The planner's windows at 4-8 elements and no single-pass shortcuts, so that small
# inputs take trees (the reduction tests' small_windows fixtures).
SHRUNK = ff.Tuning().with_({"reduce.window_min": 4, "reduce.window_max": 8,
                            "reduce.small_work": 8, "reduce.min_fragments": 4,
                            "reduce.direct_softmax_work": 0})


@pytest.fixture
def small_windows():
    """The tuning of windows of 4-8 elements, no single-pass shortcuts and cumsum
    blocks of 8 (4 strided): small inputs take trees."""
    return SHRUNK.with_({"reduce.scan_block_contiguous": 8,
                         "reduce.scan_block_strided": 4})


def scale_of(op, data, axis, keepdims=False):
    """atol scale for sums and means: the sum (mean) of |x| (cancellation)."""
    if op not in ("sum", "mean") or data.dtype != np.float32:
        return None
    fn = np.sum if op == "sum" else np.mean
    with np.errstate(invalid="ignore"):
        return fn(np.abs(data.astype(np.float64)), axis=axis, keepdims=keepdims)


def check_all(graph, fetches, feed_dict, scales=None, tuning=None):
    out, ref = run_both(graph, fetches, feed_dict, tuning=tuning)
    for label in fetches:
        assert_matches(out[label], ref[label], rtol=RTOL,
                       scale=(scales or {}).get(label), what=label)
    return out


def kernels_of(graph, fetch, x, tuning=None):
    """The kernels a session runs for fetch, fed zeros for placeholder x."""
    with ff.Session(graph, tuning=tuning) as sess:
        fn = sess.compile([fetch], feeds=[x])
        fn(np.zeros(x.shape, np.float32))
        return fn.kernels


# --- the planner (no GL) ----------------------------------------------------------------

@pytest.mark.parametrize("shape, axes", [
    ((4 << 20,), (0,)), ((4096, 1024), (0,)), ((1024, 1000), (1,)), ((3, 70001), (1,)),
    ((70, 5, 300), (0, 2)), ((1, 5, 1), (0, 2)), ((200000, 3), (0,)),
    ((2, 3, 4, 5, 6), (1, 3)),
])
def test_every_pass_reads_a_bounded_window_and_the_tree_ends(shape, axes):
    steps = reduce_tree.plan(shape, axes)
    size = math.prod(shape)
    for step, out_groups in steps:
        assert step.window <= max(ReduceTuning().window_max, 1)
        # a fragment's loop iterations stay far below llvmpipe's 65535
        assert step.window + 8 <= DESKTOP.loop_trips
        assert step.outer * step.length * step.inner <= size
        assert math.prod(s for s, _ in out_groups) == step.out_size
    final_size = math.prod(d for a, d in enumerate(shape) if a not in axes)
    assert steps[-1][0].out_size == final_size
    assert all(not reduced or size == 1 for size, reduced in steps[-1][1])


def test_a_long_reduction_splits_into_passes_and_a_short_one_does_not():
    long = reduce_tree.plan((4 << 20,), (0,))
    assert len(long) >= 2 and long[0][0].window >= ReduceTuning().window_min
    # enough fragments in the first pass to spread over llvmpipe's threads
    assert long[0][0].out_size // 4 >= 1024
    assert len(reduce_tree.plan((3, 5, 7), (0, 2))) == 2      # one pass per reduced run
    assert len(reduce_tree.plan((100, 37), (1,))) == 1
    columns = reduce_tree.plan((4096, 1024), (0,))
    assert all(step.mode == "strided4" for step, _ in columns)


# --- reductions on GL ---------------------------------------------------------------------

def test_reductions_over_long_and_awkward_axes(gl):
    rng = np.random.default_rng(10)
    rows = rng.uniform(-2, 2, (2, 3, 4097)).astype(np.float32)     # contiguous, unaligned
    cols4 = rng.uniform(-2, 2, (5003, 12)).astype(np.float32)      # columns, 4-aligned
    cols3 = rng.uniform(-2, 2, (2, 4999, 3)).astype(np.float32)    # columns, other stride
    mixed = rng.uniform(-2, 2, (70, 5, 300)).astype(np.float32)    # two reduced runs
    flat = rng.uniform(-2, 2, 70001).astype(np.float32)            # > 65,535 elements
    cases = {"rows": (rows, [-1, (0, 2), None]), "cols4": (cols4, [0, None]),
             "cols3": (cols3, [1, (0, 1)]), "mixed": (mixed, [(0, 2)]),
             "flat": (flat, [0])}
    g = ff.Graph()
    with g.as_default():
        fetches, scales, feeds = {}, {}, {}
        for name, (data, axes) in cases.items():
            x = ff.placeholder(data.shape, name=name)
            feeds[x] = data
            # sum and max everywhere; mean and min (the same passes) once each
            for op in ("sum", "max") if name != "rows" else ("sum", "mean", "max", "min"):
                for axis in axes:
                    label = f"{op} {name} axis={axis}"
                    fetches[label] = REDUCTIONS[op](x, axis=axis, keepdims=name == "mixed")
                    scales[label] = scale_of(op, data, axis, name == "mixed")
            fetches[f"argmax {name}"] = ff.argmax(x, axis=axes[0] if isinstance(
                axes[0], int) else 0)
            fetches[f"argmin {name}"] = ff.argmin(x, axis=-1)
    out = check_all(g, fetches, feeds, scales)
    np.testing.assert_array_equal(out["argmax rows"], np.argmax(rows, -1))
    np.testing.assert_allclose(out["max cols4 axis=0"], cols4.max(0))


def test_column_passes_into_render_targets(gl, small_windows):
    """A first pass down 4-aligned columns writes K adjacent column texels of each
    window to K render targets (layers of an array texture) the next pass reads."""
    rng = np.random.default_rng(19)
    data = rng.uniform(-2, 2, (37, 32)).astype(np.float32)
    batch = rng.uniform(-2, 2, (3, 37, 16)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        z = ff.placeholder(batch.shape, name="z")
        fetches = {"sum": ff.sum(x, 0), "max": ff.max(x, 0), "min": ff.min(x, 0),
                   "mean": ff.mean(x, 0, keepdims=True), "prod": ff.prod(x * 0.1 + 1, 0),
                   "logsumexp": ff.reduce_logsumexp(x, 0), "softmax": ff.softmax(x, 0),
                   "batch sum": ff.sum(z, 1), "batch max": ff.max(z, (0, 1))}
    out = check_all(g, fetches, {x: data, z: batch},
                    {"sum": scale_of("sum", data, 0), "batch sum": scale_of("sum", batch, 1),
                     "mean": scale_of("mean", data, 0, True)}, tuning=small_windows)
    np.testing.assert_allclose(out["max"], data.max(0))
    kernels = kernels_of(g, fetches["sum"], x, small_windows)
    assert kernels[0].output_layers > 1 and kernels[1].inputs[0].value == \
        kernels[0].output.value


def test_int32_and_prod_trees(gl, small_windows):
    rng = np.random.default_rng(11)
    ints = rng.integers(-2 ** 31, 2 ** 31 - 1, (6, 37), dtype=np.int64).astype(np.int32)
    columns = rng.integers(-50, 50, (37, 8)).astype(np.int32)      # 4-aligned columns
    near_one = rng.uniform(0.9, 1.1, (37, 8)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        xi = ff.placeholder(ints.shape, "int32", name="xi")
        xc = ff.placeholder(columns.shape, "int32", name="xc")
        xp = ff.placeholder(near_one.shape, name="xp")
        fetches = {f"{op} int axis={axis}": fn(xi, axis=axis)
                   for op, fn in REDUCTIONS.items() for axis in (None, 0, 1)}
        fetches.update({f"{op} int axis={axis}": getattr(ff, op)(xi, axis=axis)
                        for op in ("argmax", "argmin") for axis in (0, 1)})
        fetches.update({f"{op} int columns": getattr(ff, op)(xc, axis=0)
                        for op in ("sum", "mean", "max", "argmax", "argmin")})
        fetches.update({f"prod axis={axis}": ff.prod(xp, axis=axis) for axis in (None, 0, 1)})
    check_all(g, fetches, {xi: ints, xc: columns, xp: near_one}, tuning=small_windows)


def test_one_element_axes_keepdims_and_batches(gl, small_windows):
    rng = np.random.default_rng(12)
    data = rng.standard_normal((3, 1, 37, 1)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        fetches = {}
        for axis in ((1,), (1, 3), (0, 2), (2, 3), None):
            for keep in (False, True):
                fetches[f"sum {axis} {keep}"] = ff.sum(x, axis=axis, keepdims=keep)
                fetches[f"max {axis} {keep}"] = ff.max(x, axis=axis, keepdims=keep)
        fetches["argmax over 1"] = ff.argmax(x, axis=1)
        fetches["logsumexp (1, 3)"] = ff.reduce_logsumexp(x, axis=(1, 3), keepdims=True)
    out = check_all(g, fetches, {x: data},
                    {f"sum {a} {k}": scale_of("sum", data, a, k)
                     for a in ((1,), (1, 3), (0, 2), (2, 3), None) for k in (False, True)},
                    tuning=small_windows)
    assert out["sum (1, 3) True"].shape == (3, 1, 37, 1)
    assert (out["argmax over 1"] == 0).all()


def test_nan_and_infinities_across_passes(gl, small_windows):
    data = np.random.default_rng(13).uniform(-3, 3, (6, 37)).astype(np.float32)
    data[0, 30] = nan                       # NaN in a late window
    data[1, 2] = inf
    data[2, :] = -inf                       # only -inf
    data[3, 5], data[3, 33] = inf, -inf     # inf - inf: NaN for sums
    data[4, 0], data[4, 36] = nan, nan      # first NaN wins argmax
    data[5, 10], data[5, 20] = 7.0, 7.0     # a tie: the first position wins
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        fetches = {f"{op} axis={axis}": fn(x, axis=axis)
                   for op, fn in REDUCTIONS.items() for axis in (None, 0, 1)}
        for op in ("argmax", "argmin"):
            fetches[f"{op} 1"] = getattr(ff, op)(x, axis=1)
            fetches[f"{op} 0"] = getattr(ff, op)(x, axis=0)
        fetches["logsumexp 1"] = ff.reduce_logsumexp(x, axis=1)
        fetches["logsumexp 0"] = ff.reduce_logsumexp(x, axis=0)
        fetches["softmax 1"] = ff.softmax(x, 1)
        fetches["log_softmax 0"] = ff.log_softmax(x, 0)
    out = check_all(g, fetches, {x: data}, tuning=small_windows)
    assert np.isnan(out["max axis=1"][[0, 4]]).all() and out["max axis=1"][1] == inf
    assert out["argmax 1"][4] == 0 and out["argmax 1"][5] == 10
    assert out["logsumexp 1"][2] == -inf and np.isnan(out["softmax 1"][[0, 1, 2, 3, 4]]).all()


# --- softmax, log_softmax, logsumexp --------------------------------------------------------

def test_softmax_and_logsumexp_along_long_and_strided_axes(gl):
    rng = np.random.default_rng(14)
    rows = (rng.standard_normal((3, 4099)) * 4).astype(np.float32)   # multi-pass rows
    cols = (rng.standard_normal((2500, 6)) * 4).astype(np.float32)   # other stride
    mid = (rng.standard_normal((2, 3000, 8)) * 4).astype(np.float32)  # 4-aligned stride
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder(rows.shape, name="a")
        b = ff.placeholder(cols.shape, name="b")
        c = ff.placeholder(mid.shape, name="c")
        fetches = {"softmax rows": ff.softmax(a), "log_softmax rows": ff.log_softmax(a),
                   "softmax cols": ff.softmax(b, 0), "log_softmax mid": ff.log_softmax(c, 1),
                   "softmax mid": ff.softmax(c, 1),
                   "logsumexp rows": ff.reduce_logsumexp(a, 1),
                   "logsumexp all": ff.reduce_logsumexp(c),
                   "logsumexp (0, 1)": ff.reduce_logsumexp(c, (0, 1), keepdims=True)}
    # log-probabilities and log-sums near 0 are differences of numbers as large as |x|
    scales = {"log_softmax rows": np.abs(rows).max(1, keepdims=True) + 1,
              "log_softmax mid": np.abs(mid).max(1, keepdims=True) + 1,
              "logsumexp rows": np.abs(rows).max(1) + 1, "logsumexp all": np.abs(mid).max() + 1,
              "logsumexp (0, 1)": np.abs(mid).max((0, 1), keepdims=True) + 1}
    out = check_all(g, fetches, {a: rows, b: cols, c: mid}, scales)
    np.testing.assert_allclose(out["softmax rows"].sum(-1), 1, rtol=1e-4)
    np.testing.assert_allclose(out["softmax mid"].sum(1), 1, rtol=1e-4)


def test_a_small_softmax_is_one_kernel_and_a_large_one_a_tree(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((64, 10), name="x")
        y = ff.log_softmax(x)
    assert len(kernels_of(g, y, x)) == 1


def test_a_node_runs_as_several_kernels_with_values_between_them(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1024, 1000), name="x")
        y = ff.softmax(x)
    kernels = kernels_of(g, y, x)
    assert len(kernels) >= 3 and all(k.nodes == (y.name,) for k in kernels)
    assert kernels[-1].output.value == y.value.name
    assert len({k.name for k in kernels}) == len(kernels)
    between = [k.output.value for k in kernels[:-1]]
    assert all(v.startswith(y.name + ":r") for v in between)


# --- cumsum ---------------------------------------------------------------------------

def np_cumsum(x, axis, exclusive, reverse):
    """In float64 (numpy's float32 running sum drifts on long axes)."""
    wide = x.astype(np.float64) if x.dtype == np.float32 else x
    if reverse:
        wide = np.flip(wide, axis)
    out = np.cumsum(wide, axis=axis, dtype=wide.dtype)
    if exclusive:
        out = np.concatenate([np.zeros_like(np.take(out, [0], axis=axis)),
                              np.take(out, range(x.shape[axis] - 1), axis=axis)], axis=axis)
    if reverse:
        out = np.flip(out, axis)
    return np.ascontiguousarray(out).astype(x.dtype)


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_cumsum_scans_across_blocks_in_every_mode(gl, dtype):
    rng = np.random.default_rng(17)
    cases = {"rows": ((3, 1001), 1), "cols": ((1001, 3), 0), "cols4": ((2, 700, 8), 1),
             "long": ((70001,), 0)}
    if dtype == "int32":
        del cases["long"], cases["cols"]       # the same kernels as float32's
    g = ff.Graph()
    with g.as_default():
        feeds, fetches, expected, scales = {}, {}, {}, {}
        for name, (shape, axis) in cases.items():
            data = (rng.uniform(-2, 2, shape).astype(np.float32) if dtype == "float32"
                    else rng.integers(-2 ** 31, 2 ** 31 - 1, shape, dtype=np.int64)
                    .astype(np.int32))                  # int32 sums wrap
            x = ff.placeholder(shape, dtype, name=name)
            feeds[x] = data
            for exclusive in (False, True):
                for reverse in (False, True):
                    label = f"{name} exclusive={exclusive} reverse={reverse}"
                    fetches[label] = ff.cumsum(x, axis, exclusive, reverse)
                    with np.errstate(over="ignore"):
                        expected[label] = np_cumsum(data, axis, exclusive, reverse)
                    if dtype == "float32":
                        scales[label] = np_cumsum(np.abs(data), axis, exclusive, reverse)
    out, ref = run_both(g, fetches, feeds)
    for label in fetches:
        assert_matches(out[label], ref[label], rtol=RTOL, scale=scales.get(label),
                       what=f"{label} (reference executor)")
        assert_matches(out[label], expected[label], rtol=RTOL, scale=scales.get(label),
                       what=f"{label} (float64 formula)")


def test_cumsum_infinities_and_nan_cross_blocks(gl, small_windows):
    data = np.random.default_rng(18).uniform(-1, 1, (3, 37)).astype(np.float32)
    data[0, 5] = inf                    # inf from block 0 on
    data[1, 9], data[1, 30] = inf, -inf  # NaN from the second on
    data[2, 20] = nan
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        fetches = {f"{e} {r}": ff.cumsum(x, 1, e, r) for e in (False, True)
                   for r in (False, True)}
    out = check_all(g, fetches, {x: data}, tuning=small_windows)
    assert out["False False"][0, 36] == inf and np.isnan(out["False False"][1, 36])
    assert not np.isnan(out["False False"][2, :20]).any()


def test_tools_see_every_kernel_of_a_node(gl, tmp_path):
    """fragflow shaders / profile and kernel_of with several kernels per node."""
    from fragflow.tools.compiled import kernel_of
    g = ff.Graph()
    with g.as_default():
        # fed, not a Variable: a kernel reading only weights runs once, at the first
        # run (hoisted: docs/RUNTIME.md), and a profile of later runs leaves it out
        x = ff.placeholder((300_000,), "float32", name="x")
        y = ff.sum(x)
    ones = np.ones(300_000, np.float32)
    with ff.Session(g) as sess:
        fn = sess.compile([y], feeds=[x])
        (total,) = fn(ones)
        paths = fn.dump_shaders(str(tmp_path))
        profile = sess.profile(y, {x: ones}, runs=1)
        assert total == 300_000
        assert len(fn.kernels) >= 2 and len(paths) == len(fn.kernels)
        assert [r["kernel"] for r in profile.kernel_rows] == [k.name for k in fn.kernels]
        assert all(r["op"] == "sum" for r in profile.kernel_rows)
        assert kernel_of(g, fn.kernels) == {y.name: 0}


# --- gradients -------------------------------------------------------------------------

def test_gradients_through_trees_match_finite_differences(gl, small_windows):
    rng = np.random.default_rng(15)
    x = rng.standard_normal((5, 37)).astype(np.float32)
    small = {"tuning": small_windows}
    check_gradients(lambda t: ff.softmax(t, 1) * ff.reduce_logsumexp(t, 0), {"x": x}, **small)
    check_gradients(lambda t: ff.log_softmax(t, 0) + ff.mean(t, 1, keepdims=True), {"x": x},
                    **small)
    check_gradients(lambda t: ff.max(t, 1) + ff.sum(t * t, 0)[:5], {"x": x}, **small)
    check_gradients(lambda t: ff.cumsum(t, 1) * ff.cumsum(t, 0, True, True), {"x": x},
                    **small)


def test_gradient_graphs_reduce_with_trees(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4096, 300), name="x")
        loss = ff.sum(ff.softmax(x) * x)
        (dx,) = ff.gradients(loss, [x])
    kernels = kernels_of(g, dx, x)
    # the gradient's sum over the softmax axis runs in passes too
    assert any(".p" in k.name for k in kernels)
    rng = np.random.default_rng(16)
    data = rng.standard_normal((4096, 300)).astype(np.float32)
    out, ref = run_both(g, {"dx": dx}, {x: data})
    assert_matches(out["dx"], ref["dx"], rtol=1e-3, atol=1e-4, what="dx")
