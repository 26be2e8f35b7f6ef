"""fuse_epilogues grows a fused_conv / fused_matmul (as model importers make them, e.g.
TF's _FusedConv2D with its bias and activation) by the elementwise ops after it: a
residual add and its activation join the head's own steps, so they run in its kernel
(a blocked head's stitch) rather than in a kernel of their own. GL with the whole
pipeline against the numpy executor on the graph as built, on the direct and the
blocked (stitch) paths, with NaN, inf and negatives in the image and the shortcut;
the head's own operands keep their places (a new step reading one of them), a result
with two readers or fetched stops the chain, and the textures the stitch would bind
stay within the limit."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.passes import PassManager, prune
from tests.reference import assert_matches

BLOCKED = ff.Tuning().with_({"matmul.blocked_min_macs": 1, "conv.direct_max_macs": 0,
                            "conv.depthwise_direct_max_taps": 0})
TUNINGS = {"default": None, "blocked": BLOCKED}


def _specials(a):
    a = a.copy()
    a.reshape(-1)[0] = np.nan
    a.reshape(-1)[-1] = np.inf
    a.reshape(-1)[a.size // 2] = -np.inf
    return a


def _run(build, arrays, tuning=None):
    """(GL results, numpy results on the graph as built, kernel ops, fusion report)."""
    g = ff.Graph()
    with g.as_default():
        feeds = [ff.placeholder(a.shape, name=f"in{i}") for i, a in enumerate(arrays)]
        fetches = build(*feeds)
    want = ff.Session(g, backend="numpy", passes=[]).run(fetches, dict(zip(feeds, arrays)))
    with ff.Session(g, tuning=tuning) as sess:
        fn = sess.compile(fetches, feeds=feeds)
        got = fn(*arrays)
        ops = [k.op for k in fn.kernels]
        report = fn.fusion_report
    for a, e in zip(got, want):
        scale = 1 + float(np.max(np.abs(e[np.isfinite(e)]), initial=0))
        assert_matches(a, e, rtol=1e-4, atol=1e-4 * scale)
    return want, ops, report


@pytest.mark.parametrize("tuning", list(TUNINGS))
@pytest.mark.parametrize("conv", ["conv2d", "depthwise_conv2d"])
def test_a_residual_add_and_activation_join_a_fused_conv(gl, conv, tuning):
    rng = np.random.default_rng(1)
    x = _specials(rng.standard_normal((2, 7, 9, 8)).astype(np.float32) * 3)
    shortcut = _specials(-np.abs(rng.standard_normal((2, 7, 9, 8)).astype(np.float32)))
    w_shape = (1, 1, 8, 8) if conv == "conv2d" else (3, 3, 8, 1)
    w = rng.standard_normal(w_shape).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float32)
    alpha = rng.standard_normal(8).astype(np.float32)

    def build(xp, sp):
        head = getattr(ff.fused, conv)(xp, ff.constant(w), padding="SAME",
                                       bias=ff.constant(bias), activation="prelu",
                                       alpha=ff.constant(alpha))
        return [ff.relu6(head + sp) * 0.5]

    (want,), ops, report = _run(build, [x, shortcut], TUNINGS[tuning])
    assert not any(op.startswith("fused(") for op in ops), (ops, report)
    assert any(line.startswith("fused fused_conv") for line in report), report
    assert np.isnan(want).any() and np.isfinite(want).any()


@pytest.mark.parametrize("tuning", list(TUNINGS))
def test_a_step_reading_the_heads_own_operand_and_a_fused_matmul(gl, tuning):
    rng = np.random.default_rng(2)
    a = _specials(rng.standard_normal((9, 12)).astype(np.float32))
    b = rng.standard_normal((12, 8)).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float32)
    other = rng.standard_normal(8).astype(np.float32)

    def build(ap):
        cb, co = ff.constant(bias), ff.constant(other)
        head = ff.fused.matmul(ap, ff.constant(b), bias=cb, activation="tanh")
        return [ff.sigmoid(head * cb - co)]     # the head's bias again, and a new operand

    (want,), ops, report = _run(build, [a], TUNINGS[tuning])
    assert not any(op.startswith("fused(") for op in ops), (ops, report)
    assert np.isnan(want).any() and np.isfinite(want).any()


@pytest.mark.parametrize("readers", ["fetched", "two_results", "diamond"])
def test_a_result_read_twice_or_fetched_stays_a_kernel_unless_its_readers_close(gl,
                                                                               readers):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 6, 6, 4)).astype(np.float32)
    w = rng.standard_normal((3, 3, 4, 4)).astype(np.float32)

    def build(xp):
        head = ff.fused.conv2d(xp, ff.constant(w), padding="SAME", activation="relu")
        return {"fetched": lambda: [ff.exp(head), head],
                "two_results": lambda: [ff.exp(head), ff.square(head)],
                "diamond": lambda: [ff.exp(head) + ff.square(head)]}[readers]()

    _, ops, report = _run(build, [x])
    assert ops.count("fused_conv2d") == 1, (ops, report)
    if readers == "diamond":
        # its two readers close on one add within MAX_STEPS (GELU's shape): one kernel
        assert ops == ["fused_conv2d"], (ops, report)
    else:
        assert len(ops) >= 2, (ops, report)
    if readers == "two_results":
        assert any("has 2 consumers" in line for line in report), report


def test_the_stitch_reads_no_more_textures_than_the_limit(gl):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 5, 5, 4)).astype(np.float32)
    w = rng.standard_normal((1, 1, 4, 4)).astype(np.float32)
    adds = [rng.standard_normal((1, 5, 5, 4)).astype(np.float32) for _ in range(9)]

    def build(xp, *more):
        y = ff.fused.conv2d(xp, ff.constant(w), bias=ff.constant(np.ones(4, np.float32)),
                            activation="prelu", alpha=ff.constant(np.full(4, 0.1,
                                                                          np.float32)))
        for m in more:
            y = y + m
        return [y]

    _, ops, report = _run(build, [x, *adds], BLOCKED)
    g = ff.Graph()
    with g.as_default():
        feeds = [ff.placeholder(a.shape) for a in [x, *adds]]
        (y,) = build(*feeds)
    compiled, _ = prune(g, [y.value], {f.value: f.value.type for f in feeds})
    manager = PassManager(passes=["fuse_epilogues"], max_texture_units=16)
    after = manager.run(compiled)
    (fused,) = [n for n in after.nodes if n.op == "fused_conv"]
    # the stitch: 8 targets, then the head's bias and alpha and the adds' operands
    assert len(set(fused.inputs[2:])) == 16 - 8, fused.inputs
    assert any("more than the 16" in line for line in manager.fusion_report), \
        manager.fusion_report
