"""The import core (frontend/interop/) that ONNX, TF.js and the Keras reader share."""
import os

import numpy as np
import pytest

import fragflow as ff
from fragflow.frontend.interop import (
    ImportedModel,
    ImporterBase,
    Init,
    ModelImportError,
    ReadAttrs,
    clean_name,
    read_bounded,
    static,
    too_large,
    weight_path,
)


def test_every_importer_error_is_a_model_import_error():
    assert issubclass(ff.onnx.OnnxImportError, ModelImportError)
    assert issubclass(ff.tfjs.TfjsImportError, ModelImportError)
    assert issubclass(ModelImportError, ff.FragflowError)


@pytest.mark.parametrize("location", ["../x.bin", "/etc/passwd", "a/../../x.bin",
                                      "http://h/x.bin", "", "a\0b", "\\\\server\\x"])
def test_weight_paths_outside_the_folder_are_refused(tmp_path, location):
    (tmp_path / "m").mkdir()
    (tmp_path / "x.bin").write_bytes(b"1")
    with pytest.raises(ModelImportError):
        weight_path(str(tmp_path / "m"), location, "weight")


def test_a_weight_path_inside_the_folder_resolves(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "w.bin").write_bytes(b"1")
    assert weight_path(str(tmp_path), "sub/w.bin", "w") == os.path.realpath(
        tmp_path / "sub" / "w.bin")


def test_reads_are_bounded(tmp_path):
    (tmp_path / "f").write_bytes(b"x" * 10)
    assert read_bounded(str(tmp_path / "f"), 10, "file") == b"x" * 10
    with pytest.raises(ModelImportError, match="larger than max_bytes=9"):
        read_bounded(str(tmp_path / "f"), 9, "file")
    with pytest.raises(ModelImportError, match="not a regular file"):
        read_bounded(str(tmp_path), 9, "file")


def test_sizes_and_names():
    assert too_large((None, 1 << 14, 1 << 14), 1 << 28) is None      # free dims count 1
    assert too_large((2, 1 << 14, 1 << 14), 1 << 28) == 1 << 29
    assert clean_name("/conv1/Conv:0", "x") == "conv1/Conv_0"
    assert clean_name("::", "fallback") == "__"
    assert clean_name("", "fallback") == "fallback"


class _Importer(ImporterBase):
    def where(self):
        return "node 'n'"


def test_the_guard_turns_any_failure_into_the_formats_error():
    imp = _Importer(trainable=False)
    for exc in (KeyError("a"), IndexError("b"), MemoryError(), RecursionError(),
                ff.ShapeError("c"), ValueError("d")):
        with pytest.raises(ModelImportError, match="node 'n'"):
            with imp.guard():
                raise exc


def test_weights_become_variables_once_per_layout_and_statics_constants():
    imp = _Importer(trainable=True)
    g = imp.graph = imp.root = ff.Graph()
    with g.as_default():
        w = Init("w", np.ones((2, 3), np.float32))
        a = imp.weight(w, "t", lambda x: x.T)
        assert imp.weight(w, "t", lambda x: x.T) is a and a.shape == (3, 2)
        assert imp.tensor(w).shape == (2, 3) and set(imp.variables) == {"w:t", "w"}
        c = imp.tensor(np.arange(3, dtype=np.int64))
        assert c.dtype == "int32"
        with pytest.raises(ModelImportError, match="does not fit in int32"):
            imp.tensor(np.array([1 << 40]))


def test_unread_attributes_are_refused():
    imp = _Importer(trainable=False)
    imp.node_type = lambda: "Op"
    attrs = ReadAttrs({"alpha": 1, "momentum": 0.9, "beta": 2})
    attrs.get("alpha")
    with pytest.raises(ModelImportError, match="beta not supported .* of Op"):
        attrs.check_all_read(imp)


def test_static_evaluation_runs_the_rule_on_the_numpy_executor():
    out = static.evaluate(lambda: ff.strided_slice(
        ff.constant(np.arange(6, dtype=np.int32)), [1], [5], [2]))
    np.testing.assert_array_equal(out, [1, 3])
    assert static.foldable([np.zeros(3)]) and not static.foldable([np.zeros(3), None])


def test_the_record_maps_names_and_aliases():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2,), "float32", name="x")
        y = ff.relu(x)
    model = ImportedModel(g, {"in": x}, {"out": y}, {}, aliases={"in:0": x})
    feeds = np.array([-1.0, 2.0], np.float32)
    (key, _), = model.feed_dict({"in:0": feeds}).items()
    assert key is x
    np.testing.assert_array_equal(model.run({"in": feeds}, ff.Session(g, backend="numpy"))[
        "out"], [0.0, 2.0])
