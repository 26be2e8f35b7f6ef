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


def test_a_float16_model_keeps_its_weights_half_until_they_are_used():
    """The variables' initial values stay float16 in the graph (half the memory),
    their type float32; a session reads them as float32; the graph records the form."""
    model = ff.onnx.load(encoder_layer("float16"))
    assert model.graph.weight_encodings == [{"dtype": "float16"}]
    assert model.variables
    sess = ff.Session(model.graph, backend="numpy")
    for name, var in model.variables.items():
        assert var.dtype == "float32" and var.initial_value.dtype == np.float16, name
        value = sess.get(var)
        assert value.dtype == np.float32
        assert np.array_equal(value, var.initial_value.astype(np.float32))


def test_a_weight_rearranged_at_import_stays_half_and_one_computed_does_not():
    """weight(): a transform of a float16 weight runs in float32 and stays float16
    where it is exactly halves (a transposed Gemm weight); else float32."""
    from fragflow.frontend.interop.importer import ImporterBase, Init
    importer = ImporterBase(trainable=True)
    importer.graph = importer.root = ff.Graph()
    w = np.array([[1.0, 2.0], [0.1, 3.0]], np.float16)
    moved = importer.weight(Init("w", w), "t", lambda a: a.T)
    scaled = importer.weight(Init("w", w), "s", lambda a: a / 3)
    assert moved.initial_value.dtype == np.float16
    assert np.array_equal(moved.initial_value, w.T)
    assert scaled.initial_value.dtype == np.float32
    assert np.array_equal(scaled.initial_value, w.astype(np.float32) / 3)


def test_half_weights_survive_a_json_round_trip_and_onnx_export(tmp_path):
    model = ff.onnx.load(encoder_layer("float16"))
    x = X.astype(np.float32)
    want = _run(model, "numpy", x)
    again = ff.load_graph(ff.dump(model.graph, format="json"))
    halves = [n for n in again.nodes if n.op == "variable"]
    assert halves and all(n.attrs["initial_value"].dtype == np.float16 for n in halves)
    got = ff.Session(again, backend="numpy").run(again.value(model.outputs[0].name),
                                                 {again.value(model.inputs[0].name): x})
    assert np.array_equal(got, want)
    path = str(tmp_path / "out.onnx")
    ff.onnx.export(model.outputs, model.inputs, path)
    assert_close(ort_run(path, {model.inputs[0].name: x})[0], want, rtol=1e-6)


def test_a_float16_constant_is_still_refused():
    """float16 arrays load as a variable's initial value only: a constant's type
    would be float16, which fragflow does not have."""
    import base64
    import json
    g = ff.Graph()
    with g.as_default():
        ff.constant(np.zeros(4, np.float32), name="c")
    doc = json.loads(ff.dump(g, format="json"))
    doc["nodes"][0]["attrs"]["value"]["ndarray"].update(
        dtype="float16", data=base64.b64encode(np.zeros(4, "<f2").tobytes()).decode())
    with pytest.raises(ff.FragflowError, match="float16"):
        ff.load_graph(json.dumps(doc))


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
