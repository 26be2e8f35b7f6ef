"""A/B of Tuning knobs on a whole ONNX model in one process (llvmpipe, or whatever GL
device the session gets): the model compiled once per variant (--profile, llvmpipe's
by default, with FRAGFLOW_TUNING-style changes), the variants' runs interleaved round by round
(the order rotated each round) so load changes hit all alike; each variant's outputs
checked against the first's.

    python benchmarks/tuning_ab.py build/bench-transformers/bert-test-*.onnx \\
        --variant off='matmul.attention_reads_blocks=False' --variant on= \\
        [--rounds 41] [--repeat 3] [--trainable]

Prints per repeat each variant's median ms, the first's median over this one's and its
kernels; then the median of those ratios over repeats, and the load."""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import fragflow as ff


def feeds_for(model, seed: int = 0) -> list:
    """Seeded feeds in model.inputs' order: token ids below 100, masks of ones,
    floats N(0, 1)."""
    rng = np.random.default_rng(seed)
    out = []
    for name, p in model.inputs_by_name.items():
        if "mask" in name:
            out.append(np.ones(p.shape, p.dtype))
        elif np.dtype(p.dtype).kind in "iu":
            out.append(rng.integers(0, 100, p.shape).astype(p.dtype))
        else:
            out.append(rng.standard_normal(p.shape).astype(p.dtype))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--variant", action="append", default=[],
                        help="label=changes (FRAGFLOW_TUNING syntax; 'base=' for the "
                             "profile's defaults); repeatable")
    parser.add_argument("--profile", default="llvmpipe",
                        help="the Tuning profile the variants change")
    parser.add_argument("--rounds", type=int, default=41)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--trainable", action="store_true",
                        help="ff.onnx.load's default (weights as variables), not "
                             "trainable=False (constants folded)")
    args = parser.parse_args(argv)
    model = ff.onnx.load(args.model, trainable=args.trainable)
    feeds = feeds_for(model)
    variants = [v.partition("=")[::2] for v in args.variant or ["base="]]
    sessions, fns = [], {}
    for label, changes in variants:
        sess = ff.Session(model.graph,
                          tuning=ff.Tuning.named(args.profile).from_env(changes))
        sessions.append(sess)
        fns[label] = sess.compile(model.outputs, feeds=model.inputs)
    first = fns[variants[0][0]](*feeds)
    for label, fn in fns.items():
        out = fn(*feeds)
        diff = max(float(np.max(np.abs(np.asarray(a, np.float64) - b)))
                   for a, b in zip(out, first))
        print(f"{label}: {len(fn.kernels)} kernels, max |diff| from "
              f"{variants[0][0]} {diff:.1e}", flush=True)
    ratios = {label: [] for label in fns}
    for rep in range(args.repeat):
        load0 = os.getloadavg()[0]
        times = {label: [] for label in fns}
        labels = list(fns)
        for n in range(args.rounds):
            for j in range(len(labels)):
                label = labels[(j + n) % len(labels)]
                t = time.perf_counter()
                fns[label](*feeds)
                times[label].append(1e3 * (time.perf_counter() - t))
        medians = {k: statistics.median(v) for k, v in times.items()}
        base = medians[labels[0]]
        for label in labels:
            ratios[label].append(base / medians[label])
        print(f"repeat {rep} (load {load0:.1f} -> {os.getloadavg()[0]:.1f}): " +
              ", ".join(f"{k} {v:.2f} ms ({base / v:.3f}x)" for k, v in medians.items()),
              flush=True)
    print("median over repeats of the first's ms / this one's: " +
          ", ".join(f"{k} {statistics.median(v):.3f}x" for k, v in ratios.items()))
    print(f"load {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for sess in sessions:
        sess.close()


if __name__ == "__main__":
    main()
