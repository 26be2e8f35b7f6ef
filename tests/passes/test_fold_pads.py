"""passes/pad_folding.py folds a constant pad before a convolution (zeros) or a max /
min pool (-inf / +inf) into the window's explicit padding, and keeps it (saying why)
where the result would change. Each case: the graph as built on the numpy executor
(np.pad, then the op's reference) against the pass alone on the numpy executor and
against GL with the whole pipeline, on every conv kernel path the Tuning picks (direct,
generic loops, blocked, im2col + packed matmul), and finite cases against torch in
float64. Edge values: NaN and inf in the image, a NaN weight (0 * NaN at a padded tap
is NaN, folded or not), negatives, asymmetric pads, odd sizes, strides, dilations,
SAME, a batch of unknown size."""
import math

import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.ops.common import apply
from fragflow.passes import PassManager, prune
from tests.reference import assert_matches

torch = pytest.importorskip("torch")

TUNINGS = {
    "default": None,
    "generic": ff.Tuning().with_({"conv.direct_max_taps": 0,
                                  "conv.depthwise_direct_max_taps": 0,
                                  "conv.blocked_depthwise_taps": 0}),
    "blocked": ff.Tuning().with_({"matmul.blocked_min_macs": 1, "conv.direct_max_macs": 0,
                                  "conv.depthwise_direct_max_taps": 0}),
    "packed": ff.Tuning().with_({"matmul.blocked_min_macs": 1, "conv.direct_max_macs": 0,
                                 "conv.packed_min_input": 1, "matmul.packed_min_macs": 1}),
}


def _image(rng, shape, specials=True):
    x = rng.standard_normal(shape).astype(np.float32) * 3
    if specials:
        x[0, 0, 0, 0] = np.nan
        x[-1, -1, -1, -1] = np.inf
        x[0, -1, 0, -1] = -np.inf
    return x


def _graph(x_shape, build, unknown_batch=False):
    g = ff.Graph()
    with g.as_default():
        shape = (None,) + tuple(x_shape[1:]) if unknown_batch else x_shape
        xp = ff.placeholder(shape, name="x")
        y = build(xp)
    return g, xp, y


def _fold_report(g, xp, y, x):
    """(the ops after fold_pads alone, its report)."""
    compiled, _ = prune(g, [y.value], {xp.value: ff.TensorType(x.shape, "float32")})
    manager = PassManager(passes=["fold_pads"])
    after = manager.run(compiled)
    return [n.op for n in after.nodes], manager.log[0][3]


def _check(build, x, tuning=None, folds=True, unknown_batch=False):
    """GL (all passes) and the numpy executor with fold_pads alone against the graph as
    built; whether the pad folded (no pad kernel) or stayed."""
    g, xp, y = _graph(x.shape, build, unknown_batch)
    want = ff.Session(g, backend="numpy", passes=[]).run(y, {xp: x})
    alone = ff.Session(g, backend="numpy", passes=["fold_pads"]).run(y, {xp: x})
    with ff.Session(g, tuning=tuning) as sess:
        fn = sess.compile([y], feeds=[xp])
        (got,) = fn(x)
        ops = [k.op for k in fn.kernels]
    ops_after, report = _fold_report(g, xp, y, x)
    assert ("pad" not in ops_after) == folds, (ops_after, report)
    assert ("pad" not in ops) == folds, ops
    scale = 1 + float(np.max(np.abs(want[np.isfinite(want)]), initial=0))
    assert_matches(alone, want, rtol=1e-5, atol=1e-5 * scale)
    assert_matches(got, want, rtol=1e-4, atol=1e-4 * scale)
    return want, report


def _torch_conv(x, w, pads, strides, dilations, depthwise=False):
    """float64 conv of the zero-padded x (pads: ((top, bottom), (left, right)))."""
    xt = torch.from_numpy(x.astype(np.float64)).permute(0, 3, 1, 2)
    (top, bottom), (left, right) = pads
    xt = torch.nn.functional.pad(xt, (left, right, top, bottom))
    if depthwise:
        kh, kw, c, m = w.shape
        wt = torch.from_numpy(w.astype(np.float64)).permute(2, 3, 0, 1).reshape(c * m, 1,
                                                                                kh, kw)
        groups = c
    else:
        wt = torch.from_numpy(w.astype(np.float64)).permute(3, 2, 0, 1)
        groups = 1
    y = torch.nn.functional.conv2d(xt, wt, stride=strides, dilation=dilations,
                                   groups=groups)
    return y.permute(0, 2, 3, 1).numpy()


CONVS = [
    # (x shape, filter shape, pad, strides, padding, dilations, depthwise)
    ((2, 9, 7, 3), (3, 3, 3, 8), ((0, 1), (0, 1)), 2, "VALID", 1, False),
    ((1, 6, 5, 8), (3, 3, 8, 4), ((2, 1), (0, 3)), 1, "SAME", 2, False),
    ((1, 7, 6, 5), (2, 3, 5, 6), ((1, 0), (2, 2)), (2, 1), ((1, 0), (0, 2)), 1, False),
    ((2, 9, 10, 4), (3, 3, 4, 1), ((1, 2), (1, 2)), 2, "VALID", 1, True),
    ((1, 6, 7, 3), (5, 5, 3, 2), ((2, 2), (2, 2)), 1, "SAME", 1, True),
]


@pytest.mark.parametrize("tuning", list(TUNINGS))
@pytest.mark.parametrize("case", range(len(CONVS)))
def test_convolutions_read_the_image_with_the_pad_as_their_padding(gl, case, tuning):
    x_shape, w_shape, pads, strides, padding, dilations, depthwise = CONVS[case]
    rng = np.random.default_rng(case)
    x = _image(rng, x_shape)
    w = rng.standard_normal(w_shape).astype(np.float32)
    w[0, 0, 0, -1] = np.nan     # 0 * NaN at the pad: that channel's border is NaN
    conv = ff.depthwise_conv2d if depthwise else ff.conv2d

    def build(xp):
        padded = ff.pad(xp, ((0, 0),) + pads + ((0, 0),))
        return ff.relu(conv(padded, ff.constant(w), strides=strides, padding=padding,
                            dilations=dilations)) * 2.0

    want, report = _check(build, x, TUNINGS[tuning])
    assert len(report) == 1 and report[0].startswith("folded pad"), report
    assert np.isnan(want).any() and np.isfinite(want).any()


@pytest.mark.parametrize("case", range(len(CONVS)))
def test_folded_convolutions_match_torch_in_float64(gl, case):
    x_shape, w_shape, pads, strides, padding, dilations, depthwise = CONVS[case]
    rng = np.random.default_rng(10 + case)
    x = -np.abs(_image(rng, x_shape, specials=False))      # negatives only
    w = rng.standard_normal(w_shape).astype(np.float32)
    conv = ff.depthwise_conv2d if depthwise else ff.conv2d
    g, xp, y = _graph(x.shape, lambda xp: conv(ff.pad(xp, ((0, 0),) + pads + ((0, 0),)),
                                               ff.constant(w), strides=strides,
                                               padding=padding, dilations=dilations))
    got = ff.Session(g).run(y, {xp: x})
    # the whole padding in float64: the pad, then the conv's own (SAME worked out on
    # the padded size, as TensorFlow does)
    size = [n + b + a for n, (b, a) in zip(x.shape[1:3], pads)]
    strides2 = (strides,) * 2 if isinstance(strides, int) else strides
    dil2 = (dilations,) * 2 if isinstance(dilations, int) else dilations
    if padding == "SAME":
        own = []
        for n, k, s, r in zip(size, w_shape[:2], strides2, dil2):
            total = max((math.ceil(n / s) - 1) * s + (k - 1) * r + 1 - n, 0)
            own.append((total // 2, total - total // 2))
    elif padding == "VALID":
        own = [(0, 0), (0, 0)]
    else:
        own = padding
    whole = [(p[0] + o[0], p[1] + o[1]) for p, o in zip(pads, own)]
    want = _torch_conv(x, w, whole, strides2, dil2, depthwise)
    assert got.shape == want.shape
    assert_matches(got, want.astype(np.float32), rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_a_fused_convolution_folds_and_a_batch_of_unknown_size_stays_unknown(gl):
    rng = np.random.default_rng(3)
    x = _image(rng, (3, 8, 6, 4))
    w = rng.standard_normal((3, 3, 4, 8)).astype(np.float32)
    bias = rng.standard_normal(8).astype(np.float32)

    def build(xp):
        padded = ff.pad(xp, ((0, 0), (0, 1), (1, 0), (0, 0)))
        return ff.fused.conv2d(padded, ff.constant(w), strides=2, padding="VALID",
                               bias=ff.constant(bias), activation="relu6")

    g, xp, y = _graph(x.shape, build, unknown_batch=True)
    assert y.shape[0] is None
    _, report = _check(build, x, unknown_batch=True)
    assert len(report) == 1 and report[0].startswith("folded pad") and \
        report[0].endswith("padding [(0, 1), (1, 0)]"), report


@pytest.mark.parametrize("op, value", [("max_pool", -np.inf), ("min_pool", np.inf)])
@pytest.mark.parametrize("pads, ksize, strides, padding", [
    (((0, 1), (0, 1)), 2, 2, "VALID"),
    (((1, 0), (1, 0)), 3, (2, 1), "SAME"),
    (((1, 1), (0, 1)), (3, 2), 1, ((1, 0), (0, 0))),
])
def test_max_and_min_pools_fold_a_pad_of_infinities(gl, op, value, pads, ksize, strides,
                                                    padding):
    rng = np.random.default_rng(4)
    x = _image(rng, (2, 7, 9, 6))
    x[1, :, :, 2] = -value            # a channel of the pad's opposite infinity
    pool = ff.nn.max_pool2d if op == "max_pool" else ff.min_pool

    def build(xp):
        return pool(ff.pad(xp, ((0, 0),) + pads + ((0, 0),), constant_values=value),
                    ksize, strides, padding)

    want, report = _check(build, x)
    assert report[0].startswith("folded pad"), report
    assert np.isnan(want).any() and np.isinf(want).any()


def _skip_conv(xp, w):
    return ff.Tensor(apply("conv2d", [xp.value, w.value],
                           {"strides": 1, "padding": "VALID", "dilations": 1,
                            "padding_taps": "skip"}))


KEPT = {
    "avg_pool counts the pad": (
        lambda xp: ff.nn.avg_pool2d(ff.pad(xp, ((0, 0), (1, 1), (1, 1), (0, 0))), 2, 2),
        "avg_pool averages"),
    "a pad of ones": (
        lambda xp: ff.conv2d(ff.pad(xp, ((0, 0), (1, 1), (1, 1), (0, 0)),
                                    constant_values=1.0), ff.ones((3, 3, 5, 4))),
        "its value is 1.0"),
    "a pad of -0.0": (
        lambda xp: ff.conv2d(ff.pad(xp, ((0, 0), (1, 1), (1, 1), (0, 0)),
                                    constant_values=-0.0), ff.ones((3, 3, 5, 4))),
        "its value is -0.0"),
    "channels padded": (
        lambda xp: ff.conv2d(ff.pad(xp, ((0, 0), (1, 1), (1, 1), (0, 3))),
                             ff.ones((3, 3, 8, 4))),
        "batch or channel axis"),
    "a zero pad before max_pool": (
        lambda xp: ff.nn.max_pool2d(ff.pad(xp, ((0, 0), (0, 1), (0, 1), (0, 0))), 2, 2),
        "would pick the pad's 0.0"),
    "pool padding as wide as its window": (
        lambda xp: ff.nn.max_pool2d(ff.pad(xp, ((0, 0), (2, 0), (0, 0), (0, 0)),
                                           constant_values=-np.inf), 2, 1),
        "not smaller than its window"),
    "padding taps skipped": (
        lambda xp: _skip_conv(ff.pad(xp, ((0, 0), (1, 1), (1, 1), (0, 0))),
                              ff.constant(np.full((3, 3, 5, 4), np.nan, np.float32))),
        "padding_taps 'skip'"),
}


@pytest.mark.parametrize("case", list(KEPT))
def test_pads_that_would_change_the_result_stay_and_say_why(gl, case):
    build, why = KEPT[case]
    x = _image(np.random.default_rng(5), (2, 6, 7, 5))
    _, report = _check(build, x, folds=False)
    assert len(report) == 1 and report[0].startswith("kept pad") and why in report[0], \
        report


def test_same_over_an_unknown_spatial_size_keeps_the_pad():
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((1, None, None, 4), name="x")
        y = ff.conv2d(ff.pad(xp, ((0, 0), (1, 0), (1, 0), (0, 0))), ff.ones((3, 3, 4, 4)),
                      padding="SAME")
    compiled, _ = prune(g, [y.value], {xp.value: xp.value.type})
    manager = PassManager(passes=["fold_pads"])
    after = manager.run(compiled)
    assert "pad" in [n.op for n in after.nodes]
    assert "unknown spatial size" in manager.log[0][3][0], manager.log


def test_a_pad_read_elsewhere_stays_for_that_reader(gl):
    x = _image(np.random.default_rng(6), (1, 6, 6, 4))
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        padded = ff.pad(xp, ((0, 0), (1, 1), (1, 1), (0, 0)))
        y = ff.conv2d(padded, ff.ones((3, 3, 4, 4)), strides=2)
        z = ff.reduce_sum(padded)
    want = ff.Session(g, backend="numpy", passes=[]).run([y, z], {xp: x})
    with ff.Session(g) as sess:
        fn = sess.compile([y, z], feeds=[xp])
        got = fn(x)
        kernels = fn.kernels
    conv = [k for k in kernels if "conv" in k.op]
    assert conv and all("pad" not in [b.value for b in k.inputs] for k in conv)
    assert "pad" in [k.op for k in kernels]
    for a, e in zip(got, want):
        assert_matches(a, e, rtol=1e-5, atol=1e-4)
