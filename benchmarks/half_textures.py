"""Float16 weights in RGBA16F against RGBA32F textures in fragflow's GL runtime: one
model, two sessions (Tuning.half_weight_textures on and off), interleaved runs in one
process; prints the textures' bytes, the medians and fastest runs and their ratios.

    python benchmarks/half_textures.py [--rounds 41] [--repeats 3] [--tokens 32]

The model: a BERT-mini feed-forward block with float16 weights (as ff.onnx.load keeps
a float16 model's), x[T, 256] @ w1[256, 1024] + b1, GELU (tanh form), @ w2[1024, 256]
+ b2: 0.5 M weights."""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import fragflow as ff
from fragflow.runtime.device import Device


def _model(tokens: int):
    rng = np.random.default_rng(0)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((tokens, 256), "float32", name="x")
        w1 = ff.Variable((rng.standard_normal((256, 1024)) * 0.06).astype(np.float16))
        b1 = ff.Variable((rng.standard_normal(1024) * 0.02).astype(np.float16))
        w2 = ff.Variable((rng.standard_normal((1024, 256)) * 0.03).astype(np.float16))
        h = ff.matmul(x, w1) + b1
        h = 0.5 * h * (1.0 + ff.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
        y = ff.matmul(h, w2)
    return g, x, y


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args(argv)
    device = Device.get()
    base = device.tuning
    g, x, y = _model(args.tokens)
    feed = {x: np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)}
    sessions = {}
    for on in (True, False):
        device.tuning = base.with_(half_weight_textures=on)   # read when variables are made
        sessions[on] = ff.Session(g)
        sessions[on].run(y, feed)
    device.tuning = base
    same = np.array_equal(sessions[True].run(y, feed), sessions[False].run(y, feed))
    print(f"{ff.gl_info().get('renderer')}; T={args.tokens}; outputs equal: {same}; "
          f"session bytes RGBA16F {sessions[True].memory()['bytes']}, RGBA32F "
          f"{sessions[False].memory()['bytes']}")
    for repeat in range(args.repeats):
        times = {True: [], False: []}
        for r in range(args.rounds):
            for on in ((True, False) if r % 2 else (False, True)):
                start = time.perf_counter()
                sessions[on].run(y, feed)
                times[on].append(time.perf_counter() - start)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        low = {k: min(v) * 1e3 for k, v in times.items()}
        print(f"  repeat {repeat} (load {os.getloadavg()[0]:.1f}): median ms RGBA16F "
              f"{med[True]:.2f}, RGBA32F {med[False]:.2f} ({med[True] / med[False]:.3f}); "
              f"fastest {low[True]:.2f}, {low[False]:.2f} ({low[True] / low[False]:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
