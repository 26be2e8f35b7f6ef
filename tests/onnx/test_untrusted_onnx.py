"""An ONNX file is untrusted input, held to ff.load_graph's standard: whatever is wrong
with it ends in an OnnxImportError naming the node, never in protobuf's, onnx's or
numpy's own exception, and never allocates more than the size limits allow
(max_elements, max_bytes; checked before anything is made).

The fuzz test mutates a few small real models (made with onnx.helper, and one exported
by torch: data/torch_small_cnn.onnx) with a fixed seed: dims, dtypes, attributes, shape
values, node edits, opsets, truncated and flipped bytes. Every case either loads (and
then runs on the numpy executor, or fails there with a FragflowError) or is refused
with an OnnxImportError.
"""
import os
import random
import resource
import tracemalloc

import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import fragflow as ff  # noqa: E402
from fragflow.frontend.onnx import OnnxImportError  # noqa: E402

HERE = os.path.dirname(__file__)
TORCH_CNN = os.path.join(HERE, "data", "torch_small_cnn.onnx")
MB = 2 ** 20


# -- small real models --------------------------------------------------------------------
def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "m", inputs, outputs, list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _tensor(name, dtype, dims, raw=b"", floats=()):
    """A TensorProto as a file may hold it (helper.make_tensor refuses the bad ones)."""
    t = TensorProto(name=name, data_type=dtype, dims=dims, raw_data=raw)
    t.float_data.extend(floats)
    return t


def _out(name, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, None)


def mlp():
    rng = np.random.default_rng(0)
    w1, b1 = rng.normal(size=(4, 8)).astype(np.float32), np.zeros(8, np.float32)
    w2, b2 = rng.normal(size=(8, 3)).astype(np.float32), np.ones(3, np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h0"], name="fc1"),
             helper.make_node("Add", ["h0", "b1"], ["h1"], name="bias1"),
             helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
             helper.make_node("Gemm", ["h2", "w2", "b2"], ["z"], name="fc2", alpha=1.0,
                              beta=1.0, transB=0),
             helper.make_node("Softmax", ["z"], ["y"], name="softmax", axis=1)]
    return _model(nodes, [_f("x", [None, 4])], [_out("y")],
                  [_init("w1", w1), _init("b1", b1), _init("w2", w2), _init("b2", b2)])


def cnn():
    rng = np.random.default_rng(1)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1],
                              kernel_shape=[3, 3], strides=[1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["n"],
                              name="bn", epsilon=1e-5),
             helper.make_node("Relu", ["n"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                              strides=[2, 2]),
             helper.make_node("GlobalAveragePool", ["p"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten", axis=1),
             helper.make_node("Gemm", ["f", "fw"], ["y"], name="fc", transB=1)]
    inits = [_init("w", rng.normal(size=(3, 2, 3, 3)).astype(np.float32)),
             _init("b", np.zeros(3, np.float32)), _init("s", np.ones(3, np.float32)),
             _init("o", np.zeros(3, np.float32)), _init("m", np.zeros(3, np.float32)),
             _init("v", np.ones(3, np.float32)),
             _init("fw", rng.normal(size=(2, 3)).astype(np.float32))]
    return _model(nodes, [_f("x", [1, 2, 6, 6])], [_out("y")], inits)


def shapes():
    """Shape arithmetic evaluated at import: Shape, Gather, Concat, Reshape,
    ConstantOfShape, Expand, Tile, Pad, Slice, Range, Cast, Resize, OneHot."""
    value = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Gather", ["s", "zero"], ["n"], name="batch", axis=0),
             helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="unsqueeze"),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], name="concat", axis=0),
             helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
             helper.make_node("ConstantOfShape", ["cshape"], ["ones"], name="fill",
                              value=value),
             helper.make_node("Add", ["r", "ones"], ["a"], name="add"),
             helper.make_node("Expand", ["bias", "cshape"], ["e"], name="expand"),
             helper.make_node("Mul", ["a", "e"], ["m"], name="mul"),
             helper.make_node("Tile", ["m", "reps"], ["t"], name="tile"),
             helper.make_node("Pad", ["t", "pads"], ["p"], name="pad", mode="constant"),
             helper.make_node("Slice", ["p", "starts", "ends", "axes1"], ["sl"], name="slice"),
             helper.make_node("Range", ["r0", "r20", "r1"], ["rg"], name="range"),
             helper.make_node("Cast", ["rg"], ["rgf"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Add", ["sl", "rgf"], ["y0"], name="add_range"),
             helper.make_node("Reshape", ["y0", "img"], ["im"], name="to_image"),
             helper.make_node("Resize", ["im", "", "scales"], ["up"], name="resize",
                              mode="nearest"),
             helper.make_node("OneHot", ["labels", "depth", "onoff"], ["oh"], name="onehot",
                              axis=-1)]
    i64 = np.int64
    inits = [_init("zero", np.array(0, i64)), _init("axes0", np.array([0], i64)),
             _init("minus1", np.array([-1], i64)), _init("cshape", np.array([2, 12], i64)),
             _init("bias", np.full((1, 12), 0.5, np.float32)), _init("reps", np.array([1, 2], i64)),
             _init("pads", np.array([0, 1, 0, 1], i64)), _init("starts", np.array([0], i64)),
             _init("ends", np.array([20], i64)), _init("axes1", np.array([1], i64)),
             _init("r0", np.array(0, i64)), _init("r20", np.array(20, i64)),
             _init("r1", np.array(1, i64)), _init("img", np.array([1, 2, 4, 5], i64)),
             _init("scales", np.array([1, 1, 2, 2], np.float32)),
             _init("depth", np.array([5], i64)), _init("onoff", np.array([0, 1], np.float32))]
    inputs = [_f("x", [2, 3, 4]),
              helper.make_tensor_value_info("labels", TensorProto.INT64, [3])]
    return _model(nodes, inputs, [_out("up"), _out("oh")], inits)


def torch_cnn():
    return onnx.load(TORCH_CNN)


SEEDS = {"mlp": mlp, "cnn": cnn, "shapes": shapes, "torch_cnn": torch_cnn}


# -- running what loads ----------------------------------------------------------------------
def _feeds(model, rng):
    feeds = {}
    for p in model.inputs:
        shape = tuple(2 if d is None else d for d in p.shape)
        if p.dtype == "float32":
            feeds[p] = rng.normal(size=shape).astype(np.float32)
        elif p.dtype == "int32":
            feeds[p] = rng.integers(0, 3, size=shape).astype(np.int32)
        else:
            feeds[p] = rng.integers(0, 2, size=shape).astype(bool)
    return feeds


def load_and_run(data, **limits):
    """'loaded' (and ran), 'ran: <error class>' (loaded, refused at run time with a
    FragflowError), or 'refused: <error class>'; any other exception propagates."""
    try:
        model = ff.onnx.load(data, **limits)
    except OnnxImportError as err:
        return f"refused: {type(err).__name__}"
    except ff.FragflowError as err:
        return f"refused: {type(err).__name__}"
    try:
        sess = ff.Session(model.graph, backend="numpy")
        sess.run(model.outputs, _feeds(model, np.random.default_rng(0)))
    except ff.FragflowError as err:
        return f"ran: {type(err).__name__}"
    return "loaded"


def test_every_seed_model_loads_and_runs():
    for name, make in SEEDS.items():
        assert load_and_run(make().SerializeToString()) == "loaded", name


def test_the_torch_seed_matches_onnxruntime():
    from tests.onnx.helpers import assert_close, ort_run
    x = np.random.default_rng(2).normal(size=(1, 3, 8, 8)).astype(np.float32)
    model = ff.onnx.load(TORCH_CNN)
    got, = ff.Session(model.graph, backend="numpy").run(model.outputs, {"input": x})
    assert_close(got, ort_run(TORCH_CNN, {"input": x})[0])


# -- the cases a new user found -----------------------------------------------------------------
def _constant_of_shape(dims, name="big"):
    return _model([helper.make_node("ConstantOfShape", ["s"], ["y"], name=name)], [],
                  [_out("y")], [_init("s", np.array(dims, np.int64))])


def _peak_mb(fn):
    """fn()'s peak of memory traced by tracemalloc (numpy's arrays included), in MiB."""
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak / MB


def test_huge_constant_of_shape_is_refused_before_allocating():
    data = _constant_of_shape([100000, 100000]).SerializeToString()

    def refused():
        with pytest.raises(OnnxImportError, match=r"ConstantOfShape node 'big'.*100000, "
                                                  r"100000.*max_elements"):
            ff.onnx.load(data)
    peak = _peak_mb(refused)
    print(f"100000x100000 ConstantOfShape: refused, peak {peak:.1f} MiB")
    assert peak < 200


def test_max_elements_raises_the_limit():
    model = _constant_of_shape([50, 40]).SerializeToString()
    with pytest.raises(OnnxImportError, match="2000 elements, more than max_elements=1000"):
        ff.onnx.load(model, max_elements=1000)
    out = ff.onnx.load(model, max_elements=2000)
    assert ff.Session(out.graph, backend="numpy").run(out.outputs)[0].shape == (50, 40)


def test_empty_bytes_are_not_a_model():
    with pytest.raises(OnnxImportError, match="empty"):
        ff.onnx.load(b"")


def test_a_model_without_graph_or_outputs_is_refused():
    with pytest.raises(OnnxImportError, match="no ir_version or no graph"):
        ff.onnx.load(onnx.ModelProto())
    with pytest.raises(OnnxImportError, match="no outputs"):
        ff.onnx.load(_model([], [_f("x", [2])], []))


@pytest.mark.parametrize("data", [b"\xff\x00 not a model" * 7, b"\x08", b"\x0a\xff\xff\xff"])
def test_garbage_bytes_are_not_a_model(data):
    with pytest.raises(OnnxImportError, match="not an ONNX model"):
        ff.onnx.load(data)


def test_truncated_file(tmp_path):
    path = tmp_path / "cut.onnx"
    path.write_bytes(mlp().SerializeToString()[:-7])
    with pytest.raises(OnnxImportError, match="cut.onnx"):
        ff.onnx.load(str(path))


def test_max_bytes_bounds_bytes_and_files(tmp_path):
    data = mlp().SerializeToString()
    with pytest.raises(OnnxImportError, match="more than max_bytes=100"):
        ff.onnx.load(data, max_bytes=100)
    path = tmp_path / "m.onnx"
    path.write_bytes(data)
    with pytest.raises(OnnxImportError, match="larger than max_bytes=100"):
        ff.onnx.load(path, max_bytes=100)
    ff.onnx.load(path, max_bytes=len(data))


def test_not_a_path_or_bytes():
    with pytest.raises(OnnxImportError, match="not int"):
        ff.onnx.load(42)
    with pytest.raises(OnnxImportError, match="no such file"):
        ff.onnx.load("/nonexistent/model.onnx")


# -- external data ------------------------------------------------------------------------------
def _external(location, offset=None, length=None):
    t = _init("w", np.arange(4, dtype=np.float32))
    t.ClearField("raw_data")
    del t.float_data[:]
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", offset), ("length", length)):
        if value is not None:
            entry = t.external_data.add()
            entry.key, entry.value = key, str(value)
    nodes = [helper.make_node("Relu", ["w"], ["y"], name="relu")]
    return _model(nodes, [], [_out("y")], [t])


def _save(tmp_path, model, name="model.onnx"):
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return str(path)


def test_external_data_in_the_models_folder_is_read(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"pad!" + np.arange(4, dtype=np.float32).tobytes())
    model = ff.onnx.load(_save(tmp_path, _external("w.bin", offset=4, length=16)),
                         trainable=False)
    y, = ff.Session(model.graph, backend="numpy").run(model.outputs)
    np.testing.assert_array_equal(y, [0, 1, 2, 3])


def test_external_data_of_a_model_given_as_bytes_is_refused():
    with pytest.raises(OnnxImportError, match="initializer 'w'.*no folder.*give the model's "
                                              "path"):
        ff.onnx.load(_external("../../etc/passwd").SerializeToString())
    with pytest.raises(OnnxImportError, match="no folder"):
        ff.onnx.load(_external("w.bin"))              # a ModelProto


@pytest.mark.parametrize("location, match", [
    ("../outside.bin", "outside the model's folder"),
    ("/etc/passwd", "relative path inside the model's folder"),
    ("sub/../../outside.bin", "outside the model's folder"),
    ("link.bin", "outside the model's folder"),
    ("missing.bin", "does not exist"),
    (".", "does not exist"),
])
def test_external_data_outside_the_folder_is_refused(tmp_path, location, match):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "outside.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    os.symlink(tmp_path / "outside.bin", folder / "link.bin")
    with pytest.raises(OnnxImportError, match=f"initializer 'w'.*{match}"):
        ff.onnx.load(_save(folder, _external(location)))


@pytest.mark.parametrize("offset, length, match", [
    (0, 4000, "lies outside"), (100, None, "lies outside"), ("x", None, "not integers"),
    (0, 8, "data holds 8 bytes"), (-4, 16, "lies outside")])
def test_external_data_out_of_bounds_is_refused(tmp_path, offset, length, match):
    (tmp_path / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    with pytest.raises(OnnxImportError, match=match):
        ff.onnx.load(_save(tmp_path, _external("w.bin", offset, length)))


def test_external_data_counts_towards_max_bytes(tmp_path):
    (tmp_path / "w.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    path = _save(tmp_path, _external("w.bin"))
    with pytest.raises(OnnxImportError, match="max_bytes"):
        ff.onnx.load(path, max_bytes=os.path.getsize(path) + 8)


# -- sizes computed from values, refused before numpy or a graph op makes them -------------------
def _one(op, inputs, inits, out_elem=TensorProto.FLOAT, opset=18, graph_inputs=(), **attrs):
    node = helper.make_node(op, inputs, ["y"], name="hostile", **attrs)
    return _model([node], list(graph_inputs), [_out("y", out_elem)],
                  [_init(k, v) for k, v in inits.items()], opset=opset)


I64 = np.int64
HUGE = {
    "ConstantOfShape": lambda: _constant_of_shape([100000, 100000], "hostile"),
    "Expand": lambda: _one("Expand", ["x", "s"], {"x": np.ones((1, 3), np.float32),
                                                  "s": np.array([100000, 100000, 1], I64)}),
    "Expand of an input": lambda: _one("Expand", ["x", "s"], {"s": np.array([100000, 1, 1],
                                                                            I64)},
                                       graph_inputs=[_f("x", [1, 100000])]),
    "Tile": lambda: _one("Tile", ["x", "r"], {"x": np.ones((2, 2), np.float32),
                                              "r": np.array([100000, 100000], I64)}),
    "Range": lambda: _one("Range", ["a", "b", "c"], {"a": np.array(0, I64),
                                                      "b": np.array(10 ** 12, I64),
                                                      "c": np.array(1, I64)}, TensorProto.INT64),
    "Range float": lambda: _one("Range", ["a", "b", "c"], {
        "a": np.array(0, np.float32), "b": np.array(1e12, np.float32),
        "c": np.array(1e-3, np.float32)}),
    "Resize": lambda: _one("Resize", ["x", "", "sc"], {"x": np.ones((1, 1, 2, 2), np.float32),
                                                       "sc": np.array([1, 1, 1e5, 1e5],
                                                                      np.float32)}),
    "Resize of an input": lambda: _one("Resize", ["x", "", "sc"], {
        "sc": np.array([1, 1, 1e5, 1e5], np.float32)}, graph_inputs=[_f("x", [1, 1, 2, 2])]),
    "Upsample": lambda: _one("Upsample", ["x", "sc"], {"x": np.ones((1, 1, 2, 2), np.float32),
                                                       "sc": np.array([1, 1, 1e5, 1e5],
                                                                      np.float32)}, opset=9),
    "Pad": lambda: _one("Pad", ["x", "p"], {"x": np.ones((2, 2), np.float32),
                                            "p": np.array([0, 0, 100000, 100000], I64)}),
    "Pad of an input": lambda: _one("Pad", ["x", "p"], {"p": np.array([0, 0, 100000, 100000],
                                                                      I64)},
                                    graph_inputs=[_f("x", [2, 2])]),
    "OneHot": lambda: _one("OneHot", ["i", "d", "v"], {"i": np.arange(100000, dtype=I64),
                                                       "d": np.array([100000], I64),
                                                       "v": np.array([0, 1], np.float32)}),
    "OneHot of an input": lambda: _one("OneHot", ["i", "d", "v"], {
        "d": np.array([10 ** 9], I64), "v": np.array([0, 1], np.float32)},
        graph_inputs=[helper.make_tensor_value_info("i", TensorProto.INT64, [3])]),
    "MatMul outer product": lambda: _one("MatMul", ["a", "b"], {
        "a": np.ones((100000, 1), np.float32), "b": np.ones((1, 100000), np.float32)}),
    "Add broadcast": lambda: _one("Add", ["a", "b"], {
        "a": np.ones((100000, 1), np.float32), "b": np.ones((1, 100000), np.float32)}),
    "Gather": lambda: _one("Gather", ["a", "i"], {"a": np.ones((1, 100000), np.float32),
                                                  "i": np.zeros(100000, I64)}),
    "CenterCropPad": lambda: _one("CenterCropPad", ["x", "s"], {
        "x": np.ones((2, 2), np.float32), "s": np.array([100000, 100000], I64)}),
    "HannWindow": lambda: _one("HannWindow", ["n"], {"n": np.array(10 ** 10, I64)}),
    "DFT length": lambda: _one("DFT", ["x", "n"], {"n": np.array(10 ** 6, I64)}, opset=17,
                               graph_inputs=[_f("x", [1, 8, 1])]),
    "EyeLike": lambda: _one("EyeLike", ["x"], {}, graph_inputs=[_f("x", [100000, 100000])]),
    "Reshape to a huge shape": lambda: _one("Reshape", ["x", "s"], {
        "x": np.ones(4, np.float32), "s": np.array([100000, 100000], I64)}),
    "placeholder": lambda: _one("Relu", ["x"], {}, graph_inputs=[_f("x", [100000, 100000])]),
    "initializer dims": lambda: _model(
        [helper.make_node("Relu", ["w"], ["y"], name="hostile")], [], [_out("y")],
        [_tensor("w", TensorProto.FLOAT, [100000, 100000], b"\0" * 16)]),
    "LSTM steps": lambda: _one("LSTM", ["x", "w", "r"], {
        "w": np.zeros((1, 4, 1), np.float32), "r": np.zeros((1, 4, 1), np.float32)},
        graph_inputs=[_f("x", [10 ** 6, 1, 1])], hidden_size=1),
}


@pytest.mark.parametrize("case", sorted(HUGE))
def test_huge_values_are_refused_before_allocating(case):
    data = HUGE[case]().SerializeToString()
    errors = []

    def load():
        with pytest.raises(OnnxImportError) as info:
            ff.onnx.load(data)
        errors.append(str(info.value))
    peak = _peak_mb(load)
    print(f"{case}: refused, peak {peak:.1f} MiB")
    assert peak < 200, (case, peak)
    message = errors[0]
    assert "hostile" in message or "initializer 'w'" in message or "graph input 'x'" in \
        message or "ConstantOfShape" in message, message


def test_a_large_conv_of_constants_is_left_to_the_graph():
    """onnx's reference would evaluate it through im2col: 32 GiB for these 2 x 256 KiB."""
    ones = np.ones((1, 1, 256, 256), np.float32)
    model = _one("Conv", ["x", "w"], {"x": ones, "w": ones}, pads=[128] * 4)
    loaded = []
    peak = _peak_mb(lambda: loaded.append(ff.onnx.load(model, trainable=False)))
    assert peak < 200
    assert loaded[0].outputs[0].shape == (1, 1, 257, 257)


# -- structure, dtypes, attributes ----------------------------------------------------------------
def _relu_of(tensor):
    return _model([helper.make_node("Relu", ["w"], ["y"], name="relu")], [], [_out("y")],
                  [tensor])


def _with(model, change):
    change(model)
    return model


def _attr(node_attrs):
    node = helper.make_node("Softmax", ["x"], ["y"], name="soft")
    node.attribute.extend(node_attrs)
    return _model([node], [_f("x", [2, 3])], [_out("y")])


def _raw_attr(name, kind, **fields):
    a = onnx.AttributeProto(name=name, type=kind)
    for key, value in fields.items():
        setattr(a, key, value)
    return a


A = onnx.AttributeProto
BAD = {
    "negative dims": (lambda: _relu_of(_tensor("w", TensorProto.FLOAT, [-1, 4])),
                      "dims \\[-1, 4\\]"),
    "unknown dtype": (lambda: _with(_relu_of(_init("w", np.ones(2, np.float32))),
                                    lambda m: setattr(m.graph.initializer[0], "data_type", 99)),
                      "dtype #99"),
    "string dtype": (lambda: _relu_of(helper.make_tensor("w", TensorProto.STRING, [1], [b"a"])),
                     "dtype STRING"),
    "dims do not match raw data": (
        lambda: _with(_relu_of(_init("w", np.ones(4, np.float32))),
                      lambda m: m.graph.initializer[0].dims.__setitem__(0, 1000)),
        "1000 elements, 4000 bytes.*holds 16 bytes"),
    "dims do not match float_data": (
        lambda: _relu_of(_tensor("w", TensorProto.FLOAT, [3], floats=[1.0])),
        "3 values in float_data.*holds 1"),
    "attribute of the wrong type": (lambda: _attr([helper.make_attribute("axis", 1.5)]),
                                    "Softmax node 'soft'.*attribute 'axis' is FLOAT.*INT"),
    "attribute of undefined type": (lambda: _attr([_raw_attr("axis", A.UNDEFINED)]),
                                    "attribute 'axis' is UNDEFINED"),
    "attribute given twice": (lambda: _attr([helper.make_attribute("axis", 1)] * 2),
                              "given twice"),
    "unknown attribute": (lambda: _attr([helper.make_attribute("bogus", 1)]),
                          "attribute\\(s\\) bogus not supported"),
    "required attribute missing": (
        lambda: _model([helper.make_node("Cast", ["x"], ["y"], name="cast")],
                       [_f("x", [2])], [_out("y")]), "Cast node 'cast'.*required attribute 'to'"),
    "missing input": (lambda: _model([helper.make_node("Add", ["x"], ["y"], name="add")],
                                     [_f("x", [2])], [_out("y")]),
                      "Add node 'add'.*has 1 inputs.*takes 2"),
    "missing required input": (
        lambda: _model([helper.make_node("Gemm", ["x", "", "b"], ["y"], name="gemm")],
                       [_f("x", [2, 2])], [_out("y")], [_init("b", np.ones(2, np.float32))]),
        "Gemm node 'gemm'.*required input 1 \\('B'\\) is missing"),
    "input naming nothing": (
        lambda: _model([helper.make_node("Relu", ["nothing"], ["y"], name="relu")],
                       [_f("x", [2])], [_out("y")]),
        "Relu node 'relu': input 'nothing' names no graph input"),
    "cycle": (lambda: _model([helper.make_node("Relu", ["b"], ["a"], name="first"),
                              helper.make_node("Relu", ["a"], ["b"], name="second")],
                             [_f("x", [2])], [_out("a")]),
              "Relu node 'first': input 'b' is computed by a later node.*cycle"),
    "duplicate output": (lambda: _model([helper.make_node("Relu", ["x"], ["y"], name="one"),
                                         helper.make_node("Neg", ["x"], ["y"], name="two")],
                                        [_f("x", [2])], [_out("y")]),
                         "Neg node 'two': output 'y' is already the output of node #0"),
    "output shadows an input": (
        lambda: _model([helper.make_node("Relu", ["x"], ["x"], name="self")],
                       [_f("x", [2])], [_out("x")]), "output 'x' is already a graph input"),
    "duplicate graph input": (lambda: _model([helper.make_node("Relu", ["x"], ["y"])],
                                             [_f("x", [2]), _f("x", [2])], [_out("y")]),
                              "graph input 'x' is listed twice"),
    "opset absent": (lambda: _with(mlp(), lambda m: m.ClearField("opset_import")),
                     "declares no opset"),
    "opset zero": (lambda: _with(mlp(), lambda m: setattr(m.opset_import[0], "version", 0)),
                   "opset \\[0\\]"),
    "opset from the future": (lambda: _with(mlp(), lambda m: setattr(m.opset_import[0],
                                                                     "version", 999)),
                              "opset 999"),
    "output computed by nothing": (
        lambda: _model([helper.make_node("Relu", ["x"], ["y"])], [_f("x", [2])], [_out("z")]),
        "model output 'z' is not computed"),
    "negative input dim": (lambda: _model([helper.make_node("Relu", ["x"], ["y"])],
                                          [_f("x", [-3])], [_out("y")]),
                           "graph input 'x' has shape \\[-3\\]"),
    "ConstantOfShape negative": (lambda: _constant_of_shape([-5, 2]), "negative"),
    "Constant of huge dims": (
        lambda: _model([helper.make_node("Constant", [], ["y"], name="const", value=_tensor(
            "v", TensorProto.FLOAT, [10 ** 6, 10 ** 6]))], [], [_out("y")]),
        "Constant node 'const'.*max_elements"),
    "sparse initializer": (lambda: _with(mlp(), lambda m: m.graph.sparse_initializer.add()),
                           "sparse initializers"),
    "an op's own check fails": (
        lambda: _model([helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")],
                       [_f("x", [2, 3])], [_out("y")], [_init("s", np.array([7, 5], I64))]),
        "Reshape node 'reshape' \\(opset 17\\): reshape 'reshape/reshape'.*cannot reshape"),
}


def test_names_that_are_not_utf8_are_refused():
    data = _model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [_f("x", [2])],
                  [_out("y")]).SerializeToString()
    assert data.count(b"relu") == 1
    with pytest.raises(OnnxImportError, match="node #0: .* not valid UTF-8"):
        ff.onnx.load(data.replace(b"relu", b"r\xe5lu"))


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_models_are_refused_clearly(case):
    make, match = BAD[case]
    with pytest.raises(OnnxImportError, match=match):
        ff.onnx.load(make().SerializeToString())


# -- the fuzz test -------------------------------------------------------------------------
DIMS = [0, 1, 3, -1, -7, 2 ** 20, 2 ** 31, 10 ** 10, 2 ** 62]
INTS = [-(2 ** 40), -5, -2, -1, 0, 1, 2, 3, 4, 7, 10 ** 5, 10 ** 9, 2 ** 62]


def _tensors(model):
    out = list(model.graph.initializer)
    for node in model.graph.node:
        out += [a.t for a in node.attribute if a.type == A.TENSOR]
    return out


def m_dims(model, rng):
    """A dim of an initializer (its data unchanged) or of a graph input."""
    if rng.random() < 0.5 and _tensors(model):
        t = rng.choice(_tensors(model))
        if t.dims:
            t.dims[rng.randrange(len(t.dims))] = rng.choice(DIMS)
        else:
            t.dims.append(rng.choice(DIMS))
    elif model.graph.input:
        tt = rng.choice(model.graph.input).type.tensor_type
        if tt.shape.dim:
            tt.shape.dim[rng.randrange(len(tt.shape.dim))].dim_value = rng.choice(
                DIMS[:7] + [2, 4, 5])


def m_dtype(model, rng):
    kind = rng.choice([0, 1, 2, 5, 6, 7, 8, 9, 10, 11, 13, 14, 16, 17, 22, 99])
    r = rng.random()
    if r < 0.4 and _tensors(model):
        rng.choice(_tensors(model)).data_type = kind
    elif r < 0.7 and model.graph.input:
        rng.choice(model.graph.input).type.tensor_type.elem_type = kind
    else:
        model.graph.node[rng.randrange(len(model.graph.node))].attribute.extend(
            [helper.make_attribute("to", kind)])


def m_values(model, rng):
    """An integer initializer's values (shapes, pads, repeats, axes...) made extreme."""
    ints = [t for t in model.graph.initializer if t.data_type == TensorProto.INT64]
    if ints:
        t = rng.choice(ints)
        try:
            values = numpy_helper.to_array(t).copy().reshape(-1)
        except ValueError:           # an earlier mutation's dims
            return
        if values.size:
            values[rng.randrange(values.size)] = rng.choice(INTS)
            t.CopyFrom(numpy_helper.from_array(values.reshape(tuple(t.dims)), t.name))


def m_attr(model, rng):
    nodes = [n for n in model.graph.node if n.attribute]
    if not nodes:
        return
    node = rng.choice(nodes)
    a = rng.choice(node.attribute)
    r = rng.random()
    if r < 0.25:
        a.type = rng.choice([t for t in A.AttributeType.values() if t != a.type])
    elif r < 0.45:
        a.i = rng.choice(INTS)
        del a.ints[:]
        a.ints.extend([rng.choice(INTS) for _ in range(rng.randrange(0, 5))])
    elif r < 0.55:
        a.f = rng.choice([float("nan"), float("inf"), -1e30, 0.0])
    elif r < 0.65:
        a.s = rng.choice([b"", b"bogus", b"\xff\xfe", b"constant" * 1000])
    elif r < 0.8:
        node.attribute.remove(a)
    else:
        node.attribute.extend([helper.make_attribute(rng.choice(["bogus", a.name]), 1)])


def m_nodes(model, rng):
    nodes = model.graph.node
    k = rng.randrange(len(nodes))
    r = rng.random()
    if r < 0.2:
        nodes.insert(k, nodes[k])                          # a duplicated node
    elif r < 0.4:
        del nodes[k]                                       # a dropped node
    elif r < 0.55:
        j = rng.randrange(len(nodes))
        a, b = onnx.NodeProto(), onnx.NodeProto()
        a.CopyFrom(nodes[k])
        b.CopyFrom(nodes[j])
        nodes[k].CopyFrom(b)
        nodes[j].CopyFrom(a)                               # two nodes swapped
    elif r < 0.7 and nodes[k].input:
        nodes[k].input[rng.randrange(len(nodes[k].input))] = rng.choice(
            ["", "nothing", nodes[-1].output[0]])          # a dangling or later input
    elif r < 0.85:
        from fragflow.frontend.onnx import supported_ops
        nodes[k].op_type = rng.choice(supported_ops())     # another op, same operands
    else:
        del nodes[k].input[rng.randrange(len(nodes[k].input) or 1):]


def m_opset(model, rng):
    if rng.random() < 0.2:
        model.ClearField("opset_import")
    else:
        model.opset_import[0].version = rng.choice([-1, 0, 1, 5, 6, 7, 9, 10, 11, 13, 99])


def m_raw(model, rng):
    """An initializer's data a few bytes or one value longer or shorter than it should."""
    t = rng.choice(list(model.graph.initializer))
    if t.raw_data:
        t.raw_data = t.raw_data + b"\0" * 4 if rng.random() < 0.5 else t.raw_data[:-4]
    else:
        t.int64_data.append(7)


STRUCTURAL = [m_dims, m_dtype, m_values, m_attr, m_nodes, m_opset, m_raw]


def mutated_cases(count_per_seed=150, seed=23):
    """(id, bytes): count_per_seed mutants of each seed model; a quarter of them byte
    level (truncated, bytes flipped), the others one to three structural mutations."""
    rng = random.Random(seed)
    cases = []
    for name, make in sorted(SEEDS.items()):
        base = make()
        data = base.SerializeToString()
        for k in range(count_per_seed):
            r = rng.random()
            if r < 0.12:
                cases.append((f"{name}/{k}/truncate", data[:rng.randrange(len(data))]))
                continue
            if r < 0.25:
                flipped = bytearray(data)
                for _ in range(rng.randint(1, 8)):
                    flipped[rng.randrange(len(flipped))] ^= 1 << rng.randrange(8)
                cases.append((f"{name}/{k}/flip", bytes(flipped)))
                continue
            model = onnx.ModelProto()
            model.CopyFrom(base)
            names = []
            for _ in range(rng.randint(1, 3)):
                mutate = rng.choice(STRUCTURAL)
                names.append(mutate.__name__[2:])
                try:
                    mutate(model, rng)
                except (IndexError, ValueError):   # nothing left to mutate that way
                    names[-1] += "(none)"
            cases.append((f"{name}/{k}/{'+'.join(names)}", model.SerializeToString()))
    return cases


def test_mutated_models_load_or_refuse_clearly():
    cases = mutated_cases()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    outcomes, failures = {}, []
    for case, data in cases:
        try:
            outcome = load_and_run(data, max_elements=2 ** 20)
        except Exception as err:  # noqa: BLE001 -- the test's point: none may escape
            failures.append(f"{case}: {type(err).__name__}: {str(err)[:200]}")
            continue
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before) / 1024
    loaded = outcomes.get("loaded", 0)
    refused = sum(v for k, v in outcomes.items() if k.startswith("refused"))
    print(f"\n{len(cases)} mutated ONNX models: {loaded} loaded and ran, "
          f"{sum(v for k, v in outcomes.items() if k.startswith('ran'))} loaded and "
          f"refused at run time, {refused} refused at import; peak RSS grew {grown:.0f} MiB")
    for k, v in sorted(outcomes.items()):
        print(f"  {v:4d} {k}")
    assert not failures, "\n".join(failures[:20])
    assert loaded >= 30 and refused >= 100, outcomes
    assert grown < 300
