"""passes/pad_folding.py fold_channel_pads: a zero pad of the last (channel) axis read by
a fused matmul's or convolution's epilogue (a residual shortcut whose channels are
padded to the block's: BlazeFace, MediaPipe's detectors) becomes the node's `pad_last`:
the epilogue reads the pad's input and takes 0 past its channels, no pad kernel. GL with
the whole pipeline against the numpy executor on the graph as built (np.pad, then the
ops), and the gradient through it against the numpy executor's; edge values: NaN and
inf in the shortcut and in the product, negatives, channels and amounts not a multiple
of 4 (the element path) and of 4 (the texel path); kept where the pad is not zeros or
pads another axis."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, reference_session

pytestmark = pytest.mark.usefixtures("gl")


def _image(rng, shape):
    x = rng.standard_normal(shape).astype(np.float32) * 2
    x.reshape(-1)[3] = np.nan
    x.reshape(-1)[-2] = np.inf
    x.reshape(-1)[7] = -np.inf
    return x


def _block(kind, cin, cout, value=0.0):
    """relu(head(x) + bias + pad(x)): head a conv2d over [2, 5, 7, cin] or a matmul
    over [35, cin]."""
    rng = np.random.default_rng(cin * 31 + cout)
    shape = (2, 5, 7, cin) if kind == "conv2d" else (35, cin)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(shape, name="x")
        bias = ff.constant(rng.standard_normal(cout).astype(np.float32))
        if kind == "conv2d":
            w = ff.constant(rng.standard_normal((3, 3, cin, cout)).astype(np.float32))
            head = ff.nn.conv2d(x, w, strides=1, padding="SAME")
        else:
            w = ff.constant(rng.standard_normal((cin, cout)).astype(np.float32))
            head = ff.matmul(x, w)
        paddings = [[0, 0]] * len(shape)
        paddings[-1] = [0, cout - cin]
        shortcut = ff.pad(x, paddings, constant_values=value)
        y = ff.nn.relu(head + bias + shortcut)
    return g, x, y, _image(rng, shape)


@pytest.mark.parametrize("kind, cin, cout", [
    ("conv2d", 24, 28),      # whole texels: the texel path
    ("conv2d", 36, 42),      # 6 more channels: the element path
    ("conv2d", 5, 8),        # channels not a multiple of 4
    ("matmul", 32, 48),
    ("matmul", 7, 9),
])
def test_the_epilogue_reads_the_shortcut_padded(kind, cin, cout):
    g, x, y, value = _block(kind, cin, cout)
    want = reference_session(g).run(y, {x: value})
    with ff.Session(g) as sess:
        fn = sess.compile([y], feeds=[x])
        got = fn(value)[0]
    assert_matches(got, want, rtol=1e-4, atol=1e-4)
    assert np.isnan(want).any() and (want > 0).any()
    assert "pad" not in [k.op for k in fn.kernels], [k.op for k in fn.kernels]
    assert any("channels into" in line for line in fn.fusion_report), fn.fusion_report


def test_the_gradient_flows_through_the_folded_pad():
    g, x, y, value = _block("conv2d", 24, 28)
    value = np.nan_to_num(value, posinf=1.0, neginf=-1.0)
    with g.as_default():
        loss = ff.reduce_sum(y * y)
        (dx,) = ff.gradients(loss, [x])
    want = reference_session(g).run(dx, {x: value})
    with ff.Session(g) as sess:
        got = sess.run(dx, {x: value})
    assert_matches(got, want, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("why, value", [("a pad of ones", 1.0), ("a pad of -0.0", -0.0)])
def test_a_pad_that_is_not_zeros_stays(why, value):
    g, x, y, v = _block("conv2d", 24, 28, value=value)
    want = reference_session(g).run(y, {x: v})
    with ff.Session(g) as sess:
        fn = sess.compile([y], feeds=[x])
        got = fn(v)[0]
    assert_matches(got, want, rtol=1e-4, atol=1e-4)
    assert "pad" in [k.op for k in fn.kernels], why
