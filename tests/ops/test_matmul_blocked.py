"""The blocked matmul (codegen/matmul.py: each fragment computes a block of results
into several render targets, a stitch kernel puts them in place and applies the fused
epilogue) on GL against the numpy reference executor and float64 numpy, on shapes that
are awkward for it: M, N, K not multiples of 4 or of the block, one row or column,
K past llvmpipe's 65535 loop iterations, transposes, batches with broadcasting, x @ x.
Every case takes the blocked path (the `tuning` fixture lowers the size threshold to
1, and a test checks that a product above the real threshold takes it)."""
import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients
from tests.ops.test_matmul import check, shapes
from tests.reference import assert_matches, run_both


@pytest.fixture
def tuning():
    """Every product blocked (tests/ops/test_matmul_packed.py: every one packed)."""
    return ff.Tuning().with_({"matmul.blocked_min_macs": 1})


def test_the_blocked_path_is_taken(gl):
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder((64, 48), name="a")
        b = ff.placeholder((48, 64), name="b")
        y = ff.relu(a @ b + ff.constant(np.ones(64, np.float32)))
    with ff.Session(g) as sess:
        fn = sess.compile([y], feeds=[a, b])
        ops = [k.op for k in fn.kernels]
        assert ops == ["fused_matmul", "fused_matmul_stitch"], ops
        main = fn.kernels[0]
        assert main.output_layers == 8       # 8 render targets, layers of one texture
        rng = np.random.default_rng(0)
        av = rng.standard_normal((64, 48)).astype(np.float32)
        bv = rng.standard_normal((48, 64)).astype(np.float32)
        out, = fn(av, bv)
    np.testing.assert_allclose(out, np.maximum(av @ bv + 1, 0), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_shapes_and_transposes(gl, tuning, ta, tb):
    cases = []
    for m, k, n in [(64, 64, 64),        # everything in fours and blocks
                    (37, 70, 45),        # nothing in fours
                    (33, 64, 36),        # rows not in blocks of 4, K and N in fours
                    (1, 3000, 50),       # one row
                    (300, 500, 1),       # one column
                    (9, 1001, 17)]:      # long odd K
        sa, sb = shapes(m, k, n, ta, tb)
        cases.append((f"{m}x{k}x{n}", sa, "float32", sb, "float32", ta, tb))
    check(cases, seed=1 + 2 * ta + tb, tuning=tuning)


def test_k_longer_than_llvmpipe_loop_limit(gl, tuning):
    # 70001 steps (odd: the scalar loop) and 70000 (four at a time): both past 65535
    check([("odd", (3, 70001), "float32", (70001, 2), "float32", False, False),
           ("fours", (2, 70000), "float32", (70000, 8), "float32", False, False),
           ("fours_t", (70000, 2), "float32", (8, 70000), "float32", True, True)], seed=5,
          tuning=tuning)


def test_split_k(gl, tuning):
    # few blocks and a long K: K is split among fragments and the stitch adds up
    check([("rows", (8, 3001), "float32", (3001, 12), "float32", False, False),
           ("transposed_a", (3000, 8), "float32", (3000, 12), "float32", True, False),
           ("batched", (3, 16, 602), "float32", (3, 602, 7), "float32", False, False),
           ("transposed_b", (5, 1030), "float32", (9, 1030), "float32", False, True)],
          seed=8, tuning=tuning)


def test_batches_and_broadcasting(gl, tuning):
    check([("batch", (3, 40, 36), "float32", (3, 36, 44), "float32", False, False),
           ("broadcast", (2, 1, 33, 20), "float32", (5, 20, 24), "float32", False, False),
           ("broadcast_t", (1, 20, 33), "float32", (4, 3, 24, 20), "float32", True, True),
           ("b_shared", (6, 50, 30), "float32", (30, 27), "float32", False, False)],
          seed=7, tuning=tuning)


def test_same_tensor_twice_and_edge_values(gl, tuning):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((70, 70)).astype(np.float32)
    x[3, 5] = np.nan
    x[10, :] = 0.0
    x[20, 7] = np.inf
    g = ff.Graph()
    with g.as_default():
        p = ff.placeholder(x.shape, name="x")
        fetches = {"xx": p @ p, "xtx": ff.matmul(p, p, transpose_a=True)}
    out, ref = run_both(g, fetches, {p: x}, tuning)
    for name in fetches:
        assert_matches(out[name], ref[name], rtol=1e-4, atol=1e-3, what=name)


@pytest.mark.parametrize("activation", ["relu", "relu6", "tanh", "leaky_relu"])
def test_fused_bias_activation(gl, tuning, activation):
    rng = np.random.default_rng(4)
    av = rng.standard_normal((50, 39)).astype(np.float32)
    bv = rng.standard_normal((39, 45)).astype(np.float32)     # N % 4 != 0
    cv = rng.standard_normal(45).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        a, b = ff.placeholder(av.shape, name="a"), ff.placeholder(bv.shape, name="b")
        y = getattr(ff, activation)(a @ b + ff.constant(cv))
    out, ref = run_both(g, {"y": y}, {a: av, b: bv}, tuning)
    assert_matches(out["y"], ref["y"], rtol=1e-5, atol=1e-4, what=activation)


def test_gradients_against_finite_differences(gl, tuning):
    rng = np.random.default_rng(6)
    check_gradients(lambda a, b: ff.tanh(ff.matmul(a, b) * 0.1),
                    {"a": rng.standard_normal((21, 30)), "b": rng.standard_normal((30, 23))},
                    tuning=tuning)
    check_gradients(lambda a, b: ff.matmul(a, b, transpose_a=True, transpose_b=True),
                    {"a": rng.standard_normal((2, 30, 21)), "b": rng.standard_normal((23, 30))},
                    tuning=tuning)
