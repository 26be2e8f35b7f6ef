"""Every strategy of codegen/conv.py TABLE that applies to a node, run on GL against the
numpy reference executor (the strategy preferred by name, ff.Tuning(prefer=...)), on
awkward nodes: odd sizes, C % 4 != 0, stride 2, padding, depthwise multipliers, pools
and their gradients, filter gradients. Each case says which strategies apply under
the llvmpipe profile and under one that makes every node big enough to block
(blocked_min_macs 1, the packed thresholds 1); a tuning that leaves out every
strategy is refused with the node's name."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen import conv
from fragflow.codegen.layout import layout_for
from fragflow.codegen.limits import Limits, lowering_with
from fragflow.codegen.lower import lower
from fragflow.codegen.schedule import graph_facts
from fragflow.codegen.strategy import NoStrategyError, applicable
from fragflow.codegen.tuning import tuning_with
from fragflow.frontend.tensor import wrap
from fragflow.ir.ops import conv as _conv
from fragflow.runtime import driver
from fragflow.runtime.device import Device
from tests.reference import assert_matches

BLOCKED = ff.Tuning().with_({"matmul.blocked_min_macs": 1, "matmul.packed_min_macs": 1,
                             "matmul.packed_min_rows": 1,
                             "conv.packed_min_input": 1})
# the blocked kernels' other paths: a filter row's channels as 4 scalar fetches, texels
# read with texelFetch, one channel texel (4 pixels) a fragment
OTHER_PATHS = {"conv.filter_row_texels": False, "conv.blocked_lod_fetch": False,
               "conv.blocked_cols": 1, "conv.step_positions": True}
TUNINGS = {"llvmpipe": ff.Tuning(), "blocked": BLOCKED,
           "blocked, other paths": BLOCKED.with_(OTHER_PATHS)}


def _conv2d(x, w, strides=1, padding="SAME"):
    return lambda xp, wp: ff.conv2d(xp, wp, strides=strides, padding=padding)


def _depthwise(x, w, strides=1, padding="SAME"):
    return lambda xp, wp: ff.depthwise_conv2d(xp, wp, strides=strides, padding=padding)


def _pool_grad(ksize, strides, padding):
    def build(xp):
        y = ff.max_pool(xp, ksize, strides, padding)
        return ff.gradients(ff.sum(y * ff.sin(y)), [xp])[0]
    return build


def _filter_grad(ksize, strides, padding):
    def build(xp, dyp):
        return wrap(_conv.conv_backprop_filter("conv2d", xp.value, dyp.value, ksize,
                                               strides=strides, padding=padding))
    return build


# (label, build, input shapes, the node's op, strategies applying under any tuning)
CASES = [
    ("conv2d C=8 odd", _conv2d(None, None), [(2, 7, 9, 8), (3, 3, 8, 8)], "conv2d",
     {"conv.direct", "conv.packed", "conv.blocked", "conv.generic"}),
    ("conv2d C=3 COUT=5 s2", _conv2d(None, None, 2), [(1, 9, 7, 3), (3, 3, 3, 5)],
     "conv2d", {"conv.packed", "conv.blocked", "conv.generic"}),
    ("conv2d C=6 VALID 1x1 image", _conv2d(None, None, 1, "VALID"),
     [(2, 1, 1, 6), (1, 1, 6, 4)], "conv2d",
     {"conv.direct", "conv.packed", "conv.blocked", "conv.generic"}),
    # COUT % 4 != 0 with C % 4 == 0: the blocked kernel reads a filter row's 4 output
    # channels as one texel or the end of one and the start of the next
    # (conv.filter_row_texels; rows starting 2, and 1 and 3, elements into a texel)
    ("conv2d C=8 COUT=34 1x1", _conv2d(None, None, 1, "VALID"),
     [(1, 5, 7, 8), (1, 1, 8, 34)], "conv2d",
     {"conv.packed", "conv.blocked", "conv.generic"}),
    ("conv2d C=12 COUT=17 s2", _conv2d(None, None, 2), [(2, 7, 6, 12), (3, 3, 12, 17)],
     "conv2d", {"conv.packed", "conv.blocked", "conv.generic"}),
    ("depthwise C=8 s2", _depthwise(None, None, 2), [(2, 7, 9, 8), (3, 3, 8, 1)],
     "depthwise_conv2d", {"depthwise.direct", "depthwise.blocked", "conv.generic"}),
    ("depthwise C=3 x4", _depthwise(None, None), [(1, 6, 5, 3), (3, 3, 3, 4)],
     "depthwise_conv2d", {"depthwise.direct", "depthwise.blocked", "conv.generic"}),
    ("depthwise C=6 x1", _depthwise(None, None), [(2, 5, 5, 6), (3, 3, 6, 1)],
     "depthwise_conv2d", {"conv.generic"}),
    ("max_pool C=8 s2", lambda xp: ff.max_pool(xp, 3, 2, "SAME"), [(2, 9, 7, 8)],
     "max_pool", {"pool.vec4", "conv.generic"}),
    ("max_pool_grad C=8 overlapping", _pool_grad(3, 2, "SAME"), [(2, 7, 5, 8)],
     "max_pool_grad", {"pool.routed", "conv.generic"}),
    ("max_pool_grad C=3", _pool_grad(2, 2, "VALID"), [(2, 6, 5, 3)], "max_pool_grad",
     {"pool.lanes", "conv.generic"}),
    ("filter gradient C=3 s2", _filter_grad((3, 2), 2, "SAME"),
     [(3, 7, 5, 3), (3, 4, 3, 5)], "conv2d_backprop_filter",
     {"conv.filter_blocked", "conv.generic"}),
]


def _graph(build, shapes, seed):
    rng = np.random.default_rng(seed)
    g = ff.Graph()
    with g.as_default():
        feeds = {ff.placeholder(s, name=f"in{i}"): rng.standard_normal(s).astype(np.float32)
                 for i, s in enumerate(shapes)}
        y = build(*feeds)
    return g, y, feeds


def _applicable(g, op, tuning) -> list:
    """The names of the strategies that apply to the graph's node of `op`."""
    limits = Device.get().limits
    node = next(n for n in g.nodes if n.op == op)
    layouts = {v.name: layout_for(v.type, limits.max_texture_size)
               for n in g.nodes for v in n.outputs}
    with lowering_with(limits), tuning_with(tuning):
        site = conv.conv_site(node, layouts, "k0")
        return [s.name for s, _ in applicable(conv.TABLE, site, graph_facts(g), tuning)]


@pytest.mark.parametrize("label, build, shapes, op, expected", CASES,
                         ids=[c[0] for c in CASES])
def test_every_applicable_strategy_matches_numpy(gl, label, build, shapes, op, expected):
    g, y, feeds = _graph(build, shapes, seed=len(label))
    ref = ff.Session(g, backend="numpy", passes=[]).run(y, feeds)
    scale = float(np.max(np.abs(ref), initial=0.0))
    applied = set()
    for tuning in TUNINGS.values():
        names = _applicable(g, op, tuning)
        assert names[-1] == "conv.generic", names        # the generic kernel takes all
        for name in names:
            preferred = tuning.with_(prefer=(name,))
            with ff.Session(g, tuning=preferred) as sess:
                kernels = sess.compile([y], feeds=list(feeds)).kernels
                got = sess.run(y, feeds)
            assert name in {k.strategy for k in kernels}, \
                (name, [(k.op, k.strategy) for k in kernels])
            assert_matches(got, ref, rtol=1e-4, atol=1e-5 * (1 + scale),
                           what=f"{label} by {name}")
            applied.add(name)
    assert applied == expected, sorted(applied)


def test_the_default_choice_is_the_first_that_applies(gl):
    label, build, shapes, op, _ = CASES[0]
    g, y, feeds = _graph(build, shapes, seed=0)
    first = _applicable(g, op, ff.Tuning())[0]
    with ff.Session(g, tuning=ff.Tuning()) as sess:
        kernels = sess.compile([y], feeds=list(feeds)).kernels
    assert [k.strategy for k in kernels] == [first] == ["conv.direct"]


def test_a_tuning_that_excludes_every_strategy_is_refused(gl):
    g, y, feeds = _graph(_conv2d(None, None), [(1, 5, 5, 4), (3, 3, 4, 4)], seed=1)
    none = ff.Tuning(exclude=tuple(s.name for s in conv.TABLE))
    with ff.Session(g, tuning=none) as sess:
        with pytest.raises(NoStrategyError, match=r"no kernel of pool\.lanes.*excluded"):
            sess.compile([y], feeds=list(feeds))


def test_a_filter_row_s_channels_are_read_as_texels(gl):
    """conv.filter_row_texels: with COUT % 4 != 0 the blocked kernel reads filter row
    k0 + q's 4 channels as one texel, or two where the row starts inside a texel, at
    offsets known when the shader is written; off, as 4 scalar fetches."""
    g, y, feeds = _graph(CASES[1][1], [(1, 6, 5, 8), (3, 3, 8, 17)], seed=5)
    ref = ff.Session(g, backend="numpy", passes=[]).run(y, feeds)
    sources = {}
    for on in (True, False):
        tuning = BLOCKED.with_({"conv.filter_row_texels": on}, prefer=("conv.blocked",))
        with ff.Session(g, tuning=tuning) as sess:
            kernels = sess.compile([y], feeds=list(feeds)).kernels
            assert_matches(sess.run(y, feeds), ref, rtol=1e-4, atol=1e-4, what=str(on))
        sources[on] = next(k.source for k in kernels if k.strategy == "conv.blocked")
    # COUT = 17: rows start 0, 1, 2 and 3 elements into their texels
    assert all(f"wrow4_{q}(" in sources[True] for q in range(4))
    assert "vec4(a.yzw, b.x)" in sources[True] and "vec4(a.w, b.xyz)" in sources[True]
    assert "wrow4_" not in sources[False]


@pytest.mark.parametrize("knobs", [{}, OTHER_PATHS], ids=["defaults", "other paths"])
@pytest.mark.parametrize("prefer", [(), ("conv.generic",), ("conv.direct",),
                                    ("depthwise.blocked",), ("conv.packed",),
                                    ("conv.blocked", "depthwise.blocked")])
def test_stitch_free_plans_follow_the_preferred_strategies(gl, prefer, knobs):
    """A conv2d read only by a depthwise conv (MobileNet's pair): plan_blocks runs the
    table as lowering does, so the depthwise kernel reads the conv2d's render targets
    exactly where the chosen conv2d strategy leaves its result there."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 6, 6, 64)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        h = ff.relu6(ff.conv2d(xp, ff.constant(rng.standard_normal((1, 1, 64, 128))
                                               .astype(np.float32) * 0.2), padding="SAME"))
        y = ff.depthwise_conv2d(h, ff.constant(rng.standard_normal((3, 3, 128, 1))
                                               .astype(np.float32)), padding="SAME")
    tuning = ff.Tuning(prefer=prefer).with_(knobs)
    ref = ff.Session(g, backend="numpy", passes=[]).run(y, {xp: x})
    with ff.Session(g, tuning=tuning) as sess:
        kernels = sess.compile([y], feeds=[xp]).kernels
        got = sess.run(y, {xp: x})
    stitched = any(k.op in ("conv2d_stitch", "fused_conv2d_stitch") for k in kernels)
    free = kernels[0].strategy == "conv.blocked" and not stitched
    reads = any(b.value.endswith("#blocks") for k in kernels[1:] for b in k.inputs
                if "depthwise" in k.op)
    assert reads == free, [(k.op, k.strategy) for k in kernels]
    # (conv.direct leaves a stitch-free conv2d deep enough to the blocked kernel, and
    # conv.packed does not take an input this small)
    assert free == (prefer != ("conv.generic",))
    assert_matches(got, ref, rtol=1e-4, atol=1e-4)


def test_the_webgl_profile_blocks_4_pixels_of_one_channel_texel():
    """conv.blocked_cols: with WebGL2's 4 render targets the webgl profile's blocked
    conv2d takes 4 pixels x 1 channel texel a fragment, llvmpipe's profile 2 x 2 there
    (and 4 x 2 on its own 8 targets)."""
    g, y, feeds = _graph(_conv2d(None, None), [(1, 12, 12, 32), (1, 1, 32, 64)], seed=7)
    optimized = driver.optimize(g, [y.value], {v.value: v.value.type for v in feeds})
    shapes = {}
    for profile, limits in (("webgl", Limits.webgl2()), ("llvmpipe", Limits.webgl2()),
                            ("llvmpipe-8", Device.get().limits)):
        tuning = ff.Tuning.named(profile.partition("-")[0]).with_(prefer=("conv.blocked",))
        lowered = lower(optimized.graph, limits, tuning=tuning)
        kernel = next(k for k in lowered.kernels if k.strategy == "conv.blocked")
        b = kernel.params["blocking"]
        shapes[profile] = (b["rows"], b["cols"])
    assert shapes["webgl"] == (4, 1) and shapes["llvmpipe"] == (2, 2), shapes
    if Device.get().limits.max_draw_buffers >= 8:
        assert shapes["llvmpipe-8"] == (4, 2), shapes
