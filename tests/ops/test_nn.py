"""softmax, log_softmax, reduce_logsumexp, cumsum and local_response_normalization
(primitives with kernels of their own), and the composites of frontend/ops_nn.py
(moments, batch_normalization, the cross-entropy losses), on GL against the numpy
reference executor and against formulas written out here independently.

Tolerances: 1e-4 relative (these are reductions), with atol scaled by the sum of |terms|
where a result can be tiny by cancellation (cumsum, logsumexp near 0). Each test builds
one graph with many fetches: every kernel is a shader llvmpipe compiles (~100 ms).
"""
import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen.limits import unroll_for
from fragflow.codegen.tuning import tuning_with
from tests.reference import assert_matches, run_both

RTOL = 1e-4
inf, nan = np.inf, np.nan


def check_all(graph, fetches, feed_dict, expected=None, scales=None, tuning=None):
    """GL against the numpy executor for every fetch, and against expected[label]
    (independent formulas) where given."""
    out, ref = run_both(graph, fetches, feed_dict, tuning)
    scales = scales or {}
    for label in fetches:
        assert_matches(out[label], ref[label], rtol=RTOL, scale=scales.get(label),
                       what=f"{label} (reference executor)")
    for label, want in (expected or {}).items():
        assert_matches(out[label], np.asarray(want).astype(out[label].dtype), rtol=RTOL,
                       scale=scales.get(label), what=f"{label} (numpy formula)")
    return out


# Independent formulas: log-sum-exp by np.logaddexp.reduce (pairwise, exact with
# infinities), then TensorFlow's conventions for the slices it leaves undefined.
def np_log_softmax(x, axis):
    x = x.astype(np.float64)
    with np.errstate(invalid="ignore"):        # inf - inf: replaced by NaN below anyway
        lse = np.logaddexp.reduce(x, axis=axis, keepdims=True)
        out = x - lse
    bad = np.any(np.isnan(x) | (x == inf), axis=axis, keepdims=True) | (lse == -inf)
    return np.where(bad, nan, out)


def np_softmax(x, axis):
    return np.exp(np_log_softmax(x, axis))


def np_logsumexp(x, axis, keepdims=False):
    x = x.astype(np.float64)
    return np.logaddexp.reduce(x, axis=axis, keepdims=keepdims) if x.size else \
        np.full(np.sum(x, axis=axis, keepdims=keepdims).shape, -inf)


def np_cumsum(x, axis, exclusive, reverse):
    """Running sums by an explicit loop over the axis, in float64 (int64 wrapped)."""
    wide = x.astype(np.float64 if x.dtype == np.float32 else np.int64)
    moved = np.moveaxis(wide, axis, 0)
    out = np.zeros_like(moved)
    order = range(moved.shape[0] - 1, -1, -1) if reverse else range(moved.shape[0])
    running = np.zeros_like(moved[0])
    with np.errstate(invalid="ignore"):        # inf + -inf is NaN, as it should be
        for k in order:
            if exclusive:
                out[k] = running
                running = running + moved[k]
            else:
                running = running + moved[k]
                out[k] = running
    out = np.moveaxis(out, 0, axis)
    if x.dtype == np.int32:
        out = ((out + 2 ** 31) % 2 ** 32 - 2 ** 31).astype(np.int32)
    return out


def np_lrn(x, r, bias, alpha, beta):
    x = x.astype(np.float64)
    depth = x.shape[-1]
    padded = np.pad(np.square(x), [(0, 0)] * 3 + [(r, r)])
    sqr_sum = sum(padded[..., k:k + depth] for k in range(2 * r + 1))
    return x / (bias + alpha * sqr_sum) ** beta


# --- softmax and log_softmax ---------------------------------------------------------

def test_softmax_and_log_softmax_along_each_axis(gl):
    rng = np.random.default_rng(1)
    data = (rng.standard_normal((3, 5, 7)) * 3).astype(np.float32)   # 105 elements
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        fetches, expected = {}, {}
        for axis in (-1, 0, 1, 2):
            fetches[f"softmax axis={axis}"] = ff.softmax(x, axis)
            expected[f"softmax axis={axis}"] = np_softmax(data, axis)
            fetches[f"log_softmax axis={axis}"] = ff.log_softmax(x, axis)
            expected[f"log_softmax axis={axis}"] = np_log_softmax(data, axis)
        fetches["default axis"] = ff.softmax(x)
    out = check_all(g, fetches, {x: data}, expected)
    np.testing.assert_allclose(out["softmax axis=1"].sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(out["default axis"], out["softmax axis=-1"])


def test_softmax_edge_values_follow_tensorflow(gl):
    rows = np.array([
        [1e4, -1e4, 0.0, 1e4 - 1.0, -1.0],          # large logits: no overflow
        [-1e4, -1e4 + 2.0, -1e4, -1e4 - 3.0, -1e4],  # all very negative
        [1.0, nan, 2.0, 0.0, 3.0],                   # NaN: NaN throughout
        [1.0, inf, 2.0, 0.0, 3.0],                   # +inf: NaN throughout (inf - inf)
        [-inf, -inf, -inf, -inf, -inf],              # only -inf: NaN throughout
        [-inf, 2.0, -inf, 0.5, 0.0],                 # -inf beside finite: probability 0
        [0.0, 0.0, 0.0, 0.0, 0.0],
    ], np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(rows.shape, name="x")
        fetches = {"softmax": ff.softmax(x), "log_softmax": ff.log_softmax(x),
                   "softmax axis 0": ff.softmax(x, axis=0)}
    expected = {"softmax": np_softmax(rows, -1), "log_softmax": np_log_softmax(rows, -1),
                "softmax axis 0": np_softmax(rows, 0)}
    out = check_all(g, fetches, {x: rows}, expected)
    assert np.isnan(out["softmax"][2:5]).all()
    assert (out["softmax"][5, [0, 2]] == 0).all()
    assert (out["log_softmax"][5, [0, 2]] == -inf).all()
    e = np.exp(-1.0)                         # row 0: only the two near 1e4 count
    np.testing.assert_allclose(out["softmax"][0], [1 / (1 + e), 0, 0, e / (1 + e), 0],
                               rtol=1e-5, atol=1e-30)


def test_softmax_over_a_single_class_and_a_long_axis(gl):
    rng = np.random.default_rng(2)
    one = rng.standard_normal((6, 1)).astype(np.float32)
    long = (rng.standard_normal((2, 3001)) * 4).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder(one.shape, name="a")
        b = ff.placeholder(long.shape, name="b")
        fetches = {"softmax one": ff.softmax(a), "log_softmax one": ff.log_softmax(a),
                   "softmax long": ff.softmax(b), "log_softmax long": ff.log_softmax(b)}
    out = check_all(g, fetches, {a: one, b: long},
                    {"softmax one": np.ones_like(one), "log_softmax one": np.zeros_like(one),
                     "softmax long": np_softmax(long, -1),
                     "log_softmax long": np_log_softmax(long, -1)})
    assert (out["softmax one"] == 1).all()


def test_unrolled_loops_give_the_same_results(gl):
    """Axes longer than llvmpipe's loop limit unroll their loop bodies; force that
    path on short axes by lowering the loop budget (Tuning.max_loop_trips)."""
    tuning = ff.Tuning().with_(max_loop_trips=8)
    rng = np.random.default_rng(3)
    data = rng.standard_normal((5, 37)).astype(np.float32)
    ints = rng.integers(-9, 9, (37, 5)).astype(np.int32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        xi = ff.placeholder(ints.shape, "int32", name="xi")
        fetches = {"softmax": ff.softmax(x), "log_softmax": ff.log_softmax(x, 0),
                   "logsumexp": ff.reduce_logsumexp(x, 1),
                   "cumsum contiguous": ff.cumsum(x, 1, reverse=True),
                   "cumsum strided": ff.cumsum(x, 0, exclusive=True),
                   "cumsum int strided": ff.cumsum(xi, 0)}
    with tuning_with(tuning):
        assert unroll_for(37) > 1
    check_all(g, fetches, {x: data, xi: ints},
              {"softmax": np_softmax(data, -1), "log_softmax": np_log_softmax(data, 0),
               "logsumexp": np_logsumexp(data, 1),
               "cumsum strided": np_cumsum(data, 0, True, False),
               "cumsum int strided": np_cumsum(ints, 0, False, False)},
              {"cumsum contiguous": np_cumsum(np.abs(data), 1, False, True),
               "cumsum strided": np_cumsum(np.abs(data), 0, True, False)},
              tuning=tuning)


# --- reduce_logsumexp ------------------------------------------------------------------

def test_logsumexp_over_axes_and_keepdims(gl):
    rng = np.random.default_rng(4)
    data = (rng.standard_normal((3, 5, 7)) * 5).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        fetches, expected, scales = {}, {}, {}
        for axis in (None, 0, -1, (0, 2)):
            for keep in (False, True):
                label = f"axis={axis} keepdims={keep}"
                fetches[label] = ff.reduce_logsumexp(x, axis, keepdims=keep)
                expected[label] = np_logsumexp(data, axis, keep)
                # |result| can be tiny: allow 1e-4 of the max |x|
                scales[label] = np.max(np.abs(data), axis=axis, keepdims=keep) + 1
        fetches["alias"] = ff.logsumexp(x, 1)
    out = check_all(g, fetches, {x: data}, expected, scales)
    assert out["axis=(0, 2) keepdims=True"].shape == (1, 5, 1)


def test_logsumexp_edge_values_and_a_100k_axis(gl):
    rows = np.array([[1e4, 1e4, -1e4, 0.0], [nan, 1.0, 2.0, inf], [1.0, inf, -inf, 2.0],
                     [-inf, -inf, -inf, -inf], [-1e4, -1e4, -1e4, -1e4],
                     [-inf, 0.0, -inf, -inf]], np.float32)
    rng = np.random.default_rng(5)
    long = rng.uniform(-3, 3, 100_000).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(rows.shape, name="x")
        y = ff.placeholder(long.shape, name="y")
        fetches = {"rows": ff.reduce_logsumexp(x, axis=1), "long": ff.reduce_logsumexp(y)}
    out = check_all(g, fetches, {x: rows, y: long},
                    {"rows": [1e4 + np.log(2), nan, inf, -inf, -1e4 + np.log(4), 0.0],
                     "long": np_logsumexp(long, None)})
    assert out["rows"][2] == inf and out["rows"][3] == -inf and np.isnan(out["rows"][1])


# --- cumsum ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_cumsum_all_modes_along_each_axis(gl, dtype):
    rng = np.random.default_rng(6)
    shape = (3, 5, 7)
    data = (rng.uniform(-4, 4, shape).astype(np.float32) if dtype == "float32"
            else rng.integers(-20, 20, shape).astype(np.int32))
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(shape, dtype, name="x")
        fetches, expected, scales = {}, {}, {}
        for axis in (0, 1, 2, -1):
            for exclusive in (False, True):
                for reverse in (False, True):
                    label = f"axis={axis} exclusive={exclusive} reverse={reverse}"
                    fetches[label] = ff.cumsum(x, axis, exclusive, reverse)
                    expected[label] = np_cumsum(data, axis, exclusive, reverse)
                    if dtype == "float32":
                        scales[label] = np_cumsum(np.abs(data), axis, exclusive, reverse)
    check_all(g, fetches, {x: data}, expected, scales)


def test_cumsum_edge_values_and_int32_wraparound(gl):
    floats = np.array([[1.0, inf, 2.0, -inf, 3.0], [nan, 1.0, 2.0, 3.0, 4.0],
                       [1e30, 1e30, -1e30, 1.0, 2.0]], np.float32)
    ints = np.array([[2 ** 31 - 1, 1, 5, -(2 ** 31), -1]], np.int32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(floats.shape, name="x")
        xi = ff.placeholder(ints.shape, "int32", name="xi")
        fetches = {"float": ff.cumsum(x, 1), "float reverse": ff.cumsum(x, 1, reverse=True),
                   "int": ff.cumsum(xi, 1),
                   "int exclusive reverse": ff.cumsum(xi, 1, True, True)}
    out = check_all(g, fetches, {x: floats, xi: ints},
                    {"float": np_cumsum(floats, 1, False, False),
                     "float reverse": np_cumsum(floats, 1, False, True),
                     "int": np_cumsum(ints, 1, False, False),
                     "int exclusive reverse": np_cumsum(ints, 1, True, True)})
    assert out["int"][0, 1] == -(2 ** 31)                # INT_MAX + 1 wraps


def test_cumsum_along_a_100k_axis(gl):
    """Longer than llvmpipe's 65535 loop iterations per fragment."""
    rng = np.random.default_rng(7)
    data = rng.uniform(-1, 1, (1, 100_003)).astype(np.float32)
    ints = rng.integers(-1000, 1000, 100_003).astype(np.int32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        xi = ff.placeholder(ints.shape, "int32", name="xi")
        fetches = {"forward": ff.cumsum(x, 1),
                   "int reverse exclusive": ff.cumsum(xi, 0, True, True)}
    wide = data.astype(np.float64)
    out = check_all(g, fetches, {x: data, xi: ints},
                    {"forward": np.cumsum(wide, axis=1),
                     "int reverse exclusive": np.cumsum(ints[::-1].astype(np.int64))[::-1]
                     - ints},
                    {"forward": np.cumsum(np.abs(wide), axis=1)})
    assert out["forward"].shape == (1, 100_003)


# --- local_response_normalization ------------------------------------------------------

def test_local_response_normalization(gl):
    rng = np.random.default_rng(8)
    data = rng.standard_normal((2, 3, 2, 7)).astype(np.float32)
    cases = {"defaults": dict(), "radius 0": dict(depth_radius=0, bias=2.0, alpha=0.5),
             "radius 2 beta 0.75": dict(depth_radius=2, bias=1.0, alpha=0.3, beta=0.75),
             "beta 1": dict(depth_radius=1, bias=0.5, alpha=2.0, beta=1.0),
             "window wider than depth": dict(depth_radius=9, bias=1.5, alpha=0.1, beta=0.3)}
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        fetches = {k: ff.local_response_normalization(x, **kw) for k, kw in cases.items()}
        fetches["lrn alias"] = ff.lrn(x, 1)
    expected = {}
    for k, kw in cases.items():
        kw = {"depth_radius": 5, "bias": 1.0, "alpha": 1.0, "beta": 0.5, **kw}
        expected[k] = np_lrn(data, kw["depth_radius"], kw["bias"], kw["alpha"], kw["beta"])
    check_all(g, fetches, {x: data}, expected)


def test_lrn_grad_kernel(gl):
    """The gradient op (TensorFlow's LRNGrad) on GL against the reference executor; its
    formula is checked against finite differences in tests/autodiff/test_nn_gradients."""
    rng = np.random.default_rng(12)
    data = rng.standard_normal((2, 1, 3, 9)).astype(np.float32)
    weights = rng.standard_normal(data.shape).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        fetches = {}
        for kw in (dict(depth_radius=2, beta=0.75), dict(depth_radius=0, alpha=0.3),
                   dict(depth_radius=3, bias=2.0, beta=1.0)):
            y = ff.local_response_normalization(x, **kw)
            (fetches[f"lrn_grad {kw}"],) = ff.gradients(ff.sum(y * weights), [x])
    assert all(t.op.op == "lrn_grad" for t in fetches.values())
    check_all(g, fetches, {x: data})


# --- composites ------------------------------------------------------------------------

def test_moments_and_batch_normalization(gl):
    rng = np.random.default_rng(9)
    data = (rng.standard_normal((4, 3, 5)) * 2 + 3).astype(np.float32)
    mean = rng.standard_normal(5).astype(np.float32)
    var = rng.uniform(0.5, 2, 5).astype(np.float32)
    offset = rng.standard_normal(5).astype(np.float32)
    scale = rng.uniform(0.5, 2, 5).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(data.shape, name="x")
        m01, v01 = ff.moments(x, axes=[0, 1])
        mk, vk = ff.moments(x, axes=[2], keepdims=True)
        fetches = {"mean axes 0,1": m01, "variance axes 0,1": v01,
                   "mean keepdims": mk, "variance keepdims": vk,
                   "batch_normalization": ff.batch_normalization(
                       x, mean, var, offset, scale, variance_epsilon=1e-3),
                   "no offset, no scale": ff.batch_norm(x, mean, var, None, None, 0.01),
                   "with its moments": ff.batch_normalization(x, m01, v01, offset, scale,
                                                              1e-5)}
    d = data.astype(np.float64)
    m, v = d.mean(axis=(0, 1)), d.var(axis=(0, 1))
    check_all(g, fetches, {x: data}, {
        "mean axes 0,1": m, "variance axes 0,1": v,
        "mean keepdims": d.mean(axis=2, keepdims=True),
        "variance keepdims": d.var(axis=2, keepdims=True),
        "batch_normalization": (d - mean) / np.sqrt(var + 1e-3) * scale + offset,
        "no offset, no scale": (d - mean) / np.sqrt(var + 0.01),
        "with its moments": (d - m) / np.sqrt(v + 1e-5) * scale + offset},
        {"with its moments": np.abs(d) / np.sqrt(v) * scale + 1,
         "batch_normalization": np.abs(d) / np.sqrt(var) * scale + 1,
         "no offset, no scale": np.abs(d) / np.sqrt(var) + 1})


def test_softmax_cross_entropy_losses(gl):
    rng = np.random.default_rng(10)
    logits = (rng.standard_normal((6, 5)) * 3).astype(np.float32)
    logits[0] = [1e4, -1e4, 0.0, 3.0, -2.0]
    logits[1, 3] = -inf                      # a class that cannot happen
    probs = rng.uniform(0, 1, (6, 5)).astype(np.float32)
    probs /= probs.sum(axis=1, keepdims=True)
    probs[1, 3] = 0.0
    labels = np.array([0, 2, 4, 1, 3, 7], np.int32)     # 7: out of range -> NaN
    g = ff.Graph()
    with g.as_default():
        z = ff.placeholder(logits.shape, name="logits")
        p = ff.placeholder(probs.shape, name="labels")
        s = ff.placeholder(labels.shape, "int32", name="sparse_labels")
        fetches = {
            "dense": ff.softmax_cross_entropy_with_logits(labels=p, logits=z),
            "dense axis 0": ff.softmax_cross_entropy_with_logits(
                labels=ff.transpose(p), logits=ff.transpose(z), axis=0),
            "sparse": ff.sparse_softmax_cross_entropy_with_logits(labels=s, logits=z)}
    lsm = np_log_softmax(logits, -1)
    with np.errstate(invalid="ignore"):
        # 0 * -inf: NaN, as TensorFlow's kernel gives (labels * (lse - shifted logits))
        dense = -np.sum(probs * lsm, axis=1)
    sparse = np.array([-lsm[i, c] if c < 5 else nan for i, c in enumerate(labels)])
    out = check_all(g, fetches, {z: logits, p: probs, s: labels},
                    {"dense": dense, "dense axis 0": dense, "sparse": sparse},
                    {"dense": np.sum(probs * np.abs(np.nan_to_num(lsm)), axis=1) + 1})
    assert np.isnan(out["sparse"][5])            # label 7 of 5 classes
    assert np.isfinite(out["sparse"][1])         # another class's -inf logit is harmless


def test_sigmoid_cross_entropy_with_logits(gl):
    x = np.array([0.0, 1.0, -1.0, 30.0, -30.0, 1e4, -1e4, 0.5, -2.5, 7.0], np.float32)
    z = np.array([0.0, 1.0, 0.3, 1.0, 0.0, 0.5, 0.5, 1.0, 0.0, 0.2], np.float32)
    g = ff.Graph()
    with g.as_default():
        logits = ff.placeholder(x.shape, name="logits")
        labels = ff.placeholder(z.shape, name="labels")
        loss = ff.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits)
    # -z log(sigmoid(x)) - (1 - z) log(1 - sigmoid(x)), in float64 with logaddexp
    d, t = x.astype(np.float64), z.astype(np.float64)
    want = t * np.logaddexp(0, -d) + (1 - t) * np.logaddexp(0, d)
    check_all(g, {"loss": loss}, {logits: x, labels: z}, {"loss": want},
              {"loss": np.abs(d) + 1})


# --- errors ----------------------------------------------------------------------------

def test_bad_inputs_raise_clear_errors():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 3), name="x")
        xi = ff.placeholder((2, 3), "int32", name="xi")
        b = ff.placeholder((2, 3), "bool", name="b")
        with pytest.raises(ff.DTypeError, match="softmax.*int32"):
            ff.softmax(xi)
        with pytest.raises(ff.ShapeError, match="out of range"):
            ff.log_softmax(x, axis=2)
        with pytest.raises(ff.ShapeError, match="single int axis"):
            ff.softmax(x, axis=(0, 1))
        with pytest.raises(ff.DTypeError, match="logsumexp"):
            ff.reduce_logsumexp(xi)
        with pytest.raises(ff.DTypeError, match="cumsum.*bool"):
            ff.cumsum(b)
        with pytest.raises(ff.ShapeError, match="4-D"):
            ff.local_response_normalization(x)
        with pytest.raises(ff.AttrError, match="depth_radius"):
            ff.local_response_normalization(ff.reshape(x, (1, 1, 2, 3)), depth_radius=-1)
        with pytest.raises(ff.DTypeError, match="int32 class indices"):
            ff.sparse_softmax_cross_entropy_with_logits(labels=x, logits=x)
        with pytest.raises(ff.ShapeError, match="need logits of shape"):
            ff.sparse_softmax_cross_entropy_with_logits(labels=xi, logits=x)
