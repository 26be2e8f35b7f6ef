"""The text dump reads like a jaxpr; the JSON form round-trips exactly."""
import os

import numpy as np
import pytest

import fragflow as ff

HERE = os.path.basename(__file__)


def model():
    g = ff.Graph("model")
    with g.as_default():
        x = ff.placeholder((None, 4), "float32", name="x")
        w = ff.Variable(np.ones((4, 3), np.float32), name="w")
        b = ff.constant(np.zeros(3, np.float32), name="b")
        with ff.name_scope("dense"):
            y = ff.relu(x @ w + b)
        loss = ff.mean(ff.square(y), axis=(0, 1), keepdims=True)
        ids = ff.argmax(y, axis=1)
        sl = y[1:, ::-1, None]
        big = ff.constant(np.arange(100, dtype=np.int32).reshape(10, 10), name="table")
        nan = ff.constant(np.array([np.nan, np.inf, -np.inf], np.float32), name="specials")
        step = w.assign(w * 0.5)
    return g, (x, w, y, loss, ids, sl, big, nan, step)


def test_text_dump_has_one_line_per_node_with_types_attrs_scope_and_source():
    g, (x, w, y, loss, *_rest) = model()
    text = ff.dump(g)
    lines = text.splitlines()
    assert lines[0] == "graph model(%x: f32[?,4]) {" and lines[-1] == "}"
    assert len(lines) == len(g.nodes) + 2
    matmul_line = next(line for line in lines if "matmul(" in line)
    assert "matmul(%x, %w) : f32[?,3]" in matmul_line
    assert "# dense/matmul" in matmul_line and f"{HERE}:" in matmul_line
    mean_line = next(line for line in lines if " mean(" in line)
    assert "{axis=(0,1), keepdims=true}" in mean_line and ": f32[1,1]" in mean_line
    assert any('variable "w" : f32[4,3]' in line for line in lines)
    assert any("constant <int32[10, 10]>" in line for line in lines)


def test_json_round_trip_prints_the_same_text():
    g, _ = model()
    text = ff.dump(g, format="json")
    again = ff.load_graph(text)
    assert ff.dump(again) == ff.dump(g)
    assert ff.dump(again, format="json") == text


def test_loaded_graph_runs_like_the_original(tmp_path):
    g, (x, w, y, loss, *_rest) = model()
    path = str(tmp_path / "model.json")
    ff.save_graph(g, path)
    loaded = ff.load_graph(path)
    xb = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    with ff.Session(g, backend="numpy", passes=[]) as a, ff.Session(loaded, backend="numpy") as b:
        expected = a.run(loss, {x: xb})
        got = b.run(loaded.value(loss.name), {loaded.value("x"): xb})
    np.testing.assert_array_equal(got, expected)


def test_special_float_values_survive_json():
    g, (*_rest, nan, step) = model()
    loaded = ff.load_graph(ff.dump(g, format="json"))
    value = loaded.node("specials").attrs["value"]
    assert np.isnan(value[0]) and value[1] == np.inf and value[2] == -np.inf


@pytest.mark.parametrize("text, message", [
    ("{not json", "not valid JSON"),
    ('{"format": "other"}', "not a fragflow graph"),
    ('{"format": "fragflow.graph", "version": 99, "nodes": []}', "version 99"),
    ('{"format": "fragflow.graph", "version": 1, "nodes": [{"name": "a", "op": "nope", '
     '"inputs": [], "attrs": {}}]}', "unknown op 'nope'"),
    ('{"format": "fragflow.graph", "version": 1, "nodes": [{"name": "a", "op": "constant", '
     '"inputs": [], "attrs": {"value": {"ndarray": {"dtype": "object", "shape": [1], '
     '"data": ""}}}}]}', "unsupported dtype"),
    ("/no/such/file.json", "neither JSON text nor an existing file"),
])
def test_bad_graph_documents_raise_serialization_errors(text, message):
    with pytest.raises(ff.SerializationError, match=message):
        ff.load_graph(text)


def test_dot_export_names_every_node_and_edge():
    g, _ = model()
    dot = ff.dump(g, format="dot")
    assert dot.startswith('digraph "model"')
    for node in g.nodes:
        assert f'"{node.name}"' in dot
    assert '"x" -> "dense/matmul"' in dot


def test_compiled_graph_dump_has_concrete_shapes_and_returns_fetches():
    from fragflow.ir.types import TensorType
    from fragflow.runtime.driver import optimize
    g, (x, w, y, loss, *_rest) = model()
    compiled = optimize(g, [loss.value], {x.value: TensorType((8, 4), "float32")}).graph
    text = ff.dump(compiled)
    assert "graph model(%x: f32[8,4])" in text and "f32[8,3]" in text
    assert text.splitlines()[-2].strip().startswith("return %")
    assert "argmax" not in text          # pruned: the loss does not need it
