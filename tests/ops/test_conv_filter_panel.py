"""The blocked conv2d's filter panel and image walk (codegen/conv.py _filter_panel,
_image_walk; knobs conv.filter_panel, conv.image_walk, on in the webgl profile): a
constant filter repacked once (a hoisted pack kernel) so a channel step's 4 filter rows
are adjacent texels, and each pixel's image texels read at one address a tap plus the
step's offset. On GL against the numpy executor on the graph as built, under the webgl
profile: 1x1 and 3x3 filters, strides, dilation, batches, output channels not a
multiple of 4, NaN and inf in the filter and the image, images read from a depthwise
kernel's render targets; and the cases that keep the plain reads (a variable filter,
C % 4 != 0, a texture whose width and C / 4 do not divide each other)."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import check_both, gl_kernels, normal

# the blocked kernel preferred: small convolutions would run direct
WEBGL = ff.Tuning.named("webgl").from_env("prefer=conv.blocked,matmul.blocked_min_macs=0")
PLAIN = WEBGL.from_env("conv.filter_panel=false,conv.image_walk=false")


def _kernels(g, fetches, feeds, tuning=WEBGL):
    return gl_kernels(g, fetches, feeds, tuning)


def _check(g, y, feeds):
    return check_both(g, {"y": y}, feeds, WEBGL)[1]["y"]


def _conv_graph(x, w, b=None, dw=None, **kwargs):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        h = xp
        if dw is not None:             # a blocked depthwise conv: the conv reads its targets
            h = ff.relu6(ff.depthwise_conv2d(h, ff.constant(dw), padding="SAME"))
        y = ff.conv2d(h, ff.constant(w), **kwargs)
        if b is not None:
            y = ff.relu6(y + ff.constant(b))
    return g, xp, y


@pytest.mark.parametrize("x_shape, k, cout, kwargs", [
    ((1, 25, 25, 96), 1, 96, dict(padding="SAME")),                      # posenet's
    ((2, 7, 5, 16), 3, 36, dict(padding="SAME")),                        # batch, 3x3
    ((1, 9, 9, 8), 3, 6, dict(strides=2, padding="SAME")),               # COUT % 4 != 0
    ((1, 11, 10, 32), 3, 17, dict(dilations=2, padding="VALID")),        # dilated, 17
    ((1, 8, 8, 560), 1, 20, dict(padding="SAME")),                       # long sum
    ((1, 6, 6, 4), 1, 8, dict(padding="SAME")),                          # one step
    ((1, 4, 4, 600), 1, 8, dict(padding="SAME")),    # 150 texels a pixel on 128-wide rows
    ((1, 10, 10, 12), 3, 16, dict(padding="SAME")),  # 3 texels a pixel on 128-wide rows
    ((1, 3, 5, 12), 3, 8, dict(padding="SAME")),     # ... on one 45-wide row: divisions
])
def test_panel_and_walk_match_numpy(gl, x_shape, k, cout, kwargs):
    rng = np.random.default_rng(sum(x_shape) + cout)
    x = normal(rng, *x_shape)
    w = normal(rng, k, k, x_shape[-1], cout) * 0.2
    w[0, 0, 1, 2 % cout] = np.nan        # a NaN weight: every output of that channel
    w[-1, -1, -1, -1] = np.inf
    x[-1, 0, 0, 0] = -np.inf
    x[0, -1, -1, 1] = 0.0
    g, xp, y = _conv_graph(x, w, normal(rng, cout), **kwargs)
    kernels = _kernels(g, [y], [xp])
    assert [k.op for k in kernels][0] == "fused_conv2d_pack", [k.op for k in kernels]
    assert "wpanel4" in kernels[1].source
    ref = _check(g, y, {xp: x})
    assert np.isnan(ref).any() and not np.isnan(ref).all()


@pytest.mark.parametrize("x_shape, cout", [
    ((1, 12, 12, 128), 64), ((2, 5, 7, 64), 24),      # 32, 16 texels a pixel: "rows"
    ((1, 9, 9, 80), 16), ((1, 12, 12, 48), 64),       # 20 and 12 on 16-wide layers: "wrap"
])
def test_walk_reads_a_depthwise_kernels_targets(gl, x_shape, cout):
    rng = np.random.default_rng(cout)
    x = normal(rng, *x_shape)
    x[0, 1, 2, 3] = np.nan
    c = x_shape[-1]
    g, xp, y = _conv_graph(x, normal(rng, 1, 1, c, cout) * 0.2, normal(rng, cout),
                           dw=normal(rng, 3, 3, c, 1), padding="SAME")
    kernels = _kernels(g, [y], [xp])
    conv = next(k for k in kernels if k.op == "fused_conv2d")
    assert conv.inputs[0].value.endswith("#blocks"), [b.value for b in conv.inputs]
    assert "image_walk" in conv.source and "wpanel4" in conv.source
    _check(g, y, {xp: x})


def test_walk_forms_and_where_the_panel_does_not_apply(gl):
    rng = np.random.default_rng(3)
    x = normal(rng, 1, 10, 10, 12)       # 3 texels a pixel on 128-wide rows: "wrap"
    g, xp, y = _conv_graph(x, normal(rng, 3, 3, 12, 16), padding="SAME")
    conv = next(k for k in _kernels(g, [y], [xp]) if k.op == "conv2d")
    assert "wpanel4" in conv.source and 'image_walk "wrap"' in conv.source
    _check(g, y, {xp: x})
    x = normal(rng, 1, 4, 4, 32)         # 8 texels a pixel: "rows"
    g, xp, y = _conv_graph(x, normal(rng, 1, 1, 32, 16), padding="SAME")
    conv = next(k for k in _kernels(g, [y], [xp]) if k.op == "conv2d")
    assert "image_walk" in conv.source and 'image_walk "wrap"' not in conv.source
    x = normal(rng, 1, 10, 10, 6)        # C % 4 != 0: one channel a step, no panel, no walk
    g, xp, y = _conv_graph(x, normal(rng, 3, 3, 6, 16), padding="SAME")
    kernels = _kernels(g, [y], [xp])
    assert not any(k.op.endswith("_pack") or "image_walk" in k.source for k in kernels)
    _check(g, y, {xp: x})
    # a variable filter (trained): read in place, no pack kernel every run
    x = normal(rng, 1, 10, 10, 16)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y = ff.conv2d(xp, ff.Variable(normal(rng, 3, 3, 16, 16), name="w"), padding="SAME")
    assert not any(k.op.endswith("_pack") for k in _kernels(g, [y], [xp]))


def test_the_panel_is_drawn_once_and_the_results_equal_the_plain_reads(gl):
    """Hoisted (runtime/memory_plan.py: its input a constant): a run draws no pack
    kernel after the first; and the same sums in the same order as the plain reads, so
    the results are bit-identical."""
    rng = np.random.default_rng(5)
    x = normal(rng, 1, 14, 14, 64)
    g, xp, y = _conv_graph(x, normal(rng, 1, 1, 64, 48), normal(rng, 48), padding="SAME")
    with ff.Session(g, tuning=WEBGL) as sess:
        fn = sess.compile([y], feeds=[xp])
        first, = fn(x)
        second, = fn(x)
        packs = [k for k in fn.kernels if k.op == "fused_conv2d_pack"]
        assert len(packs) == 1 and packs[0].output.value in fn._last.plan.hoisted
    with ff.Session(g, tuning=PLAIN) as sess:
        plain = sess.run(y, {xp: x})
    assert np.array_equal(first, second) and np.array_equal(first, plain)


def _schedule(directory):
    from fragflow.tools.webgl.export import read_schedule
    return read_schedule(open(directory / "model.js").read())


def test_the_export_stores_the_panel_in_the_filters_place(tmp_path):
    """ff.webgl.export (tools/webgl/export.py fold_filter_panels): no pack kernel, the
    panel's texels (filter row k's texel ct at ct * K + k) in model.bin where the
    filter was, model.bin no bigger; a filter read by a second conv keeps its pack."""
    rng = np.random.default_rng(7)
    w = normal(rng, 3, 3, 16, 24)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((1, 20, 20, 16), name="x")
        y = ff.relu6(ff.conv2d(xp, ff.constant(w), padding="SAME"))
    ff.webgl.export({"y": y}, [xp], tmp_path / "a", page=False, tuning=WEBGL)
    ff.webgl.export({"y": y}, [xp], tmp_path / "b", page=False, tuning=PLAIN)
    a = _schedule(tmp_path / "a")
    assert not any(k["op"].endswith("_pack") for k in a["kernels"])
    assert "wpanel4" in a["programs"][a["kernels"][0]["program"]]
    assert (tmp_path / "a" / "model.bin").stat().st_size == \
        (tmp_path / "b" / "model.bin").stat().st_size
    blob = (tmp_path / "a" / "model.bin").read_bytes()
    panel = w.reshape(9 * 16, 6, 4).transpose(1, 0, 2).reshape(-1)
    stored = [np.frombuffer(blob, "<f4", s["data"][1], s["data"][0])
              for s in a["slots"] if s["kind"] == "constant"]
    assert any(np.array_equal(v, panel) for v in stored)
    assert not any(v.size == w.size and np.array_equal(v, w.reshape(-1)) for v in stored)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((1, 20, 20, 16), name="x")
        wc = ff.constant(w)
        y = ff.conv2d(xp, wc, padding="SAME") + ff.conv2d(xp * 2.0, wc, padding="VALID")[:, :1, :1]
    ff.webgl.export({"y": y}, [xp], tmp_path / "c", page=False, tuning=WEBGL)
    assert any(k["op"].endswith("_pack") for k in _schedule(tmp_path / "c")["kernels"])
