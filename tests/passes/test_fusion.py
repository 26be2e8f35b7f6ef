"""Fusion: the fused graph computes what the unfused one does (GL, forward and
gradients), in fewer kernels, and every rejected candidate says why."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.frontend.fused import ACTIVATIONS
from tests.reference import assert_matches

rng = np.random.default_rng(11)
UNFUSED = ["fold_constants", "cse", "simplify", "verify"]
PATTERNS = ["matmul", "conv2d", "depthwise_conv2d"]


def compile_both(g, fetches, feeds):
    """(fused fn, unfused fn), both compiled on GL and called once."""
    sess = ff.Session(g)
    fused = sess.compile(fetches, feeds=list(feeds))
    plain = sess.compile(fetches, feeds=list(feeds), passes=UNFUSED)
    return sess, fused, plain


def test_an_eight_op_elementwise_chain_is_one_kernel(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((37, 5), name="x")
        b = ff.placeholder((5,), name="b")
        y = ff.sigmoid(ff.tanh(ff.exp(-ff.abs(x * 2.0 + b)) - 0.5) * x) / (ff.square(b) + 1.0)
    xb = rng.standard_normal((37, 5)).astype(np.float32)
    bb = rng.standard_normal(5).astype(np.float32)
    sess, fused, plain = compile_both(g, [y], [x, b])
    with sess:
        (got,) = fused(xb, bb)
        (want,) = plain(xb, bb)
        assert len(fused.kernels) == 1 and len(plain.kernels) >= 8
        assert len(fused.kernels[0].nodes) >= 8
    assert_matches(got, want, rtol=1e-5)
    assert_matches(got, (1 / (1 + np.exp(-np.tanh(np.exp(-np.abs(xb * 2 + bb)) - 0.5) * xb)))
                   / (bb ** 2 + 1), rtol=1e-5)


def _activation(name, y, alpha):
    if name == "linear":
        return y
    if name == "prelu":
        return ff.prelu(y, alpha)
    if name == "leaky_relu":
        return ff.leaky_relu(y, alpha=0.1)
    return getattr(ff, name)(y)


SHAPES = {"matmul": ((6, 7), (7, 8), 8), "conv2d": ((2, 6, 5, 3), (3, 3, 3, 8), 8),
          "depthwise_conv2d": ((2, 6, 5, 4), (3, 3, 4, 2), 8)}


def _head(pattern, x, w):
    if pattern == "matmul":
        return ff.matmul(x, w)
    return getattr(ff, pattern)(x, w, strides=2, padding="SAME")


def _api(pattern, x, w, **kwargs):
    if pattern == "matmul":
        return ff.fused.matmul(x, w, **kwargs)
    return getattr(ff.fused, pattern)(x, w, strides=2, padding="SAME", **kwargs)


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_bias_activation_fuses_and_matches_unfused(pattern, activation, gl):
    x_shape, w_shape, channels = SHAPES[pattern]
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(x_shape, name="x")
        w = ff.placeholder(w_shape, name="w")
        b = ff.placeholder((channels,), name="b")
        alpha = ff.constant(rng.uniform(0.05, 0.3, channels).astype(np.float32),
                            name="alpha")
        pattern_out = _activation(activation, _head(pattern, x, w) + b, alpha)
        api = _api(pattern, x, w, bias=b, activation=activation,
                   alpha=0.1 if activation == "leaky_relu" else alpha)
        loss = ff.sum(pattern_out * pattern_out) + ff.sum(api * api)
        grads = ff.gradients(loss, [x, w, b])
    feeds = [rng.standard_normal(s).astype(np.float32) * 3
             for s in (x_shape, w_shape, (channels,))]
    pattern = pattern_out
    sess, fused, plain = compile_both(g, [pattern, api, *grads], [x, w, b])
    with sess:
        got = fused(*feeds)
        want = plain(*feeds)
        forward_only = sess.compile([pattern], feeds=[x, w, b])
        forward_only(*feeds)
        assert len(forward_only.kernels) == 1, forward_only.fusion_report
        assert forward_only.kernels[0].op.startswith("fused_")
    for a, e in zip(got, want):
        assert_matches(a, e, rtol=1e-5, atol=1e-4)
    assert_matches(got[0], got[1], rtol=1e-5)


def test_a_mobilenet_block_is_two_kernels(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 9, 9, 8), name="x")
        dw = ff.constant(rng.standard_normal((3, 3, 8, 1)).astype(np.float32))
        pw = ff.constant(rng.standard_normal((1, 1, 8, 16)).astype(np.float32))
        b1 = ff.constant(rng.standard_normal(8).astype(np.float32))
        b2 = ff.constant(rng.standard_normal(16).astype(np.float32))
        h = ff.relu6(ff.depthwise_conv2d(x, dw, strides=2, padding="SAME") + b1)
        y = ff.relu6(ff.conv2d(h, pw, padding="SAME") + b2)
    xb = rng.standard_normal((2, 9, 9, 8)).astype(np.float32)
    sess, fused, plain = compile_both(g, [y], [x])
    with sess:
        (got,), (want,) = fused(xb), plain(xb)
        assert [k.op for k in fused.kernels] == ["fused_depthwise_conv2d", "fused_conv2d"]
    assert_matches(got, want, rtol=1e-5)


def test_conv_bias_relu_is_one_kernel(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 7, 7, 3), name="x")
        w = ff.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32))
        y = ff.relu(ff.conv2d(x, w, padding="SAME") + ff.constant(np.ones(4, np.float32)))
    with ff.Session(g) as sess:
        fn = sess.compile([y], feeds=[x])
        fn(np.ones((1, 7, 7, 3), np.float32))
        assert len(fn.kernels) == 1


def test_fused_matmul_gradient_to_second_order(gl):
    from tests.gradcheck import check_gradients
    check_gradients(lambda x, w: ff.fused.matmul(x, w, bias=ff.constant(
        np.array([0.1, -0.2, 0.3], np.float32)), activation="elu"),
        {"x": rng.standard_normal((2, 3)).astype(np.float32),
         "w": rng.standard_normal((3, 3)).astype(np.float32)}, second_order=True)


def test_rejections_say_why(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 4), name="x")
        w = ff.placeholder((4, 4), name="w")
        h = ff.add(ff.matmul(x, w, name="mm"), 1.0, name="biased")
        act = ff.relu(h, name="act")
        shared = ff.exp(x, name="shared")
        y1 = ff.sin(shared, name="y1")
        y2 = ff.cos(shared, name="y2")
    with ff.Session(g) as sess:
        fn = sess.compile([act, h, y1, y2], feeds=[x, w])
        fn(np.eye(4, dtype=np.float32), np.eye(4, dtype=np.float32))
        report = "\n".join(fn.fusion_report)
        kernels = fn.kernels
    assert "'biased': its result is fetched" in report
    assert "rejected exp 'shared' for the group of 'y2': its result is also used by 'y1'" \
        in report or "rejected exp 'shared' for the group of 'y1'" in report
    assert len(kernels) == 5       # mm+biased, act, shared, y1, y2


def test_fused_graph_equals_unfused_after_autodiff_on_an_mlp(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((16, 10), name="x")
        w1 = ff.Variable(rng.standard_normal((10, 12)).astype(np.float32) * 0.3, name="w1")
        b1 = ff.Variable(np.zeros(12, np.float32), name="b1")
        w2 = ff.Variable(rng.standard_normal((12, 3)).astype(np.float32) * 0.3, name="w2")
        h = ff.relu(x @ w1 + b1)
        loss = ff.mean(ff.square(h @ w2 - 1.0))
        grads = ff.gradients(loss, [w1, b1, w2])
    xb = rng.standard_normal((16, 10)).astype(np.float32)
    sess, fused, plain = compile_both(g, [loss, *grads], [x])
    with sess:
        got, want = fused(xb), plain(xb)
        assert len(fused.kernels) < len(plain.kernels)
    for a, e in zip(got, want):
        assert_matches(a, e, rtol=1e-5, atol=1e-6)


def test_gradients_through_fused_nodes_of_a_compiled_graph(gl):
    """A compiled graph (fused_elementwise, fused_matmul and fused_conv nodes) can be
    differentiated again: each fused node's gradient is its ops' gradient."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 5, 5, 2), name="x")
        w = ff.constant(rng.standard_normal((3, 3, 2, 4)).astype(np.float32), name="w")
        m = ff.constant(rng.standard_normal((4, 3)).astype(np.float32), name="m")
        c = ff.tanh(ff.conv2d(x, w, padding="SAME") + 0.5)
        # (the exp term broadcasts, so it stays a fused_elementwise of its own instead
        # of joining the matmul's epilogue as a producer of its operand)
        y = ff.sigmoid(ff.reshape(c, (25, 4)) @ m - 1.0) * 2.0 + ff.exp(-ff.square(
            ff.reshape(c, (25, 4))[:1, :3]))
    xb = rng.standard_normal((1, 5, 5, 2)).astype(np.float32)
    with ff.Session(g) as sess:
        fn = sess.compile([y], feeds=[x])
        fn(xb)
        compiled = fn.graph
    ops = {n.op for n in compiled.nodes}
    assert {"fused_conv", "fused_matmul", "fused_elementwise"} <= ops, ops
    with compiled.as_default():
        cx = ff.Tensor(compiled.value("x"))
        cy = ff.Tensor(compiled.outputs[0])
        (dx,) = ff.gradients(ff.sum(cy * cy), [cx])
    (dx_original,) = ff.gradients(ff.sum(y * y), [x])
    with ff.Session(compiled) as sess, ff.Session(g) as ref:
        got = sess.run(dx, {cx: xb})
        want = ref.run(dx_original, {x: xb})
    assert_matches(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("head", ["conv2d", "depthwise_conv2d", "matmul"])
def test_inference_batch_norm_folds_into_the_weights(head, gl):
    g = ff.Graph()
    with g.as_default():
        if head == "matmul":
            x = ff.placeholder((5, 6), name="x")
            w = ff.constant(rng.standard_normal((6, 8)).astype(np.float32))
            y = ff.matmul(x, w)
        else:
            x = ff.placeholder((1, 6, 6, 4), name="x")
            shape = (3, 3, 4, 8) if head == "conv2d" else (3, 3, 4, 2)
            w = ff.constant(rng.standard_normal(shape).astype(np.float32))
            y = getattr(ff, head)(x, w, padding="SAME")
        channels = 8
        stats = [rng.uniform(0.5, 1.5, channels).astype(np.float32) for _ in range(4)]
        z = ff.relu(ff.batch_normalization(y, stats[0], stats[1], offset=stats[2],
                                           scale=stats[3], variance_epsilon=1e-3))
    xb = rng.standard_normal(x.shape).astype(np.float32)
    sess, fused, plain = compile_both(g, [z], [x])
    with sess:
        (got,), (want,) = fused(xb), plain(xb)
        ops = [n.op for n in fused.graph.nodes]
        assert len(fused.kernels) == 1
        report = "\n".join(fused.fusion_report)
    assert "mul" not in str(fused.graph.nodes[-1].attrs["steps"]), report
    assert head in ops or any(o.startswith("fused") for o in ops)
    assert_matches(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pattern", PATTERNS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_fused_ops_differentiate_to_second_order_for_every_activation(pattern, activation):
    """ff.fused.* gradients (TensorFlow.js raises for all but linear and relu) against
    finite differences, first and second order (numpy executor: the rules, not the
    kernels, are under test here; the GL kernels are above)."""
    from tests.gradcheck import check_gradients
    shapes = {"matmul": ((2, 3), (3, 4), 4), "conv2d": ((1, 3, 3, 2), (2, 2, 2, 4), 4),
              "depthwise_conv2d": ((1, 3, 3, 2), (2, 2, 2, 2), 4)}[pattern]
    x_shape, w_shape, channels = shapes
    local = np.random.default_rng(17)
    bias = local.uniform(-0.3, 0.3, channels).astype(np.float32)
    alpha = local.uniform(0.1, 0.3, channels).astype(np.float32)

    def build(x, w):
        kwargs = dict(bias=ff.constant(bias), activation=activation,
                      alpha=0.1 if activation == "leaky_relu" else ff.constant(alpha))
        if pattern == "matmul":
            return ff.fused.matmul(x, w, **kwargs)
        return getattr(ff.fused, pattern)(x, w, padding="SAME", **kwargs)
    # away from the kinks of relu/relu6/leaky_relu/prelu, where differences straddle
    data = {"x": local.uniform(0.3, 1.0, x_shape).astype(np.float32)
            * local.choice([-1, 1], x_shape),
            "w": local.uniform(0.3, 1.0, w_shape).astype(np.float32)}
    check_gradients(build, data, backend="numpy", second_order=True, rtol=2e-3, atol=2e-3)


# -- epilogues through reshapes, with the producers of their operands ------------------
def _mask_inputs(shape, nan_at=(0, 1)):
    """Values for a ReLU mask: negatives, zeros, NaN (greater(NaN, 0) is false)."""
    a = rng.standard_normal(shape).astype(np.float32)
    a.reshape(-1)[::7] = 0.0
    a.reshape(-1)[list(nan_at)] = np.nan
    return a


@pytest.mark.parametrize("m, k, n", [(7, 5, 10), (1, 3, 6), (64, 96, 33)])  # last: blocked
def test_a_relu_mask_is_computed_in_the_matmul_epilogue_that_applies_it(gl, m, k, n):
    """where(greater(a, 0), x @ w, 0) (a ReLU's gradient): greater joins the matmul's
    epilogue as the producer of its mask, no kernel of its own."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((m, k), name="x")
        w = ff.placeholder((k, n), name="w")
        a = ff.placeholder((m, n), name="a")
        y = ff.where(ff.greater(a, 0.0), x @ w, 0.0)
    feeds = [rng.standard_normal((m, k)).astype(np.float32),
             rng.standard_normal((k, n)).astype(np.float32), _mask_inputs((m, n))]
    sess, fused, plain = compile_both(g, [y], [x, w, a])
    with sess:
        (got,), (want,) = fused(*feeds), plain(*feeds)
        ops = [kernel.op for kernel in fused.kernels]
    assert not any("greater" in op or op == "fused(greater,where)" for op in ops), ops
    assert len(fused.kernels) < len(plain.kernels)
    assert_matches(got, want, rtol=1e-5, atol=1e-6)
    x64, w64 = (f.astype(np.float64) for f in feeds[:2])
    assert_matches(got, np.where(feeds[2] > 0, x64 @ w64, 0).astype(np.float32),
                   rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("batch, features, k", [(6, 5, 3), (64, 16, 32)])  # W13's, blocked
def test_an_epilogue_passes_through_a_reshape(gl, batch, features, k):
    """The gradient of reshape(relu(conv), (batch, -1)) @ w: the mask of the conv's
    shape is applied to (dy @ w^T) reshaped back, in the matmul's epilogue (operands
    of the reshaped shape are read as the matmul's shape); a bias of the reshaped
    shape's last axis cannot be read so and stops the chain, said in the report."""
    shape = (batch, 2, 2, features)
    size = 4 * features
    g = ff.Graph()
    with g.as_default():
        dy = ff.placeholder((batch, k), name="dy")
        w = ff.placeholder((size, k), name="w")
        c = ff.placeholder(shape, name="c")
        bias = ff.placeholder((features,), name="bias")
        back = ff.reshape(ff.matmul(dy, w, transpose_b=True), shape)
        masked = ff.where(ff.greater(c, 0.0), back, 0.0)
        y = masked * 0.5 + bias
    feeds = [rng.standard_normal((batch, k)).astype(np.float32),
             rng.standard_normal((size, k)).astype(np.float32), _mask_inputs(shape),
             rng.standard_normal(features).astype(np.float32)]
    sess, fused, plain = compile_both(g, [y, masked], [dy, w, c, bias])
    with sess:
        got, want = fused(*feeds), plain(*feeds)
        report = "\n".join(fused.fusion_report)
        ops = [kernel.op for kernel in fused.kernels]
        fused_ops = [node.op for node in fused.graph.nodes]
    assert fused_ops.count("fused_matmul") == 1 and "reshape" in fused_ops, fused_ops
    for a, e in zip(got, want):
        assert_matches(a, e, rtol=1e-5, atol=1e-6)
    expect = np.where(feeds[2] > 0, (feeds[0].astype(np.float64) @ feeds[1].T)
                      .reshape(shape), 0)
    assert_matches(got[1], expect.astype(np.float32), rtol=1e-5, atol=1e-5)
    assert not any("greater" in op for op in ops), ops
    # masked is fetched: the chain stops there; y is an elementwise kernel of its own
    assert "its result is fetched" in report, report


def test_a_reshaped_epilogue_rejects_an_operand_it_cannot_read(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((6, 4), name="x")
        w = ff.placeholder((4, 8), name="w")
        bias = ff.placeholder((4,), name="bias")
        y = ff.relu(ff.reshape(x @ w, (6, 2, 4)) + bias)
    feeds = [rng.standard_normal((6, 4)).astype(np.float32),
             rng.standard_normal((4, 8)).astype(np.float32),
             rng.standard_normal(4).astype(np.float32)]
    sess, fused, plain = compile_both(g, [y], [x, w, bias])
    with sess:
        (got,), (want,) = fused(*feeds), plain(*feeds)
        report = "\n".join(fused.fusion_report)
    assert "cannot be read after the reshape to [6, 2, 4]" in report, report
    assert_matches(got, want, rtol=1e-5, atol=1e-6)


def test_a_shared_producer_stays_out_of_the_epilogue(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5, 3), name="x")
        w = ff.placeholder((3, 6), name="w")
        a = ff.placeholder((5, 6), name="a")
        mask = ff.greater(a, 0.0, name="mask")
        y = ff.where(mask, x @ w, 0.0)
        z = ff.where(mask, a, 1.0)
    feeds = [rng.standard_normal((5, 3)).astype(np.float32),
             rng.standard_normal((3, 6)).astype(np.float32), _mask_inputs((5, 6))]
    sess, fused, plain = compile_both(g, [y, z], [x, w, a])
    with sess:
        got, want = fused(*feeds), plain(*feeds)
        report = "\n".join(fused.fusion_report)
    assert "rejected producer greater 'mask'" in report and "also used by" in report, report
    for a_, e in zip(got, want):
        assert_matches(a_, e, rtol=1e-5, atol=1e-6)


# -- a bias's update in the kernel that sums its gradient (fused_sum_like) -------------
def _bias_update_graph(g_shape, nan=False):
    from fragflow.frontend.tensor import wrap
    from fragflow.ir.ops.autodiff_ops import sum_like
    c = g_shape[-1]
    g = ff.Graph()
    with g.as_default():
        grad = ff.placeholder(g_shape, name="grad")
        b = ff.placeholder((c,), name="b")
        summed = wrap(sum_like(grad.value, b.value))
        updated = ff.relu(b - 0.05 * summed)         # an update and an activation
    values = rng.standard_normal(g_shape).astype(np.float32)
    if nan:
        values.reshape(-1, c)[0, 0] = np.nan
    return g, grad, b, updated, values, rng.standard_normal(c).astype(np.float32)


@pytest.mark.parametrize("g_shape", [(64, 10), (7, 3), (5, 2, 3, 8), (1, 5), (1000, 6),
                                     (64, 1)])
def test_a_bias_update_runs_in_the_kernel_that_sums_its_gradient(gl, g_shape):
    g, grad, b, updated, gv, bv = _bias_update_graph(g_shape, nan=g_shape == (7, 3))
    sess, fused, plain = compile_both(g, [updated], [grad, b])
    with sess:
        (got,), (want,) = fused(gv, bv), plain(gv, bv)
        ops = [kernel.op for kernel in fused.kernels]
    assert ops == ["fused_sum_like"], ops
    assert_matches(got, want, rtol=1e-5, atol=1e-6)
    rows = gv.reshape(-1, g_shape[-1]).astype(np.float64)
    expect = np.maximum(bv - 0.05 * rows.sum(axis=0), 0)
    if g_shape == (7, 3):
        assert np.isnan(got[0])               # NaN in the gradient's column 0
        expect[0] = np.nan
    assert_matches(got, expect.astype(np.float32), rtol=1e-5, atol=1e-6)


def test_a_long_bias_gradient_stays_a_reduction_tree(gl):
    """Past SUM_LIKE_ROWS rows one fragment's walk would be the slow part: the sum
    stays a tree of passes and the update a kernel of its own."""
    g, grad, b, updated, gv, bv = _bias_update_graph((4096, 8))
    sess, fused, plain = compile_both(g, [updated], [grad, b])
    with sess:
        (got,), (want,) = fused(gv, bv), plain(gv, bv)
        ops = [kernel.op for kernel in fused.kernels]
    assert "fused_sum_like" not in ops and "sum_like" in ops, ops
    assert_matches(got, want, rtol=1e-5, atol=1e-6)


def test_sgd_updates_biases_in_their_gradients_kernels(gl):
    """An SGD step of a dense layer: the bias's update joins its gradient's sum, and
    the variables after two steps equal the numpy executor's."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((9, 6), name="x")
        w = ff.Variable(rng.standard_normal((6, 5)).astype(np.float32), name="w")
        bias = ff.Variable(rng.standard_normal(5).astype(np.float32), name="bias")
        loss = ff.reduce_mean(ff.square(ff.tanh(x @ w + bias)))
        step = ff.optim.SGD(0.1).minimize(loss)
    xb = rng.standard_normal((9, 6)).astype(np.float32)
    gl_sess, np_sess = ff.Session(g), ff.Session(g, backend="numpy", passes=[])
    fn = gl_sess.compile([step, loss], feeds=[x])
    for _ in range(2):
        fn(xb)
        np_sess.run([step, loss], {x: xb})
    assert "fused_sum_like" in [kernel.op for kernel in fn.kernels]
    for v in (w, bias):
        assert_matches(gl_sess.get(v), np_sess.get(v), rtol=1e-5, atol=1e-6)


def test_a_compiled_bias_update_differentiates(gl):
    """fused_sum_like's gradient is its ops' (sum_like, then the steps): the compiled
    graph's gradient equals the original graph's, to second order."""
    g, grad, b, updated, gv, bv = _bias_update_graph((6, 4))
    bv = bv + 10.0                     # the relu passes: every gradient is nonzero
    with ff.Session(g) as sess:
        fn = sess.compile([updated], feeds=[grad, b])
        fn(gv, bv)
        compiled = fn.graph
    assert "fused_sum_like" in {n.op for n in compiled.nodes}
    with compiled.as_default():
        cg, cb = (ff.Tensor(compiled.value(n)) for n in ("grad", "b"))
        y = ff.Tensor(compiled.outputs[0])
        first = ff.gradients(ff.sum(y * y), [cg, cb])
        second = ff.gradients(ff.sum(first[0] * first[0]), [cg])
    with g.as_default():
        first_o = ff.gradients(ff.sum(updated * updated), [grad, b])
        second_o = ff.gradients(ff.sum(first_o[0] * first_o[0]), [grad])
    got = ff.Session(compiled).run([*first, *second], {cg: gv, cb: bv})
    want = ff.Session(g, backend="numpy", passes=[]).run([*first_o, *second_o], {grad: gv, b: bv})
    for a_, e in zip(got, want):
        assert_matches(a_, e, rtol=1e-5, atol=1e-6)
