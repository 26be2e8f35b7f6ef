"""float16 ONNX models: ff.onnx.load reads their half weights (the graph records the
form, Graph.weight_encodings), computes in float32 from them on GL and on the numpy
executor, and ff.webgl.export keeps them float16 in model.bin (half the float32
export's size), RGBA16F on the GPU. Oracles: onnxruntime on the float32 twin of each
model (tests/onnx/half_models.py: the same weights, all exactly halves) within 1e-5 of
the output's largest magnitude, and onnxruntime on the float16 model itself within
float16 arithmetic's rounding (2e-3 of it: ORT rounds every intermediate to half)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.onnx.conftest import require_onnx_packages

require_onnx_packages()

import fragflow as ff  # noqa: E402
from tests.onnx.half_models import EDGES, TOKENS, WIDTH, edge_add, encoder_layer  # noqa: E402
from tests.onnx.helpers import assert_close, ort_run  # noqa: E402
from tests.reference import assert_matches  # noqa: E402

X = np.random.default_rng(3).standard_normal((1, TOKENS, WIDTH)).astype(np.float16)
FLOAT16_BOUND = 2e-3          # fragflow (float32 from half weights) against ORT in half


def _run(model, backend, x):
    return ff.Session(model.graph, backend=backend).run(model.outputs[0],
                                                        {model.inputs[0]: x})


def test_a_float16_model_records_its_half_weights():
    model = ff.onnx.load(encoder_layer("float16"))
    assert model.graph.weight_encodings == [{"dtype": "float16"}]
    for name, var in model.variables.items():
        assert var.dtype == "float32"
        value = var.initial_value
        assert np.array_equal(value.astype(np.float16).astype(np.float32), value), name


def test_a_float32_model_records_no_weight_form():
    assert ff.onnx.load(encoder_layer("float32")).graph.weight_encodings == []


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_a_float16_encoder_layer_matches_onnxruntime(backend):
    model = ff.onnx.load(encoder_layer("float16"))
    got = _run(model, backend, X.astype(np.float32))
    twin = ort_run(encoder_layer("float32"), {"x": X.astype(np.float32)})[0]
    assert_close(got, twin, rtol=1e-5)
    in_half = ort_run(encoder_layer("float16"), {"x": X})[0].astype(np.float32)
    assert_close(got, in_half, rtol=FLOAT16_BOUND)
    assert not np.array_equal(got, in_half)     # ORT's half arithmetic does round


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_edge_weights_come_through_as_onnxruntime_reads_them(backend):
    """-0, subnormals, 65504, +-inf and NaN as float16 weights: x + w equals
    onnxruntime's float32 twin (inf - inf is NaN, NaN stays NaN)."""
    model = ff.onnx.load(edge_add("float16"))
    x = np.stack([np.zeros(11), np.linspace(-3, 3, 11)]).astype(np.float32)
    x[1, 6] = -np.inf
    got = _run(model, backend, x)
    want = ort_run(edge_add("float32"), {"x": x})[0]
    assert_matches(got, want, rtol=0, atol=0)
    assert np.isnan(got[1, 6]) and np.isnan(got[:, 8]).all()


def test_the_export_keeps_float16_weights_at_half_the_size(tmp_path):
    model = ff.onnx.load(encoder_layer("float16"))
    kept = ff.webgl.export(model.outputs, model.inputs, tmp_path / "kept", page=False)
    plain = ff.webgl.export(model.outputs, model.inputs, tmp_path / "plain", page=False,
                            weights="float32")
    data = [s for s in kept.schedule["slots"] if s.get("data")]
    half = [s for s in data if s.get("encoding") == ["float16"]]
    # every weight but the ones the passes compute (a folded product is float32)
    assert len(half) >= len(data) - 2 and half
    assert all(s.get("half") for s in half)              # RGBA16F textures
    assert not any(s.get("encoding") or s.get("half") for s in plain.schedule["slots"])
    # 16-byte alignment of each of ~13 weights keeps it a little above one half
    assert 0.45 * plain.bin_bytes < kept.bin_bytes < 0.6 * plain.bin_bytes, \
        (kept.bin_bytes, plain.bin_bytes)


def test_exported_edge_weights_are_stored_bit_for_bit(tmp_path):
    model = ff.onnx.load(edge_add("float16"))
    export = ff.webgl.export(model.outputs, model.inputs, tmp_path, page=False)
    (slot,) = [s for s in export.schedule["slots"] if s.get("data")]
    assert slot["encoding"] == ["float16"] and slot["half"]
    offset, count = slot["data"]
    stored = np.frombuffer((tmp_path / "model.bin").read_bytes(), "<u2", count, offset)
    assert np.array_equal(stored, EDGES.view(np.uint16))
