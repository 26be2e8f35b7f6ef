"""ff.webgl.export(..., weights="float16"): a float32 model's weights rounded to float16
in model.bin (half the download), the accuracy that costs in the export's report, values
float16 cannot hold refused or counted, and float16 weights nothing writes as RGBA16F
textures in the browser (Tuning.half_weight_textures). Oracles: a float64 numpy formula
of the model with the weights numpy rounds to float16 (the report's numbers), the numpy
executor on the same graph built with those rounded weights (the browser's), and
onnxruntime's float32 twin of a float16 ONNX model (tests/onnx/half_models.py)."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import fragflow as ff
from fragflow.tools.cli import main
from tests.reference import assert_matches
from tests.webgl.browser import CONFIGS, chromium, run_cases

RNG = np.random.default_rng(8)
W1 = (RNG.standard_normal((10, 33)) * 0.4).astype(np.float32)
B1 = (RNG.standard_normal(33) * 0.1).astype(np.float32)
W2 = (RNG.standard_normal((33, 7)) * 0.4).astype(np.float32)


def _mlp(w1=W1, b1=B1, w2=W2):
    """y = tanh(x[3, 10] @ w1 + b1) @ w2: sizes not multiples of 4."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 10), "float32", name="x")
        y = ff.matmul(ff.tanh(ff.matmul(x, ff.Variable(w1, name="w1")) +
                              ff.Variable(b1, name="b1")), ff.Variable(w2, name="w2"))
    return x, y


def _half(a):
    return np.asarray(a, np.float32).astype(np.float16).astype(np.float32)


def _formula(x, w1, b1, w2):
    return np.tanh(x.astype(np.float64) @ w1 + b1) @ w2


def _stored(export, path) -> dict:
    """{variable name: its values as model.bin holds them, decoded}."""
    blob = (path / "model.bin").read_bytes()
    out = {}
    for v in export.schedule["variables"]:
        s = export.schedule["slots"][v["slot"]]
        offset, count = s["data"]
        if s.get("encoding") == ["float16"]:
            out[v["name"]] = np.frombuffer(blob, "<f2", count, offset).astype(np.float32)
        else:
            out[v["name"]] = np.frombuffer(blob, "<f4", count, offset)
    return out


def test_float16_weights_halve_model_bin(tmp_path):
    x, y = _mlp()
    full = ff.webgl.export(y, [x], tmp_path / "f32", page=False)
    half = ff.webgl.export(y, [x], tmp_path / "f16", page=False, weights="float16")
    # 330 + 33 + 231 weights, each but the last padded to 16 bytes: 1328 + 144 + 924
    # bytes as float32, 672 + 80 + 462 as float16
    assert full.bin_bytes == 2396 and half.bin_bytes == 1214
    stored = _stored(half, tmp_path / "f16")
    for name, w in (("w1", W1), ("b1", B1), ("w2", W2)):
        assert np.array_equal(stored[name], _half(w).reshape(-1)), name


def test_the_report_states_the_error_against_float32(tmp_path):
    """The report's max |difference| and max |output| are the float64 formula's on the
    seeded inputs (default_rng(0) standard normal), to float32's rounding."""
    x, y = _mlp()
    export = ff.webgl.export(y, [x], tmp_path, page=False, weights="float16")
    report = export.weights_report
    feed = np.random.default_rng(0).standard_normal((3, 10)).astype(np.float32)
    want = _formula(feed, W1, B1, W2)
    rounded = _formula(feed, _half(W1), _half(B1), _half(W2))
    (out,) = report.outputs.values()
    scale = np.abs(want).max()
    assert out["max_abs"] == pytest.approx(scale, rel=1e-5)
    assert abs(out["max_abs_diff"] - np.abs(rounded - want).max()) < 2e-6 * scale
    assert 1e-5 < report.relative < 5e-3          # half's 11 bits, not float32's 24
    assert report.weights == 3 and report.elements == 330 + 33 + 231
    assert report.flushed == report.subnormal == 0
    assert any("max |float16 - float32|" in line for line in export.notes)


def test_a_weight_beyond_float16s_range_is_refused(tmp_path):
    w1 = W1.copy()
    w1[2, 3] = 70000.0
    x, y = _mlp(w1=w1)
    with pytest.raises(ff.webgl.HalfWeightsError, match="variable 'w1'.*65520"):
        ff.webgl.export(y, [x], tmp_path, page=False, weights="float16")
    w1[2, 3] = 65519.0                            # rounds to 65504: kept
    x, y = _mlp(w1=w1)
    ff.webgl.export(y, [x], tmp_path, page=False, weights="float16")


def test_inf_nan_and_tiny_weights(tmp_path):
    """inf and NaN stay so; values under 2**-14 become subnormals and under 2**-25
    become 0: both counted, a warning for the zeros."""
    b1 = B1.copy()
    b1[:4] = [np.inf, np.nan, 1e-6, 1e-9]
    x, y = _mlp(b1=b1)
    with pytest.warns(UserWarning, match="1 nonzero weight value.*became 0"):
        export = ff.webgl.export(y, [x], tmp_path, page=False, weights="float16")
    stored = _stored(export, tmp_path)["b1"]
    assert stored[0] == np.inf and np.isnan(stored[1])
    assert stored[2] == np.float32(np.float16(1e-6)) != 0 and stored[3] == 0
    report = export.weights_report
    assert report.flushed == 1 and report.subnormal == 1


def test_weights_takes_none_float32_or_float16(tmp_path):
    x, y = _mlp()
    with pytest.raises(ff.webgl.WebGLExportError, match="weights='bfloat16'"):
        ff.webgl.export(y, [x], tmp_path, weights="bfloat16")


def test_assigned_variables_keep_float32_textures(tmp_path):
    """A training step's variables are stored as float16 but written by the run: their
    textures stay RGBA32F, and the knob turned off leaves every slot RGBA32F."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 10), "float32", name="x")
        w = ff.Variable(W1, name="w")
        frozen = ff.Variable(W2, name="frozen")
        loss = ff.reduce_mean(ff.square(ff.matmul(ff.matmul(x, w), frozen)))
        step = ff.optim.SGD(0.1).minimize(loss, var_list=[w])
    export = ff.webgl.export([loss, step], [x], tmp_path / "a", page=False,
                             weights="float16")
    slots = export.schedule["slots"]
    by_name = {v["name"]: slots[v["slot"]] for v in export.schedule["variables"]}
    assert by_name["w"]["encoding"] == ["float16"] and not by_name["w"].get("half")
    assert by_name["frozen"]["half"]
    off = ff.Tuning.named("webgl").with_(half_weight_textures=False)
    plain = ff.webgl.export([loss, step], [x], tmp_path / "b", page=False,
                            weights="float16", tuning=off)
    assert not any(s.get("half") for s in plain.schedule["slots"])


def test_cli_exports_float16_weights(tmp_path, capsys):
    pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
    from tests.onnx.half_models import encoder_layer
    path = tmp_path / "layer.onnx"
    path.write_bytes(encoder_layer("float32").SerializeToString())
    assert main(["export", str(path), "--webgl", "-o", str(tmp_path / "a"),
                 "--weights", "float32"]) == 0
    assert main(["export", str(path), "--webgl", "-o", str(tmp_path / "b"),
                 "--weights", "float16"]) == 0
    assert "max |float16 - float32|" in capsys.readouterr().err
    sizes = [os.path.getsize(tmp_path / d / "model.bin") for d in "ab"]
    assert 0.45 * sizes[0] < sizes[1] < 0.6 * sizes[0]


# -- in the browser -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Three exports run in one Chromium launch per rasteriser: a float16 ONNX encoder
    layer, the MLP with weights="float16", the same with the RGBA16F knob off."""
    if chromium() is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is missing")
    from tests.onnx.half_models import TOKENS, WIDTH, encoder_layer
    root = str(tmp_path_factory.mktemp("half_weights"))
    layer = ff.onnx.load(encoder_layer("float16"))
    xl = np.random.default_rng(4).standard_normal((1, TOKENS, WIDTH)).astype(np.float32)
    xm = np.random.default_rng(5).standard_normal((3, 10)).astype(np.float32)
    x, y = _mlp()
    off = ff.Tuning.named("webgl").with_(half_weight_textures=False)
    exports = {
        "layer": ff.webgl.export(layer.outputs, layer.inputs, os.path.join(root, "layer"),
                                 page=False),
        "mlp": ff.webgl.export(y, [x], os.path.join(root, "mlp"), page=False,
                               weights="float16"),
        "mlp32tex": ff.webgl.export(y, [x], os.path.join(root, "mlp32tex"), page=False,
                                    weights="float16", tuning=off),
    }
    assert any(s.get("half") for s in exports["mlp"].schedule["slots"])
    feeds = {"layer": {"x": (xl, "float32")}, "mlp": {"x": (xm, "float32")},
             "mlp32tex": {"x": (xm, "float32")}}
    # load()'s halfTextures: RGBA16F asked for ("layer", "mlp"), the renderer's default
    # ("mlp-default": RGBA32F on SwiftShader and llvmpipe), the tuning's off ("mlp32tex")
    cases = [{"id": k, "dir": k, "feeds": feeds[k],
              "outputs": {o["name"]: (tuple(o["shape"]), o["dtype"])
                          for o in e.schedule["outputs"]},
              "variables": {"w1": ((10, 33), "float32")} if k == "mlp" else {},
              "load_options": {"halfTextures": True} if k in ("layer", "mlp") else {}}
             for k, e in exports.items()]
    cases.append(dict(cases[1], id="mlp-default", variables={}, load_options={}))
    results = {config: run_cases(root, cases, config) for config in CONFIGS}
    yield results, xl, xm
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_a_float16_onnx_layer_runs_in_the_browser(browser, config):
    from tests.onnx.half_models import encoder_layer
    from tests.onnx.helpers import assert_close, ort_run
    results, xl, _ = browser
    got = results[config]["layer"]
    assert got["error"] is None, got["error"]
    (out,) = got["outputs"][0].values()
    assert_close(out, ort_run(encoder_layer("float32"), {"x": xl})[0], rtol=1e-5)


@pytest.mark.parametrize("case", ["mlp", "mlp32tex"])
@pytest.mark.parametrize("config", list(CONFIGS))
def test_float16_weights_run_in_the_browser_as_rounded_float32(browser, config, case):
    """The browser's output equals the numpy executor on the graph built with the
    rounded weights, with RGBA16F textures and without."""
    results, _, xm = browser
    got = results[config][case]
    assert got["error"] is None, got["error"]
    (out,) = got["outputs"][0].values()
    x, y = _mlp(_half(W1), _half(B1), _half(W2))
    want = ff.Session(y.graph, backend="numpy", passes=[]).run(y, {x: xm})
    assert_matches(out, want, rtol=1e-5, atol=1e-6)
    x, y = _mlp()
    full = ff.Session(y.graph, backend="numpy", passes=[]).run(y, {x: xm})
    assert not np.allclose(out, full, rtol=0, atol=1e-6)    # the weights were rounded


@pytest.mark.parametrize("config", list(CONFIGS))
def test_rgba16f_is_load_options_choice_and_off_on_cpu_rasterisers(browser, config):
    """halfTextures: RGBA16F where load() asks for it; by default not on SwiftShader or
    llvmpipe (both CPU rasterisers here), which sample RGBA32F faster (docs/WEBGL.md);
    the default's results equal the RGBA16F run's (the same numbers are stored)."""
    results = browser[0][config]
    assert results["mlp"]["timings"]["halfTextures"] is True
    assert results["mlp-default"]["timings"]["halfTextures"] is False
    assert results["mlp-default"]["error"] is None, results["mlp-default"]["error"]
    (a,), (b,) = (results[k]["outputs"][0].values() for k in ("mlp", "mlp-default"))
    assert np.array_equal(a, b)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_a_variable_in_an_rgba16f_texture_reads_back_as_stored(browser, config):
    """model.read of a variable living in RGBA16F: the rounded weights, exactly."""
    got = browser[0][config]["mlp"]
    assert got["error"] is None, got["error"]
    assert np.array_equal(got["variables"]["w1"], _half(W1))
