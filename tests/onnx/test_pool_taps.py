"""Pools with dilations (frontend/onnx/pool_taps.py: per-axis gathers and an
elementwise max or sum) on GL against onnxruntime, in 1-D, 2-D and 3-D, with pads,
ceil_mode and count_include_pad (auto_pad raises); the max pool's gradient against finite
differences."""
import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")

import fragflow as ff
from tests.gradcheck import numeric_gradient
from tests.onnx.test_import_ops import check, make_model, node, randn

pytestmark = pytest.mark.usefixtures("gl")


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], dilations=[2, 2]),
    dict(kernel_shape=[2, 3], dilations=[3, 2], strides=[2, 1], pads=[1, 2, 0, 1]),
    dict(kernel_shape=[3, 2], dilations=[2, 2], strides=[2, 2], ceil_mode=1),
], ids=["plain", "pads_strides", "ceil_mode"])
def test_dilated_2d_pool(op, attrs):
    check([node(op, ["x"], **attrs)], {"x": randn(2, 3, 9, 11)}, opset=19)


@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "VALID"])
def test_dilated_pool_with_auto_pad_raises_naming_it(auto_pad):
    # onnxruntime sizes these by the dilated window, onnx's reference by the undilated
    # one: fragflow asks for explicit pads
    model = make_model([node("MaxPool", ["x"], kernel_shape=[3, 3], dilations=[2, 1],
                             auto_pad=auto_pad)], {"x": randn(1, 1, 9, 9)}, ["y"], opset=19)
    with pytest.raises(ff.onnx.OnnxImportError,
                       match=f"MaxPool node.*dilations and auto_pad='{auto_pad}'"):
        ff.onnx.load(model)


def test_dilated_average_pool_counting_the_padding():
    check([node("AveragePool", ["x"], kernel_shape=[3, 3], dilations=[2, 2],
                pads=[2, 1, 1, 2], count_include_pad=1)], {"x": randn(1, 2, 7, 8)},
          opset=19)


@pytest.mark.parametrize("shape, attrs", [
    ((2, 3, 13), dict(kernel_shape=[3], dilations=[3], strides=[2], pads=[1, 1])),
    ((1, 2, 6, 7, 5), dict(kernel_shape=[2, 2, 2], dilations=[2, 3, 1], strides=[1, 2, 1])),
], ids=["1d", "3d"])
def test_dilated_1d_and_3d_max_pool(shape, attrs):
    check([node("MaxPool", ["x"], **attrs)], {"x": randn(*shape)}, opset=19)


def test_dilated_lp_pool():
    check([node("LpPool", ["x"], kernel_shape=[2, 2], dilations=[2, 2], p=3, pads=[1, 0, 0, 1])],
          {"x": randn(1, 2, 6, 7)}, opset=19)


def test_dilated_max_pool_of_all_negative_values_ignores_the_padding():
    x = -np.abs(randn(1, 1, 5, 6)) - 1.0
    check([node("MaxPool", ["x"], kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 2, 2, 2])],
          {"x": x}, opset=19)


def test_dilated_max_pool_gradient_matches_finite_differences():
    model = make_model([node("MaxPool", ["x"], kernel_shape=[2, 2], dilations=[2, 2],
                             pads=[1, 1, 0, 0])], {"x": randn(1, 1, 5, 5)}, ["y"], opset=19)
    imported = ff.onnx.load(model)
    x, = imported.inputs
    with imported.graph.as_default():
        loss = ff.reduce_sum(imported.outputs[0] * ff.constant(
            np.random.default_rng(1).uniform(0.5, 1.5, imported.outputs[0].shape)
            .astype(np.float32)))
        dx, = ff.gradients(loss, [x])
    xv = np.random.default_rng(2).permutation(25).reshape(1, 1, 5, 5).astype(np.float32)
    got = ff.Session(imported.graph).run(dx, {x: xv})
    np.testing.assert_allclose(got, numeric_gradient(imported.graph, loss, x, {x: xv}),
                               rtol=1e-3, atol=1e-4)
