"""matmul and @ on GL against the numpy reference executor.

The kernel has three paths: scalar (any shape), a vec4 one reading b a texel at a time
(N % 4 == 0 and not transpose_b) and one also reading a four values at a time (K % 4 == 0
and not transpose_a too). The shapes below hit each, with and without transposes.
Floats are held to 1e-5 relative, with atol 1e-5 * (|a| @ |b|) for cancellation.
"""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, run_both

RTOL = 1e-5


def operand(rng, shape, dtype):
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    return rng.integers(-20, 21, shape).astype(np.int32)


def check(cases, seed, tuning=None):
    """cases: [(label, a_shape, a_dtype, b_shape, b_dtype, transpose_a, transpose_b)].
    Every case is one fetch of one graph; each is compared with the numpy executor and
    its float results also with numpy's matmul in float64. tuning: the GL side's."""
    rng = np.random.default_rng(seed)
    g = ff.Graph()
    fetches, feeds, plain = {}, {}, {}
    with g.as_default():
        for i, (label, sa, da, sb, db, ta, tb) in enumerate(cases):
            av, bv = operand(rng, sa, da), operand(rng, sb, db)
            a = ff.placeholder(sa, da, name=f"a{i}")
            b = ff.placeholder(sb, db, name=f"b{i}")
            feeds[a], feeds[b] = av, bv
            fetches[label] = ff.matmul(a, b, transpose_a=ta, transpose_b=tb)
            plain[label] = (np.swapaxes(av, -1, -2) if ta else av,
                            np.swapaxes(bv, -1, -2) if tb else bv)
    out, ref = run_both(g, fetches, feeds, tuning)
    worst = 0.0
    for label, (av, bv) in plain.items():
        scale = np.abs(av.astype(np.float64)) @ np.abs(bv.astype(np.float64))
        assert_matches(out[label], ref[label], rtol=RTOL, scale=scale, what=label)
        if out[label].dtype == np.float32:
            exact = av.astype(np.float64) @ bv.astype(np.float64)
            assert out[label].shape == exact.shape, label
            assert np.all(np.abs(out[label] - exact) <= RTOL * (scale + np.abs(exact))), label
            if out[label].size:
                worst = max(worst, float(np.max(np.abs(out[label] - exact) / (scale + 1e-30))))
    return out, worst


def shapes(m, k, n, ta, tb):
    return ((k, m) if ta else (m, k)), ((n, k) if tb else (k, n))


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_paths_and_transposes(gl, ta, tb):
    # (M, K, N): N % 4 and K % 4 decide the path when the operands are not transposed.
    mkn = [(1, 1, 1), (3, 5, 7), (5, 6, 8), (6, 8, 12), (2, 3, 4), (7, 12, 5), (4, 4, 4)]
    cases = []
    for m, k, n in mkn:
        sa, sb = shapes(m, k, n, ta, tb)
        cases.append((f"{sa}{'T' if ta else ''}@{sb}{'T' if tb else ''}",
                      sa, "float32", sb, "float32", ta, tb))
    check(cases, seed=10 + 2 * ta + tb)


def test_batched_broadcasting(gl):
    f = "float32"
    check([("(2,3,4,5)@(5,6)", (2, 3, 4, 5), f, (5, 6), f, False, False),
           ("(1,4,5)@(3,5,2)", (1, 4, 5), f, (3, 5, 2), f, False, False),
           ("(2,1,3,4)@(1,5,4,6)", (2, 1, 3, 4), f, (1, 5, 4, 6), f, False, False),
           ("(2,1,3,4)@(1,5,4,8)", (2, 1, 3, 4), f, (1, 5, 4, 8), f, False, False),
           ("(3,8,2)T@(3,8,4)", (3, 8, 2), f, (3, 8, 4), f, True, False),
           ("(2,3,4)@(1,5,4)T", (2, 3, 4), f, (1, 5, 4), f, False, True),
           ("(5,4)@(2,2,4,3)", (5, 4), f, (2, 2, 4, 3), f, False, False)], seed=20)


def test_int32_exact_and_wrapping(gl):
    rng = np.random.default_rng(30)
    big_a = rng.integers(-2 ** 31, 2 ** 31 - 1, (5, 7), dtype=np.int64).astype(np.int32)
    big_b = rng.integers(-2 ** 31, 2 ** 31 - 1, (7, 8), dtype=np.int64).astype(np.int32)
    small = rng.integers(-1000, 1000, (6, 9)).astype(np.int32)
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder(big_a.shape, "int32", name="a")
        b = ff.placeholder(big_b.shape, "int32", name="b")
        s = ff.placeholder(small.shape, "int32", name="s")
        fetches = {"wrap (N%4==0)": a @ b, "wrap scalar path": a @ b[:, :5],
                   "wrap K%4==0": a[:4, :4] @ b[:4],
                   "s @ s.T": ff.matmul(s, s, transpose_b=True),
                   "s.T @ s": ff.matmul(s, s, transpose_a=True)}
    out, ref = run_both(g, fetches, {a: big_a, b: big_b, s: small})
    for label in fetches:
        assert_matches(out[label], ref[label], what=label)
    wrapped = (big_a.astype(np.int64) @ big_b.astype(np.int64)) % 2 ** 32
    expect = np.where(wrapped >= 2 ** 31, wrapped - 2 ** 32, wrapped).astype(np.int32)
    np.testing.assert_array_equal(out["wrap (N%4==0)"], expect)
    np.testing.assert_array_equal(out["s @ s.T"], small.astype(np.int64) @ small.T)


def test_mixed_dtypes_promote_to_float32(gl):
    out, _ = check([("i32@f32", (3, 5), "int32", (5, 8), "float32", False, False),
                    ("f32@i32T", (3, 5), "float32", (6, 5), "int32", False, True),
                    ("i32T@f32", (4, 3), "int32", (4, 4), "float32", True, False)], seed=40)
    assert all(v.dtype == np.float32 for v in out.values())


def test_same_tensor_twice_and_empty_k(gl):
    rng = np.random.default_rng(50)
    xv = rng.standard_normal((6, 6)).astype(np.float32)
    yv = rng.standard_normal((5, 8)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(xv.shape, "float32", name="x")
        y = ff.placeholder(yv.shape, "float32", name="y")
        e1 = ff.placeholder((3, 0), "float32", name="e1")
        e2 = ff.placeholder((0, 5), "float32", name="e2")
        e3 = ff.placeholder((0, 8), "float32", name="e3")
        fetches = {"x@x": x @ x, "x@xT": ff.matmul(x, x, transpose_b=True),
                   "xT@x": ff.matmul(x, x, transpose_a=True),
                   "y@yT": ff.matmul(y, y, transpose_b=True),
                   "yT@y": ff.matmul(y, y, transpose_a=True),
                   "K=0": e1 @ e2, "K=0 N%4==0": ff.matmul(e1, e3),
                   "M=0": ff.matmul(e2, y)}
    feeds = {x: xv, y: yv, e1: np.zeros((3, 0), np.float32),
             e2: np.zeros((0, 5), np.float32), e3: np.zeros((0, 8), np.float32)}
    out, ref = run_both(g, fetches, feeds)
    scales = {"x@x": np.abs(xv) @ np.abs(xv), "x@xT": np.abs(xv) @ np.abs(xv).T,
              "xT@x": np.abs(xv).T @ np.abs(xv), "y@yT": np.abs(yv) @ np.abs(yv).T,
              "yT@y": np.abs(yv).T @ np.abs(yv)}
    for label in fetches:
        assert_matches(out[label], ref[label], rtol=RTOL, scale=scales.get(label), what=label)
    np.testing.assert_allclose(out["x@xT"], xv @ xv.T, rtol=1e-5, atol=1e-4)
    assert (out["K=0"] == 0).all() and out["K=0"].shape == (3, 5)
    assert out["M=0"].shape == (0, 8)


def test_large_and_long_k(gl):
    """256x512 @ 512x256 on the fastest path, and K long enough that four loops over K
    per fragment would pass llvmpipe's 65535-iteration limit."""
    f = "float32"
    _, worst = check([("256x512@512x256", (256, 512), f, (512, 256), f, False, False),
                      ("(3,20001)@(20001,5)", (3, 20001), f, (20001, 5), f, False, False),
                      ("(70001,2)T@(70001,4)", (70001, 2), f, (70001, 4), f, True, False),
                      ("(2,70000)@(70000,4)", (2, 70000), f, (70000, 4), f, False, False)],
                     seed=60)
    assert worst < RTOL


def test_errors_name_op_node_and_line(gl):
    g = ff.Graph()
    with g.as_default():
        v = ff.placeholder((3,), "float32", name="v")
        m = ff.placeholder((2, 3), "float32", name="m")
        n = ff.placeholder((4, 5), "float32", name="n")
        bm = ff.placeholder((2, 3), "bool", name="bm")
        bn = ff.placeholder((3, 2), "bool", name="bn")
        where = r"matmul 'matmul(_\d+)?' \(.*test_matmul\.py:\d+\)"
        with pytest.raises(ff.ShapeError, match=where + ".*rank >= 2"):
            ff.matmul(v, m)
        with pytest.raises(ff.ShapeError, match=where + ".*rank >= 2"):
            ff.matmul(m, v)
        with pytest.raises(ff.ShapeError, match=where + ".*inner dimensions"):
            ff.matmul(m, n)
        with pytest.raises(ff.ShapeError, match=where + ".*inner dimensions"):
            m @ n
        with pytest.raises(ff.ShapeError, match="inner dimensions"):
            ff.matmul(m, n, transpose_a=True, transpose_b=True)
        with pytest.raises(ff.DTypeError, match=where + ".*bool"):
            bm @ bn
        with pytest.raises(ff.DTypeError, match="bool"):
            ff.matmul(m, ff.placeholder((3, 2), "bool"))
        assert len([nd for nd in g.nodes if nd.op == "matmul"]) == 0
