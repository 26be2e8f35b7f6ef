"""make bench-browser: fragflow's WebGL export beside TensorFlow.js 4.22's WebGL backend,
in one page, with the same weights, in headless Chromium on SwiftShader and on Mesa
(ANGLE over EGL, llvmpipe here).

    python benchmarks/browser/bench.py [--only mobilenet,matmul] [--rounds 20]
                                       [--configs swiftshader,mesa] [--json out.json]

Each workload (workloads.py) is exported with ff.webgl.export into a temporary folder
served on 127.0.0.1, its arrays written for TF.js beside it; bench.js runs both sides
(first run, then interleaved steady-state runs synced by a readback, then a profile of
each) and posts the results back. Needs chromium and benchmarks/browser/node_modules
(`npm ci` there: the Makefile target runs it)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from workloads import WORKLOADS  # noqa: E402  (beside this file)

import fragflow as ff  # noqa: E402
from fragflow.tools.webgl.chromium import CONFIGS, chromium, serve_and_open  # noqa: E402

TFJS = os.path.join(HERE, "node_modules", "@tensorflow", "tfjs", "dist", "tf.min.js")


def _write_arrays(path, arrays: dict) -> list:
    """arrays.bin of named arrays (float32 / int32, 16-byte aligned); their index."""
    index, blob = [], bytearray()
    for name, array in arrays.items():
        array = np.ascontiguousarray(array)
        dtype = "int32" if array.dtype.kind in "iub" else "float32"
        flat = array.astype("<i4" if dtype == "int32" else "<f4").reshape(-1)
        blob.extend(b"\0" * (-len(blob) % 16))
        index.append({"name": name, "shape": list(array.shape), "dtype": dtype,
                      "offset": len(blob), "count": int(flat.size)})
        blob.extend(flat.tobytes())
    with open(path, "ab") as f:
        f.write(bytes(blob))
    return index


def prepare(root: str, names, max_draw_buffers: int = 4) -> list:
    """Export each workload under root/<name>/ with the arrays TF.js reads."""
    listed = []
    for name in names:
        w = WORKLOADS[name]()
        folder = os.path.join(root, w.name)
        export = ff.webgl.export(w.fetches, list(w.feeds), folder, page=False,
                                 max_draw_buffers=max_draw_buffers)
        path = os.path.join(folder, "arrays.bin")
        arrays = _write_arrays(path, w.arrays)
        offset = os.path.getsize(path)
        feeds = _write_arrays(path, {p.value.node.name: a for p, a in w.feeds.items()})
        for f in feeds:
            f["offset"] += offset
        listed.append({"name": w.name, "title": w.title, "tfjs": w.tfjs,
                       "options": w.options, "arrays": arrays, "feeds": feeds,
                       "compare": next(iter(w.fetches)),
                       "exportKernels": len(export.kernels)})
        print(f"exported {w.name}: {len(export.kernels)} kernels, model.bin "
              f"{export.bin_bytes} bytes", file=sys.stderr)
    return listed


def run(config: str, root: str, listed: list, rounds: int, budget_ms: float) -> dict:
    with open(os.path.join(root, "bench.json"), "w") as f:
        json.dump({"workloads": listed, "rounds": rounds, "budgetMs": budget_ms}, f)
    messages = serve_and_open(root, "bench.html", config, timeout=900)
    out = {"info": {}, "results": {}, "errors": {}}
    for query, body in messages:
        kind = query.get("kind")
        if kind == "info":
            out["info"] = json.loads(body)
        elif kind == "result":
            out["results"][query["name"]] = json.loads(body)
        elif kind in ("error", "fatal"):
            out["errors"][query.get("name", "page")] = body.decode(errors="replace")
    return out


def table(runs: dict, titles: dict) -> str:
    lines = ["| workload | rasteriser | fragflow steady | TF.js steady | steady speedup | "
             "fragflow first run | TF.js first run | first-run speedup | kernels ff / TF.js "
             "| max diff |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for config, run_ in runs.items():
        for name, r in run_["results"].items():
            ff_, tf_ = r["fragflow"], r["tfjs"]
            diff = r["agreement"]
            lines.append(
                f"| {titles[name]} | {config} | {ff_['steady']:.2f} ms | {tf_['steady']:.2f} ms "
                f"| {tf_['steady'] / ff_['steady']:.2f}x | {ff_['first']:.0f} ms | "
                f"{tf_['first']:.0f} ms | {tf_['first'] / ff_['first']:.2f}x | "
                f"{ff_['kernels']} / {tf_['kernels']} | "
                f"{diff['diff']:.1e} (of {diff['scale']:.1e}) |")
        for name, error in run_["errors"].items():
            lines.append(f"| {titles.get(name, name)} | {config} | error: "
                         f"{error.splitlines()[0][:80]} |||||||")
    return "\n".join(lines)


def profiles(runs: dict, top: int = 5) -> str:
    """The slowest kernels of each side, per workload and rasteriser."""
    out = []
    for config, run_ in runs.items():
        for name, r in run_["results"].items():
            rows = sorted((k for k in r["fragflow"]["profile"] if k["ms"] is not None),
                          key=lambda k: -k["ms"])[:top]
            total = sum(k["ms"] or 0 for k in r["fragflow"]["profile"])
            out.append(f"{name} ({config}) fragflow, {r['fragflow']['method']}, "
                       f"sum {total:.2f} ms: " +
                       ", ".join(f"{k['name']} {k['ms']:.2f}" for k in rows))
            tfk = [k for k in (r["tfjs"]["profile"] or []) if k["ms"] is not None]
            tf_total = sum(k["ms"] for k in tfk)
            rows = sorted(tfk, key=lambda k: -k["ms"])[:top]
            out.append(f"{name} ({config}) TF.js, sum {tf_total:.2f} ms: " +
                       ", ".join(f"{k['name']} {k['ms']:.2f}" for k in rows))
    return "\n".join(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="comma-separated workloads: " + ",".join(WORKLOADS))
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--rounds", type=int, default=20,
                        help="steady-state runs per side at most (20)")
    parser.add_argument("--budget", type=float, default=6.0,
                        help="seconds of steady-state rounds per workload at most (6)")
    parser.add_argument("--max-draw-buffers", type=int, choices=(4, 8), default=4,
                        help="the exports' render targets per kernel (4: safe everywhere)")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    if chromium() is None:
        print("bench-browser: chromium is not installed (apt-get install chromium)",
              file=sys.stderr)
        return 1
    if not os.path.exists(TFJS):
        print(f"bench-browser: {TFJS} is missing: run `npm ci` in {HERE} "
              f"(make bench-browser does)", file=sys.stderr)
        return 1
    names = args.only.split(",") if args.only else list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        print(f"unknown workloads {unknown}; choose from {list(WORKLOADS)}", file=sys.stderr)
        return 1
    root = tempfile.mkdtemp(prefix="fragflow-bench-browser-")
    try:
        listed = prepare(root, names, args.max_draw_buffers)
        for file in ("bench.html", "bench.js"):
            shutil.copy(os.path.join(HERE, file), root)
        shutil.copy(TFJS, root)
        runs = {}
        for config in args.configs.split(","):
            runs[config] = run(config, root, listed, args.rounds, args.budget * 1000)
            print(f"{config}: {runs[config]['info'].get('renderer')}", file=sys.stderr)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    titles = {w["name"]: w["title"] for w in listed}
    print(table(runs, titles))
    print()
    print(profiles(runs))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(runs, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
