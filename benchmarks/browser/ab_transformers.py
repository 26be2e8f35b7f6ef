"""A/B of the WebGL export's tuning on bench_transformers' models (Hugging Face
transformers, random weights, exported to ONNX): each model exported once per variant
(the "webgl" profile with FRAGFLOW_TUNING-style changes) and every variant timed in the
same interleaved rounds of one page, one Chromium session per rasteriser (and
--repeat sessions each), so the variants' ratio is measured under the same load.

    python benchmarks/browser/ab_transformers.py --only bert,bert-test \\
        --variant base= --variant direct='reduce.norm_direct_work=100000000' \\
        [--configs swiftshader,mesa] [--rounds 15] [--budget-ms 4000] [--repeat 3]
        [--top 8] [--json out.json]

Models: bench_transformers' (BERT-mini: 4 layers, 256 wide, 128 tokens; vit, whisper)
and bert-test, the size tests/onnx/test_transformers_onnx.py checks (2 layers, 128
wide, 32 tokens). Prints per session and variant the steady-state median, the first
variant's median over this one's, the kernels (all, layer 0) and the outputs' max
|difference| from the first variant's; then per rasteriser the median of those ratios
over sessions."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import fragflow as ff
from fragflow.tools.webgl.chromium import CONFIGS, serve_and_open

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ab_tuning  # noqa: E402  (same folder)
import bench_transformers as bt  # noqa: E402


def specs() -> dict:
    """bench_transformers' models (not GPT-2's generation) and bert-test."""
    out = {k: v for k, v in bt.model_configs(False, 1000).items() if k != "gpt2"}
    kwargs = dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=512, attn_implementation="eager")
    out["bert-test"] = ("BertModel", kwargs, {"input_ids": ((1, 32), "int64"),
                                              "attention_mask": ((1, 32), "int64")},
                        2, "BERT 2 layers, 128 wide, 2 heads, 32 tokens")
    return out


def prepare(root, name, spec, variants, cache, log) -> list:
    """Each variant's export of one model under root/<name>~<label>/: the page's list."""
    _, kwargs, inputs, _, _ = spec
    path = bt.onnx_file(name, spec, cache, log=log)
    model = ff.onnx.load(path, trainable=False)
    feeds = bt.seeded_feeds(inputs, kwargs.get("vocab_size", 30522))
    listed = []
    for label, changes in variants:
        folder = os.path.join(root, f"{name}~{label}")
        os.makedirs(folder)
        export = ff.webgl.export(dict(model.outputs_by_name), list(model.inputs),
                                 os.path.join(folder, "ff"), page=False, name=name,
                                 tuning=ff.Tuning.named("webgl").from_env(changes))
        page_feeds = []
        for k, (onnx_name, p) in enumerate(model.inputs_by_name.items()):
            dtype = "int32" if p.dtype == "int32" else "float32"
            feeds[onnx_name].astype("<i4" if dtype == "int32" else "<f4").tofile(
                os.path.join(folder, f"feed{k}.bin"))
            page_feeds.append({"ff": p.value.node.name, "file": f"feed{k}.bin",
                               "shape": list(p.shape), "dtype": dtype})
        listed.append({"name": f"{name}~{label}", "feeds": page_feeds,
                       "kernels": len(export.kernels),
                       "layer_kernels": bt.layer_kernels(export.kernels)})
        log(f"  {name}~{label}: {len(export.kernels)} kernels "
            f"({listed[-1]['layer_kernels']} in layer 0)")
    return listed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="bert,bert-test")
    parser.add_argument("--variant", action="append", default=[],
                        help="label=changes (FRAGFLOW_TUNING syntax over the webgl "
                             "profile; 'base=' for its defaults); repeatable")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--budget-ms", type=float, default=4000.0)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--top", type=int, default=0)
    parser.add_argument("--cache", default=bt.CACHE)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    variants = [v.partition("=")[::2] for v in args.variant or ["base="]]
    models = specs()
    root = tempfile.mkdtemp(prefix="fragflow-ab-transformers-")
    results = {}
    try:
        groups = []
        for name in args.only.split(","):
            groups.append({"model": name, "variants": prepare(
                root, name, models[name], variants, args.cache,
                lambda s: print(s, flush=True))})
        with open(os.path.join(root, "ab.json"), "w") as f:
            json.dump({"groups": groups, "rounds": args.rounds, "budgetMs": args.budget_ms,
                       "profile": args.top > 0}, f)
        for page_file in ("ab_transformers.js", "ab_transformers.html", "pagelib.js"):
            shutil.copy(os.path.join(HERE, page_file), root)
        for config in args.configs.split(","):
            for rep in range(args.repeat):
                key = f"{config}#{rep}"
                start, load0 = time.monotonic(), os.getloadavg()[0]
                out = {}
                for query, body in serve_and_open(root, "ab_transformers.html", config,
                                                  3600.0):
                    if query.get("kind") in ("result", "error", "info", "fatal"):
                        out[query.get("name", query["kind"])] = (
                            json.loads(body) if query["kind"] in ("result", "info")
                            else body.decode(errors="replace"))
                results[key] = out
                print(f"{key}: {out.get('info', {}).get('renderer')} "
                      f"({time.monotonic() - start:.0f} s; load {load0:.1f} -> "
                      f"{os.getloadavg()[0]:.1f})", flush=True)
                for group in groups:
                    r = out.get(group["model"])
                    if not isinstance(r, dict):
                        print(f"  {group['model']}: {str(r)[:300]}", flush=True)
                        continue
                    base = r[group["variants"][0]["name"]]["steady"]
                    for c in group["variants"]:
                        v = r[c["name"]]
                        print(f"  {c['name']:28s} {v['steady']:8.2f} ms (fastest "
                              f"{v['fastest']:7.2f}, {v['runs']} runs)  first / this "
                              f"{base / v['steady']:.3f}  kernels {c['kernels']} "
                              f"({c['layer_kernels']})  max|diff| {v['diff']:.1e}",
                              flush=True)
                        rows = sorted((p for p in v.get("profile") or [] if p[1]),
                                      key=lambda p: -p[1])[:args.top]
                        for op, ms, kname in rows:
                            print(f"      {ms:7.2f} ms  {op} {kname}")
        print("median over sessions of the first variant's ms / this one's:")
        ab_tuning._summary(results, groups, args.configs.split(","), lambda v: v["steady"],
                           base=lambda r, group: r[group["variants"][0]["name"]],
                           digits=3)
        print(f"load {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"variants": variants, "groups": groups, "results": results},
                          f, indent=1, default=str)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
