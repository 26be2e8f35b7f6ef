"""ONNX ops imported one model at a time (built with onnx.helper) and run on GL against
onnxruntime: elementwise and broadcasting, activations, reductions, softmax, shapes,
convolutions and pools, the attribute -> input moves between opsets, and the errors."""
import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import fragflow as ff
from tests.onnx.helpers import assert_close, ort_run

pytestmark = pytest.mark.usefixtures("gl")
rng = np.random.default_rng(7)


def randn(*shape):
    a = rng.standard_normal(shape).astype(np.float32)
    a.reshape(-1)[:2] = 0.0                   # zeros among the values
    return a


def _elem(a):
    return {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
            np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL}[a.dtype]


def make_model(nodes, inputs: dict, outputs, initializers=None, opset=17):
    graph = helper.make_graph(
        nodes, "test",
        [helper.make_tensor_value_info(k, _elem(v), v.shape) for k, v in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        initializer=[numpy_helper.from_array(v, k) for k, v in (initializers or {}).items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def check(nodes, inputs, outputs=("y",), initializers=None, opset=17, **load_args):
    """The model on GL equals onnxruntime; returns the imported model and the compiled
    function (for kernel checks)."""
    model = make_model(nodes, inputs, list(outputs), initializers, opset)
    expected = ort_run(model, inputs)
    imported = ff.onnx.load(model, **load_args)
    fn = ff.Session(imported.graph).compile(imported.outputs, feeds=imported.inputs)
    got = fn(*[inputs[k] for k in imported.inputs_by_onnx_name])
    for g, e in zip(got, expected):
        assert_close(g, e)
    return imported, fn


def node(op, inputs, outputs=("y",), **attrs):
    return helper.make_node(op, list(inputs), list(outputs), **attrs)


# -- elementwise, broadcasting, activations ------------------------------------------------
X, Y = randn(2, 3, 5), randn(3, 1)
UNARY = ["Relu", "Sigmoid", "Tanh", "Exp", "Abs", "Neg", "Floor", "Ceil", "Sin", "Cos",
         "Erf", "Sign", "Softplus", "Softsign", "HardSwish", "Selu", "Elu"]


@pytest.mark.parametrize("op", UNARY)
def test_unary(op):
    check([node(op, ["x"])], {"x": X * 3})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Mean", "Sum"])
def test_binary_broadcasting(op):
    check([node(op, ["x", "z"])], {"x": X, "z": Y + 2.5})


def test_pow_comparison_and_where():
    nodes = [node("Pow", ["x", "z"], ["p"]), node("Greater", ["x", "z"], ["c"]),
             node("Where", ["c", "p", "x"])]
    check(nodes, {"x": np.abs(X) + 0.1, "z": Y})


@pytest.mark.parametrize("op,attrs,opset", [
    ("LeakyRelu", {"alpha": 0.1}, 17), ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, 17),
    ("Elu", {"alpha": 0.5}, 17), ("Celu", {"alpha": 2.0}, 17), ("Mish", {}, 18),
    ("Gelu", {}, 20), ("Gelu", {"approximate": "tanh"}, 20),
    ("ThresholdedRelu", {"alpha": 0.5}, 17)])
def test_activation_with_attributes(op, attrs, opset):
    check([node(op, ["x"], **attrs)], {"x": X * 3}, opset=opset)


def test_clip_before_and_after_opset_11():
    check([node("Clip", ["x"], min=-0.5, max=0.7)], {"x": X}, opset=9)
    check([node("Clip", ["x", "lo", "hi"])], {"x": X}, initializers={
        "lo": np.float32(-0.5), "hi": np.float32(0.7)}, opset=13)
    _, fn = check([node("Clip", ["x", "lo", "hi"])], {"x": X * 9}, initializers={
        "lo": np.float32(0), "hi": np.float32(6)}, opset=13)
    assert [k.op for k in fn.kernels] == ["relu6"]


def test_prelu_with_a_per_channel_slope():
    check([node("PRelu", ["x", "s"])], {"x": randn(2, 3, 4, 4)},
          initializers={"s": randn(3, 1, 1)})


# -- reductions and softmax -------------------------------------------------------------
@pytest.mark.parametrize("op,opset,axes_as_input", [
    ("ReduceSum", 11, False), ("ReduceSum", 13, True), ("ReduceMean", 13, False),
    ("ReduceMean", 18, True), ("ReduceMax", 13, False), ("ReduceMin", 13, False),
    ("ReduceProd", 13, False), ("ReduceL2", 13, False), ("ReduceL1", 13, False),
    ("ReduceSumSquare", 13, False), ("ReduceLogSumExp", 13, False)])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reductions(op, opset, axes_as_input, keepdims):
    x = randn(3, 4, 5)
    if axes_as_input:
        check([node(op, ["x", "axes"], keepdims=keepdims)], {"x": x},
              initializers={"axes": np.array([0, -1], np.int64)}, opset=opset)
    else:
        check([node(op, ["x"], axes=[0, -1], keepdims=keepdims)], {"x": x}, opset=opset)


def test_bool_reduce_max_and_min_are_any_and_all():
    x = np.array([[True, False, False], [True, True, True]])
    check([node("ReduceMax", ["x", "axes"], keepdims=0),
           node("ReduceMin", ["x", "axes"], ["z"], keepdims=0)], {"x": x},
          outputs=("y", "z"), initializers={"axes": np.array([1], np.int64)}, opset=20)


def test_argmax_keeps_the_axis():
    check([node("ArgMax", ["x"], axis=1), node("ArgMin", ["x"], ["z"], axis=2, keepdims=0)],
          {"x": randn(3, 4, 5)}, outputs=("y", "z"))


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset", [11, 13])
def test_softmax_axis_semantics_of_each_opset(op, opset):
    # before opset 13 axis=1 of a 3-D input means "over the flattened axes 1 and 2"
    check([node(op, ["x"], axis=1)], {"x": randn(2, 3, 4) * 4}, opset=opset)


# -- shapes -----------------------------------------------------------------------------
def test_shape_arithmetic_is_folded_at_import():
    nodes = [node("Shape", ["x"], ["s"]),
             node("Gather", ["s", "zero"], ["n"], axis=0),
             node("Unsqueeze", ["n", "axes"], ["n1"]),
             node("Concat", ["n1", "minus_one"], ["target"], axis=0),
             node("Reshape", ["x", "target"], ["y"])]
    imported, fn = check(nodes, {"x": randn(2, 3, 4)}, initializers={
        "zero": np.array(0, np.int64), "axes": np.array([0], np.int64),
        "minus_one": np.array([-1], np.int64)}, opset=13)
    ops = {n.op for n in imported.graph.nodes}
    assert ops <= {"placeholder", "reshape"}, ops        # no shape work left in the graph
    assert fn.kernels == [] or all(k.op != "gather" for k in fn.kernels)


@pytest.mark.parametrize("opset", [9, 13])
def test_slice_attributes_then_inputs(opset):
    x = randn(4, 6, 5)
    if opset < 10:
        nodes, inits = [node("Slice", ["x"], starts=[1, -4], ends=[3, 1000], axes=[0, 1])], {}
    else:
        nodes = [node("Slice", ["x", "st", "en", "ax", "sp"])]
        inits = {"st": np.array([1, -1], np.int64), "en": np.array([3, -7], np.int64),
                 "ax": np.array([0, 1], np.int64), "sp": np.array([1, -2], np.int64)}
    check(nodes, {"x": x}, initializers=inits, opset=opset)


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_and_unsqueeze_axes_attribute_then_input(opset):
    x = randn(3, 1, 4)
    if opset < 13:
        nodes, inits = [node("Squeeze", ["x"], ["s"], axes=[1]),
                        node("Unsqueeze", ["s"], axes=[0, 3])], {}
    else:
        nodes = [node("Squeeze", ["x", "a1"], ["s"]), node("Unsqueeze", ["s", "a2"])]
        inits = {"a1": np.array([1], np.int64), "a2": np.array([0, 3], np.int64)}
    check(nodes, {"x": x}, initializers=inits, opset=opset)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_split_sizes_attribute_input_or_count(opset):
    x = randn(2, 7)
    if opset == 11:
        nodes, inits = [node("Split", ["x"], ["a", "b"], axis=1, split=[3, 4])], {}
    elif opset == 13:
        nodes, inits = [node("Split", ["x", "s"], ["a", "b"], axis=1)], \
            {"s": np.array([5, 2], np.int64)}
    else:
        nodes, inits = [node("Split", ["x"], ["a", "b"], axis=1, num_outputs=2)], {}
    check(nodes, {"x": x}, outputs=("a", "b"), initializers=inits, opset=opset)


@pytest.mark.parametrize("opset,mode", [(9, "constant"), (13, "constant"), (13, "reflect")])
def test_pad_attribute_then_inputs(opset, mode):
    x = randn(2, 3, 4)
    if opset < 11:
        nodes, inits = [node("Pad", ["x"], pads=[0, 1, 2, 0, 2, 1], value=1.5)], {}
    else:
        nodes = [node("Pad", ["x", "p", "v"], mode=mode)]
        inits = {"p": np.array([0, 1, 2, 0, 2, 1], np.int64), "v": np.float32(1.5)}
    check(nodes, {"x": x}, initializers=inits, opset=opset)


@pytest.mark.parametrize("pads", [
    [0, 1, -2, 0, -1, 3],            # axis 1: one in front, the last cut; axis 2: the reverse
    [0, 0, 1, 0, 0, -1],             # RWKV's time shift (ZeroPad2d((0, 0, 1, -1)) on [B, L, C])
    [-1, -2, 0, 0, -1, -3]])         # only cropping, both ends of an axis
def test_pad_negative_pads_crop(pads):
    check([node("Pad", ["x", "p", "v"])], {"x": randn(2, 5, 7) * 3},
          initializers={"p": np.array(pads, np.int64), "v": np.float32(-0.5)})


@pytest.mark.parametrize("mode,pads,message", [
    ("edge", [0, 1, 0, 0, -1, 0], "with mode 'edge' are not supported"),
    ("constant", [0, -3, 0, 0, -2, 0], "must leave at least one element")])
def test_pad_negative_pads_refused(mode, pads, message):
    model = make_model([node("Pad", ["x", "p"], mode=mode)], {"x": randn(2, 5, 7)}, ["y"],
                       {"p": np.array(pads, np.int64)})
    with pytest.raises(ff.onnx.OnnxImportError, match=message):
        ff.onnx.load(model)


def test_structure_ops():
    x = randn(2, 3, 4)
    nodes = [node("Transpose", ["x"], ["t"], perm=[2, 0, 1]),
             node("Gather", ["t", "idx"], ["g"], axis=2),
             node("Flatten", ["g"], ["f"], axis=1),
             node("Tile", ["f", "reps"], ["tl"]),
             node("Expand", ["z", "shape"], ["e"]),
             node("Concat", ["x", "x"], ["c"], axis=-1)]
    check(nodes, {"x": x, "z": randn(3, 1)}, outputs=("tl", "e", "c"), initializers={
        "idx": np.array([2, -1, 0], np.int64), "reps": np.array([2, 1], np.int64),
        "shape": np.array([2, 3, 4], np.int64)})


def test_reshape_shape_attribute_of_opset_1_style_models_is_rejected_with_its_input():
    # Reshape's shape is an input from opset 5: a dynamic one must be known at import
    model = make_model([node("Reshape", ["x", "s"])], {"x": randn(6), "s": np.array(
        [2, 3], np.int64)}, ["y"])
    with pytest.raises(ff.onnx.OnnxImportError, match="Reshape node.*must be known"):
        ff.onnx.load(model)


# -- matrices, convolutions, pools --------------------------------------------------------
def test_matmul_batched_and_vector():
    check([node("MatMul", ["a", "b"], ["m"]), node("MatMul", ["m", "v"])],
          {"a": randn(2, 3, 4), "b": randn(4, 5), "v": randn(5)})


def test_gemm_with_transposes_alpha_and_beta():
    check([node("Gemm", ["a", "b", "c"], transA=1, transB=1, alpha=0.5, beta=2.0)],
          {"a": randn(4, 3)}, initializers={"b": randn(5, 4), "c": randn(5)})


@pytest.mark.parametrize("attrs,w_shape", [
    ({"pads": [1, 0, 1, 2], "strides": [2, 1]}, (6, 4, 3, 3)),
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, (6, 4, 3, 3)),
    ({"auto_pad": "SAME_LOWER", "strides": [2, 2]}, (6, 4, 2, 2)),
    ({"dilations": [2, 2]}, (6, 4, 3, 3)),
    ({"dilations": [2, 1], "strides": [2, 2], "pads": [1, 1, 0, 1]}, (6, 4, 3, 3)),
    ({"group": 2, "pads": [1, 1, 1, 1]}, (6, 2, 3, 3)),
    ({"group": 4, "pads": [1, 1, 1, 1]}, (8, 1, 3, 3))])
def test_conv2d(attrs, w_shape):
    check([node("Conv", ["x", "w", "b"], **attrs)], {"x": randn(2, 4, 9, 8)},
          initializers={"w": randn(*w_shape), "b": randn(w_shape[0])})


def test_conv1d():
    check([node("Conv", ["x", "w"], pads=[1, 2], strides=[2])], {"x": randn(2, 3, 11)},
          initializers={"w": randn(5, 3, 4)})


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}),
    ("GlobalAveragePool", {}), ("GlobalMaxPool", {})])
def test_pools(op, attrs):
    check([node(op, ["x"], **attrs)], {"x": randn(2, 3, 7, 9)})


def test_batch_norm_trainable_and_constant():
    inits = {"s": randn(3) + 1, "b": randn(3), "m": randn(3),
             "v": np.abs(randn(3)) + 0.5}
    nodes = [node("BatchNormalization", ["x", "s", "b", "m", "v"], epsilon=1e-3)]
    check(nodes, {"x": randn(2, 3, 4, 5)}, initializers=inits)
    check(nodes, {"x": randn(2, 3, 4, 5)}, initializers=inits, trainable=False)


@pytest.mark.parametrize("shape", [(2, 5), (3, 5, 7), (2, 5, 3, 3)])
def test_batch_norm_statistics_computed_by_the_graph(shape):
    """A running mean that is an Identity of another weight (torch's export keeps one copy
    of equal initializers: a fresh BatchNorm1d's zero mean as its zero bias, LeViT) and a
    variance fed as an input: normalized with them as tensors. 5 channels, negative and
    zero means, a zero variance (only eps left)."""
    mean, var = randn(5) * 3, np.abs(randn(5)) + 0.5
    var[1] = 0.0
    nodes = [node("Identity", ["b"], ["m"]),
             node("BatchNormalization", ["x", "s", "b", "m", "v"], epsilon=1e-3)]
    inits = {"s": randn(5) - 1, "b": mean}
    for trainable in (True, False):
        check(nodes, {"x": randn(*shape) * 2, "v": var}, initializers=inits,
              trainable=trainable)


def test_normalizations():
    x = randn(2, 3, 4, 5)
    check([node("InstanceNormalization", ["x", "s", "b"], epsilon=1e-4)], {"x": x},
          initializers={"s": randn(3), "b": randn(3)})
    check([node("LayerNormalization", ["x", "s", "b"], axis=-2)], {"x": x},
          initializers={"s": randn(4, 5), "b": randn(4, 5)})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_and_back(mode):
    check([node("DepthToSpace", ["x"], ["d"], blocksize=2, mode=mode),
           node("SpaceToDepth", ["d"], blocksize=2)], {"x": randn(2, 8, 3, 5)},
          outputs=("d", "y"))


@pytest.mark.parametrize("mode,coord,nearest", [
    ("nearest", "asymmetric", "floor"), ("linear", "half_pixel", None),
    ("linear", "align_corners", None), ("linear", "asymmetric", None)])
def test_resize(mode, coord, nearest):
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    if nearest:
        attrs["nearest_mode"] = nearest
    check([node("Resize", ["x", "", "scales"], **attrs)], {"x": randn(1, 2, 4, 5)},
          initializers={"scales": np.array([1, 1, 2, 3], np.float32)}, opset=13)


@pytest.mark.parametrize("mode,coord", [("linear", "half_pixel"),
                                        ("linear", "align_corners")])
def test_resize_to_sizes(mode, coord):
    check([node("Resize", ["x", "", "", "sizes"], mode=mode,
                coordinate_transformation_mode=coord)], {"x": randn(1, 2, 4, 5)},
          initializers={"sizes": np.array([1, 2, 7, 3], np.int64)}, opset=13)


def test_upsample_of_opset_9():
    check([node("Upsample", ["x", "scales"], mode="nearest")], {"x": randn(1, 2, 3, 4)},
          initializers={"scales": np.array([1, 1, 2, 2], np.float32)}, opset=9)


# -- names, dtypes and errors -----------------------------------------------------------
def test_invalid_onnx_input_names_are_mapped():
    model = make_model([node("Relu", ["input:0"], ["out:0"])], {"input:0": X}, ["out:0"])
    imported = ff.onnx.load(model)
    placeholder = imported.inputs_by_onnx_name["input:0"]
    out = ff.Session(imported.graph).run(imported.outputs_by_onnx_name["out:0"],
                                         imported.feed_dict({"input:0": X}))
    assert_close(out, np.maximum(X, 0))
    assert placeholder.name == "input_0"


def test_int64_input_is_fed_as_int32_and_values_that_do_not_fit_raise():
    check([node("Add", ["i", "c"])], {"i": np.arange(6, dtype=np.int64).reshape(2, 3)},
          initializers={"c": np.array([5], np.int64)})
    model = make_model([node("Add", ["i", "c"])], {"i": np.zeros(2, np.int64)}, ["y"],
                       {"c": np.array([1 << 40], np.int64)})
    with pytest.raises(ff.onnx.OnnxImportError, match=r"Add node.*does not fit in int32"):
        ff.onnx.load(model)


def test_unsupported_op_names_the_node_and_op_type():
    bad = helper.make_node("Det", ["x"], ["y"], name="my_det")
    model = make_model([bad], {"x": randn(3, 3)}, ["y"])
    with pytest.raises(ff.onnx.UnsupportedOnnxOpError, match="Det node 'my_det'.*Det"):
        ff.onnx.load(model)


def test_unsupported_attribute_names_it():
    model = make_model([node("Resize", ["x", "", "s"], mode="area")], {"x": randn(1, 1, 2, 2)},
                       ["y"], {"s": np.array([1, 1, 2, 2], np.float32)}, opset=13)
    with pytest.raises(ff.onnx.OnnxImportError, match="Resize node.*'area'"):
        ff.onnx.load(model)


def test_not_a_model_raises_an_import_error(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\x00\x01 not protobuf")
    with pytest.raises(ff.onnx.OnnxImportError):
        ff.onnx.load(str(path))
    with pytest.raises(ff.onnx.OnnxImportError):
        ff.onnx.load(str(tmp_path / "missing.onnx"))


# -- composites added for onnx's conformance cases -----------------------------------------
def test_lp_normalization_and_rms_normalization():
    x = randn(3, 4, 5)
    x[0, 0, :] = 0.0                                    # a zero vector stays zero
    check([node("LpNormalization", ["x"], axis=-1, p=2),
           node("LpNormalization", ["x"], ["z"], axis=1, p=1)], {"x": x}, outputs=("y", "z"))
    check([node("RMSNormalization", ["x", "s"], axis=-1, epsilon=1e-4)], {"x": x},
          initializers={"s": randn(5)}, opset=23)


@pytest.mark.parametrize("opset", [11, 13])
def test_hardmax(opset):
    check([node("Hardmax", ["x"], axis=1)], {"x": randn(2, 3, 4)}, opset=opset)


@pytest.mark.parametrize("upper,k", [(1, 0), (0, -1), (1, 2)])
def test_trilu(upper, k):
    check([node("Trilu", ["x", "k"], upper=upper)], {"x": randn(2, 4, 5)},
          initializers={"k": np.array(k, np.int64)}, opset=14)


@pytest.mark.parametrize("axis,largest", [(-1, 1), (1, 0)])
def test_top_k(axis, largest):
    x = rng.permutation(60).astype(np.float32).reshape(3, 4, 5)   # no ties
    check([node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)], {"x": x},
          outputs=("v", "i"), initializers={"k": np.array([3], np.int64)})


def test_gather_elements_with_negative_indices():
    idx = np.array([[0, -1, 2], [1, 0, -3]], np.int64)
    check([node("GatherElements", ["x", "i"], axis=1)], {"x": randn(2, 4), "i": idx})


@pytest.mark.parametrize("attrs", [
    {"strides": [2, 2]}, {"strides": [2, 1], "pads": [1, 0, 1, 1]},
    {"strides": [2, 2], "output_padding": [1, 1], "pads": [1, 1, 1, 1]}])
def test_conv_transpose(attrs):
    check([node("ConvTranspose", ["x", "w", "b"], **attrs)], {"x": randn(2, 3, 5, 4)},
          initializers={"w": randn(3, 4, 3, 3), "b": randn(4)})


def test_argmax_select_last_index_and_layer_norm_statistics():
    x = np.array([[1, 3, 3, 0], [2, 2, 1, 2]], np.float32)
    check([node("ArgMax", ["x"], axis=1, select_last_index=1)], {"x": x})
    check([node("LayerNormalization", ["x", "s"], ["y", "m", "r"], axis=1)],
          {"x": randn(2, 3, 4)}, outputs=("y", "m", "r"), initializers={"s": randn(3, 4)})


def test_an_attribute_the_rule_ignores_is_an_error():
    model = make_model([node("Relu", ["x"], mystery=3)], {"x": X}, ["y"])
    with pytest.raises(ff.onnx.OnnxImportError, match="Relu node.*mystery"):
        ff.onnx.load(model)


def test_opset_6_broadcasting_by_axis():
    # onnxruntime runs no opset 6: numpy is the reference (b aligned at axis 1)
    x, b = randn(2, 3, 4, 5), randn(3)
    model = ff.onnx.load(make_model([node("Add", ["x", "b"], broadcast=1, axis=1)],
                                    {"x": x}, ["y"], {"b": b}, opset=6))
    out = ff.Session(model.graph).run(model.outputs[0], {"x": x})
    assert_close(out, x + b.reshape(1, 3, 1, 1))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_softmax_cross_entropy_and_nll_losses(reduction):
    scores, labels = randn(4, 5, 3), np.array([[0, 4, 2], [1, 1, 3], [2, 0, 4], [3, 2, 1]])
    weights = np.abs(randn(5)) + 0.5
    check([node("SoftmaxCrossEntropyLoss", ["s", "t", "w"], ["y", "lp"],
                reduction=reduction, ignore_index=2),
           node("NegativeLogLikelihoodLoss", ["lp", "t"], ["n"], reduction=reduction)],
          {"s": scores, "t": labels.astype(np.int64)}, outputs=("y", "lp", "n"),
          initializers={"w": weights})


@pytest.mark.parametrize("case", ["causal_gqa_mask", "three_d_past_softcap"])
def test_attention_against_onnx_reference(case):
    from onnx.reference import ReferenceEvaluator
    if case == "causal_gqa_mask":
        inputs = {"q": randn(2, 4, 3, 8), "k": randn(2, 2, 5, 8), "v": randn(2, 2, 5, 6),
                  "m": rng.random((3, 5)) > 0.3}
        nodes = [node("Attention", ["q", "k", "v", "m"], ["y", "pk", "pv", "qk"],
                      is_causal=1, qk_matmul_output_mode=3)]
        outs = ("y", "qk")
    else:
        inputs = {"q": randn(2, 3, 8), "k": randn(2, 4, 8), "v": randn(2, 4, 8),
                  "pk": randn(2, 2, 2, 4), "pv": randn(2, 2, 2, 4)}
        nodes = [node("Attention", ["q", "k", "v", "", "pk", "pv"], ["y", "k2", "v2"],
                      q_num_heads=2, kv_num_heads=2, softcap=2.0, scale=0.3)]
        outs = ("y", "k2", "v2")
    model = make_model(nodes, inputs, list(outs), opset=23)
    expected = ReferenceEvaluator(model).run(list(outs), inputs)
    imported = ff.onnx.load(model)
    got = ff.Session(imported.graph).run([imported.outputs_by_onnx_name[o] for o in outs],
                                         inputs)
    for g, e in zip(got, expected):
        assert_close(g, e)


def test_one_hot_with_negative_indices():
    check([node("OneHot", ["i", "d", "v"], axis=1)],
          {"i": np.array([[0, 3, -1], [2, -4, 1]], np.int64)},
          initializers={"d": np.array(4, np.int64), "v": np.array([-1, 2], np.float32)})


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_nd_and_elements(reduction):
    nd_idx = np.array([[1], [3]], np.int64) if reduction == "none" else \
        np.array([[1], [3], [1]], np.int64)
    check([node("ScatterND", ["x", "i", "u"], reduction=reduction)], {"x": randn(5, 3)},
          initializers={"i": nd_idx, "u": randn(len(nd_idx), 3)}, opset=16)
    check([node("ScatterElements", ["x", "j", "w"], axis=1, reduction=reduction)],
          {"x": randn(3, 4)}, initializers={"j": np.array([[1, -1], [0, 2], [3, 1]],
                                                          np.int64),
                                            "w": randn(3, 2)}, opset=16)


@pytest.mark.parametrize("reduction", ["none", "add"])
@pytest.mark.parametrize("data", ["float", "int"])
def test_scatter_nd_with_indices_the_graph_computes(reduction, data):
    """Indices fed as an input (wav2vec2's feature mask computes them from the
    attention_mask's row sums): one slice per index row of a [3, 5, 7] tensor, negative
    indices from the end, and full-element indices (K equal to the rank)."""
    x = randn(3, 5, 7) if data == "float" else \
        rng.integers(-9, 9, (3, 5, 7)).astype(np.int64)
    rows = np.array([[0, 4], [2, -1], [1, 0]], np.int64)      # [3, 2]: slices of 7
    points = np.array([[2, -2, 6], [0, 3, 0]], np.int64)     # [2, 3]: elements
    for i, lead in ((rows, (3,)), (points, (2,))):
        u = (randn(*lead, *x.shape[i.shape[-1]:]) * 4).astype(x.dtype)
        check([node("Add", ["i", "zero"], ["j"]),
               node("ScatterND", ["x", "j", "u"], reduction=reduction)],
              {"x": x, "i": i, "u": u}, initializers={"zero": np.zeros((), np.int64)},
              opset=16)


def test_scatter_nd_with_computed_indices_and_max_needs_them_at_import():
    model = make_model([node("ScatterND", ["x", "i", "u"], reduction="max")],
                       {"x": randn(4, 3), "i": np.array([[1]], np.int64),
                        "u": randn(1, 3)}, ["y"], opset=18)
    with pytest.raises(ff.onnx.OnnxImportError, match="indices must be known at import"):
        ff.onnx.load(model)


def test_random_draws_have_their_distribution():
    """onnxruntime's generator is not Philox: the draws are checked against their
    distribution (float64 formulas, 5 standard errors), GL against the numpy executor
    (the same stream), and a second run against the first (fresh values)."""
    nodes = [node("RandomUniformLike", ["x"], ["u"], low=-2.0, high=3.0, seed=5.0),
             node("RandomNormal", [], ["n"], shape=[3, 1001], mean=1.5, scale=0.5),
             node("RandomNormalLike", ["x"], ["z"], dtype=TensorProto.DOUBLE),
             node("RandomUniform", [], ["v"], shape=[5, 7])]
    model = ff.onnx.load(make_model(nodes, {"x": randn(7, 1001)}, ["u", "n", "z", "v"]))
    fns = [ff.Session(model.graph, backend=b).compile(model.outputs, feeds=model.inputs)
           for b in ("gl", "numpy")]
    x = randn(7, 1001)
    (u, n, z, v), ref = fns[0](x), fns[1](x)
    for got, want in zip((u, n, z, v), ref):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    assert [a.shape for a in (u, n, z, v)] == [(7, 1001), (3, 1001), (7, 1001), (5, 7)]
    assert u.min() >= -2.0 and u.max() < 3.0 and v.min() >= 0.0 and v.max() < 1.0
    for draws, mean, std in ((u, 0.5, 5 / np.sqrt(12)), (n, 1.5, 0.5), (z, 0.0, 1.0)):
        d = draws.astype(np.float64).reshape(-1)
        assert abs(d.mean() - mean) < 5 * std / np.sqrt(d.size), (d.mean(), mean)
        assert abs(d.std() - std) < 0.05 * std, (d.std(), std)
    assert not np.array_equal(fns[0](x)[0], u)           # each run draws anew


def test_random_draws_of_an_integer_dtype_are_refused():
    model = make_model([node("RandomUniform", [], ["y"], shape=[2], dtype=TensorProto.INT32)],
                       {}, ["y"])
    with pytest.raises(ff.onnx.OnnxImportError, match="dtype INT32"):
        ff.onnx.load(model)


def test_lp_pool_with_padding():
    check([node("LpPool", ["x"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], p=2)],
          {"x": randn(2, 3, 7, 6)}, opset=18)


def test_conv3d_and_pools3d():
    check([node("Conv", ["x", "w", "b"], ["c"], pads=[1, 0, 1, 1, 0, 1], strides=[1, 2, 1]),
           node("MaxPool", ["c"], ["m"], kernel_shape=[2, 2, 2], strides=[1, 1, 2]),
           node("AveragePool", ["c"], ["y"], kernel_shape=[3, 2, 2], pads=[1, 0, 0, 1, 1, 1])],
          {"x": randn(2, 3, 4, 6, 5)}, outputs=("c", "m", "y"),
          initializers={"w": randn(4, 3, 3, 2, 3), "b": randn(4)})


def test_pad_edge_and_shrink():
    check([node("Pad", ["x", "p"], ["e"], mode="edge"), node("Shrink", ["x"], lambd=0.3,
                                                            bias=0.1)],
          {"x": randn(2, 3, 4)}, outputs=("e", "y"),
          initializers={"p": np.array([0, 2, 1, 1, 0, 3], np.int64)})


@pytest.mark.parametrize("reduction", ["mul", "max", "min"])
def test_scatter_reductions_with_repeated_indices(reduction):
    check([node("ScatterElements", ["x", "j", "w"], axis=1, reduction=reduction)],
          {"x": randn(2, 4)}, initializers={"j": np.array([[1, 1, 3], [0, 2, 0]], np.int64),
                                            "w": randn(2, 3)}, opset=18)


def test_gather_nd_swish_and_group_norm():
    check([node("GatherND", ["x", "i"], ["g"]), node("Swish", ["x"], ["s"], alpha=0.7)],
          {"x": randn(3, 4, 2)}, outputs=("g", "s"),
          initializers={"i": np.array([[2, -1], [0, 1]], np.int64)}, opset=24)
    check([node("GroupNormalization", ["x", "sc", "b"], num_groups=2, epsilon=1e-3)],
          {"x": randn(2, 6, 3, 4)}, initializers={"sc": randn(6), "b": randn(6)}, opset=21)


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]), ("i,j->ij", [(3,), (4,)]),
    ("ij->ji", [(3, 4)]), ("ijk->j", [(2, 3, 4)]), ("ij,ij->i", [(3, 4), (3, 4)]),
    ("ab,cb", [(3, 4), (5, 4)]), ("bn,anm,bm->ba", None)])
def test_einsum(equation, shapes):
    if shapes is None:                            # three operands: named as unsupported
        model = make_model([node("Einsum", ["a", "b", "c"], equation=equation)],
                           {"a": randn(2, 3), "b": randn(4, 3, 5), "c": randn(2, 5)}, ["y"])
        with pytest.raises(ff.onnx.OnnxImportError, match="more than two operands"):
            ff.onnx.load(model)
        return
    names = ["a", "b"][:len(shapes)]
    check([node("Einsum", names, equation=equation)],
          {n: randn(*s) for n, s in zip(names, shapes)}, opset=12)
