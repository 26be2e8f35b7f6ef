"""passes/conv_lowering.py computes a strided conv2d_backprop_input (a transposed
convolution) as one conv2d of its s * s phases, the phases as channels, then an
interleave (depth_to_space) and a crop; s * s conv2d and a concat where the filter's
size is not a multiple of the stride. Pointwise ops after it with per-channel
constants move before the interleave, where fold_batch_norm and fuse_epilogues take
them into the convolution. Checked against a float64 scatter formula (each product
dy[o] * w[t] added at o * s + t - pad: no product, no term), against torch's
conv_transpose2d, the pass's graph before against after, on GL and the numpy executor."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.passes import PassManager, prune
from fragflow.runtime.numpy_executor import NumpyPlan, NumpyVariables
from tests.reference import assert_matches


def scatter_reference(dy, w, size, strides, pads):
    """float64 transposed convolution: dx[n, o*s + t - pad, ci] += dy[n, o, co] *
    w[t, ci, co] for every o and tap t landing inside size."""
    dy, w = dy.astype(np.float64), w.astype(np.float64)
    n, ho, wo, _ = dy.shape
    kh, kw, c, _ = w.shape
    (sh, sw), ((ph, _), (pw, _)) = strides, pads
    dx = np.zeros((n,) + tuple(size) + (c,))
    for th in range(kh):
        for tw in range(kw):
            with np.errstate(invalid="ignore"):
                prod = np.einsum("nhwo,co->nhwc", dy, w[th, tw])
            for oh in range(ho):
                i = oh * sh + th - ph
                if not 0 <= i < size[0]:
                    continue
                for ow in range(wo):
                    j = ow * sw + tw - pw
                    if 0 <= j < size[1]:
                        dx[:, i, j] += prod[:, oh, ow]
    return dx


def _pads(size, w_shape, strides, padding, dy_hw):
    """(before, after) per axis as TensorFlow resolves padding for conv2d."""
    if not isinstance(padding, str):
        return tuple(padding)
    if padding == "VALID":
        return ((0, 0), (0, 0))
    out = []
    for n, k, s, o in zip(size, w_shape[:2], strides, dy_hw):
        total = max((o - 1) * s + k - n, 0)
        out.append((total // 2, total - total // 2))
    return tuple(out)


def _graph(x_shape, w, strides, padding, tail=None):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x_shape, name="x")
        y = ff.conv2d(xp, ff.constant(w), strides, padding)
        dy = ff.placeholder(tuple(y.shape), name="dy")
        dx = ff.conv2d_transpose(dy, ff.constant(w), x_shape, strides, padding)
        out = dx if tail is None else tail(dx)
    return g, dy, out


def _kernel_ops(g, fetch, feeds, tuning=None):
    with ff.Session(g, tuning=tuning) as sess:
        return [k.op for k in sess.compile([fetch], feeds=list(feeds)).kernels]


CASES = [   # (x_shape, filter HW, strides, padding)
    ((2, 7, 9, 3), (2, 2), 2, "SAME"),
    ((1, 8, 8, 5), (4, 4), 2, "SAME"),
    ((2, 9, 7, 3), (3, 3), 2, "SAME"),
    ((1, 9, 10, 2), (5, 3), 2, "VALID"),
    ((2, 11, 8, 3), (3, 5), 3, "SAME"),
    ((1, 10, 9, 6), (4, 2), 2, ((1, 2), (0, 1))),
    ((1, 13, 11, 3), (3, 3), 3, "VALID"),
    ((2, 8, 8, 4), (4, 5), 2, ((2, 2), (1, 3))),
]


@pytest.mark.parametrize("x_shape, k, strides, padding", CASES)
def test_strided_transposed_conv_matches_the_scatter_formula(gl, x_shape, k, strides,
                                                             padding):
    rng = np.random.default_rng(sum(x_shape) + sum(k) + strides)
    w = rng.standard_normal(k + (x_shape[-1], 7)).astype(np.float32)
    w[0, 1, 0, 2] = np.nan                 # reaches only the outputs of its phase
    w[-1, 0, -1, 0] = -np.inf
    g, dy, dx = _graph(x_shape, w, strides, padding)
    dyv = rng.standard_normal(tuple(dy.shape)).astype(np.float32)
    dyv[0, 0, 0] = -dyv[0, 0, 0] * 1e3
    dyv[0, 1, 1] = 0.0
    s = (strides, strides)
    want = scatter_reference(dyv, w, x_shape[1:3], s,
                             _pads(x_shape[1:3], w.shape, s, padding, dy.shape[1:3]))
    assert np.isnan(want).any() and np.isfinite(want).any()
    scale = 1e-5 * (1 + np.abs(want[np.isfinite(want)]).max())
    for backend in ("numpy", "gl"):
        got = ff.Session(g, backend=backend).run(dx, {dy: dyv})
        assert_matches(got, want.astype(np.float32), rtol=1e-5, atol=scale, what=backend)
    assert "conv2d_backprop_input" not in _kernel_ops(g, dx, [dy])


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_matches_torch_conv_transpose2d(gl, padding):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x_shape, w = (3, 10, 10, 5), rng.standard_normal((4, 4, 5, 6)).astype(np.float32)
    g, dy, dx = _graph(x_shape, w, 2, padding)
    dyv = rng.standard_normal(tuple(dy.shape)).astype(np.float32)
    # torch: NCHW, weight (in = dy's channels, out = dx's), symmetric padding
    pad = 1 if padding == "SAME" else 0
    full = torch.nn.functional.conv_transpose2d(
        torch.from_numpy(dyv.transpose(0, 3, 1, 2)).double(),
        torch.from_numpy(w.transpose(3, 2, 0, 1)).double(), stride=2, padding=pad)
    want = full.numpy().transpose(0, 2, 3, 1)[:, :10, :10]
    got = ff.Session(g).run(dx, {dy: dyv})
    assert_matches(got, want.astype(np.float32), rtol=1e-5, atol=1e-4)


def test_the_graph_after_the_pass_computes_what_the_graph_before_does():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((3, 4, 3, 5)).astype(np.float32)
    bias = rng.standard_normal(3).astype(np.float32)
    g, dy, out = _graph((2, 9, 8, 3), w, 2, "SAME",
                        lambda dx: ff.relu(dx * 2.5 + ff.constant(bias)))
    compiled, _ = prune(g, [out.value], {dy.value: dy.value.type})
    manager = PassManager(passes=["conv_backprop_as_conv"], tuning=ff.Tuning())
    after = manager.run(compiled)
    ops = [n.op for n in after.nodes]
    assert "conv2d_backprop_input" not in ops and ops.count("conv2d") == 4, ops   # k 3: 2 x 2
    assert ops.count("transpose") == 1 and ops.count("relu") == 1, ops
    dyv = rng.standard_normal(tuple(dy.shape)).astype(np.float32)
    before_out, = NumpyPlan(compiled, NumpyVariables()).run({"dy": dyv})
    after_out, = NumpyPlan(after, NumpyVariables()).run({"dy": dyv})
    assert_matches(after_out, before_out, rtol=1e-5, atol=1e-5)


def test_bias_and_activation_fuse_into_the_phase_convolution(gl):
    rng = np.random.default_rng(2)
    w = rng.standard_normal((2, 2, 6, 8)).astype(np.float32)
    bias = rng.standard_normal(6).astype(np.float32)
    g, dy, out = _graph((1, 8, 10, 6), w, 2, "SAME",
                        lambda dx: ff.relu(dx + ff.constant(bias)) * 0.5)
    dyv = rng.standard_normal(tuple(dy.shape)).astype(np.float32)
    want = ff.Session(g, backend="numpy", passes=[]).run(out, {dy: dyv})
    ops = _kernel_ops(g, out, [dy])
    # one convolution with its epilogue and one interleave: nothing elementwise after it
    assert "transpose" in ops and not any(op.startswith("fused(") for op in ops), ops
    assert "conv2d_backprop_input" not in ops, ops
    assert_matches(ff.Session(g).run(out, {dy: dyv}), want, rtol=1e-5, atol=1e-5)


def test_a_scale_stays_out_of_a_constant_filter(gl):
    """A per-channel scale right after the phases is not folded into their filter: the
    filter keeps the values it came with (an export stores float16 weights as half)."""
    rng = np.random.default_rng(8)
    w = rng.standard_normal((4, 4, 3, 8)).astype(np.float16).astype(np.float32)
    scale = rng.uniform(0.5, 2, 3).astype(np.float32)
    g, dy, out = _graph((1, 8, 10, 3), w, 2, "SAME",
                        lambda dx: ff.relu(dx * ff.constant(scale) + 1.0))
    compiled, _ = prune(g, [out.value], {dy.value: dy.value.type})
    after = PassManager(tuning=ff.Tuning()).run(compiled)
    filters = [n.attrs["value"] for n in after.nodes
               if n.op == "constant" and n.attrs["value"].size == w.size]
    assert len(filters) == 1 and np.array_equal(np.sort(filters[0], axis=None),
                                                np.sort(w, axis=None))
    dyv = rng.standard_normal(tuple(dy.shape)).astype(np.float32)
    want = ff.Session(g, backend="numpy", passes=[]).run(out, {dy: dyv})
    ops = _kernel_ops(g, out, [dy])
    assert "fused(mul,add,relu)" in ops and "conv2d_backprop_input" not in ops, ops
    assert_matches(ff.Session(g).run(out, {dy: dyv}), want, rtol=1e-5, atol=1e-5)


def test_transposed_convs_sharing_a_filter_share_its_phase_filter():
    w = np.arange(4 * 4 * 3 * 3, dtype=np.float32).reshape(4, 4, 3, 3)
    g = ff.Graph()
    with g.as_default():
        dy = ff.placeholder((1, 3, 3, 3), name="dy")
        up = ff.conv2d_transpose(dy, ff.constant(w), (1, 6, 6, 3), 2, "SAME")
        out = ff.conv2d_transpose(up, ff.constant(w), (1, 12, 12, 3), 2, "SAME")
    compiled, _ = prune(g, [out.value], {dy.value: dy.value.type})
    compiled = PassManager(passes=["cse", "conv_backprop_as_conv"],
                           tuning=ff.Tuning()).run(compiled)
    assert [n.op for n in compiled.nodes].count("conv2d") == 2
    assert sum(n.op == "constant" and n.attrs["value"].size == w.size
               for n in compiled.nodes) == 1


def test_a_fetched_transposed_conv_keeps_its_readers_after_the_interleave(gl):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 4, 3, 4)).astype(np.float32)
    g, dy, out = _graph((2, 8, 6, 3), w, 2, "SAME", lambda dx: (dx, ff.relu(dx + 1.0)))
    dyv = rng.standard_normal(tuple(dy.shape)).astype(np.float32)
    want = ff.Session(g, backend="numpy", passes=[]).run(list(out), {dy: dyv})
    got = ff.Session(g).run(list(out), {dy: dyv})
    for a, b in zip(got, want):
        assert_matches(a, b, rtol=1e-5, atol=1e-5)


def test_a_variable_filter_is_split_by_one_gather(gl):
    rng = np.random.default_rng(4)
    w = rng.standard_normal((3, 3, 5, 2)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        wp = ff.placeholder(w.shape, name="w")
        dy = ff.placeholder((2, 4, 5, 2), name="dy")
        dx = ff.conv2d_transpose(dy, wp, (2, 7, 9, 5), 2, "SAME")
    dyv = rng.standard_normal(tuple(dy.shape)).astype(np.float32)
    feeds = {dy: dyv, wp: w}
    want = ff.Session(g, backend="numpy", passes=[]).run(dx, feeds)
    ops = _kernel_ops(g, dx, feeds)
    assert ops.count("gather") == 4 and "conv2d_backprop_input" not in ops, ops
    assert_matches(ff.Session(g).run(dx, feeds), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("strides, k, why", [
    ((2, 1), (3, 3), "strides [2, 1] differ"),
    ((3, 3), (2, 4), "phases without taps"),
])
def test_what_the_phases_cannot_take_keeps_the_gather_kernel(gl, strides, k, why):
    rng = np.random.default_rng(6)
    w = rng.standard_normal(k + (3, 2)).astype(np.float32)
    g, dy, dx = _graph((1, 9, 8, 3), w, strides, "SAME")
    dyv = rng.standard_normal(tuple(dy.shape)).astype(np.float32)
    compiled, _ = prune(g, [dx.value], {dy.value: dy.value.type})
    manager = PassManager(passes=["conv_backprop_as_conv"], tuning=ff.Tuning())
    manager.run(compiled)
    assert any(why in line for _, _, _, lines in manager.log for line in lines)
    assert "conv2d_backprop_input" in _kernel_ops(g, dx, [dy])
    want = ff.Session(g, backend="numpy", passes=[]).run(dx, {dy: dyv})
    assert_matches(ff.Session(g).run(dx, {dy: dyv}), want, rtol=1e-5, atol=1e-5)


def test_the_knob_off_keeps_the_gather_kernel(gl):
    w = np.ones((2, 2, 3, 4), np.float32)
    g, dy, dx = _graph((1, 8, 8, 3), w, 2, "SAME")
    off = ff.Tuning().with_({"conv.backprop_phases": False})
    assert "conv2d_backprop_input" in _kernel_ops(g, dx, [dy], tuning=off)
    assert "conv2d_backprop_input" not in _kernel_ops(g, dx, [dy])


def test_gradients_through_a_strided_transposed_conv_are_unchanged(gl):
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((4, 4, 3, 5)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        dy = ff.placeholder((2, 4, 3, 5), name="dy")
        wp = ff.placeholder(w0.shape, name="w")
        dx = ff.conv2d_transpose(dy, wp, (2, 8, 6, 3), 2, "SAME")
        loss = ff.reduce_sum(ff.square(dx) * ff.constant(
            rng.standard_normal((8, 6, 3)).astype(np.float32)))
        grads = ff.gradients(loss, [dy, wp])
    feeds = {dy: rng.standard_normal((2, 4, 3, 5)).astype(np.float32), wp: w0}
    want = ff.Session(g, backend="numpy", passes=[]).run(grads, feeds)
    for backend in ("numpy", "gl"):
        got = ff.Session(g, backend=backend).run(grads, feeds)
        for a, b in zip(got, want):
            assert_matches(a, b, rtol=1e-4, atol=1e-3 * (1 + np.abs(b).max()), what=backend)
