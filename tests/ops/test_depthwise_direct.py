"""The direct depthwise kernel (codegen/depthwise.py, templates/depthwise_direct.glsl.j2:
one fragment per output texel, taps unrolled, the epilogue in the same kernel) on GL
against the numpy reference executor: multipliers 1, 4 and 8, one channel texel,
batches, odd spatial sizes, strides, dilations, SAME / VALID / explicit padding, 1x1
and 5x5 and 7x7 filters, a 1x1 image, NaN in the image, fused bias + activation; which
kernel runs; gradients against finite differences."""
import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients
from tests.reference import assert_matches, compiled_kernels, normal, run_both


@pytest.mark.parametrize("x_shape, w_shape, kwargs", [
    ((1, 9, 10, 8), (3, 3, 8, 1), dict(padding="SAME")),                   # MobileNet's
    ((2, 7, 9, 4), (3, 3, 4, 4), dict(strides=2, padding="VALID")),        # multiplier 4
    ((1, 11, 5, 8), (5, 5, 8, 1), dict(dilations=2, padding="SAME")),      # 5x5 dilated
    ((1, 3, 2, 4), (3, 3, 4, 1), dict(padding="SAME")),                    # tiny output
    ((1, 6, 7, 2), (3, 3, 2, 8), dict(strides=(1, 2), padding="SAME")),    # multiplier 8
    ((3, 13, 13, 12), (3, 3, 12, 1), dict(strides=2, padding="SAME")),     # batch, stride 2
    ((1, 1, 1, 4), (3, 3, 4, 1), dict(padding="SAME")),                    # one pixel
    ((2, 5, 6, 4), (1, 1, 4, 1), dict()),                                  # 1x1 filter
    ((1, 9, 8, 4), (7, 7, 4, 1), dict(padding=((3, 2), (1, 4)))),          # 7x7, explicit
])
def test_direct_depthwise_matches_numpy(gl, x_shape, w_shape, kwargs):
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    x, w = normal(rng, *x_shape), normal(rng, *w_shape)
    x[0, x_shape[1] // 2, x_shape[2] // 2, 0] = np.nan    # spreads through its windows
    build = lambda xp, wp: ff.depthwise_conv2d(xp, wp, **kwargs)    # noqa: E731
    assert [k.op for k in compiled_kernels(build, [x.shape, w.shape])] == ["depthwise_conv2d"]
    assert "direct depthwise" in compiled_kernels(build, [x.shape, w.shape])[0].source
    g = ff.Graph()
    with g.as_default():
        xp, wp = ff.placeholder(x.shape, name="x"), ff.placeholder(w.shape, name="w")
        y = build(xp, wp)
    out, ref = run_both(g, {"y": y}, {xp: x, wp: w})
    assert np.isnan(ref["y"]).any() and not np.isnan(ref["y"]).all()
    assert_matches(out["y"], ref["y"], rtol=1e-5, atol=1e-5 * (1 + np.nanmax(np.abs(ref["y"]))))


@pytest.mark.parametrize("activation", ["relu6", "relu", "leaky_relu"])
def test_fused_bias_and_activation_in_one_kernel(gl, activation):
    rng = np.random.default_rng(3)
    x, w, b = normal(rng, 2, 7, 9, 8), normal(rng, 3, 3, 8, 1), normal(rng, 8)
    x[1, 3, 3, 5] = np.nan

    def build(xp):
        return getattr(ff, activation)(
            ff.depthwise_conv2d(xp, ff.constant(w), padding="SAME") + ff.constant(b))
    assert [k.op for k in compiled_kernels(build, [x.shape])] == ["fused_depthwise_conv2d"]
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y = build(xp)
        scaled = ff.relu(ff.depthwise_conv2d(xp, ff.constant(w), padding="SAME") * 0.5 + 1.0)
    out, ref = run_both(g, {"y": y, "scaled": scaled}, {xp: x})
    for label in ("y", "scaled"):
        assert_matches(out[label], ref[label], rtol=1e-5, atol=1e-4, what=label)


def test_other_depthwise_convolutions_keep_their_kernels(gl):
    rng = np.random.default_rng(4)
    # C % 4 != 0 with multiplier 1: scalar lanes (conv.glsl.j2)
    odd = compiled_kernels(lambda xp: ff.depthwise_conv2d(xp, ff.constant(normal(rng, 3, 3, 3, 1)),
                                                 padding="SAME"), [(1, 6, 6, 3)])
    assert "direct depthwise" not in odd[0].source
    # big enough for the blocked kernel: blocked + stitch
    big = compiled_kernels(lambda xp: ff.depthwise_conv2d(xp, ff.constant(normal(rng, 3, 3, 32, 1)),
                                                 padding="SAME"), [(1, 64, 64, 32)])
    assert [k.op for k in big] == ["depthwise_conv2d", "depthwise_conv2d_stitch"]


def test_gradients_through_the_direct_kernel(gl):
    rng = np.random.default_rng(5)
    check_gradients(lambda x, w: ff.depthwise_conv2d(x, w, padding="SAME") ** 2,
                    {"x": rng.standard_normal((2, 5, 6, 4)),
                     "w": rng.standard_normal((3, 3, 4, 1))})
    check_gradients(lambda x, w: ff.tanh(ff.depthwise_conv2d(x, w, strides=2,
                                                             padding="VALID")),
                    {"x": rng.standard_normal((1, 7, 6, 4)),
                     "w": rng.standard_normal((3, 3, 4, 4))})
