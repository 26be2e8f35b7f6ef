"""ONNX Resize beyond the dedicated kernels (frontend/onnx/resize.py): cubic, fractional
scales, antialias, axes, keep_aspect_ratio_policy, tf_crop_and_resize, other ranks; on
GL against onnxruntime, and its gradient against finite differences."""
import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")

import fragflow as ff
from tests.gradcheck import numeric_gradient
from tests.onnx.test_import_ops import check, make_model, node, randn

pytestmark = pytest.mark.usefixtures("gl")
F32, I64 = np.float32, np.int64


def _scales(*s):
    return {"scales": np.array(s, F32)}


@pytest.mark.parametrize("coord", ["half_pixel", "align_corners", "asymmetric",
                                   "pytorch_half_pixel"])
def test_cubic_upsample(coord):
    # whole-number sizes: with fractional ones, align_corners divides by the float
    # size in onnx's reference (which the conformance cases follow) and by the
    # integer size in onnxruntime; fragflow follows the reference
    check([node("Resize", ["x", "", "scales"], mode="cubic",
                coordinate_transformation_mode=coord)], {"x": randn(1, 2, 4, 6)},
          initializers=_scales(1, 1, 2, 1.5), opset=13)


def test_cubic_with_its_coefficient_and_exclude_outside():
    check([node("Resize", ["x", "", "scales"], mode="cubic", cubic_coeff_a=-0.5,
                exclude_outside=1)], {"x": randn(1, 1, 6, 7)},
          initializers=_scales(1, 1, 0.6, 1.3), opset=13)


@pytest.mark.parametrize("mode,nearest", [("linear", None), ("nearest", "round_prefer_floor"),
                                          ("nearest", "ceil"), ("cubic", None)])
def test_fractional_scales_map_coordinates_by_the_scale(mode, nearest):
    # 5 * 0.7 = 3.5: the output has 3 pixels, coordinates scale by 1 / 0.7, not 5 / 3
    attrs = {"mode": mode} if nearest is None else {"mode": mode, "nearest_mode": nearest}
    check([node("Resize", ["x", "", "scales"], **attrs)], {"x": randn(2, 3, 5, 9)},
          initializers=_scales(1, 1, 0.7, 1.45), opset=13)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_antialiased_downscale(mode):
    check([node("Resize", ["x", "", "", "sizes"], mode=mode, antialias=1)],
          {"x": randn(1, 2, 12, 9)}, initializers={"sizes": np.array([1, 2, 5, 3], I64)},
          opset=18)


def test_antialias_with_many_taps_uses_a_matmul():
    # a 5x smaller image: each output pixel averages about 10 input pixels per axis
    imported, fn = check([node("Resize", ["x", "", "", "sizes"], mode="linear", antialias=1)],
                         {"x": randn(1, 1, 30, 25)},
                         initializers={"sizes": np.array([1, 1, 6, 5], I64)}, opset=18)
    assert any("matmul" in k.op for k in fn.kernels), [k.op for k in fn.kernels]


@pytest.mark.parametrize("axes", [[2, 3], [3, 2], [-1]])
def test_axes_attribute(axes):
    sizes = {2: 7, 3: 3, -1: 8}
    check([node("Resize", ["x", "", "", "sizes"], mode="linear", axes=axes)],
          {"x": randn(1, 2, 4, 5)},
          initializers={"sizes": np.array([sizes[a] for a in axes], I64)}, opset=18)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_keep_aspect_ratio_policy(policy):
    check([node("Resize", ["x", "", "", "sizes"], mode="nearest",
                keep_aspect_ratio_policy=policy, axes=[2, 3])], {"x": randn(1, 1, 4, 6)},
          initializers={"sizes": np.array([7, 7], I64)}, opset=18)


def test_tf_crop_and_resize_with_extrapolation():
    check([node("Resize", ["x", "roi", "", "sizes"], mode="linear",
                coordinate_transformation_mode="tf_crop_and_resize",
                extrapolation_value=-7.5)], {"x": randn(1, 2, 5, 6)},
          initializers={"roi": np.array([0, 0, -0.2, 0.3, 1, 1, 0.9, 1.4], F32),
                        "sizes": np.array([1, 2, 4, 5], I64)}, opset=13)


@pytest.mark.parametrize("shape, scales", [((3, 10), (1, 0.55)), ((2, 3, 7), (1, 1, 2.5)),
                                           ((1, 2, 3, 4, 5), (1, 1, 2, 1.5, 0.6))])
def test_other_ranks(shape, scales):
    check([node("Resize", ["x", "", "scales"], mode="linear")], {"x": randn(*shape)},
          initializers=_scales(*scales), opset=13)


def test_resize_of_the_channel_axis():
    check([node("Resize", ["x", "", "scales"], mode="nearest")], {"x": randn(1, 3, 2, 2)},
          initializers=_scales(1, 2, 1, 1), opset=13)


def test_gradient_through_a_cubic_resize_matches_finite_differences():
    model = make_model([node("Resize", ["x", "", "scales"], mode="cubic")],
                       {"x": randn(1, 1, 3, 4)}, ["y"], _scales(1, 1, 1.5, 0.75), opset=13)
    imported = ff.onnx.load(model)
    x, = imported.inputs
    with imported.graph.as_default():
        weights = ff.constant(np.random.default_rng(0).uniform(
            0.5, 1.5, imported.outputs[0].shape).astype(F32))
        loss = ff.reduce_sum(imported.outputs[0] * weights)
        dx, = ff.gradients(loss, [x])
    xv = randn(1, 1, 3, 4)
    got = ff.Session(imported.graph).run(dx, {x: xv})
    want = numeric_gradient(imported.graph, loss, x, {x: xv})
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


def test_unknown_coordinate_mode_names_it():
    model = make_model([node("Resize", ["x", "", "scales"], mode="linear",
                             coordinate_transformation_mode="sideways")],
                       {"x": randn(1, 1, 2, 2)}, ["y"], _scales(1, 1, 1.5, 1.5), opset=13)
    with pytest.raises(ff.onnx.OnnxImportError, match="Resize node.*'sideways'"):
        ff.onnx.load(model)
