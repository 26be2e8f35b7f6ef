"""A blocked conv2d read by a depthwise kernel (its image) and by a fused conv's epilogue
(a residual add's shortcut, at the reader's own shape) leaves its result in its render
targets: no stitch; the epilogue reads the shortcut from the targets (codegen/conv.py
reads_epilogue_blocks, templates/epilogue.glsl.j2 lanes "blocks"). On GL against the
numpy executor on the graph as built: batches, odd sizes, channels not a multiple of 8,
NaN and inf in the image; readers on the direct, blocked (the epilogue in their stitch
or their own targets) and generic (element by element) paths, a depthwise reader of the
shortcut; and conv.epilogue_blocks off keeps the stitch."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, normal

# the reader "generic": a 3x3 conv2d of few products past the direct kernel's taps,
# run by templates/conv.glsl.j2, whose epilogue reads element by element
TUNINGS = {"conv2d": None, "depthwise_conv2d": None,
           "generic": ff.Tuning().with_({"conv.direct_max_taps": 1})}


def _residual(xp, zp, rng, c, reader):
    """h = relu6(conv1x1(x) + b), d = depthwise(h), then act(r + b + h) where r reads d
    (conv2d 1x1 or depthwise) or z (a 3x3 conv2d; d fetched too): h's readers are a depthwise kernel
    (its image) and the epilogue of r's kernel (the shortcut)."""
    cin = xp.shape[-1]
    h = ff.relu6(ff.conv2d(xp, ff.constant(normal(rng, 1, 1, cin, c) * 0.3))
                 + ff.constant(normal(rng, c)))
    d = ff.depthwise_conv2d(h, ff.constant(normal(rng, 3, 3, c, 1)), padding="SAME")
    if reader == "conv2d":
        r = ff.conv2d(d, ff.constant(normal(rng, 1, 1, c, c) * 0.3))
    elif reader == "depthwise_conv2d":
        r = ff.depthwise_conv2d(d, ff.constant(normal(rng, 3, 3, c, 1)), padding="SAME")
    else:
        r = ff.conv2d(zp, ff.constant(normal(rng, 3, 3, 2, c)), padding="SAME")
    y = ff.nn.leaky_relu(r + ff.constant(normal(rng, c)) + h, 0.1) * 2.0
    return [y, d] if reader == "generic" else [y]


def _run(build, x, z, tuning):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        zp = ff.placeholder(z.shape, name="z")
        fetches = build(xp, zp)
    feeds = {xp: x, zp: z}
    want = ff.Session(g, backend="numpy", passes=[]).run(fetches, feeds)
    with ff.Session(g, tuning=tuning) as sess:
        fn = sess.compile(fetches, feeds=[xp, zp])
        got = fn(x, z)
        kernels = fn.kernels
    for a, e in zip(got, want):
        scale = 1 + float(np.max(np.abs(e[np.isfinite(e)]), initial=0))
        assert_matches(a, e, rtol=1e-4, atol=1e-4 * scale)
    return want[0], kernels


@pytest.mark.parametrize("reader", list(TUNINGS))
@pytest.mark.parametrize("x_shape, c", [((1, 6, 6, 64), 128), ((2, 9, 9, 52), 20)])
def test_the_shortcut_is_read_from_the_blocked_targets(gl, x_shape, c, reader):
    rng = np.random.default_rng(sum(x_shape) + c)
    x = normal(rng, *x_shape)
    x[0, 1, 2, 3] = np.nan
    x[-1, -1, -1, -1] = np.inf
    z = normal(rng, *x_shape[:3], 2)
    want, kernels = _run(lambda xp, zp: _residual(xp, zp, rng, c, reader), x, z,
                         TUNINGS[reader])
    ops = [(k.op, k.strategy) for k in kernels]
    head = kernels[0]
    assert head.op == "fused_conv2d" and head.output_layers, ops    # its targets
    assert not any(k.op.endswith("_stitch") and k.nodes == head.nodes for k in kernels), ops
    blocks = head.output.value                      # "<value>#blocks"
    samplers = [b.sampler for k in kernels[1:] for b in k.inputs if b.value == blocks]
    readers = [k for k in kernels[1:] if blocks in [b.value for b in k.inputs]]
    assert len(readers) == 2 and all(f"px_{s}(" in k.source or f"bx_{s}(" in k.source
                                     for k, s in zip(readers, samplers)), ops
    if reader == "generic":
        assert ("fused_conv2d", "conv.generic") in ops, ops
    assert np.isnan(want).any() and np.isfinite(want).any()


def test_the_knob_off_keeps_the_stitch(gl):
    rng = np.random.default_rng(2)
    x, z = normal(rng, 1, 6, 6, 64), normal(rng, 1, 6, 6, 2)
    _, kernels = _run(lambda xp, zp: _residual(xp, zp, rng, 128, "conv2d"), x, z,
                      ff.Tuning().with_({"conv.epilogue_blocks": False}))
    assert [k.op for k in kernels].count("fused_conv2d_stitch") == 2, \
        [k.op for k in kernels]
