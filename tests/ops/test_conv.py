"""The conv family on GL against the numpy reference executor, and the references (and
the composites conv1d, separable_conv2d, conv2d_transpose) against brute-force loops.

Sums of products are held to 1e-4 relative with atol 1e-4 * (the same op on |inputs|),
the sum of |terms|: cancellation can make a result tiny. Each test builds one graph of
many fetches: every kernel is a shader llvmpipe compiles (~100-300 ms).

The shapes hit each kernel path (codegen/conv.py): conv's vec4 path (C_out % 4 == 0),
its texel-input path (C_in % 4 == 0 too) and scalar lanes; depthwise with multiplier 1
and C % 4 == 0, multiplier % 4 == 0 and scalar; conv2d_backprop_filter's vec4 and scalar
paths; and loops that exceed llvmpipe's 65535 iterations unless unrolled.
"""
import itertools
import os

import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, run_both

RTOL = 1e-4


# -- brute-force numpy formulas (loops over output positions; independent of ir/ops) ----
def same_pads(size, k, s, r):
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * r + 1 - size, 0)
    return total // 2, total - total // 2


def brute_pads(x_shape, ksize, strides, dilations, padding):
    if padding == "VALID":
        return [(0, 0)] * len(ksize)
    if padding == "SAME":
        return [same_pads(n, k, s, r) for n, k, s, r in
                zip(x_shape[1:-1], ksize, strides, dilations)]
    return [tuple(p) for p in padding]


def brute_windows(x, ksize, strides, dilations, padding, fill):
    """{output position: [(tap, value or fill)]} for an NHWC / NDHWC x."""
    pads = brute_pads(x.shape, ksize, strides, dilations, padding)
    spatial = x.shape[1:-1]
    outs = [(n + b + a - (k - 1) * r - 1) // s + 1 for n, (b, a), k, s, r in
            zip(spatial, pads, ksize, strides, dilations)]
    result = {}
    for o in itertools.product(*map(range, outs)):
        taps = []
        for k in itertools.product(*map(range, ksize)):
            pos = [oi * s - b + ki * r for oi, s, (b, _), ki, r in
                   zip(o, strides, pads, k, dilations)]
            inside = all(0 <= p < n for p, n in zip(pos, spatial))
            taps.append((k, x[(slice(None),) + tuple(pos)] if inside else fill))
        result[o] = taps
    return result, outs


def brute_conv(x, w, strides, padding, dilations):
    d = x.ndim - 2
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    wins, outs = brute_windows(x64, w.shape[:d], strides, dilations, padding, None)
    out = np.zeros((x.shape[0], *outs, w.shape[-1]))
    for o, taps in wins.items():
        for k, v in taps:
            if v is not None:
                out[(slice(None),) + o] += v @ w64[k]
    return out


def brute_depthwise(x, w, strides, padding, dilations):
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    wins, outs = brute_windows(x64, w.shape[:2], strides, dilations, padding, None)
    c, m = w.shape[2], w.shape[3]
    out = np.zeros((x.shape[0], *outs, c * m))
    for o, taps in wins.items():
        for k, v in taps:
            if v is not None:
                out[(slice(None),) + o] += (v[:, :, None] * w64[k]).reshape(-1, c * m)
    return out


def brute_pool(x, ksize, strides, padding, how):
    wins, outs = brute_windows(x.astype(np.float64), ksize, strides, (1,) * len(ksize),
                               padding, None)
    out = np.zeros((x.shape[0], *outs, x.shape[-1]))
    for o, taps in wins.items():
        vals = np.stack([v for _, v in taps if v is not None])
        out[(slice(None),) + o] = {"max": np.max, "min": np.min, "avg": np.mean}[how](
            vals, axis=0)
    return out


def brute_dilation(x, w, strides, padding, dilations):
    wins, outs = brute_windows(x.astype(np.float64), w.shape[:2], strides, dilations,
                               padding, None)
    out = np.zeros((x.shape[0], *outs, x.shape[-1]))
    for o, taps in wins.items():
        out[(slice(None),) + o] = np.max(np.stack([v + w[k] for k, v in taps
                                                   if v is not None]), axis=0)
    return out


def brute_conv_transpose(dy, w, out_shape, strides, padding):
    """Scatter form: each dy pixel adds dy @ w[k]^T at the input position it read."""
    ksize = w.shape[:2]
    pads = brute_pads(out_shape, ksize, strides, (1, 1), padding)
    dx = np.zeros(out_shape)
    for o in itertools.product(*map(range, dy.shape[1:3])):
        for k in itertools.product(*map(range, ksize)):
            pos = [oi * s - b + ki for oi, s, (b, _), ki in zip(o, strides, pads, k)]
            if all(0 <= p < n for p, n in zip(pos, out_shape[1:3])):
                dx[:, pos[0], pos[1]] += dy[:, o[0], o[1]].astype(np.float64) @ w[k].T
    return dx


# -- helpers ------------------------------------------------------------------------
class Case:
    """A graph of many fetches; checks GL against the numpy executor with atol scaled by
    the same graph run on |feeds| (the sum of |terms| for sums of products)."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.graph = ff.Graph()
        self.feeds, self.fetches = {}, {}

    def input(self, shape, values=None):
        values = self.rng.standard_normal(shape).astype(np.float32) if values is None \
            else np.asarray(values, np.float32)
        with self.graph.as_default():
            p = ff.placeholder(shape, name=f"in{len(self.feeds)}")
        self.feeds[p] = values
        return p

    def run(self, scaled=True):
        out, ref = run_both(self.graph, self.fetches, self.feeds)
        scales = {}
        if scaled:
            with ff.Session(self.graph, backend="numpy", passes=[]) as sess:
                scales = sess.run(self.fetches, {p: np.abs(v) for p, v in self.feeds.items()})
        for label in self.fetches:
            assert_matches(out[label], ref[label], rtol=RTOL, scale=scales.get(label),
                           what=label)
        return out, ref


def gradient_of(case, y, x):
    """d sum(y * r) / d x with a random r fed as grad_ys (a placeholder: a constant
    would be folded on the host), so that only the gradient op itself runs."""
    r = case.input(y.shape, case.rng.uniform(0.5, 1.5, y.shape))
    return ff.gradients([y], [x], grad_ys=[r])[0]


def kernel_ops(graph, fetches, feeds):
    fn = ff.Session(graph).compile(list(fetches), feeds=list(feeds))
    return {k.op for k in fn.kernels}


# -- convolutions ---------------------------------------------------------------------
CONV2D = [  # label: (x shape, w shape, strides, padding, dilations)
    ("7x7 stride 2 SAME, scalar lanes", (2, 7, 7, 3), (3, 3, 3, 5), 2, "SAME", 1),
    ("7x6 stride 2 VALID, vec4", (2, 7, 6, 3), (3, 2, 3, 8), 2, "VALID", 1),
    ("texel input path", (1, 5, 5, 4), (2, 2, 4, 8), 1, "SAME", 1),
    ("dilation 2, explicit pairs", (1, 8, 7, 3), (3, 3, 3, 4), 1, [[1, 2], [0, 1]], 2),
    ("full-rank explicit", (2, 5, 6, 2), (2, 3, 2, 3), [1, 2, 1, 1],
     [[0, 0], [1, 1], [2, 0], [0, 0]], 1),
    ("kernel bigger than input, SAME", (1, 3, 3, 2), (5, 5, 2, 3), 1, "SAME", 1),
    ("1x1 conv stride 2", (2, 5, 5, 6), (1, 1, 6, 4), 2, "VALID", 1),
    ("strides per axis [1, 3]", (1, 6, 10, 3), (2, 3, 3, 2), [1, 3], "SAME", 1),
]


def test_conv2d_matches_reference_and_brute_force(gl):
    case = Case(1)
    plain = {}
    with case.graph.as_default():
        for label, xs, ws, s, p, r in CONV2D:
            x, w = case.input(xs), case.input(ws)
            case.fetches[label] = ff.conv2d(x, w, strides=s, padding=p, dilations=r)
            plain[label] = (x, w, s, p, r)
    out, ref = case.run()
    for label, (x, w, s, p, r) in plain.items():
        s = (s, s) if isinstance(s, int) else tuple(s)[-3:-1] if len(s) == 4 else tuple(s)
        p = p if isinstance(p, str) else [tuple(q) for q in p][-3:-1] if len(p) == 4 else p
        want = brute_conv(case.feeds[x], case.feeds[w], s, p, (r, r))
        np.testing.assert_allclose(ref[label], want, rtol=1e-5, atol=1e-5, err_msg=label)


def test_conv2d_gradient_ops_and_conv3d(gl):
    """conv2d_backprop_input / conv2d_backprop_filter (both of its paths) and conv3d
    with conv3d_backprop_input / conv3d_backprop_filter, as ff.gradients builds them."""
    case = Case(2)
    plain = {}
    with case.graph.as_default():
        for label, xs, ws, s, p, r in CONV2D[:5]:
            x, w = case.input(xs), case.input(ws)
            y = ff.conv2d(x, w, strides=s, padding=p, dilations=r)
            case.fetches[f"conv2d_backprop_input: {label}"] = gradient_of(case, y, x)
            case.fetches[f"conv2d_backprop_filter: {label}"] = gradient_of(case, y, w)
        for label, xs, ws, s, p, r in [
                ("conv3d SAME strides", (2, 5, 4, 3, 2), (2, 3, 2, 2, 3), [2, 1, 2], "SAME", 1),
                ("conv3d vec4 dilated", (1, 5, 5, 4, 4), (2, 2, 2, 4, 4), 1, "VALID", 2)]:
            x, w = case.input(xs), case.input(ws)
            y = ff.conv3d(x, w, strides=s, padding=p, dilations=r)
            case.fetches[label] = y
            plain[label] = (case.feeds[x], case.feeds[w])
            case.fetches[f"conv3d_backprop_input: {label}"] = gradient_of(case, y, x)
            case.fetches[f"conv3d_backprop_filter: {label}"] = gradient_of(case, y, w)
    out, ref = case.run()
    assert {"conv2d_backprop_input", "conv2d_backprop_filter", "conv3d",
            "conv3d_backprop_input", "conv3d_backprop_filter"} <= kernel_ops(
                case.graph, case.fetches.values(), case.feeds)
    label = "conv3d SAME strides"
    x, w = plain[label]
    np.testing.assert_allclose(ref[label], brute_conv(x, w, (2, 1, 2), "SAME", (1, 1, 1)),
                               rtol=1e-5, atol=1e-5)


DEPTHWISE = [  # label: (x shape, w shape, strides, padding, dilations)
    ("multiplier 1, C % 4 == 0", (2, 6, 5, 4), (3, 3, 4, 1), 1, "SAME", 1),
    ("multiplier 4", (1, 7, 7, 3), (3, 3, 3, 4), 2, "SAME", 1),
    ("multiplier 2, dilated", (2, 7, 6, 3), (2, 3, 3, 2), 1, "VALID", 2),
    ("multiplier 3, strides [2, 3]", (1, 7, 8, 2), (3, 2, 2, 3), [2, 3], [[1, 1], [0, 2]], 1),
]


def test_depthwise_conv2d_and_its_gradient_ops(gl):
    case = Case(3)
    plain = []
    with case.graph.as_default():
        for label, xs, ws, s, p, r in DEPTHWISE:
            x, w = case.input(xs), case.input(ws)
            plain.append((case.feeds[x], case.feeds[w]))
            y = ff.depthwise_conv2d(x, w, strides=s, padding=p, dilations=r)
            case.fetches[label] = y
            case.fetches[f"depthwise_conv2d_backprop_input: {label}"] = gradient_of(case, y, x)
            case.fetches[f"depthwise_conv2d_backprop_filter: {label}"] = gradient_of(case, y, w)
    out, ref = case.run()
    for (label, _xs, _ws, s, p, r), (x, w) in zip(DEPTHWISE, plain):
        s = (s, s) if isinstance(s, int) else tuple(s)
        np.testing.assert_allclose(ref[label], brute_depthwise(x, w, s, p, (r, r)),
                                   rtol=1e-5, atol=1e-5, err_msg=label)


def test_composites_against_brute_force(gl):
    """conv1d (conv2d of height 1), separable_conv2d (depthwise then 1x1) and
    conv2d_transpose (conv2d_backprop_input) against loops written here."""
    case = Case(4)
    with case.graph.as_default():
        x1, w1 = case.input((2, 11, 3)), case.input((3, 3, 5))
        case.fetches["conv1d"] = ff.conv1d(x1, w1, stride=2, padding="SAME")
        case.fetches["conv1d dilated explicit"] = ff.conv1d(x1, w1, padding=[[2, 1]],
                                                             dilations=2)
        xs, dw, pw = case.input((1, 6, 6, 3)), case.input((3, 3, 3, 2)), \
            case.input((1, 1, 6, 4))
        case.fetches["separable_conv2d"] = ff.separable_conv2d(xs, dw, pw, strides=1,
                                                               padding="SAME")
        dy, wt = case.input((2, 4, 3, 5)), case.input((3, 3, 2, 5))
        case.fetches["conv2d_transpose"] = ff.conv2d_transpose(
            dy, wt, output_shape=[2, 7, 6, 2], strides=2, padding="SAME")
    out, ref = case.run()
    f = case.feeds
    x1v, w1v = f[x1], f[w1]
    want = brute_conv(x1v[:, None], w1v[None], (1, 2), "SAME", (1, 1))[:, 0]
    np.testing.assert_allclose(out["conv1d"], want, rtol=1e-4, atol=1e-4)
    want = brute_conv(x1v[:, None], w1v[None], (1, 1), [(0, 0), (2, 1)], (1, 2))[:, 0]
    np.testing.assert_allclose(out["conv1d dilated explicit"], want, rtol=1e-4, atol=1e-4)
    hidden = brute_depthwise(f[xs], f[dw], (1, 1), "SAME", (1, 1))
    want = brute_conv(hidden, f[pw].astype(np.float64), (1, 1), "VALID", (1, 1))
    np.testing.assert_allclose(out["separable_conv2d"], want, rtol=1e-4, atol=1e-4)
    want = brute_conv_transpose(f[dy], f[wt], (2, 7, 6, 2), (2, 2), "SAME")
    np.testing.assert_allclose(out["conv2d_transpose"], want, rtol=1e-4, atol=1e-4)


def test_long_sums_are_not_cut_short_by_llvmpipe(gl):
    """llvmpipe silently ends a fragment's loops after 65535 iterations in all: a 3x3
    conv over 2048 input channels with four scalar lanes would need 4 * 18432 if each
    lane looped alone; 8192 channels need the loop unrolled; and a filter gradient over
    a 256x256 image sums 65536 positions per output."""
    case = Case(5)
    with case.graph.as_default():
        x = case.input((1, 3, 3, 2048))
        case.fetches["conv2d 3x3 over 2048 channels, scalar lanes"] = ff.conv2d(
            x, case.input((3, 3, 2048, 3)), padding="SAME")
        x2 = case.input((1, 2, 2, 8192))
        case.fetches["conv2d 3x3 over 8192 channels, unrolled"] = ff.conv2d(
            x2, case.input((3, 3, 8192, 3)), padding="SAME")
        xb = case.input((1, 256, 256, 1))
        w = case.input((3, 3, 1, 4))
        case.fetches["conv2d_backprop_filter over 65536 positions"] = gradient_of(case,
            ff.conv2d(xb, w, padding="SAME"), w)
    case.run()


# -- pools and dilation2d -------------------------------------------------------------
POOLS = [  # label: (x shape, ksize, strides, padding)
    ("3x3 stride 2 SAME on 7x7", (2, 7, 7, 3), 3, 2, "SAME"),
    ("window bigger than input SAME", (1, 3, 2, 5), 4, 1, "SAME"),
    ("explicit pairs, full-rank 3x2 ksize", (2, 5, 6, 1), [1, 3, 2, 1], [1, 2, 1, 1],
     [[0, 0], [1, 2], [1, 0], [0, 0]]),
]


def distinct(rng, shape):
    """Values without ties (argmax ties are tested on their own)."""
    return (rng.permutation(int(np.prod(shape))).reshape(shape) * 0.37 - 5).astype(
        np.float32)


def test_pools_match_reference_and_brute_force(gl):
    case = Case(6)
    plain = []
    with case.graph.as_default():
        for label, xs, k, s, p in POOLS:
            x = case.input(xs, distinct(case.rng, xs))
            plain.append(case.feeds[x])
            for op in ("max_pool", "min_pool", "avg_pool"):
                y = getattr(ff, op)(x, ksize=k, strides=s, padding=p)
                case.fetches[f"{op}: {label}"] = y
                case.fetches[f"{op}_grad: {label}"] = gradient_of(case, y, x)
        # the second-order ops: a gather at the argmax of the gradient's own gradient
        for op in ("max_pool", "min_pool"):
            y = getattr(ff, op)(x, ksize=k, strides=s, padding=p)
            dx = gradient_of(case, ff.square(y), x)
            case.fetches[f"{op}_grad_grad: {label}"] = gradient_of(case, dx, x)
    out, ref = case.run()
    assert {"max_pool_grad", "min_pool_grad", "avg_pool_grad", "max_pool_grad_grad",
            "min_pool_grad_grad"} <= kernel_ops(
        case.graph, case.fetches.values(), case.feeds)
    for (label, _xs, k, s, p), x in zip(POOLS, plain):
        def two(v):
            v = (v, v) if isinstance(v, int) else tuple(v)
            return v[1:3] if len(v) == 4 else v
        pad = p if isinstance(p, str) else [tuple(q) for q in p][1:3]
        for how in ("max", "min", "avg"):
            np.testing.assert_allclose(ref[f"{how}_pool: {label}"],
                                       brute_pool(x, two(k), two(s), pad, how),
                                       rtol=1e-5, atol=1e-5, err_msg=label)


def test_max_pool_grad_routes_to_the_first_max_and_grad_grad_gathers_there(gl):
    """Ties: TensorFlow's max_pool_grad gives all of dy to the first maximum of the
    window; max_pool_grad_grad (the second-order op) reads there. NaN wins a window."""
    x_val = np.array([[1, 1, 0], [1, 1, 2], [np.nan, 3, 3]], np.float32)[None, :, :, None]
    dy_val = np.array([[10, 20], [30, 40]], np.float32)[None, :, :, None]
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(x_val.shape, name="x")
        dy = ff.placeholder(dy_val.shape, name="dy")
        y = ff.max_pool(x, 2, 1, "VALID")
        (dx,) = ff.gradients(y, [x], grad_ys=[dy])
        dx_var = ff.placeholder(x_val.shape, name="ddx")
        (gg,) = ff.gradients(ff.sum(dx * dx_var), [dy])     # max_pool_grad_grad
    ddx_val = np.arange(9, dtype=np.float32).reshape(x_val.shape)
    out, ref = run_both(g, {"y": y, "dx": dx, "gg": gg},
                        {x: x_val, dy: dy_val, dx_var: ddx_val})
    # window (0,0): 1 1 / 1 1 -> first (0,0) gets 10; window (0,1): 1 0 / 1 2 -> (1,2)
    # gets 20; window (1,0): 1 1 / NaN 3 -> NaN at (2,0) gets 30; window (1,1):
    # 1 2 / 3 3 -> first 3 at (2,1) gets 40
    expected_dx = np.array([[10, 0, 0], [0, 0, 20], [30, 40, 0]], np.float32)[None, :, :, None]
    for name in ("dx", "gg"):
        assert_matches(out[name], ref[name], what=name)
    assert_matches(out["dx"], expected_dx, what="max_pool_grad")
    assert_matches(out["gg"], ddx_val.reshape(-1)[[0, 5, 6, 7]].reshape(dy_val.shape),
                   what="max_pool_grad_grad")
    assert np.isnan(out["y"][0, 1, 0, 0])


def test_pool3d_and_dilation2d(gl):
    case = Case(8)
    with case.graph.as_default():
        v = case.input((2, 4, 5, 3, 2), distinct(case.rng, (2, 4, 5, 3, 2)))
        for label, k, s, p in [("2x2x2 stride 2 SAME", 2, 2, "SAME"),
                               ("[3, 2, 1] strides [1, 2, 1] VALID", [3, 2, 1], [1, 2, 1],
                                "VALID")]:
            for op in ("max_pool3d", "avg_pool3d"):
                y = getattr(ff, op)(v, ksize=k, strides=s, padding=p)
                case.fetches[f"{op}: {label}"] = y
                case.fetches[f"{op}_grad: {label}"] = gradient_of(case, y, v)
            y = ff.max_pool3d(v, ksize=k, strides=s, padding=p)
            dx = gradient_of(case, ff.square(y), v)
            case.fetches[f"max_pool3d_grad_grad: {label}"] = gradient_of(case, dx, v)
        x = case.input((2, 7, 6, 3), distinct(case.rng, (2, 7, 6, 3)))
        w = case.input((3, 2, 3), case.rng.uniform(-1, 1, (3, 2, 3)) * 0.01)
        for label, s, p, r in [("stride 2 SAME", 2, "SAME", 1),
                               ("dilations [2, 1] VALID", 1, "VALID", [2, 1])]:
            y = ff.dilation2d(x, w, strides=s, padding=p, dilations=r)
            case.fetches[f"dilation2d: {label}"] = y
            case.fetches[f"dilation2d_backprop_input: {label}"] = gradient_of(case, y, x)
            case.fetches[f"dilation2d_backprop_filter: {label}"] = gradient_of(case, y, w)
    out, ref = case.run()
    assert {"max_pool3d_grad", "max_pool3d_grad_grad", "avg_pool3d_grad",
            "dilation2d_backprop_input", "dilation2d_backprop_filter"} <= kernel_ops(
                case.graph, case.fetches.values(), case.feeds)
    xv, wv = case.feeds[x], case.feeds[w]
    np.testing.assert_allclose(ref["dilation2d: stride 2 SAME"],
                               brute_dilation(xv, wv, (2, 2), "SAME", (1, 1)), rtol=1e-6)
    np.testing.assert_allclose(ref["max_pool3d: 2x2x2 stride 2 SAME"],
                               brute_pool(case.feeds[v], (2, 2, 2), (2, 2, 2), "SAME", "max"))


def test_avg_pool_divides_by_the_real_elements_only(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 2, 2, 1))
        y = ff.avg_pool(x, 3, 1, "SAME")
    with ff.Session(g) as sess:
        got = sess.run(y, {x: np.array([1, 2, 3, 6], np.float32).reshape(1, 2, 2, 1)})
    np.testing.assert_allclose(got.reshape(-1), [3, 3, 3, 3])


# -- shapes and errors --------------------------------------------------------------------
def test_output_shapes_follow_tensorflow():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 7, 7, 3))
        w = ff.constant(np.zeros((3, 3, 3, 8), np.float32))
        assert ff.conv2d(x, w, strides=2, padding="SAME").shape == (None, 4, 4, 8)
        assert ff.conv2d(x, w, strides=2, padding="VALID").shape == (None, 3, 3, 8)
        assert ff.conv2d(x, w, padding="SAME", dilations=3).shape == (None, 7, 7, 8)
        assert ff.max_pool(x, 2, 2, "VALID").shape == (None, 3, 3, 3)
        assert ff.depthwise_conv2d(x, ff.constant(np.zeros((3, 3, 3, 2), np.float32)),
                                   padding="SAME").shape == (None, 7, 7, 6)


def test_errors_name_the_node_and_the_line():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 8, 8, 8))
        w = ff.constant(np.zeros((3, 3, 16, 4), np.float32))
        with ff.name_scope("block1"):
            with pytest.raises(ff.ShapeError) as err:
                ff.conv2d(x, w, name="conv2d_3")
        assert "conv2d 'block1/conv2d_3'" in str(err.value)
        assert "filter has 16 input channels but the input has 8" in str(err.value)
        assert f"{os.path.basename(__file__)}:" in str(err.value)
        good = ff.constant(np.zeros((3, 3, 8, 4), np.float32))
        assert ff.conv2d(x, good, padding="same").shape == (1, 8, 8, 4)   # any case (#15)
        with pytest.raises(ff.AttrError, match="padding 'full' is not one of 'SAME'"):
            ff.conv2d(x, good, padding="full")
        with pytest.raises(ff.AttrError, match="strides must be positive"):
            ff.conv2d(x, good, strides=0)
        with pytest.raises(ff.AttrError, match="strides must be positive"):
            ff.max_pool(x, 2, [1, 0])
        with pytest.raises(ff.ShapeError, match="the input must have rank 4"):
            ff.conv2d(ff.placeholder((8, 8, 8)), good)
        with pytest.raises(ff.ShapeError, match="the filter must have rank 5"):
            ff.conv3d(ff.placeholder((1, 4, 4, 4, 8)), good)
        with pytest.raises(ff.ShapeError, match="larger than the input"):
            ff.conv2d(ff.placeholder((1, 2, 2, 8)), good, padding="VALID")
        with pytest.raises(ff.DTypeError, match="int32"):
            ff.max_pool(ff.placeholder((1, 4, 4, 1), "int32"), 2, 2)
        with pytest.raises(ff.AttrError, match="batch and channel entries must be 1"):
            ff.conv2d(x, good, strides=[2, 1, 1, 1])
        with pytest.raises(ff.AttrError, match=r"explicit padding needs 2 \(before, after\)"):
            ff.conv2d(x, good, padding=[[1, 1]])
        with pytest.raises(ff.ShapeError, match="output_shape"):
            ff.conv2d_transpose(ff.placeholder((1, 4, 4, 4)), good, [1, 8, 8, 3], 2, "SAME")
