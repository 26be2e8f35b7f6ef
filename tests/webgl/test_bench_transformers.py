"""`make bench-transformers` (benchmarks/browser/bench_transformers.py) on its --tiny
BERT (2 layers, 32 wide, 16 tokens) and GPT-2 (2 layers, 32 wide, vocabulary 100, 32
greedy tokens) for one round on SwiftShader, browser side only: the export and
onnxruntime-web's wasm backend run in the page, agree (GPT-2: both generate
transformers' own tokens), and the tables name the models.
Skips, saying why, where chromium, onnxruntime-web (npm ci --prefix benchmarks/browser)
or the Python packages that write the ONNX file (torch, transformers, onnxruntime) are
missing. The .onnx files are kept in pytest's cache, so a rerun takes ~30 s."""
from __future__ import annotations

import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "benchmarks", "browser")

# found, not imported: torch and transformers load only where the .onnx file is not cached
MISSING = [p for p in ("torch", "transformers", "onnxruntime", "onnx")
           if importlib.util.find_spec(p) is None]
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"{', '.join(MISSING)} (the test and "
                                f"examples extras) not installed: the benchmark needs them")
sys.path.insert(0, BENCH)

import bench_transformers  # noqa: E402  (benchmarks/browser: the driver and its page)

from fragflow.tools.webgl.chromium import chromium  # noqa: E402


@pytest.fixture(scope="module")
def summary(request, tmp_path_factory):
    if chromium() is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    if not os.path.isdir(bench_transformers.ORT_DIST):
        pytest.skip("onnxruntime-web is not installed: npm ci --prefix benchmarks/browser "
                    "(make bench-transformers does)")
    cache = str(request.config.cache.mkdir("bench-transformers"))
    out = str(tmp_path_factory.mktemp("bench") / "out.json")
    return bench_transformers.main(["--tiny", "--only", "bert,gpt2", "--configs", "swiftshader",
                                    "--webgpu", "", "--rounds", "1", "--budget-ms", "0",
                                    "--no-python", "--cache", cache, "--json", out])


def test_the_export_and_ort_wasm_run_in_the_page_and_agree(summary):
    entry = summary["results"]["swiftshader"]["bert"]
    assert entry["error"] is None, entry["error"]
    result = entry["result"]
    assert result["errors"] == {}, result["errors"]
    for side in ("fragflow", "wasm"):
        assert result[side]["runs"] == 1 and result[side]["steady"] > 0, result[side]
    assert "webgpu" not in result                       # --webgpu "": not asked
    assert entry["agreement"]["fragflow"] < 1e-4


def test_kernel_counts_and_bytes_are_reported(summary):
    facts = summary["facts"]["bert"]
    assert "python" not in facts                        # --no-python
    assert 0 < facts["layer_kernels"] < facts["kernels"]
    ff_bytes, wasm_bytes = facts["sizes"]["fragflow"], facts["sizes"]["wasm"]
    assert 0 < ff_bytes[1] < ff_bytes[0] and wasm_bytes[0] > ff_bytes[0]


def test_the_table_has_a_row_per_model_and_skips_none(summary):
    for name in ("bert", "gpt2"):
        facts = summary["facts"][name]
        rows = [line for line in summary["table"].splitlines()
                if line.startswith(f"| {name} |")]
        assert len(rows) == 2, summary["table"]         # times; kernels, bytes, agreement
        assert f"| {facts['kernels']} ({facts['layer_kernels']}) /" in rows[1]
    assert summary["skipped"] == {}


def test_gpt2_generates_transformers_tokens_on_both_sides(summary):
    facts = summary["facts"]["gpt2"]
    want = facts["transformers_tokens"]
    assert len(want) == facts["new_tokens"] == 32 and len(set(want)) > 1, want
    entry = summary["results"]["swiftshader"]["gpt2"]
    assert entry["error"] is None, entry["error"]
    assert entry["result"]["errors"] == {}, entry["result"]["errors"]
    assert entry["tokens_equal"] == {"fragflow": True, "wasm": True, "webgpu": None}
    for side in ("fragflow", "wasm"):
        assert entry["result"][side]["runs"] == 1 and entry["result"][side]["steady"] > 0
    assert 0 < facts["layer_kernels"] < facts["kernels"]
    row = [line for line in summary["table"].splitlines() if line.startswith("| gpt2 |")]
    assert "a token)" in row[0] and "| tokens equal |" in row[1], row
