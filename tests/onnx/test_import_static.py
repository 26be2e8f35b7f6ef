"""Values the importer needs at import time: windows of a static size, CenterCropPad,
a constant CastLike'd to a tensor's dtype, and the ONNX backend binding an integer graph
input that such a value is computed from (never a float one); on GL against
onnxruntime."""
import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import fragflow as ff
from fragflow.frontend.onnx.backend import FragflowBackend
from tests.onnx.helpers import assert_close, ort_run
from tests.onnx.test_import_ops import check, make_model, node, randn

pytestmark = pytest.mark.usefixtures("gl")


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_window_of_a_static_size(op, periodic):
    check([node(op, ["n"], ["w"], periodic=periodic), node("Mul", ["x", "w"])],
          {"x": randn(2, 7)}, initializers={"n": np.array(7, np.int64)}, opset=17)


@pytest.mark.parametrize("shape, target, axes", [
    ((2, 5, 6), [3, 4], [1, 2]),            # crop both
    ((2, 3, 4), [6, 7], [1, 2]),            # pad both (the larger half after)
    ((2, 5, 4), [2, 7], [-2, -1]),          # crop one, pad the other
    ((3, 4, 5), [2, 4, 8], None)])          # every axis
def test_center_crop_pad(shape, target, axes):
    attrs = {} if axes is None else {"axes": axes}
    check([node("CenterCropPad", ["x", "s"], **attrs)], {"x": randn(*shape)},
          initializers={"s": np.array(target, np.int64)}, opset=18)


def test_a_constant_cast_like_a_tensor_stays_static():
    # Pad's constant_value must be known at import: here a constant CastLike the input
    nodes = [helper.make_node("Constant", [], ["v"], value=numpy_helper.from_array(
                 np.array(-7.5, np.float32))),
             node("CastLike", ["v", "x"], ["c"]),
             node("Pad", ["x", "p", "c"])]
    check(nodes, {"x": randn(2, 3)}, initializers={"p": np.array([0, 1, 1, 0], np.int64)},
          opset=18)


def _typed(model, shape):
    """The model with its output typed (the backend runs onnx's checker)."""
    out = model.graph.output[0]
    out.CopyFrom(helper.make_tensor_value_info(out.name, TensorProto.FLOAT, shape))
    return model


def test_backend_binds_the_integer_input_a_static_value_is_computed_from():
    # Range's limit is Cast(n) + 1: computed from the graph input n, which the backend
    # binds to the run's value (and imports again when it changes)
    model = make_model([node("Cast", ["n"], ["nf"], to=1), node("Add", ["nf", "one"], ["l"]),
                        node("Range", ["zero", "l", "one"], ["r"]), node("Mul", ["r", "k"])],
                       {"n": np.array(4, np.int64), "k": np.float32([2.0])}, ["y"],
                       {"zero": np.float32(0), "one": np.float32(1)}, opset=13)
    model = _typed(model, [None])
    rep = FragflowBackend.prepare(model)
    for n in (4, 6):
        feeds = {"n": np.array(n, np.int64), "k": np.float32([2.0])}
        assert_close(rep.run(feeds)[0], ort_run(model, feeds)[0])


def test_a_float_input_is_never_bound():
    # the pad value comes from the float input x itself: data, not a constant
    model = make_model([node("ReduceMax", ["x"], ["m"], keepdims=0),
                        node("Pad", ["x", "p", "m"])], {"x": randn(2, 3)}, ["y"],
                       {"p": np.array([0, 1, 0, 0], np.int64)}, opset=13)
    model = _typed(model, [2, 4])
    with pytest.raises(ff.onnx.OnnxImportError, match="constant_value must be known"):
        FragflowBackend.prepare(model).run({"x": randn(2, 3)})
