"""ONNX ops imported for the conformance cases, on GL against onnx's reference
evaluator (onnxruntime lacks some, or runs them only in training builds):
BatchNormalization in training mode, MeanVarianceNormalization, AffineGrid, Compress,
CumProd, SpaceToDepth CRD, Dropout in training mode with ratio 0, SwiGLU,
ReverseSequence, RotaryEmbedding, Attention's sliding windows and nonpad_kv_seqlen,
Col2Im; and ConvTranspose 1-D, with groups, output_shape and SAME against
onnxruntime."""
import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")
from onnx.reference import ReferenceEvaluator  # noqa: E402

import fragflow as ff
from tests.onnx.helpers import assert_close
from tests.onnx.test_import_ops import check, make_model, node, randn

pytestmark = pytest.mark.usefixtures("gl")


def check_ref(nodes, inputs, outputs=("y",), initializers=None, opset=18):
    """The model on GL equals onnx's reference evaluator (each output)."""
    model = make_model(nodes, inputs, list(outputs), initializers, opset)
    expected = ReferenceEvaluator(model).run(None, inputs)
    imported = ff.onnx.load(model)
    got = ff.Session(imported.graph).run(imported.outputs, inputs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert_close(g, e)


def test_batch_norm_in_training_mode():
    c, outputs = 3, ("y", "rm", "rv")
    check_ref([node("BatchNormalization", ["x", "s", "b", "m", "v"], outputs,
                    momentum=0.8, epsilon=1e-3, training_mode=1)],
              {"x": randn(4, c, 5, 2)}, outputs,
              {"s": randn(c), "b": randn(c), "m": randn(c),
               "v": np.abs(randn(c)) + 0.5}, opset=15)


@pytest.mark.parametrize("axes", [None, [1, 2]])
def test_mean_variance_normalization(axes):
    attrs = {} if axes is None else {"axes": axes}
    check_ref([node("MeanVarianceNormalization", ["x"], **attrs)], {"x": randn(2, 3, 4, 5)})


@pytest.mark.filterwarnings("ignore:divide by zero")     # onnx's reference, a 1-pixel axis
@pytest.mark.parametrize("size, align", [((2, 3, 4, 5), 0), ((2, 3, 4, 5), 1),
                                         ((1, 1, 3, 2, 4), 0), ((1, 1, 1, 3, 2), 1)])
def test_affine_grid(size, align):
    theta = randn(size[0], len(size) - 2, len(size) - 1)
    check_ref([node("AffineGrid", ["theta", "size"], align_corners=align)], {"theta": theta},
              initializers={"size": np.array(size, np.int64)}, opset=20)


@pytest.mark.parametrize("axis", [None, 0, -1])
def test_compress(axis):
    attrs = {} if axis is None else {"axis": axis}
    check_ref([node("Compress", ["x", "c"], **attrs)], {"x": randn(3, 4)},
              initializers={"c": np.array([1, 0, 1], bool)})


@pytest.mark.parametrize("exclusive, reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumprod(exclusive, reverse):
    check_ref([node("CumProd", ["x", "axis"], exclusive=exclusive, reverse=reverse)],
              {"x": randn(3, 5) + 1.0}, initializers={"axis": np.array(1, np.int64)},
              opset=26)


def test_space_to_depth_crd_inverts_depth_to_space_crd():
    check_ref([node("DepthToSpace", ["x"], ["d"], blocksize=2, mode="CRD"),
               node("SpaceToDepth", ["d"], blocksize=2, mode="CRD")],
              {"x": randn(2, 8, 3, 5)}, ("d", "y"), opset=26)


def test_dropout_in_training_mode_with_ratio_zero_is_the_identity():
    check_ref([node("Dropout", ["x", "r", "t"], ["y", "mask"])], {"x": randn(3, 4)},
              ("y", "mask"), {"r": np.float32(0.0), "t": np.array(True)}, opset=13)
    model = make_model([node("Dropout", ["x", "r", "t"])], {"x": randn(3, 4)}, ["y"],
                       {"r": np.float32(0.5), "t": np.array(True)}, opset=13)
    with pytest.raises(ff.onnx.OnnxImportError, match="training_mode=true is not supp"):
        ff.onnx.load(model)


def test_swiglu():
    check_ref([node("SwiGLU", ["a", "b"], alpha=1.5)], {"a": randn(3, 5), "b": randn(3, 5)},
              opset=26)


@pytest.mark.parametrize("batch_axis, time_axis", [(1, 0), (0, 1)])
def test_reverse_sequence(batch_axis, time_axis):
    shape = (4, 3, 2) if batch_axis == 1 else (3, 4, 2)
    check_ref([node("ReverseSequence", ["x", "lens"], batch_axis=batch_axis,
                    time_axis=time_axis)], {"x": randn(*shape)},
              initializers={"lens": np.array([4, 1, 2], np.int64)}, opset=10)


@pytest.mark.parametrize("interleaved, dim, four_d", [(0, 0, True), (1, 0, True),
                                                      (0, 4, False), (1, 4, False)])
def test_rotary_embedding(interleaved, dim, four_d):
    batch, seq, heads, head = 2, 3, 2, 6
    rot = dim or head
    x = randn(batch, heads, seq, head) if four_d else randn(batch, seq, heads * head)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": dim}
    if not four_d:
        attrs["num_heads"] = heads
    check_ref([node("RotaryEmbedding", ["x", "cos", "sin", "pos"], **attrs)], {"x": x},
              initializers={"cos": randn(8, rot // 2), "sin": randn(8, rot // 2),
                            "pos": np.array([[0, 1, 2], [5, 6, 7]], np.int64)}, opset=23)


@pytest.mark.parametrize("attrs", [dict(left_window_size=1), dict(right_window_size=0),
                                   dict(is_causal=1, left_window_size=2)])
def test_attention_sliding_windows(attrs):
    check_ref([node("Attention", ["q", "k", "v"], **attrs)],
              {"q": randn(2, 2, 4, 3), "k": randn(2, 2, 5, 3), "v": randn(2, 2, 5, 3)},
              opset=24)


@pytest.mark.parametrize("causal", [0, 1])
def test_attention_with_nonpad_kv_seqlen(causal):
    check_ref([node("Attention", ["q", "k", "v", "", "", "", "n"], is_causal=causal)],
              {"q": randn(2, 2, 3, 4), "k": randn(2, 2, 6, 4), "v": randn(2, 2, 6, 4)},
              initializers={"n": np.array([6, 4], np.int64)}, opset=24)


@pytest.mark.parametrize("attrs, x_shape, w_shape", [
    (dict(strides=[2]), (2, 3, 5), (3, 4, 3)),                                  # 1-D
    (dict(group=2, strides=[2, 1]), (1, 4, 3, 4), (4, 3, 3, 2)),                # groups
    (dict(strides=[3, 2], output_shape=[10, 8]), (1, 2, 3, 3), (2, 3, 3, 3)),  # larger
    (dict(strides=[2, 2], output_shape=[5, 6]), (1, 2, 3, 3), (2, 2, 3, 3)),   # smaller
    (dict(strides=[2, 2], auto_pad="SAME_UPPER"), (1, 2, 3, 4), (2, 2, 3, 3)),
    (dict(strides=[2, 2], auto_pad="SAME_LOWER"), (1, 2, 3, 4), (2, 2, 4, 3)),
], ids=["1d", "groups", "output_shape_larger", "output_shape", "same_upper", "same_lower"])
def test_conv_transpose(attrs, x_shape, w_shape):
    check([node("ConvTranspose", ["x", "w", "b"], **attrs)], {"x": randn(*x_shape)},
          initializers={"w": randn(*w_shape), "b": randn(w_shape[1] * attrs.get("group", 1))},
          opset=17)


@pytest.mark.parametrize("image, block, attrs", [
    ((5, 6), (2, 3), {}),
    ((7, 6), (3, 2), dict(strides=[2, 1], dilations=[1, 2], pads=[1, 0, 2, 1])),
])
def test_col2im(image, block, attrs):
    dims = len(image)
    strides = attrs.get("strides", [1] * dims)
    dilations = attrs.get("dilations", [1] * dims)
    pads = attrs.get("pads", [0] * 2 * dims)
    counts = [(image[d] + pads[d] + pads[d + dims] - dilations[d] * (block[d] - 1) - 1)
              // strides[d] + 1 for d in range(dims)]
    x = randn(2, 3 * int(np.prod(block)), int(np.prod(counts)))
    check_ref([node("Col2Im", ["x", "image", "block"], **attrs)], {"x": x},
              initializers={"image": np.array(image, np.int64),
                            "block": np.array(block, np.int64)})
