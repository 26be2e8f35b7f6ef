"""Exports of TF.js corpus models (and of two UpscalerJS layers models, loaded in the page
by tf.loadLayersModel) against TF.js 4.22's WebGL backend in Chromium, on
both rasterisers (SwiftShader; Mesa through ANGLE's GL-EGL backend): each model
exported (weights as they came), then run in one page beside tf.loadGraphModel on the
same model.json and shards (benchmarks/browser/models.js), on the same seeded feeds;
inputs and outputs named as TF.js names them; every output within 1e-3 of its largest
magnitude. Minutes on 2 cores: `make test-tfjs-browser` (FRAGFLOW_TFJS_BROWSER=1), run
by .ci/run, not make test."""
from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pytest
import tfjs_corpus as corpus

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "benchmarks", "browser"))

import bench_models  # noqa: E402  (benchmarks/browser: the page and its driver)

import fragflow as ff  # noqa: E402
from fragflow.tools.webgl.chromium import CONFIGS, chromium  # noqa: E402

# a face detector (float16), a segmenter (float16), an age regressor (float32), a pose
# model with an int32 image input (float16)
MODELS = ["facemesh-detection-short", "selfie", "age", "movenet-lightning"]
TOLERANCE = 1e-3

pytestmark = pytest.mark.skipif(os.environ.get("FRAGFLOW_TFJS_BROWSER") != "1",
                                reason="minutes on 2 cores: make test-tfjs-browser "
                                       "(FRAGFLOW_TFJS_BROWSER=1)")


def _require_browser():
    corpus.require_tfjs()
    if chromium() is None:
        if os.environ.get("FRAGFLOW_REQUIRE_CHROMIUM", "") not in ("", "0"):
            pytest.fail("FRAGFLOW_REQUIRE_CHROMIUM is set but chromium is not on PATH")
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    corpus.corpus()
    _require_browser()
    root = str(tmp_path_factory.mktemp("tfjs-browser"))
    listed, skipped, sizes = bench_models.prepare(root, MODELS, log=lambda s: None)
    assert not skipped, skipped
    yield root, listed, sizes
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def results(prepared):
    root, listed, _ = prepared
    return {config: bench_models.run(root, listed, config, rounds=0, budget_ms=0,
                                     profile=False, timeout=900)
            for config in CONFIGS}


def test_exports_name_inputs_and_outputs_as_tfjs_does(prepared):
    _, listed, _ = prepared
    for c in listed:
        path = os.path.join(corpus.corpus(), c["name"] + ".json")
        m = ff.tfjs.load(path, input_shapes=corpus.fixed_input_shapes(path))
        assert c["outputs"] == list(m.outputs_by_name)
        assert [f["name"] for f in c["feeds"]] == list(m.inputs_by_name)
        assert [f["ff"] for f in c["feeds"]] == list(m.inputs_by_name)


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", MODELS)
def test_export_matches_tfjs_webgl(results, config, name):
    entry = results[config][name]
    assert entry["error"] is None, entry["error"]
    for ff_out, tf_out in zip(entry["outputs"]["fragflow"], entry["outputs"]["tfjs"]):
        assert ff_out is not None and tf_out is not None
        assert ff_out.shape == tf_out.shape
        scale = max(float(np.max(np.abs(tf_out))), 1e-30)
        assert np.all(np.isfinite(ff_out))
        assert float(np.max(np.abs(ff_out - tf_out))) <= TOLERANCE * scale


def test_exports_are_smaller_than_tfjs_with_its_runtime(prepared):
    _, _, sizes = prepared
    for name, s in sizes.items():
        assert s["ff"][1] < s["tfjs"][1], (name, s)         # gzipped
        assert s["bin"] <= os.path.getsize(os.path.join(corpus.corpus(), name + ".bin"))


# -- models from other npm packages (test_tfjs_npm_models.py): UpscalerJS's layers models
UPSCALERS = {"default-model": "@upscalerjs/default-model/models/model.json",
             "esrgan-legacy-div2k-x3": "@upscalerjs/esrgan-legacy/models/div2k/x3/model.json"}


@pytest.fixture(scope="module")
def upscaler_results(tmp_path_factory):
    """Each exported at 1x37x29x3 (sides not multiples of 4) with images in [0, 255), as
    UpscalerJS feeds them, and run beside tf.loadLayersModel on the same files."""
    _require_browser()
    root = str(tmp_path_factory.mktemp("npm-browser"))
    sources = {name: {"path": corpus.npm_model(rel), "input_shapes": {"LR": (1, 37, 29, 3)},
                      "scale": 255.0}
               for name, rel in UPSCALERS.items()}
    listed, skipped, _ = bench_models.prepare(root, list(UPSCALERS), log=lambda s: None,
                                              sources=sources)
    assert not skipped, skipped
    return {config: bench_models.run(root, listed, config, rounds=0, budget_ms=0,
                                     profile=False, timeout=900)
            for config in CONFIGS}


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", list(UPSCALERS))
def test_an_upscaler_export_matches_tfjs_webgl(upscaler_results, config, name):
    entry = upscaler_results[config][name]
    assert entry["error"] is None, entry["error"]
    error = bench_models.agreement(entry["outputs"])
    print(f"{name} {config}: {error:.1e} of the largest output")
    assert error <= TOLERANCE
