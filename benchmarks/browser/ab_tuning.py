"""A/B of the WebGL export's tuning on TF.js corpus models: each model exported once per
variant (the "webgl" profile with FRAGFLOW_TUNING-style changes), every variant beside
TF.js 4.22's WebGL backend in one page and one Chromium session per rasteriser, so each
variant's ratio (TF.js / fragflow steady state) is measured in the same session as the
others'.

    python benchmarks/browser/ab_tuning.py --only movenet-lightning,posenet \\
        --variant base= --variant t8='matmul.max_targets=8' [--configs swiftshader,mesa]
        [--rounds 5] [--budget-ms 1500] [--max-draw-buffers 4] [--top 12] [--json out.json]

Prints per model, variant and rasteriser the steady-state medians and ratio, and with
--top N the N kernels taking most of fragflow's profile (timer queries: kernel,
strategy, output shape, ms) and the N TF.js kernels taking most of its tf.profile
(name, input and output shapes, ms)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import fragflow as ff
from fragflow.tools.webgl.chromium import serve_and_open

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_models as bm  # noqa: E402


def tuning_of(spec: str) -> ff.Tuning:
    """The webgl profile with `spec` applied (Tuning.from_env's syntax)."""
    return ff.Tuning.named("webgl").from_env(spec)


def top_kernels(profile, kernels, n) -> list:
    """fragflow's profile rows [op, ms, name] -> the n dearest as text."""
    rows = sorted((r for r in profile or [] if r[1] is not None), key=lambda r: -r[1])[:n]
    total = sum(r[1] for r in profile or [] if r[1] is not None) or 1.0
    out = []
    for _op, ms, *rest in rows:
        name = rest[0] if rest else "?"
        strategy, shape = (kernels or {}).get(name, ["?", "?"])
        out.append(f"{ms:8.2f} ms {100 * ms / total:4.1f}%  {name} [{strategy}] -> {shape}")
    return out


def top_tfjs(profile, n) -> list:
    rows = sorted((r for r in profile or [] if r[1] is not None), key=lambda r: -r[1])[:n]
    total = sum(r[1] for r in profile or [] if r[1] is not None) or 1.0
    return [f"{ms:8.2f} ms {100 * ms / total:4.1f}%  {name} {rest[0] if rest else ''}"
            for name, ms, *rest in rows]


def session(root: str, config: str) -> dict:
    """One Chromium session of the A/B page: {"info", model: result or {"error"}}."""
    out = {"info": {}}
    for query, body in serve_and_open(root, "ab_tuning.html", config, 3600.0):
        kind = query.get("kind")
        if kind == "info":
            out["info"] = json.loads(body)
        elif kind == "fatal":
            raise RuntimeError(f"the A/B page failed ({config}): {body.decode()}")
        elif kind == "error":
            out[query["name"]] = {"error": body.decode(errors="replace")}
        elif kind == "result":
            out[query["name"]] = json.loads(body)
    return out


def report(result, groups, kernels, top) -> None:
    for group in groups:
        r = result.get(group["model"]) or {}
        if "error" in r or not r:
            print(f"  {group['model']}: {r.get('error', 'no result')[:300]}", flush=True)
            continue
        tfjs = r["tfjs"]["steady"]
        base = r[group["variants"][0]["name"]]["steady"]
        for c in group["variants"]:
            v = r[c["name"]]
            fast = r["tfjs"]["fastest"] / v["fastest"]
            print(f"  {c['name']:34s} ff {v['steady']:8.1f} ms  TF.js {tfjs:8.1f} ms  "
                  f"{tfjs / v['steady']:5.2f}x  (first variant / this {base / v['steady']:.2f}); "
                  f"fastest {v['fastest']:8.1f} ms, TF.js / ff {fast:.2f}x", flush=True)
            if top:
                for line in top_kernels(v.get("profile"), kernels.get(c["name"]), top):
                    print("      ff   " + line)
        if top:
            for line in top_tfjs(r["tfjs"].get("profile"), top):
                print("      tfjs " + line)


def summary(results, groups, configs) -> None:
    """Per config and variant, the median over sessions of TF.js / fragflow, of the
    steady-state medians and of the fastest runs (robust to other processes' load)."""
    for stat, of in (("steady state (medians)", lambda v: v["steady"]),
                     ("fastest runs", lambda v: v["fastest"])):
        print(f"median over sessions of TF.js / fragflow, {stat}:")
        _summary(results, groups, configs, of)


def _summary(results, groups, configs, of, base=lambda r, group: r["tfjs"],
             digits=2) -> None:
    """Per config, model and variant: `of` of base (TF.js; ab_transformers.py: the
    first variant) over `of` of the variant, the median over sessions and each one's."""
    for config in configs:
        for group in groups:
            cells = []
            for c in group["variants"]:
                ratios = sorted(of(base(r[group["model"]], group)) /
                                of(r[group["model"]][c["name"]])
                                for key, r in results.items()
                                if key.startswith(config + "#") and
                                isinstance(r.get(group["model"]), dict))
                if ratios:
                    cells.append(f"{c['name'].partition('~')[2]} "
                                 f"{ratios[len(ratios) // 2]:.{digits}f}x "
                                 f"[{', '.join(f'{x:.2f}' for x in ratios)}]")
            print(f"  {config} {group['model']}: " + "; ".join(cells))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", required=True, help="comma-separated model names")
    parser.add_argument("--variant", action="append", default=[],
                        help="label=changes (FRAGFLOW_TUNING syntax over the webgl "
                             "profile; 'base=' for its defaults); repeatable")
    parser.add_argument("--configs", default=",".join(bm.CONFIGS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--budget-ms", type=float, default=1500.0)
    parser.add_argument("--max-draw-buffers", default="4+8",
                        help="4, 8, or 4+8 (the export's default: 4 and a variant for 8)")
    parser.add_argument("--top", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=1,
                        help="Chromium sessions per rasteriser")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    variants = []
    for v in args.variant or ["base="]:
        label, _, spec = v.partition("=")
        # "draw_buffers=8" is the export's max_draw_buffers, not a Tuning knob
        extra = [p for p in spec.split(",") if p.startswith("draw_buffers=")]
        spec = ",".join(p for p in spec.split(",") if not p.startswith("draw_buffers="))
        # draw_buffers=4+8: the 4-target schedule with its variant for 8
        value = extra[-1].partition("=")[2] if extra else str(args.max_draw_buffers)
        buffers = tuple(map(int, value.split("+"))) if "+" in value else int(value)
        variants.append((label, spec, buffers))
    names = args.only.split(",")
    root = tempfile.mkdtemp(prefix="fragflow-ab-tuning-")
    listed, kernels = [], {}

    try:
        for label, spec, buffers in variants:
            tuning = tuning_of(spec)
            got, skipped, sizes = bm.prepare(root, names, tuning=tuning, suffix="~" + label,
                                             max_draw_buffers=buffers,
                                             log=lambda s: print(s, flush=True))
            if skipped:
                print(f"variant {label}: not exported: {skipped}", flush=True)
            listed += got
            kernels.update({k: v["kernels"] for k, v in sizes.items()})
        groups = []
        for model in names:
            variants_of = [c for c in listed if c["name"].partition("~")[0] == model]
            if variants_of:
                groups.append({"model": model, "variants": variants_of})
        with open(os.path.join(root, "ab.json"), "w") as f:
            json.dump({"groups": groups, "rounds": args.rounds, "budgetMs": args.budget_ms,
                       "profile": args.top > 0}, f)
        for page_file in ("ab_tuning.js", "ab_tuning.html", "pagelib.js"):
            shutil.copy(os.path.join(HERE, page_file), root)
        shutil.copy(bm.TF_MIN, os.path.join(root, "tf.min.js"))
        results = {}
        for config in args.configs.split(","):
            for rep in range(args.repeat):
                key = f"{config}#{rep}"
                start = time.monotonic()
                load0 = os.getloadavg()[0]
                results[key] = session(root, config)
                print(f"{key}: {results[key]['info'].get('renderer')} "
                      f"({time.monotonic() - start:.0f} s; load {load0:.1f} -> "
                      f"{os.getloadavg()[0]:.1f})", flush=True)
                report(results[key], groups, kernels, args.top)
        summary(results, groups, args.configs.split(","))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"variants": variants, "kernels": kernels, "results": results},
                          f, indent=1, default=str)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
