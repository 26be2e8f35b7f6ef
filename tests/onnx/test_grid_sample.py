"""ONNX GridSample (frontend/onnx/grid_sample.py) on GL against onnxruntime (bicubic
border against onnx's reference): every mode, padding and align_corners with grid
points outside the image, 3-D volumes, and
gradients with respect to the image and the grid against finite differences."""
import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")

import fragflow as ff
from tests.gradcheck import numeric_gradient
from tests.onnx.test_import_more import check_ref
from tests.onnx.test_import_ops import check, make_model, node, randn

pytestmark = pytest.mark.usefixtures("gl")
rng = np.random.default_rng(16)


def _grid(*shape):
    # beyond [-1, 1] on both sides: the padding modes matter
    return rng.uniform(-1.7, 1.7, shape).astype(np.float32)


@pytest.mark.parametrize("mode, padding, align", [
    ("nearest", "zeros", 0), ("nearest", "border", 1), ("nearest", "reflection", 0),
    ("linear", "zeros", 1), ("linear", "border", 0), ("linear", "reflection", 1),
    ("cubic", "zeros", 0), ("cubic", "reflection", 1), ("nearest", "reflection", 1),
    ("linear", "reflection", 0), ("cubic", "zeros", 1)])
def test_2d(mode, padding, align):
    check([node("GridSample", ["x", "g"], mode=mode, padding_mode=padding,
                align_corners=align)], {"x": randn(2, 3, 5, 6), "g": _grid(2, 4, 7, 2)},
          opset=20)


@pytest.mark.parametrize("align", [0, 1])
def test_cubic_border_follows_onnx_reference(align):
    # onnxruntime's bicubic border padding differs from onnx's reference (which the
    # conformance cases follow): fragflow follows the reference
    check_ref([node("GridSample", ["x", "g"], mode="cubic", padding_mode="border",
                    align_corners=align)], {"x": randn(2, 3, 5, 6), "g": _grid(2, 4, 7, 2)},
              opset=20)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("padding", ["zeros", "border"])
def test_volumetric(mode, padding):
    check([node("GridSample", ["x", "g"], mode=mode, padding_mode=padding)],
          {"x": randn(1, 2, 3, 4, 5), "g": _grid(1, 2, 3, 4, 3)}, opset=20)


def test_opset_16_bilinear_is_the_default():
    check([node("GridSample", ["x", "g"])], {"x": randn(1, 2, 4, 4), "g": _grid(1, 3, 3, 2)},
          opset=16)


def test_gradients_wrt_image_and_grid_match_finite_differences():
    x, g = randn(1, 2, 4, 5), rng.uniform(-0.9, 0.9, (1, 3, 2, 2)).astype(np.float32)
    model = make_model([node("GridSample", ["x", "g"], mode="linear")], {"x": x, "g": g},
                       ["y"], opset=20)
    imported = ff.onnx.load(model)
    xp, gp = imported.inputs
    with imported.graph.as_default():
        loss = ff.reduce_sum(imported.outputs[0] * ff.constant(
            rng.uniform(0.5, 1.5, imported.outputs[0].shape).astype(np.float32)))
        dx, dg = ff.gradients(loss, [xp, gp])
    got_x, got_g = ff.Session(imported.graph).run([dx, dg], {xp: x, gp: g})
    feeds = {xp: x, gp: g}
    np.testing.assert_allclose(got_x, numeric_gradient(imported.graph, loss, xp, feeds),
                               rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(got_g, numeric_gradient(imported.graph, loss, gp, feeds),
                               rtol=1e-3, atol=1e-3)
