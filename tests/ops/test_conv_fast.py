"""The blocked convolutions (codegen/conv.py: a plain conv2d as the matmul of its
windows with the filter, 4 pixels x 8 output channels per fragment; a depthwise one
as 4 channels of 2 x 4 adjacent pixels per fragment reading their shared footprint
once; both into render targets that the stitch puts in place with the fused bias and
activation) on GL against the numpy reference executor, on awkward shapes: channels
not in fours, 1x1 filters, strides, dilations, explicit and SAME padding, batches,
small outputs, depthwise multipliers, NaN in the image; gradients against finite
differences. The size threshold is lowered to 1 and the direct conv2d kernel is off
here so every case runs blocked (a test checks that a W4-sized convolution takes the
blocked path by itself)."""
import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients
from tests.reference import assert_matches, normal, run_both

# every size blocked; small ones would run direct (tests/ops/test_conv_direct.py)
BLOCKED = ff.Tuning().with_({"matmul.blocked_min_macs": 1, "conv.direct_max_macs": 0})


def _run(build, arrays, rtol=1e-5):
    """build(*tensors) -> {label: tensor}; placeholders fed with arrays; GL vs numpy."""
    g = ff.Graph()
    with g.as_default():
        feeds = {ff.placeholder(a.shape, name=f"in{i}"): a for i, a in enumerate(arrays)}
        fetches = build(*feeds)
    out, ref = run_both(g, fetches, feeds, tuning=BLOCKED)
    for label in fetches:
        scale = float(np.max(np.abs(np.nan_to_num(ref[label])), initial=0.0))
        assert_matches(out[label], ref[label], rtol=rtol, atol=1e-5 * (1 + scale), what=label)
    return g


def test_w4_sized_convolutions_take_the_blocked_path(gl):
    rng = np.random.default_rng(0)
    x = normal(rng, 1, 32, 32, 16)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y = ff.relu(ff.conv2d(xp, ff.constant(normal(rng, 3, 3, 16, 16)), padding="SAME")
                    + ff.constant(normal(rng, 16)))
        z = ff.relu6(ff.depthwise_conv2d(xp, ff.constant(normal(rng, 3, 3, 16, 1)),
                                         padding="SAME") + ff.constant(normal(rng, 16)))
    with ff.Session(g) as sess:
        fn = sess.compile([y, z], feeds=[xp])
        ops = [k.op for k in fn.kernels]
        assert ops == ["fused_conv2d", "fused_conv2d_stitch", "fused_depthwise_conv2d",
                       "fused_depthwise_conv2d_stitch"], ops
        out = fn(x)
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        ref = sess.run([y, z], {xp: x})
    for a, b in zip(out, ref):
        assert_matches(a, b, rtol=1e-5, atol=1e-4)


# plain convolutions of awkward shapes (tests/ops/test_matmul_packed.py runs them packed)
CONV2D_CASES = [
    ((2, 9, 11, 8), (3, 3, 8, 12), dict(padding="SAME")),                 # fours
    ((1, 10, 7, 3), (3, 3, 3, 5), dict(strides=2, padding="VALID")),       # C=3, COUT=5
    ((1, 8, 8, 4), (1, 1, 4, 6), dict()),                                  # 1x1
    ((1, 12, 12, 8), (3, 3, 8, 8), dict(dilations=2, padding="SAME")),     # dilated
    ((3, 5, 6, 5), (2, 3, 5, 4), dict(strides=(1, 2),
                                      padding=((1, 0), (2, 1)))),          # explicit pads
    ((1, 1, 1, 7), (1, 1, 7, 9), dict()),                                  # one pixel
    ((1, 2, 40, 4), (1, 3, 4, 1), dict(padding="SAME")),                   # COUT=1
]


@pytest.mark.parametrize("x_shape, w_shape, kwargs", CONV2D_CASES)
def test_conv2d_shapes(gl, x_shape, w_shape, kwargs):
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    x, w = normal(rng, *x_shape), normal(rng, *w_shape)
    x.flat[len(x.flat) // 2] = np.nan       # spreads to the outputs whose window holds it
    _run(lambda xp, wp: {"y": ff.conv2d(xp, wp, **kwargs)}, [x, w])


@pytest.mark.parametrize("x_shape, w_shape, kwargs", [
    ((1, 9, 10, 8), (3, 3, 8, 1), dict(padding="SAME")),                   # MobileNet's
    ((2, 7, 9, 4), (3, 3, 4, 4), dict(strides=2, padding="VALID")),        # multiplier 4
    ((1, 11, 5, 8), (5, 5, 8, 1), dict(dilations=2, padding="SAME")),      # 5x5 dilated
    ((1, 3, 2, 4), (3, 3, 4, 1), dict(padding="SAME")),                    # output < block
    ((1, 6, 7, 4), (3, 3, 4, 2), dict(padding="SAME")),                    # multiplier 2
    ((1, 13, 13, 12), (3, 3, 12, 1), dict(strides=2, padding="SAME")),     # stride 2
])
def test_depthwise_shapes(gl, x_shape, w_shape, kwargs):
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    x, w = normal(rng, *x_shape), normal(rng, *w_shape)
    x[0, 1, 1, 0] = np.nan
    _run(lambda xp, wp: {"y": ff.depthwise_conv2d(xp, wp, **kwargs)}, [x, w])


@pytest.mark.parametrize("depthwise", [False, True])
@pytest.mark.parametrize("activation", ["relu", "relu6", "leaky_relu"])
def test_fused_bias_activation(gl, depthwise, activation):
    rng = np.random.default_rng(11)
    c = 8
    x = normal(rng, 2, 7, 9, c)
    w = normal(rng, 3, 3, c, 1 if depthwise else 6)
    b = normal(rng, c if depthwise else 6)
    conv = ff.depthwise_conv2d if depthwise else ff.conv2d

    def build(xp, wp, bp):
        y = conv(xp, wp, padding="SAME") + bp
        return {"y": getattr(ff, activation)(y),
                "scaled": ff.relu(y * 0.5 + 1.0)}          # a scalar operand too
    _run(build, [x, w, b])
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y = getattr(ff, activation)(conv(xp, ff.constant(w), padding="SAME")
                                    + ff.constant(b))
    with ff.Session(g, tuning=BLOCKED) as sess:    # bias and activation in the stitch
        ops = [k.op for k in sess.compile([y], feeds=[xp]).kernels]
    name = "depthwise_conv2d" if depthwise else "conv2d"
    assert ops == [f"fused_{name}", f"fused_{name}_stitch"], ops


def test_gradients_against_finite_differences(gl):
    rng = np.random.default_rng(5)
    # stride 1: the input gradient runs as a (blocked) convolution too
    check_gradients(lambda x, w: ff.tanh(ff.conv2d(x, w, padding="SAME")),
                    {"x": rng.standard_normal((1, 5, 6, 4)),
                     "w": rng.standard_normal((3, 3, 4, 4))}, tuning=BLOCKED)
    check_gradients(lambda x, w: ff.depthwise_conv2d(x, w, strides=2, padding="SAME") ** 2,
                    {"x": rng.standard_normal((1, 6, 5, 4)),
                     "w": rng.standard_normal((3, 3, 4, 1))}, tuning=BLOCKED)


@pytest.mark.parametrize("x_shape, dy_shape, ksize, kwargs", [
    ((2, 7, 9, 8), (2, 7, 9, 12), (3, 3), dict(padding="SAME")),           # fours
    ((1, 10, 7, 4), (1, 4, 3, 5), (3, 3), dict(strides=2, padding="VALID")),   # COUT=5
    ((1, 12, 12, 4), (1, 12, 12, 3), (3, 3), dict(dilations=2, padding="SAME")),
    ((3, 5, 6, 4), (3, 5, 4, 4), (2, 3), dict(strides=(1, 2),
                                              padding=((1, 0), (2, 1)))),  # explicit
    ((1, 8, 8, 4), (1, 8, 8, 1), (1, 1), dict()),                          # 1x1, COUT=1
    ((5, 8, 8, 1), (5, 8, 8, 8), (3, 3), dict(padding="SAME")),            # C=1 (W13's)
    ((1, 9, 7, 3), (1, 4, 3, 5), (3, 3), dict(strides=2, padding="VALID")),    # C=3
    ((2, 6, 6, 6), (2, 6, 6, 2), (2, 2), dict(dilations=2, padding="SAME")),   # C=6
])
def test_filter_gradient_shapes(gl, x_shape, dy_shape, ksize, kwargs):
    """conv2d_backprop_filter runs blocked (4 channels per texel of x where C % 4 == 0)."""
    from fragflow.frontend.tensor import wrap
    from fragflow.ir.ops import conv as _conv
    rng = np.random.default_rng(sum(x_shape) + sum(dy_shape))
    x, dy = normal(rng, *x_shape), normal(rng, *dy_shape)
    x[0, 1, 1, 0] = np.nan

    def build(xp, dyp):
        return {"dw": wrap(_conv.conv_backprop_filter("conv2d", xp.value, dyp.value, ksize,
                                                       **kwargs))}
    g = _run(build, [x, dy], rtol=1e-4)
    with ff.Session(g, tuning=BLOCKED) as sess:
        placeholders = [n.outputs[0] for n in g.nodes if n.op == "placeholder"]
        dw = [n.outputs[0] for n in g.nodes if n.op == "conv2d_backprop_filter"]
        ops = [k.op for k in sess.compile([wrap(v) for v in dw],
                                          feeds=[wrap(v) for v in placeholders]).kernels]
    assert ops == ["conv2d_backprop_filter", "conv2d_backprop_filter_stitch"], ops


def test_filter_gradient_past_the_loop_limit(gl):
    # 198 x 198 output pixels: the pixel loop is unrolled to stay under 65535 iterations
    from fragflow.frontend.tensor import wrap
    from fragflow.ir.ops import conv as _conv
    rng = np.random.default_rng(9)
    x, dy = normal(rng, 1, 200, 200, 4), normal(rng, 1, 198, 198, 4)
    _run(lambda xp, dyp: {"dw": wrap(_conv.conv_backprop_filter(
        "conv2d", xp.value, dyp.value, (3, 3), strides=1, padding="VALID"))}, [x, dy],
        rtol=1e-4)


@pytest.mark.parametrize("pool, x_shape, kwargs", [
    ("max_pool", (2, 9, 7, 8), dict(ksize=3, strides=2, padding="SAME")),     # overlaps
    ("max_pool", (3, 8, 8, 4), dict(ksize=2, strides=2, padding="VALID")),    # tiles
    ("min_pool", (1, 6, 5, 12), dict(ksize=(2, 3), strides=1, padding="SAME")),
    ("max_pool3d", (1, 4, 5, 6, 4), dict(ksize=2, strides=(1, 2, 2), padding="SAME")),
])
def test_pool_gradients_four_channels_at_a_time(gl, pool, x_shape, kwargs):
    """max/min pool gradients with C % 4 == 0 take a texel (4 channels) at a time: ties
    (the first extremum takes dy), NaN (it is the extremum) and padding as numpy's."""
    if not hasattr(ff, pool):
        pytest.skip(f"no ff.{pool}")
    rng = np.random.default_rng(len(x_shape) + x_shape[-1])
    x = np.round(normal(rng, *x_shape) * 2) / 2          # many ties
    x.reshape(-1)[5] = np.nan
    r = normal(rng, *[1] * len(x_shape))

    def build(xp):
        y = getattr(ff, pool)(xp, **kwargs)
        dx, = ff.gradients(ff.reduce_sum(y * ff.sin(y) + y * float(r.reshape(-1)[0])), [xp])
        return {"dx": dx}
    _run(build, [x])
