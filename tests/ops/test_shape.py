"""reshape, transpose, expand_dims, squeeze and indexing (strided_slice) on GL against
the numpy reference executor, for float32, int32 and bool. reshape/expand_dims/squeeze
are views of the same texture (no kernel); transpose and slices run a kernel.

Each test builds one graph with many fetches (each kernel costs ~100 ms of llvmpipe JIT).
"""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, run_both

DTYPES = ["float32", "int32", "bool"]


def data_of(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    if dtype == "int32":
        return rng.integers(-2 ** 31, 2 ** 31 - 1, shape, dtype=np.int64).astype(np.int32)
    return rng.random(shape) < 0.5


def check_all(graph, fetches, feeds, expected=None, computed=()):
    """Every fetch against the numpy executor (exactly: moving elements computes nothing;
    labels in `computed` run arithmetic too and get 1e-5), and where given against plain
    numpy expressions too."""
    out, ref = run_both(graph, fetches, feeds)
    for label in fetches:
        if label in computed:
            assert_matches(out[label], ref[label], rtol=1e-5, what=label)
        else:
            assert_matches(out[label], ref[label], rtol=0, atol=0, what=label)
    for label, value in (expected or {}).items():
        assert out[label].shape == value.shape, label
        np.testing.assert_array_equal(out[label], value, err_msg=label)
    return out


# Python index expressions, evaluated on the tensor and on the numpy array alike.
INDEXES = ["[1]", "[-1]", "[:, 1:5:2]", "[::-1]", "[..., ::-2]", "[None, 2, ..., None]",
           "[3:1]", "[:, -2:, 5]", "[1:4, ::3, -1:-7:-2]", "[..., 0]", "[:, None, :, 3]",
           "[4:100, -100:2]", "[0, 0, 0]", "[-2, ..., 1:]", "[::2, ::-4, ::3]"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_indexing(gl, dtype):
    value = data_of((5, 6, 7), dtype, seed=1)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(value.shape, dtype, name="x")
        fetches, expected = {}, {}
        for ix in INDEXES:                          # fixed strings, not user input
            fetches[ix] = eval("x" + ix)
            expected[ix] = np.asarray(eval("value" + ix))
    check_all(g, fetches, {x: value}, expected)


@pytest.mark.parametrize("dtype", DTYPES)
def test_reshape_expand_squeeze_transpose(gl, dtype):
    value = data_of((3, 1, 5, 7), dtype, seed=2)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(value.shape, dtype, name="x")
        fetches = {
            "reshape(-1, 7)": ff.reshape(x, (-1, 7)),
            "reshape(105)": ff.reshape(x, (105,)),
            "reshape(5, -1, 3)": x.reshape(5, -1, 3),
            "expand_dims(0)": ff.expand_dims(x, 0),
            "expand_dims(-1)": ff.expand_dims(x, -1),
            "expand_dims(2)": ff.expand_dims(x, 2),
            "squeeze()": ff.squeeze(x),
            "squeeze(1)": ff.squeeze(x, 1),
            "squeeze(-3)": ff.squeeze(x, -3),
            "squeeze((1, 4))": ff.squeeze(ff.expand_dims(x, -1), (1, 4)),
            "transpose()": ff.transpose(x),
            "T": x.T,
            "transpose(2, 0, 3, 1)": ff.transpose(x, (2, 0, 3, 1)),
            "transpose(-1, 0, 1, 2)": ff.transpose(x, (-1, 0, 1, 2)),
        }
    check_all(g, fetches, {x: value}, {
        "reshape(5, -1, 3)": value.reshape(5, -1, 3),
        "expand_dims(2)": np.expand_dims(value, 2),
        "squeeze()": value.squeeze(), "squeeze((1, 4))": value[..., None].squeeze((1, 4)),
        "transpose()": value.T, "transpose(2, 0, 3, 1)": value.transpose(2, 0, 3, 1)})


def test_transpose_ranks_1_to_5(gl):
    g = ff.Graph()
    fetches, feeds, expected = {}, {}, {}
    with g.as_default():
        for rank in range(1, 6):
            shape = (3, 5, 2, 1, 3)[:rank]
            value = data_of(shape, "float32", seed=rank)
            x = ff.placeholder(shape, "float32", name=f"x{rank}")
            feeds[x] = value
            perm = tuple(np.roll(np.arange(rank), 1))
            fetches[f"rank {rank} default"] = ff.transpose(x)
            fetches[f"rank {rank} {perm}"] = ff.transpose(x, perm)
            expected[f"rank {rank} default"] = value.T
            expected[f"rank {rank} {perm}"] = value.transpose(perm)
        v = data_of((2, 3, 4, 5, 6), "int32", seed=9)
        y = ff.placeholder(v.shape, "int32", name="y")
        feeds[y] = v
        fetches["int rank 5 (4,2,0,3,1)"] = ff.transpose(y, (4, 2, 0, 3, 1))
        expected["int rank 5 (4,2,0,3,1)"] = v.transpose(4, 2, 0, 3, 1)
    check_all(g, fetches, feeds, expected)


def test_chained_views_and_kernels(gl):
    value = data_of((6, 10, 7), "float32", seed=4)
    ints = data_of((6, 10, 7), "int32", seed=5)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(value.shape, "float32", name="x")
        k = ff.placeholder(ints.shape, "int32", name="k")
        chain = ff.reshape(ff.transpose(x[1:, ::-3, 2:]), (5, -1))
        fetches = {
            "reshape(transpose(slice))": chain,
            "slice(reshape(transpose))":
                ff.reshape(ff.transpose(x, (2, 0, 1)), (14, 30))[3:11:2, ::-7],
            "reshape feeds a kernel": ff.reshape(x, (-1, 5)) * 2.0 + 1.0,
            "int sum over a reshape": ff.sum(ff.reshape(k, (60, 7)), 0),
            "matmul of views": ff.reshape(x[::2], (21, 10)) @ ff.squeeze(x[:1, :, :4], 0),
            "expand, squeeze, slice": ff.squeeze(ff.expand_dims(x, 1)[:, :, 2], 1),
            "int chain": ff.transpose(ff.reshape(k[::-1, 3:], (6, 49)))[::5],
            "x itself": x,
        }
    check_all(g, fetches, {x: value, k: ints}, computed=(
        "reshape feeds a kernel", "matmul of views"), expected={
        "reshape(transpose(slice))": value[1:, ::-3, 2:].T.reshape(5, -1),
        "int chain": ints[::-1, 3:].reshape(6, 49).T[::5],
        "x itself": value})


def test_none_dims_resolve_at_feed_time(gl):
    value = data_of((6, 10), "float32", seed=6)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 10), "float32", name="x")
        b = ff.placeholder((None, 3), "bool", name="b")
        r = ff.reshape(x, (-1, 5))
        assert r.shape == (None, 5)
        fetches = {"reshape(-1, 5)": r, "reshape(2, -1, 2)": ff.reshape(x, (2, -1, 2)),
                   "x[-1, ::-3]": x[-1, ::-3], "x[1:, None]": x[1:, None],
                   "transpose": ff.transpose(x), "sum(reshape, 1)": ff.sum(r, 1),
                   "bool reshape": ff.reshape(b, (-1,))}
    bv = data_of((4, 3), "bool", seed=7)
    out = check_all(g, fetches, {x: value, b: bv},
                    {"reshape(2, -1, 2)": value.reshape(2, -1, 2), "x[-1, ::-3]": value[-1, ::-3],
                     "bool reshape": bv.reshape(-1)}, computed=("sum(reshape, 1)",))
    # Another feed shape: the same graph, re-specialised.
    value2 = data_of((2, 10), "float32", seed=8)
    with ff.Session(g) as sess:
        np.testing.assert_array_equal(sess.run(r, {x: value2}), value2.reshape(-1, 5))
    assert out["x[1:, None]"].shape == (5, 1, 10)


def test_fetching_a_reshape_of_a_feed(gl):
    value = data_of((4, 6), "int32", seed=10)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(value.shape, "int32", name="x")
        r = ff.reshape(x, (3, 8))
    out, ref = run_both(g, r, {x: value})          # the fetch is only a view of the feed
    assert_matches(out, ref)
    np.testing.assert_array_equal(out, value.reshape(3, 8))
    out, ref = run_both(g, [ff.expand_dims(r, 0), ff.squeeze(ff.reshape(x, (1, 24)))],
                        {x: value})
    np.testing.assert_array_equal(out[0], value.reshape(1, 3, 8))
    np.testing.assert_array_equal(out[1], value.reshape(24))


def test_build_time_errors(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 4), "float32", name="x")
        line = r"\(.*test_shape\.py:\d+\)"
        with pytest.raises(ff.ShapeError, match=r"strided_slice .*" + line + ".*out of bounds"):
            x[3]
        with pytest.raises(ff.ShapeError, match="out of bounds"):
            x[0, -5]
        with pytest.raises(ff.ShapeError, match=r"strided_slice .*" + line + ".*too many"):
            x[0, 0, 0]
        with pytest.raises(ff.ShapeError, match=line + ".*ellipsis"):
            x[..., ...]
        with pytest.raises(ff.ShapeError, match="step"):
            x[::0]
        with pytest.raises(ff.ShapeError, match=r"squeeze .*" + line + ".*size 3"):
            ff.squeeze(x, 0)
        with pytest.raises(ff.ShapeError, match="size 4"):
            ff.squeeze(x, (1,))
        with pytest.raises(ff.ShapeError, match=r"reshape .*" + line):
            ff.reshape(x, (5, -1))
        with pytest.raises(ff.ShapeError, match="more than one -1"):
            ff.reshape(x, (-1, -1))
        with pytest.raises(ff.ShapeError, match="out of range"):
            ff.expand_dims(x, 3)
        with pytest.raises(ff.AttrError, match="permutation"):
            ff.transpose(x, (0, 0))
        assert [n.op for n in g.nodes] == ["placeholder"]
