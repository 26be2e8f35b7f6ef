"""The packed matmul (codegen/matmul.py packed_kernels: both operands packed into
panels, the windows of a convolution into A's, then a blocked kernel reading adjacent
texels and the stitch) on GL against the numpy reference executor and float64 numpy.
The blocked tests' awkward cases run again here with the size thresholds lowered to 1
(the `tuning` fixture), so that every product and every plain convolution takes the
packed path: M, N, K not multiples of 4 or of the block, one row or column, long K
(split among fragments; past llvmpipe's 65535 loop iterations), transposes, batches
with broadcasting, x @ x with NaN and inf, fused bias and activations, channels not in
fours, strides, dilations, padding, 1x1 filters; convolution gradients against finite
differences (the input gradient runs as a packed convolution; matmul's gradients are
matmuls with transposes, which the shapes above cover)."""
import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients
from tests.ops.test_conv_fast import CONV2D_CASES
from tests.ops.test_matmul import check
from tests.ops.test_matmul_blocked import (  # noqa: F401
    test_batches_and_broadcasting,
    test_fused_bias_activation,
    test_same_tensor_twice_and_edge_values,
    test_shapes_and_transposes,
)
from tests.reference import assert_matches, normal, run_both

# every product and plain convolution packed (small convolutions would run direct)
PACKED = ff.Tuning().with_({"matmul.blocked_min_macs": 1, "matmul.packed_min_macs": 1,
                            "matmul.packed_min_rows": 1,
                            "conv.packed_min_input": 1, "conv.direct_max_macs": 0})


@pytest.fixture
def tuning():
    """The blocked tests' tuning here (tests/ops/test_matmul_blocked.py)."""
    return PACKED


def _run(build, arrays, rtol=1e-5):
    """build(*tensors) -> {label: tensor}; placeholders fed with arrays; GL vs numpy."""
    g = ff.Graph()
    with g.as_default():
        feeds = {ff.placeholder(a.shape, name=f"in{i}"): a for i, a in enumerate(arrays)}
        fetches = build(*feeds)
    out, ref = run_both(g, fetches, feeds, PACKED)
    for label in fetches:
        scale = float(np.max(np.abs(np.nan_to_num(ref[label])), initial=0.0))
        assert_matches(out[label], ref[label], rtol=rtol, atol=1e-5 * (1 + scale), what=label)


def test_big_products_take_the_packed_path(gl):
    rng = np.random.default_rng(0)
    av, bv = normal(rng, 130, 256), normal(rng, 256, 132)
    x, w = normal(rng, 1, 64, 64, 128), normal(rng, 1, 1, 128, 8)     # x: 2 MB
    g = ff.Graph()
    with g.as_default():
        a, b = ff.placeholder(av.shape, name="a"), ff.placeholder(bv.shape, name="b")
        xp = ff.placeholder(x.shape, name="x")
        y = ff.relu(a @ b + ff.constant(np.ones(132, np.float32)))
        z = ff.relu(ff.conv2d(xp, ff.constant(w)))
        small = a[:8] @ b[:, :8]
    with ff.Session(g) as sess:
        fn = sess.compile([y, z, small], feeds=[a, b, xp])
        ops = [k.op for k in fn.kernels]
        # A (row-major, K % 4 == 0) is read in place; the windows are packed
        assert [o for o in ops if o.startswith("fused_matmul")] == [
            "fused_matmul_pack", "fused_matmul", "fused_matmul_stitch"], ops
        assert [o for o in ops if o.startswith("fused_conv2d")] == [
            "fused_conv2d_pack", "fused_conv2d_pack", "fused_conv2d",
            "fused_conv2d_stitch"], ops
        out = fn(av, bv, x)
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        ref = sess.run([y, z, small], {a: av, b: bv, xp: x})
    for got, want in zip(out, ref):
        assert_matches(got, want, rtol=1e-5, atol=1e-4)


def test_panels_of_odd_sizes_split_k_and_long_k(gl, tuning):
    # more rows and columns than one block group, none in fours, with a batch: the
    # panels' zero padding past ROWS / COLS must not leak into the results; few blocks
    # and a long K split K (the stitch adds the splits), A packed or read in place
    # (K % 4 == 0, batched); K = 70001 steps past 65535
    check([("odd", (5, 67, 131), "float32", (5, 131, 70), "float32", False, False),
           ("odd_t", (3, 131, 67), "float32", (3, 70, 131), "float32", True, True),
           ("vec", (1, 9), "float32", (9, 1), "float32", False, False),
           ("split", (8, 3001), "float32", (3001, 12), "float32", False, False),
           ("split_t", (3000, 8), "float32", (5, 3000), "float32", True, True),
           ("split_in_place", (2, 8, 3000), "float32", (3000, 12), "float32", False, False),
           ("long", (3, 70001), "float32", (70001, 2), "float32", False, False)], seed=11,
          tuning=tuning)


@pytest.mark.parametrize("x_shape, w_shape, kwargs", CONV2D_CASES)
def test_conv2d_shapes(gl, x_shape, w_shape, kwargs):
    """tests/ops/test_conv_fast.py's plain convolutions, packed."""
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    x, w = normal(rng, *x_shape), normal(rng, *w_shape)
    x.flat[len(x.flat) // 2] = np.nan       # spreads to the outputs whose window holds it
    _run(lambda xp, wp: {"y": ff.conv2d(xp, wp, **kwargs)}, [x, w])


def test_conv_gradients(gl):
    # tests/ops/test_conv_fast.py's; stride 1: the input gradient runs as a (packed)
    # convolution too
    rng = np.random.default_rng(5)
    check_gradients(lambda x, w: ff.tanh(ff.conv2d(x, w, padding="SAME")),
                    {"x": rng.standard_normal((1, 5, 6, 4)),
                     "w": rng.standard_normal((3, 3, 4, 4))}, tuning=PACKED)
    check_gradients(lambda x, w: ff.depthwise_conv2d(x, w, strides=2, padding="SAME") ** 2,
                    {"x": rng.standard_normal((1, 6, 5, 4)),
                     "w": rng.standard_normal((3, 3, 4, 1))}, tuning=PACKED)


@pytest.mark.parametrize("activation", ["relu", "relu6", "leaky_relu"])
def test_conv_bias_activation(gl, activation):
    rng = np.random.default_rng(12)
    x, w, b = normal(rng, 2, 7, 9, 8), normal(rng, 3, 3, 8, 6), normal(rng, 6)

    def build(xp, wp, bp):
        y = ff.conv2d(xp, wp, padding="SAME") + bp
        return {"y": getattr(ff, activation)(y), "scaled": ff.relu(y * 0.5 + 1.0)}
    _run(build, [x, w, b])


@pytest.mark.parametrize("m, k, n, ta", [
    (37, 64, 24, False),      # A in place, K4 % unroll == 0: row runs with offsets
    (37, 40, 24, False),      # A in place, K4 = 10: the unrolled loop and its tail
    (9, 1000, 8, False),      # K4 % unroll != 0: no offsets for A's runs
    (33, 44, 20, True),       # A packed (transposed): its R texels a run
    (5, 2052, 12, False),     # K split among fragments, chunks of the unroll
])
def test_row_runs_read_with_offsets(gl, tuning, m, k, n, ta):
    """The packed kernel reads the texels after the first of a row run (B's step, A's
    unrolled steps or packed rows) with textureLodOffset where the runs stay in one
    texture row; GL against float64 numpy either way."""
    rng = np.random.default_rng(m + k + n)
    av = normal(rng, *((k, m) if ta else (m, k)))
    bv = normal(rng, k, n)
    av[m // 2 if not ta else 0, 0] = np.nan
    g = ff.Graph()
    with g.as_default():
        a, b = ff.placeholder(av.shape, name="a"), ff.placeholder(bv.shape, name="b")
        y = ff.matmul(a, b, transpose_a=ta)
    with ff.Session(g, tuning=tuning) as sess:
        fn = sess.compile([y], feeds=[a, b])
        main = [kk for kk in fn.kernels if kk.op == "matmul" and "packed" in kk.source]
        assert main and "textureLodOffset" in main[0].source
        got = fn(av, bv)[0]
    want = (av.T if ta else av).astype(np.float64) @ bv
    assert_matches(got, want.astype(np.float32), rtol=1e-4,
                   scale=np.abs(av.T if ta else av).astype(np.float64) @ np.abs(bv))
