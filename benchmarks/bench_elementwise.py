"""Side-by-side timings against numpy, in one run (ratios, not absolute claims).

    python benchmarks/bench_elementwise.py [--quick]

Each case runs a compiled fragflow function and the same computation in numpy, takes
the median of several runs after a warm-up, and prints a markdown table. "fed" rows
upload their inputs and read the result back every call (what fn(...) costs);
"resident" rows keep inputs on the GPU as variables and read back only the result.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fragflow as ff


def median_time(fn, runs: int) -> float:
    fn()                                           # warm-up: shader JIT, allocations
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def case_relu_fma(n: int, resident: bool, runs: int):
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    g = ff.Graph()
    with g.as_default():
        if resident:
            ta, tb, tc = (ff.Variable(v, name=nm) for v, nm in zip((a, b, c), "abc"))
            feeds, args = [], ()
        else:
            ta, tb, tc = (ff.placeholder((n,), name=nm) for nm in "abc")
            feeds, args = [ta, tb, tc], (a, b, c)
        y = ff.relu(ta * tb + tc)
    sess = ff.Session(g)
    fn = sess.compile([y], feeds=feeds)
    (out,) = fn(*args)
    ref = np.maximum(a * b + c, 0)
    assert np.allclose(out, ref, rtol=1e-5, atol=1e-6)
    t_gl = median_time(lambda: fn(*args), runs)
    t_np = median_time(lambda: np.maximum(a * b + c, 0), runs)
    kernels = len(fn.kernels)
    sess.close()
    return t_gl, t_np, kernels


UNFUSED = ["fold_constants", "cse", "simplify", "verify"]


def chain8(ff_or_np, a, b):
    """Eight elementwise ops (the fusion benchmark of the passes issue)."""
    m = ff_or_np
    y = a * 1.5 + b
    y = m.tanh(y) - 0.25
    y = m.maximum(y, b) * a
    return m.exp(m.abs(y))


def case_chain8(n: int, runs: int):
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    g = ff.Graph()
    with g.as_default():
        ta, tb = ff.Variable(a, name="a"), ff.Variable(b, name="b")
        y = chain8(ff, ta, tb)
    with ff.Session(g) as sess:
        fused = sess.compile([y])
        plain = sess.compile([y], passes=UNFUSED)
        (out,) = fused()
        assert np.allclose(out, chain8(np, a, b), rtol=1e-5, atol=1e-6)
        t_fused, t_plain = median_time(fused, runs), median_time(plain, runs)
        kernels = (len(fused.kernels), len(plain.kernels))
    return t_fused, t_plain, median_time(lambda: chain8(np, a, b), runs), kernels


def numpy_conv3x3_bias_relu(x, w, b):
    """SAME 3x3 convolution, NHWC/HWIO, in numpy (the reference the ratio is against)."""
    n, h, wd, c = x.shape
    padded = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((n, h, wd, w.shape[-1]), np.float32)
    for i in range(3):
        for j in range(3):
            out += padded[:, i:i + h, j:j + wd, :] @ w[i, j]
    return np.maximum(out + b, 0)


def case_conv(runs: int):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 64, 64, 32)).astype(np.float32)
    w = (rng.standard_normal((3, 3, 32, 32)) * 0.1).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        tx = ff.Variable(x, name="x")
        y = ff.relu(ff.conv2d(tx, ff.Variable(w, name="w"), padding="SAME") +
                    ff.Variable(b, name="b"))
    with ff.Session(g) as sess:
        fused = sess.compile([y])
        plain = sess.compile([y], passes=UNFUSED)
        (out,) = fused()
        assert np.allclose(out, numpy_conv3x3_bias_relu(x, w, b), rtol=1e-4, atol=1e-4)
        t_fused, t_plain = median_time(fused, runs), median_time(plain, runs)
        kernels = (len(fused.kernels), len(plain.kernels))
    return t_fused, t_plain, median_time(lambda: numpy_conv3x3_bias_relu(x, w, b), runs), \
        kernels


def case_matmul(n: int, runs: int):
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    g = ff.Graph()
    with g.as_default():
        ta, tb = ff.Variable(a, name="a"), ff.Variable(b, name="b")
        y = ta @ tb
    sess = ff.Session(g)
    fn = sess.compile([y])
    (out,) = fn()
    assert np.allclose(out, a @ b, rtol=1e-4, atol=1e-3)
    t_gl = median_time(fn, runs)
    t_np = median_time(lambda: a @ b, runs)
    kernels = len(fn.kernels)
    sess.close()
    return t_gl, t_np, kernels


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller sizes, fewer runs")
    args = parser.parse_args()
    runs = 3 if args.quick else 10
    n = 1 << (18 if args.quick else 22)
    m = 128 if args.quick else 512
    info = ff.gl_info()
    print(f"backend: {info['backend']} — {info['renderer']} — OpenGL {info['version']}")
    print(f"numpy {np.__version__}; median of {runs} runs after a warm-up\n")
    print("| case | kernels | fragflow GL | numpy | GL / numpy |")
    print("|---|---|---|---|---|")
    rows = [
        (f"relu(a*b+c), {n / 2**20:g}M floats, fed", case_relu_fma(n, False, runs)),
        (f"relu(a*b+c), {n / 2**20:g}M floats, resident", case_relu_fma(n, True, runs)),
        (f"matmul {m}x{m} @ {m}x{m}, resident", case_matmul(m, runs)),
    ]
    for name, (t_gl, t_np, kernels) in rows:
        print(f"| {name} | {kernels} | {t_gl * 1e3:.2f} ms | {t_np * 1e3:.2f} ms | "
              f"{t_gl / t_np:.2f}x |")
    print("\n| fusion case | kernels fused / unfused | fused | unfused | numpy | "
          "fused / unfused | fused / numpy |")
    print("|---|---|---|---|---|---|---|")
    fusion_rows = [(f"8-op elementwise chain, {n / 2**20:g}M floats, resident",
                    case_chain8(n, runs)),
                   ("conv 3x3 1x64x64x32 -> 32 + bias + relu, resident", case_conv(runs))]
    for name, (t_fused, t_plain, t_np, (k_fused, k_plain)) in fusion_rows:
        print(f"| {name} | {k_fused} / {k_plain} | {t_fused * 1e3:.2f} ms | "
              f"{t_plain * 1e3:.2f} ms | {t_np * 1e3:.2f} ms | {t_fused / t_plain:.2f}x | "
              f"{t_fused / t_np:.2f}x |")


if __name__ == "__main__":
    main()
