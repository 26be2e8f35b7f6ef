"""top_k's strategies in one run on this machine's GL device: top_k.radix (with 2, 4 and
8 bits per round), top_k.rank (every element ranked against its row) and, for long
rows, the chunked top_k the TF.js importer used before (the best k of each chunk of 256
ranked, the survivors chunked again until 8192 are left). Median ms per run (results
read back), each beside radix with 2 bits as a ratio.
`python benchmarks/top_k.py [--repeats N] [--only NAME]`."""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fragflow as ff

CASES = {   # name: (shape, k)
    "centernet 1x1310720 k=100": ((1, 1310720), 100),
    "row 65536 k=100": ((1, 65536), 100),
    "row 8192 k=10": ((1, 8192), 10),
    "row 2048 k=10": ((1, 2048), 10),
    "row 512 k=10": ((1, 512), 10),
    "row 256 k=10": ((1, 256), 10),
    "64 rows of 256 k=5": ((64, 256), 5),
    "64 rows of 1000 k=5": ((64, 1000), 5),
}
LOWEST = float(np.finfo(np.float32).min)


def chunked_top_k(v, k, chunk=256, last=8192):
    """The TF.js importer's top_k over long rows before top_k.radix (one row)."""
    n = v.shape[-1]
    values, index = v, None
    while n > last:
        rows = -(-n // chunk)
        if rows * chunk != n:
            values = ff.pad(values, [[0, 0], [0, rows * chunk - n]], constant_values=LOWEST)
            if index is not None:
                index = ff.pad(index, [[0, 0], [0, rows * chunk - n]])
        best = ff.top_k(ff.reshape(values, [rows, chunk]), k=k)
        if index is None:
            picked = best.indices + ff.constant((np.arange(rows, dtype=np.int32)
                                                 * chunk).reshape(-1, 1))
        else:
            picked = ff.gather(ff.reshape(index, [rows, chunk]), best.indices, axis=1,
                               batch_dims=1)
        n = rows * k
        values, index = ff.reshape(best.values, [1, n]), ff.reshape(picked, [1, n])
    top = ff.top_k(values, k=k)
    return top.indices if index is None else ff.gather(index, top.indices, axis=1,
                                                       batch_dims=1)


def sides(shape, k):
    radix = {"structure.top_k_rank_max_work": 0}
    out = {f"radix {b} bits": (ff.Tuning().with_({**radix, "structure.top_k_radix_bits": b}),
                               False) for b in (2, 4, 8)}
    if shape[-1] <= 16384:
        out["rank"] = (ff.Tuning().with_(exclude=("top_k.radix",)), False)
    if shape[0] == 1 and shape[-1] > 8192:
        out["chunked (before)"] = (ff.Tuning().with_(exclude=("top_k.radix",)), True)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--only", help="a substring of the case names")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    for name, (shape, k) in CASES.items():
        if args.only and args.only not in name:
            continue
        x = rng.standard_normal(shape).astype(np.float32)
        want = np.argsort(-x, axis=-1, kind="stable")[..., :k]
        fns = {}
        for label, (tuning, chunked) in sides(shape, k).items():
            g = ff.Graph()
            with g.as_default():
                p = ff.placeholder(shape, name="x")
                out = chunked_top_k(p, k) if chunked else ff.top_k(p, k).indices
            fn = ff.Session(g, tuning=tuning).compile([out], feeds=[p])
            assert np.array_equal(fn(x)[0], want), f"{name}: {label} is wrong"
            fns[label] = fn
        times = {label: [] for label in fns}
        for _ in range(args.repeats):                     # interleaved
            for label, fn in fns.items():
                start = time.perf_counter()
                fn(x)
                times[label].append(time.perf_counter() - start)
        med = {label: statistics.median(t) for label, t in times.items()}
        base = med["radix 2 bits"]
        print(f"{name}: " + ", ".join(
            f"{label} {m * 1e3:.1f} ms ({len(fns[label].kernels)} kernels, "
            f"{m / base:.2f}x)" for label, m in med.items()))


if __name__ == "__main__":
    main()
