"""Attention fused (fuse_attention: attention.scores_blocks' two kernels, and with
matmul.attention_scores_blocks off attention.scores' blocked product, its stitch and
the walk, "stitched") against the same graph
unfused (Tuning matmul.attention_fuse=False: scores with scale and mask, softmax, the
product with v), in one run on this machine's GL device: median seconds per run and
the ratio, with the fusion forced past matmul.attention_max_walk.
`python benchmarks/attention.py [--repeats N]`. Results are read back each
run (fn(...) returns numpy arrays), so each time includes the readback."""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fragflow as ff

SHAPES = {   # name: (batch and heads, queries = keys, head width)
    "bert_mini_128": ((1, 4), 128, 64),
    "bert_tiny_32": ((1, 2), 32, 64),
    "vit_tiny_65": ((1, 3), 65, 64),
}


def build(batch, length, width):
    rng = np.random.default_rng(0)
    g = ff.Graph()
    with g.as_default():
        q, k, v = (ff.placeholder(batch + (length, width), name=n) for n in "qkv")
        mask = ff.placeholder((batch[0], 1, 1, length), name="mask")
        scores = ff.matmul(q, k, transpose_b=True) / np.float32(np.sqrt(width)) + mask
        out = ff.matmul(ff.softmax(scores, axis=-1), v)
    feeds = [rng.standard_normal(p.shape).astype(np.float32) for p in (q, k, v)]
    feeds.append(np.zeros(mask.shape, np.float32))
    return g, out, [q, k, v, mask], feeds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    for name, shape in SHAPES.items():
        g, out, holders, feeds = build(*shape)
        fns = {}
        for label, fuse, blocks in (("fused", True, True), ("stitched", True, False),
                                    ("unfused", False, True)):
            # fused at every size (past matmul.attention_max_walk too); "stitched": the
            # walk reads the scores from a stitch's texture, not from q kᵀ's targets
            knobs = {"matmul.attention_fuse": fuse, "matmul.attention_max_walk": 1 << 40,
                     "matmul.attention_scores_blocks": blocks}
            sess = ff.Session(g, tuning=ff.Tuning().with_(knobs))
            fns[label] = sess.compile([out], feeds=holders)
            fns[label](*feeds)                           # compile and warm up
        times = {label: [] for label in fns}
        for _ in range(args.repeats):                    # interleaved
            for label, fn in fns.items():
                start = time.perf_counter()
                fn(*feeds)
                times[label].append(time.perf_counter() - start)
        med = {label: statistics.median(t) for label, t in times.items()}
        print(f"{name:15s} fused {med['fused'] * 1e3:7.2f} ms ({len(fns['fused'].kernels)} "
              f"kernels)  unfused {med['unfused'] * 1e3:7.2f} ms "
              f"({len(fns['unfused'].kernels)} kernels)  unfused/fused "
              f"{med['unfused'] / med['fused']:.2f}x  stitched/fused "
              f"{med['stitched'] / med['fused']:.2f}x ({len(fns['stitched'].kernels)} "
              f"kernels)")


if __name__ == "__main__":
    main()
