"""Half-size weights in the browser: one model exported with weights="float16" twice,
its weight textures RGBA16F (Tuning.half_weight_textures, the default) and RGBA32F,
run interleaved in one headless Chromium page per rasteriser; prints the median run of
each, their ratio, the texture bytes of the weights and model.bin's size against the
float32 export's.

    python benchmarks/browser/bench_half_weights.py [--rounds 30] [--tokens 1,128]
                                                   [--configs swiftshader,mesa]

The model: a BERT-mini feed-forward block, x[T, 256] @ w1[256, 1024] + b1, GELU (tanh
form), @ w2[1024, 256] + b2 (random weights): 0.5 M weights, read once a run."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile

import numpy as np

import fragflow as ff
from fragflow.tools.webgl.chromium import CONFIGS, chromium, serve_and_open

PAGE = """<!doctype html><meta charset="utf-8"><script type="module">
const post = (query, body) => fetch(`/post?${new URLSearchParams(query)}`,
  {method: 'POST', body});
async function main() {
  const {names, rounds} = await (await fetch('./bench.json')).json();
  const models = [];
  for (const name of names) {
    const t = performance.now();
    const model = await (await import(`./${name}/model.js`)).load();
    const size = model.inputs[0].shape.reduce((a, b) => a * b, 1);
    const feeds = {[model.inputs[0].name]: Float32Array.from({length: size},
      (_, i) => Math.sin(i))};
    await model.run(feeds);                       // first run: compiles, uploads
    models.push({name, model, feeds, load: performance.now() - t, times: []});
  }
  for (let r = 0; r < rounds; r++) {
    for (const m of models) {
      const t = performance.now();
      await m.model.run(m.feeds);                 // resolves after the readback
      m.times.push(performance.now() - t);
    }
  }
  await post({kind: 'result'}, JSON.stringify(models.map((m) => ({name: m.name,
    load: m.load, times: m.times}))));
  await post({kind: 'done'}, '');
}
main().catch((err) => post({kind: 'fatal'}, String(err && err.stack || err)));
</script>"""


def _model(tokens: int):
    rng = np.random.default_rng(0)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((tokens, 256), "float32", name="x")
        w1 = ff.Variable((rng.standard_normal((256, 1024)) * 0.06).astype(np.float32))
        b1 = ff.Variable((rng.standard_normal(1024) * 0.02).astype(np.float32))
        w2 = ff.Variable((rng.standard_normal((1024, 256)) * 0.03).astype(np.float32))
        b2 = ff.Variable((rng.standard_normal(256) * 0.02).astype(np.float32))
        h = ff.matmul(x, w1) + b1
        h = 0.5 * h * (1.0 + ff.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
        y = ff.matmul(h, w2) + b2
    return x, y


def _texture_bytes(export) -> int:
    return sum(s["width"] * s["height"] * (8 if s.get("half") else 16)
               for s in export.schedule["slots"] if s["kind"] in ("constant", "variable"))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--tokens", default="1,128")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    args = parser.parse_args(argv)
    if chromium() is None:
        raise SystemExit("chromium is not installed")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    off = ff.Tuning.named("webgl").with_(half_weight_textures=False)
    for tokens in (int(t) for t in args.tokens.split(",")):
        root = tempfile.mkdtemp(prefix="fragflow-half-")
        try:
            x, y = _model(tokens)
            f32 = ff.webgl.export(y, [x], os.path.join(root, "f32"), page=False)
            f16 = ff.webgl.export(y, [x], os.path.join(root, "f16"), page=False,
                                  weights="float16")
            f16_32 = ff.webgl.export(y, [x], os.path.join(root, "f16_32"), page=False,
                                     weights="float16", tuning=off)
            print(f"T={tokens}: model.bin {f32.bin_bytes} -> {f16.bin_bytes} bytes "
                  f"({f16.bin_bytes / f32.bin_bytes:.3f}); weight textures "
                  f"{_texture_bytes(f16_32)} -> {_texture_bytes(f16)} bytes; "
                  f"max |diff| / max |out| {f16.weights_report.relative:.2e}")
            names = ["f32", "f16", "f16_32"]
            with open(os.path.join(root, "bench.json"), "w") as f:
                json.dump({"names": names, "rounds": args.rounds}, f)
            with open(os.path.join(root, "bench.html"), "w") as f:
                f.write(PAGE)
            for config in args.configs.split(","):
                messages = serve_and_open(root, "bench.html", config, 600)
                for query, body in messages:
                    if query.get("kind") == "fatal":
                        raise SystemExit(f"{config}: {body.decode()}")
                (body,) = [b for q, b in messages if q.get("kind") == "result"]
                rows = {r["name"]: r for r in json.loads(body)}
                med = {n: statistics.median(rows[n]["times"]) for n in names}
                print(f"  {config}: median run ms float32 {med['f32']:.3f}, float16 in "
                      f"RGBA32F {med['f16_32']:.3f}, in RGBA16F {med['f16']:.3f} "
                      f"(RGBA16F / RGBA32F {med['f16'] / med['f16_32']:.3f}); load ms "
                      + ", ".join(f"{n} {rows[n]['load']:.0f}" for n in names))
        finally:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
