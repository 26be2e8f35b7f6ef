"""A blocked conv2d read as the image of blocked conv2d kernels (MobileNet-v2's project
conv feeding the next block's expand conv; Tuning.conv.conv_reads_blocks) leaves its
result in its render targets: no stitch; the readers fetch pixel p, channel texel ct
through blocks_texel.glsl.j2's px_ (templates/conv_blocked.glsl.j2). On GL against the
numpy executor on the graph as built: 1x1 and 3x3 readers, strides, SAME and VALID
padding, a batch, channels not a multiple of 8, NaN and inf in the image; a block with
a residual (the epilogue reading the shortcut from the same targets); the knob off
keeps the stitch."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, normal


def _run(build, x, tuning=None):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y = build(xp)
    want = ff.Session(g, backend="numpy", passes=[]).run(y, {xp: x})
    with ff.Session(g, tuning=tuning) as sess:
        fn = sess.compile([y], feeds=[xp])
        (got,) = fn(x)
        kernels = fn.kernels
    scale = 1 + float(np.max(np.abs(want[np.isfinite(want)]), initial=0))
    assert_matches(got, want, rtol=1e-4, atol=1e-4 * scale)
    return want, kernels


@pytest.mark.parametrize("x_shape, c, k, reader", [
    ((1, 8, 8, 64), 96, 1, dict()),
    ((2, 9, 7, 48), 36, 1, dict()),
    ((1, 9, 9, 64), 64, 3, dict(padding="SAME")),
    ((2, 10, 9, 32), 48, 3, dict(strides=2, padding="SAME")),
    ((1, 11, 10, 64), 64, 3, dict(strides=(2, 1), padding="VALID")),
])
def test_a_conv2d_reads_its_image_from_a_conv2ds_targets(gl, x_shape, c, k, reader):
    rng = np.random.default_rng(sum(x_shape) + c + k)
    x = normal(rng, *x_shape)
    x[0, 1, 2, 3] = np.nan
    x[-1, -1, -1, -1] = np.inf

    def build(xp):
        h = ff.conv2d(xp, ff.constant(normal(rng, 1, 1, x_shape[-1], c) * 0.3)) + \
            ff.constant(normal(rng, c))
        y = ff.conv2d(h, ff.constant(normal(rng, k, k, c, 64) * 0.2), **reader)
        return ff.relu6(y + ff.constant(normal(rng, 64)))

    want, kernels = _run(build, x)
    ops = [(k_.op, k_.strategy) for k_ in kernels]
    assert ops == [("fused_conv2d", "conv.blocked")] * 2 + [
        ("fused_conv2d_stitch", "conv.blocked")], ops
    assert kernels[1].inputs[0].value == kernels[0].output.value     # '<h>#blocks'
    assert f"px_{kernels[1].inputs[0].sampler}(" in kernels[1].source
    assert np.isnan(want).any() and np.isfinite(want).any()


@pytest.mark.parametrize("conv_reads_blocks", [True, False])
def test_a_mobilenet_v2_block_with_its_residual(gl, conv_reads_blocks):
    rng = np.random.default_rng(7)
    x = normal(rng, 1, 16, 16, 24)
    x[0, 3, 3, 5] = np.nan

    def build(xp):
        p = ff.conv2d(xp, ff.constant(normal(rng, 1, 1, 24, 32) * 0.3))      # project
        e = ff.relu6(ff.conv2d(p, ff.constant(normal(rng, 1, 1, 32, 192) * 0.3)))
        d = ff.relu6(ff.depthwise_conv2d(e, ff.constant(normal(rng, 3, 3, 192, 1)),
                                         padding="SAME"))
        return ff.conv2d(d, ff.constant(normal(rng, 1, 1, 192, 32) * 0.1)) + p

    tuning = ff.Tuning().with_({"conv.conv_reads_blocks": conv_reads_blocks})
    want, kernels = _run(build, x, tuning)
    # p: read by the expand conv (its image) and by the last conv's epilogue, both
    # from its targets; with the knob off, from the value (p's kernel writes it)
    p = kernels[0]
    ops = [(k.op, k.strategy, [b.value for b in k.inputs]) for k in kernels]
    assert bool(p.output_layers) == conv_reads_blocks, ops
    readers = [k for k in kernels if p.output.value in [b.value for b in k.inputs]]
    assert len(readers) == 2, ops
    assert [k.op for k in kernels].count("fused_conv2d_stitch") == 1, ops
    assert np.isnan(want).any() and np.isfinite(want).any()
