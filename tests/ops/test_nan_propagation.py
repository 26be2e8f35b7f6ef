"""NaN and infinities on GL exactly as numpy computes them (issue 12).

Mesa's optimiser rewrites x - x, x + -x and (x + y) - x algebraically (its inexact
rules) and x * 0 and 0 / x where the 0 is a literal, which is wrong where x is inf or
NaN. Elementwise kernels mark their output `invariant` (every operation computing it is
then exact) and take float zeros from a uniform, so these keep IEEE results. Each case
runs fused (one kernel) and op by op, against numpy itself and the reference executor.
"""
import numpy as np
import pytest

import fragflow as ff

X_EDGES = np.array([np.inf, -np.inf, np.nan, 1.5, -2.0, 0.0, -0.0, 3e38], np.float32)
N = np.float32(np.nan)

CASES = {
    # name: (fragflow expression, numpy expression)
    "x - x": (lambda x: x - x, lambda x: x - x),
    "x + -x": (lambda x: x + (-x), lambda x: x + (-x)),
    "squared_difference(x, x)": (lambda x: ff.squared_difference(x, x),
                                 lambda x: np.square(x - x)),
    "zeros_like(x) / x": (lambda x: ff.zeros_like(x) / x, lambda x: np.zeros_like(x) / x),
    "zeros_like(x) * x": (lambda x: ff.zeros_like(x) * x, lambda x: np.zeros_like(x) * x),
    "x * 0": (lambda x: x * 0.0, lambda x: x * np.float32(0)),
    "0 / x": (lambda x: 0.0 / x, lambda x: np.float32(0) / x),
    "x / x": (lambda x: x / x, lambda x: x / x),
    "(x + 1) - x": (lambda x: (x + 1.0) - x, lambda x: (x + np.float32(1)) - x),
    "x * 2 - x - x": (lambda x: x * 2.0 - x - x, lambda x: x * np.float32(2) - x - x),
    "square(x) - square(x)": (lambda x: ff.square(x) - ff.square(x),
                              lambda x: np.square(x) - np.square(x)),
    "maximum(x, nan)": (lambda x: ff.maximum(x, N), lambda x: np.maximum(x, N)),
    "minimum(nan, x)": (lambda x: ff.minimum(N, x), lambda x: np.minimum(N, x)),
    "maximum(x, 0)": (lambda x: ff.maximum(x, 0.0), lambda x: np.maximum(x, np.float32(0))),
    "minimum(x, x)": (lambda x: ff.minimum(x, x), lambda x: np.minimum(x, x)),
    "relu(x)": (ff.relu, lambda x: np.where(x < 0, np.float32(0), x)),
    "leaky_relu(x, 0)": (lambda x: ff.leaky_relu(x, 0.0),
                         lambda x: np.where(x > 0, x, x * np.float32(0))),
    "x == x": (lambda x: ff.equal(x, x), lambda x: x == x),
    "x != x": (lambda x: ff.not_equal(x, x), lambda x: x != x),
    "x >= x": (lambda x: ff.greater_equal(x, x), lambda x: x >= x),
    "abs(x) - abs(x)": (lambda x: ff.abs(x) - ff.abs(x), lambda x: np.abs(x) - np.abs(x)),
}

EACH_OP = ["fold_constants", "cse", "simplify", "verify"]    # no fusion: a kernel per op


@pytest.mark.parametrize("repeats", [1, 8200], ids=["small", "large"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "op_by_op"])
def test_nan_and_inf_as_numpy(gl, fused, repeats):
    """(Past 65,536 elements fold_constants leaves zeros_like(x) to the kernel.)"""
    X = np.tile(X_EDGES, repeats)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(X.shape, "float32", name="x")
        ys = {name: fn(x) for name, (fn, _) in CASES.items()}
    names = list(ys)
    with ff.Session(g) as sess:
        fn = sess.compile([ys[k] for k in names], feeds=[x],
                          passes=None if fused else EACH_OP)
        got = dict(zip(names, fn(X)))
    with ff.Session(g, backend="numpy", passes=[]) as ref_sess:
        ref = dict(zip(names, ref_sess.run([ys[k] for k in names], {x: X})))
    bad = []
    with np.errstate(all="ignore"):
        for name, (_, numpy_fn) in CASES.items():
            want = numpy_fn(X)
            for what, other in (("numpy", want), ("the reference executor", ref[name])):
                if not np.array_equal(got[name], other, equal_nan=True):
                    bad.append(f"{name}: GL {got[name][:8]} != {what} {other[:8]}")
    assert not bad, "\n".join(bad)


def test_elementwise_kernels_are_exact(gl):
    """zeros_like(x) / x in one kernel (its only consumer, past fold_constants' limit),
    and the form that keeps the results: an invariant output, zeros from a uniform."""
    X = np.tile(X_EDGES, 1 << 14)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(X.shape, "float32", name="x")
        y = ff.zeros_like(x) / x
    with ff.Session(g) as sess:
        fn = sess.compile([y], feeds=[x])
        (got,) = fn(X)
        (kernel,) = fn.kernels
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got, np.zeros_like(X) / X)
    assert kernel.op == "fused(zeros_like,div)"
    assert "invariant ff_out;" in kernel.source
    assert "vec4(ff_zero)" in kernel.source and "uniform float ff_zero;" in kernel.source


@pytest.mark.parametrize("m,k,n", [(3, 2, 2), (64, 96, 128)], ids=["one_kernel", "blocked"])
def test_matmul_epilogues_keep_nan(gl, m, k, n):
    """Steps fused after a matmul are exact too: relu(y - y) and (y + c) - c with
    y = a @ b holding inf and NaN, c = inf."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(np.float32)
    a[0, 0], a[1, 1] = np.inf, np.nan
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.inf, np.float32)
    g = ff.Graph()
    with g.as_default():
        y = ff.Variable(a, name="a") @ ff.Variable(b, name="b")
        ys = [ff.relu(y - y), (y + ff.Variable(c, name="c")) - ff.Variable(c, name="c2")]
    with ff.Session(g) as sess:
        got = [sess.compile([t]) for t in ys]
        kernels = [fn.kernels for fn in got]
        got = [fn()[0] for fn in got]
    with ff.Session(g, backend="numpy", passes=[]) as ref_sess:
        want = ref_sess.run(ys)
    assert all(any(kk.op.startswith("fused_matmul") for kk in ks) for ks in kernels)
    for g_, w_ in zip(got, want):
        assert np.isnan(w_).any()
        np.testing.assert_array_equal(np.isnan(g_), np.isnan(w_))
