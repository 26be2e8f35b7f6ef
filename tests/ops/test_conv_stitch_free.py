"""Stitch-free blocked convolutions (codegen/conv.py stitch_free): a blocked conv2d whose
only readers are direct depthwise kernels applies its bias and activation itself and
leaves its result in its render targets; the depthwise kernels read them
(templates/blocks_texel.glsl.j2). On GL against the numpy reference executor: batches,
odd spatial sizes, output channels not a multiple of 8 (layers of 3 texel columns),
1x1 images, 3x3 filters, strided / dilated / VALID depthwise readers, NaN in the image;
and the cases that keep the stitch (a fetched result, a second kind of reader, a
depthwise multiplier)."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, normal, run_both


def _compiled(g, fetches, feeds):
    with ff.Session(g) as sess:
        return sess.compile(fetches, feeds=feeds).kernels


def _check(g, fetches: dict, feed_dict):
    out, ref = run_both(g, fetches, feed_dict)
    for label in fetches:
        scale = float(np.max(np.abs(np.nan_to_num(ref[label])), initial=0.0))
        assert_matches(out[label], ref[label], rtol=1e-5, atol=1e-5 * (1 + scale),
                       what=label)
    return ref


def _block(x, cin, cout, rng, k=1, dw=None, dw_k=3):
    """conv2d k x k + bias + relu6, then depthwise + bias + relu6 (MobileNet's pair in
    the other order, as one block's pointwise feeds the next block's depthwise)."""
    h = ff.relu6(ff.conv2d(x, ff.constant(normal(rng, k, k, cin, cout) * 0.2),
                           padding="SAME") + ff.constant(normal(rng, cout)))
    kwargs = dict(padding="SAME") if dw is None else dw
    return h, ff.relu6(ff.depthwise_conv2d(
        h, ff.constant(normal(rng, dw_k, dw_k, cout, 1)), **kwargs)
        + ff.constant(normal(rng, cout)))


@pytest.mark.parametrize("x_shape, cout, k, dw, dw_k", [
    ((1, 6, 6, 64), 128, 1, None, 3),                                    # MobileNet's
    ((2, 5, 7, 128), 20, 1, None, 3),                    # batch, odd sizes, NT = 5
    ((1, 1, 1, 512), 256, 1, None, 3),                                   # one pixel
    ((1, 3, 3, 128), 256, 1, dict(strides=2, padding="SAME"), 3),        # stride 2
    ((1, 9, 7, 64), 36, 1, dict(dilations=2, padding="SAME"), 3),        # dilated
    ((2, 7, 6, 96), 64, 1, dict(padding="VALID"), 5),                    # 5x5 VALID
    ((1, 12, 12, 32), 64, 1, None, 3),         # would run direct: blocked, no stitch
    ((1, 7, 5, 16), 48, 3, dict(strides=(2, 1), padding="SAME"), 3),     # 3x3 conv
])
def test_depthwise_reads_the_blocked_targets(gl, x_shape, cout, k, dw, dw_k):
    rng = np.random.default_rng(sum(x_shape) + cout)
    x = normal(rng, *x_shape)
    x[-1, 0, 0, 1] = np.nan             # spreads through the windows that read it
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        _, y = _block(xp, x_shape[-1], cout, rng, k, dw, dw_k)
    kernels = _compiled(g, [y], [xp])
    assert [k.op for k in kernels] == ["fused_conv2d", "fused_depthwise_conv2d"], \
        [k.op for k in kernels]
    assert kernels[1].inputs[0].value.endswith("#blocks")
    assert "sampler2DArray" in kernels[1].source
    ref = _check(g, {"y": y}, {xp: x})
    assert np.isnan(ref["y"]).any()
    assert x_shape[1] * x_shape[2] == 1 or not np.isnan(ref["y"]).all()


def test_two_depthwise_readers_both_read_the_targets(gl):
    rng = np.random.default_rng(1)
    x = normal(rng, 1, 6, 6, 64)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        h, y = _block(xp, 64, 128, rng)
        z = ff.depthwise_conv2d(h, ff.constant(normal(rng, 3, 3, 128, 1)), strides=2,
                                padding="SAME")
    kernels = _compiled(g, [y, z], [xp])
    assert len(kernels) == 3 and not any("stitch" in k.op for k in kernels)
    _check(g, {"y": y, "z": z}, {xp: x})


@pytest.mark.parametrize("reader", ["fetched", "elementwise", "multiplier"])
def test_other_readers_keep_the_stitch(gl, reader):
    rng = np.random.default_rng(2)
    x = normal(rng, 2, 6, 6, 64)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        h, y = _block(xp, 64, 128, rng)
        fetches = {"y": y}
        if reader == "fetched":
            fetches["h"] = h
        elif reader == "elementwise":
            fetches["e"] = ff.mean(h * 2.0)
        else:                                # multiplier 2: not the direct M == 1 read
            fetches["m"] = ff.depthwise_conv2d(h, ff.constant(normal(rng, 3, 3, 128, 2)),
                                               padding="SAME")
    kernels = _compiled(g, list(fetches.values()), [xp])
    assert "fused_conv2d_stitch" in [k.op for k in kernels]
    assert not any(b.value.endswith("#blocks") for k in kernels
                   if k.op == "fused_depthwise_conv2d" for b in k.inputs)
    _check(g, fetches, {xp: x})


def test_gradients_through_a_stitch_free_pair(gl):
    """The forward pair runs stitch-free only where nothing else reads the conv's
    result; a training graph's gradients read it too: GL and numpy agree either way."""
    rng = np.random.default_rng(3)
    x = normal(rng, 2, 6, 6, 64)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        w = ff.Variable(normal(rng, 1, 1, 64, 128) * 0.2, name="w")
        h = ff.relu6(ff.conv2d(xp, w) + ff.constant(normal(rng, 128)))
        y = ff.relu6(ff.depthwise_conv2d(h, ff.constant(normal(rng, 3, 3, 128, 1)),
                                         padding="SAME"))
        loss = ff.mean(ff.square(y))
        dw, = ff.gradients(loss, [w])
    _check(g, {"loss": loss, "dw": dw}, {xp: x})


def _dw_then_conv(x, c, cout, rng, dw=None, k=1, dw_k=3):
    """depthwise + bias + relu6, then conv2d k x k + bias + relu6 (a MobileNet block)."""
    kwargs = dict(padding="SAME") if dw is None else dw
    h = ff.relu6(ff.depthwise_conv2d(x, ff.constant(normal(rng, dw_k, dw_k, c, 1)), **kwargs)
                 + ff.constant(normal(rng, c)))
    return h, ff.relu6(ff.conv2d(h, ff.constant(normal(rng, k, k, c, cout) * 0.2),
                                 padding="SAME") + ff.constant(normal(rng, cout)))


@pytest.mark.parametrize("x_shape, cout, dw, k", [
    ((1, 6, 6, 128), 128, None, 1),                               # MobileNet's, small
    ((2, 7, 5, 64), 204, dict(strides=2, padding="SAME"), 1),     # batch, odd, stride 2
    ((1, 1, 1, 256), 1028, None, 1),                              # one pixel
    ((1, 13, 11, 32), 36, dict(dilations=2, padding="VALID"), 3),  # dilated; 3x3 conv
])
def test_conv2d_reads_a_depthwise_kernels_targets(gl, x_shape, cout, dw, k):
    """The depthwise conv runs blocked without its stitch where its reader runs blocked
    anyway (a big conv2d, with its stitch: a fetched result)."""
    rng = np.random.default_rng(sum(x_shape) + cout)
    x = normal(rng, *x_shape)
    x[-1, 0, 0, 2] = np.nan
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        _, y = _dw_then_conv(xp, x_shape[-1], cout, rng, dw, k)
    kernels = _compiled(g, [y], [xp])
    assert [k.op for k in kernels] == ["fused_depthwise_conv2d", "fused_conv2d",
                                       "fused_conv2d_stitch"], [k.op for k in kernels]
    assert kernels[1].inputs[0].value.endswith("#blocks")
    ref = _check(g, {"y": y}, {xp: x})
    assert np.isnan(ref["y"]).any()


def test_a_chain_of_blocks_runs_without_stitches(gl):
    """conv -> depthwise -> conv -> depthwise -> conv, each reading the one before's
    targets; only the fetched end has a stitch. Batch 2, odd sizes, a stride."""
    rng = np.random.default_rng(7)
    x = normal(rng, 2, 9, 7, 64)
    x[1, 4, 3, 5] = np.nan
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        h = _block(xp, 64, 96, rng, dw=dict(strides=2, padding="SAME"))[1]
        h = _block(h, 96, 128, rng)[1]
        y = ff.relu6(ff.conv2d(h, ff.constant(normal(rng, 1, 1, 128, 256) * 0.1))
                     + ff.constant(normal(rng, 256)))
    kernels = _compiled(g, [y], [xp])
    ops = [k.op for k in kernels]
    assert ops == ["fused_conv2d", "fused_depthwise_conv2d"] * 2 + \
        ["fused_conv2d", "fused_conv2d_stitch"], ops
    assert all(k.inputs[0].value.endswith("#blocks") for k in kernels[1:-1]), \
        [k.inputs[0].value for k in kernels]
    ref = _check(g, {"y": y}, {xp: x})
    assert np.isnan(ref["y"]).any() and not np.isnan(ref["y"]).all()


@pytest.mark.parametrize("reader", ["fetched", "small_conv", "odd_channels"])
def test_depthwise_keeps_its_kernels_for_other_readers(gl, reader):
    rng = np.random.default_rng(8)
    c = 6 if reader == "odd_channels" else 8
    x = normal(rng, 2, 9, 9, c)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        # a small conv2d runs direct: its depthwise keeps its own (direct) kernel
        h, y = _dw_then_conv(xp, c, 16, rng)
        fetches = {"y": y, "h": h} if reader == "fetched" else {"y": y}
    kernels = _compiled(g, list(fetches.values()), [xp])
    assert not any(b.value.endswith("#blocks") for k in kernels for b in k.inputs
                   if k.op == "fused_conv2d"), [k.op for k in kernels]
    _check(g, fetches, {xp: x})
