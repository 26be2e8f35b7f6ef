"""A model.json and its shards are untrusted input: each malformed or hostile model ends
in a TfjsImportError naming the node or weight, read nothing outside the model's folder
and allocate nothing before the sizes are checked."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
from tfjs_builder import ModelBuilder

import fragflow as ff
from fragflow.frontend.tfjs import reader

TfjsImportError = ff.tfjs.TfjsImportError


def small():
    b = ModelBuilder()
    b.placeholder("x", [1, 4])
    b.const("w", np.ones((4, 2), np.float32))
    b.op("MatMul", "y", ["x", "w"], transpose_a=False, transpose_b=False)
    return b


def write(tmp_path, b, mutate=None, shard="weights.bin"):
    model = b.model_json(shard)
    if mutate:
        mutate(model)
    return b.write(str(tmp_path), model, shard)


def test_a_well_formed_model_loads(tmp_path):
    model = ff.tfjs.load(write(tmp_path, small()))
    y = ff.Session(model.graph, backend="numpy").run(
        model.outputs[0], model.feed_dict({"x": np.ones((1, 4), np.float32)}))
    np.testing.assert_array_equal(y, [[4.0, 4.0]])
    assert ff.tfjs.load(str(tmp_path)).outputs[0].shape == (1, 2)      # the folder


@pytest.mark.parametrize("path,why", [
    ("../outside.bin", "outside the model's folder"),
    ("sub/../../outside.bin", "outside the model's folder"),
    ("/etc/passwd", "relative path inside"),
    ("https://example.com/w.bin", "relative path inside"),
    ("missing.bin", "does not exist"),
])
def test_weight_paths_stay_inside_the_folder(tmp_path, path, why):
    folder = tmp_path / "model"
    b = small()
    json_path = write(folder, b, lambda m: m["weightsManifest"][0].update(paths=[path]))
    (tmp_path / "outside.bin").write_bytes(b"".join(b.chunks))
    with pytest.raises(TfjsImportError, match=why):
        ff.tfjs.load(json_path)


def test_a_symbolic_link_out_of_the_folder_is_refused(tmp_path):
    folder = tmp_path / "model"
    b = small()
    (tmp_path / "outside.bin").write_bytes(b"".join(b.chunks))
    json_path = write(folder, b, lambda m: m["weightsManifest"][0].update(paths=["link.bin"]))
    os.symlink(tmp_path / "outside.bin", folder / "link.bin")
    with pytest.raises(TfjsImportError, match="outside the model's folder"):
        ff.tfjs.load(json_path)


def test_shard_sizes_are_checked_before_reading(tmp_path):
    b = small()
    json_path = write(tmp_path, b)
    with open(tmp_path / "weights.bin", "ab") as f:
        f.write(b"\0" * 4)
    with pytest.raises(TfjsImportError, match="declares 32 bytes .* hold 36 bytes"):
        ff.tfjs.load(json_path)


def test_a_declared_weight_too_big_is_refused_before_allocation(tmp_path):
    b = small()
    json_path = write(tmp_path, b, lambda m: m["weightsManifest"][0]["weights"][0].update(
        shape=[1 << 20, 1 << 20]))
    with pytest.raises(TfjsImportError, match="weight 'w': .* more than max_elements"):
        ff.tfjs.load(json_path)


def test_malformed_json_is_refused(tmp_path):
    (tmp_path / "model.json").write_text('{"modelTopology": {"node": [')
    with pytest.raises(TfjsImportError, match="malformed JSON"):
        ff.tfjs.load(str(tmp_path / "model.json"))


def test_json_nested_too_deep_is_refused(tmp_path):
    (tmp_path / "model.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TfjsImportError, match="nests too deep|not an object"):
        ff.tfjs.load(str(tmp_path / "model.json"))


def test_a_top_level_that_is_not_an_object_is_refused(tmp_path):
    (tmp_path / "model.json").write_text("[1, 2]")
    with pytest.raises(TfjsImportError, match="not an object"):
        ff.tfjs.load(str(tmp_path / "model.json"))


def test_a_cycle_is_refused_naming_a_node(tmp_path):
    b = small()
    b.op("AddV2", "a", ["x", "c"])
    b.op("Relu", "c", ["a"])
    b.op("Identity", "out", ["c"])
    with pytest.raises(TfjsImportError, match="node '(a|c)' is part of a cycle"):
        ff.tfjs.load(write(tmp_path, b))


def test_duplicate_node_names_are_refused(tmp_path):
    b = small()
    b.op("Relu", "y", ["x"])
    with pytest.raises(TfjsImportError, match="node name 'y' is used twice"):
        ff.tfjs.load(write(tmp_path, b))


def test_a_dangling_input_is_refused(tmp_path):
    b = small()
    b.op("Relu", "r", ["nowhere:0"])
    with pytest.raises(TfjsImportError, match="Relu node 'r': input 'nowhere' names no node"):
        ff.tfjs.load(write(tmp_path, b))


def test_duplicate_weight_names_are_refused(tmp_path):
    b = small()
    json_path = write(tmp_path, b, lambda m: m["weightsManifest"][0]["weights"].append(
        dict(m["weightsManifest"][0]["weights"][0])))
    with pytest.raises(TfjsImportError, match="weight 'w' is listed twice"):
        ff.tfjs.load(json_path)


@pytest.mark.parametrize("entry,why", [
    ({"dtype": "string"}, "dtype 'string' is not supported"),
    ({"dtype": "complex64"}, "dtype 'complex64' is not supported"),
    ({"quantization": {"dtype": "int4"}}, "quantization 'int4' is not supported"),
    ({"quantization": {"dtype": "uint8"}}, "needs finite numbers 'min' and 'scale'"),
    ({"quantization": {"dtype": "uint8", "min": "x", "scale": 1}}, "needs finite"),
    ({"shape": [-1, 2]}, "non-negative integers"),
    ({"shape": "4x2"}, "non-negative integers"),
])
def test_unknown_dtypes_and_quantizations_are_refused(tmp_path, entry, why):
    b = small()
    json_path = write(tmp_path, b, lambda m: m["weightsManifest"][0]["weights"][0].update(
        entry))
    with pytest.raises(TfjsImportError, match=why):
        ff.tfjs.load(json_path)


def test_an_unknown_input_dtype_is_refused(tmp_path):
    b = small()
    b.nodes[0]["attr"]["dtype"] = {"type": "DT_STRING"}
    with pytest.raises(TfjsImportError, match="Placeholder node 'x': input dtype DT_STRING"):
        ff.tfjs.load(write(tmp_path, b))


def test_an_unsupported_op_names_the_op_the_node_and_the_supported_set(tmp_path):
    b = small()
    b.op("Bitcast", "e", ["y"], type="DT_INT32")
    with pytest.raises(ff.tfjs.UnsupportedTfjsOpError,
                       match=r"Bitcast node .e.: op Bitcast is not supported .* it supports "
                             r"\d+ ops: .*_FusedConv2D"):
        ff.tfjs.load(write(tmp_path, b))


def test_an_unread_attribute_is_refused(tmp_path):
    b = small()
    b.op("Relu", "r", ["y"], surprise=3)
    with pytest.raises(TfjsImportError, match="Relu node 'r': attribute.* surprise not"):
        ff.tfjs.load(write(tmp_path, b))


def test_a_const_without_its_weight_is_refused(tmp_path):
    b = small()
    json_path = write(tmp_path, b)
    model = json.load(open(json_path))
    model["modelTopology"]["node"].append({"name": "lost", "op": "Const", "attr": {}})
    model["modelTopology"]["node"].append({"name": "o", "op": "AddV2",
                                           "input": ["y", "lost"]})
    with open(json_path, "w") as f:
        json.dump(model, f)
    with pytest.raises(TfjsImportError, match="Const node 'lost': .* no weight"):
        ff.tfjs.load(json_path)


def test_a_malformed_layers_model_is_a_tfjs_import_error(tmp_path):
    (tmp_path / "model.json").write_text(json.dumps({
        "format": "layers-model", "modelTopology": {"class_name": "Sequential"},
        "weightsManifest": []}))
    with pytest.raises(TfjsImportError, match="the config's 'layers' is missing"):
        ff.tfjs.load(str(tmp_path))


def test_a_folder_without_model_json_says_so(tmp_path):
    (tmp_path / "other.json").write_text("{}")
    with pytest.raises(TfjsImportError, match="holds no model.json .*other.json"):
        ff.tfjs.load(str(tmp_path))


def test_deep_graphs_import_without_recursion(tmp_path):
    b = ModelBuilder()
    b.placeholder("x", [2])
    last = "x"
    for k in range(5000):
        last = b.op("Relu" if k % 2 else "Neg", f"n{k}", [last])
    model = ff.tfjs.load(b.write(str(tmp_path)))
    assert model.outputs[0].shape == (2,)


def test_every_float16_pattern_decodes_as_ieee():
    bits = np.arange(1 << 16, dtype=np.uint16)
    got = reader.float16_as_tfjs(bits)
    want = bits.view(np.float16).astype(np.float32)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[finite], want[finite])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[np.isinf(want)], want[np.isinf(want)])


def test_uint8_dequantization_is_the_float64_formula_rounded_once():
    q = np.arange(256, dtype=np.uint8)
    scale, minimum = 0.0123456789, -1.5
    got = reader.dequantize(q, scale, minimum, "float32")
    want = np.array([np.float32(v * scale + minimum) for v in range(256)], np.float32)
    np.testing.assert_array_equal(got, want)
    ints = reader.dequantize(np.array([0, 1, 2, 3], np.uint8), 0.5, -1.0, "int32")
    np.testing.assert_array_equal(ints, [-1, 0, 0, 1])      # Math.round: -0.5 -> -0, 0.5 -> 1


def test_trainable_weights_are_variables_that_train(tmp_path):
    b = small()
    b.op("Square", "sq", ["y"])
    path = write(tmp_path, b)
    frozen = ff.tfjs.load(path)
    assert frozen.variables == {}
    model = ff.tfjs.load(path, trainable=True)
    assert list(model.variables) == ["w"]
    x = np.ones((1, 4), np.float32)
    with model.graph.as_default():
        loss = ff.reduce_sum(model.outputs_by_name["sq"])
        grad, = ff.gradients(loss, [model.variables["w"]])
    g = ff.Session(model.graph, backend="numpy").run(grad, model.feed_dict({"x": x}))
    np.testing.assert_allclose(g, np.full((4, 2), 2 * 4.0))   # d(sum (x@w)^2)/dw = 2 x^T (x@w)


def _reshape_to_shape_of(tmp_path, source):
    """relu(x) reshaped to [Shape(source)[0], -1, 2]: x is [?, 4], source x or y [?, 4]."""
    b = ModelBuilder()
    b.placeholder("x", [None, 4])
    b.placeholder("y", [None, 4])
    b.op("Relu", "relu", ["x"])
    b.op("Shape", "shape", [source], out_type="DT_INT32")
    for name, value in (("b0", [0]), ("b1", [1]), ("m1", -1), ("two", 2)):
        b.const(name, np.array(value, np.int32))
    b.op("StridedSlice", "batch", ["shape", "b0", "b1", "b1"], shrink_axis_mask=1,
         begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0)
    b.op("Pack", "target", ["batch", "m1", "two"], axis=0, N=3)
    b.op("Reshape", "out", ["relu", "target"])
    return b.write(str(tmp_path))


def test_a_reshape_to_its_own_free_dim_stays_free(tmp_path):
    model = ff.tfjs.load(_reshape_to_shape_of(tmp_path, "relu"))
    out = model.outputs_by_name["out"]
    assert out.shape == (None, 2, 2)
    x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    got = ff.Session(model.graph, backend="numpy").run(out, model.feed_dict({"x": x}))
    np.testing.assert_array_equal(got, np.maximum(x, 0).reshape(3, 2, 2))


def test_a_reshape_to_another_tensors_free_dim_is_not_guessed(tmp_path):
    with pytest.raises(TfjsImportError, match="Reshape node 'out': shape must be known .*"
                                              "input_shapes="):
        ff.tfjs.load(_reshape_to_shape_of(tmp_path, "y"))
