"""A/B of the WebGL export's tuning on MobileNet-v2 blocks: a 1x1 expand conv2d (C ->
COUT, bias, relu6), a 3x3 depthwise conv (bias, relu6) and a 1x1 project conv (COUT ->
C, bias), random float32 weights, exported once per variant (the "webgl" profile with
FRAGFLOW_TUNING-style changes) and run beside TF.js 4.22's WebGL backend computing the
same ops from the same arrays (tf.fused.conv2d / depthwiseConv2d) in one page and one
Chromium session per rasteriser: interleaved rounds, medians, then each side's profile
summed per role (expand, depthwise, project; medians of 5 profiled runs).

    python benchmarks/browser/ab_blocks.py --shapes 48x48x24x144,96x96x16x96 \\
        --variant before=conv.pointwise=false --variant kept= [--expand-only]
        [--blocks 2] [--configs swiftshader,mesa] [--rounds 15]

--expand-only: one expand conv then a stride-2 depthwise conv (a small readback), the
block's project conv left out. Prints per shape and variant the run's median, TF.js /
fragflow, the roles' profile ms against TF.js's, the largest difference from TF.js's
outputs (relative to their largest magnitude) and the variant's first run (module
import, load and one run; the first variant also pays for programs the others then
share)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

import fragflow as ff
from fragflow.tools.webgl.chromium import serve_and_open

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_models as bm  # noqa: E402


def block_graph(h, w, c, cout, blocks, expand_only, rng):
    """(graph, x, y, {name: array}): `blocks` MobileNet-v2 blocks on a 1 x h x w x c
    image, each op in a name scope naming its role (the profile's rows)."""
    arrays = {}
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, h, w, c), name="x")
        y = x
        for i in range(blocks):
            for k, shape in (("e", (1, 1, c, cout)), ("eb", (cout,)), ("d", (3, 3, cout, 1)),
                             ("db", (cout,)), ("p", (1, 1, cout, c)), ("pb", (c,))):
                scale = 0.3 if len(shape) > 1 else 0.1
                arrays[f"{k}{i}"] = (rng.standard_normal(shape) * scale).astype(np.float32)
            a = {k: ff.constant(arrays[f"{k}{i}"]) for k in ("e", "eb", "d", "db", "p", "pb")}
            with ff.name_scope(f"expand{i}"):
                y = ff.relu6(ff.conv2d(y, a["e"]) + a["eb"])
            with ff.name_scope(f"dw{i}"):
                y = ff.relu6(ff.depthwise_conv2d(y, a["d"], strides=2 if expand_only else 1,
                                                 padding="SAME") + a["db"])
            if expand_only:
                break
            with ff.name_scope(f"project{i}"):
                y = ff.conv2d(y, a["p"]) + a["pb"]
    return g, x, y, arrays


def prepare(root, shapes, variants, blocks, expand_only) -> list:
    groups = []
    for shape in shapes:
        h, w, c, cout = map(int, shape.split("x"))
        rng = np.random.default_rng(0)
        g, x, y, arrays = block_graph(h, w, c, cout, blocks, expand_only, rng)
        folder = os.path.join(root, shape)
        os.makedirs(folder)
        blob, index = bytearray(), []
        feed = rng.random((1, h, w, c), dtype=np.float32)
        for name, a in list(arrays.items()) + [("x", feed)]:
            index.append({"name": name, "shape": list(a.shape), "offset": len(blob),
                          "count": int(a.size)})
            blob.extend(a.astype("<f4").tobytes())
        with open(os.path.join(folder, "arrays.bin"), "wb") as f:
            f.write(bytes(blob))
        for label, spec in variants:
            ff.webgl.export({"y": y}, [x], os.path.join(folder, label), page=False,
                            tuning=ff.Tuning.named("webgl").from_env(spec))
        groups.append({"name": shape, "c": c, "blocks": 1 if expand_only else blocks,
                       "dwStride": 2 if expand_only else 1, "index": index,
                       "variants": [label for label, _ in variants]})
    return groups


def report(result: dict) -> None:
    t = result["tfjs"]
    print(f"  TF.js run {t['steady']:.1f} ms; profile expand {t['expand']:.2f}, "
          f"depthwise {t['dw']:.2f}, project {t['project']:.2f} ms")
    for v in result["variants"]:
        s = result[v]
        print(f"  {v:12s} run {s['steady']:7.1f} ms  TF.js / ff {t['steady'] / s['steady']:.2f}x"
              f"  profile expand {s['expand']:.2f}, depthwise {s['dw']:.2f}, project "
              f"{s['project']:.2f} ms  diff {s['diff']:.1e}  first {s['first']:.0f} ms")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shapes", default="48x48x24x144,96x96x16x96,24x24x32x192",
                        help="comma-separated HxWxCxCOUT")
    parser.add_argument("--variant", action="append", default=[],
                        help="label=changes (FRAGFLOW_TUNING syntax over the webgl "
                             "profile; 'base=' for its defaults); repeatable")
    parser.add_argument("--blocks", type=int, default=2)
    parser.add_argument("--expand-only", action="store_true")
    parser.add_argument("--configs", default=",".join(bm.CONFIGS))
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    variants = [tuple(v.partition("=")[::2]) for v in args.variant or ["base="]]
    root = tempfile.mkdtemp(prefix="fragflow-ab-blocks-")
    try:
        groups = prepare(root, args.shapes.split(","), variants, args.blocks,
                         args.expand_only)
        with open(os.path.join(root, "blocks.json"), "w") as f:
            json.dump({"groups": groups, "rounds": args.rounds}, f)
        for page_file in ("ab_blocks.js", "ab_blocks.html", "pagelib.js"):
            shutil.copy(os.path.join(HERE, page_file), root)
        shutil.copy(bm.TF_MIN, os.path.join(root, "tf.min.js"))
        for config in args.configs.split(","):
            start, load0 = time.monotonic(), os.getloadavg()[0]
            posted = {}
            for query, body in serve_and_open(root, "ab_blocks.html", config, 3600.0):
                posted[query.get("name", query.get("kind"))] = (query.get("kind"), body)
            info = posted.get("info", (None, b"{}"))[1].decode()
            print(f"{config}: {info} ({time.monotonic() - start:.0f} s; load "
                  f"{load0:.1f} -> {os.getloadavg()[0]:.1f})", flush=True)
            if "fatal" in posted:
                print("  " + posted["fatal"][1].decode()[:1000])
            for group in groups:
                kind, body = posted.get(group["name"], ("error", b"no result"))
                print(f" {group['name']}:")
                if kind != "result":
                    print("  " + body.decode(errors="replace")[:1000])
                    continue
                report(json.loads(body))
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
