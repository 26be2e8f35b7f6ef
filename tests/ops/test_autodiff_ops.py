"""GL against the reference for add_n and the ops gradients are built from
(stop_gradient, sum_like, reshape_like, strided_slice_grad)."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.ops import autodiff_ops
from fragflow.ir.ops.shape import index_spec
from tests.reference import assert_matches, run_both

rng = np.random.default_rng(7)


def test_add_n_sums_left_to_right(gl):
    g = ff.Graph()
    with g.as_default():
        xs = [ff.placeholder((3, 5), name=f"x{i}") for i in range(4)]
        total = ff.add_n(xs)
        ints = [ff.placeholder((7,), "int32", name=f"i{i}") for i in range(3)]
        int_total = ff.add_n(ints)
    data = [rng.standard_normal((3, 5)).astype(np.float32) for _ in range(4)]
    data[1][0, 0] = np.nan
    data[2][1, 1] = np.inf
    idata = [np.array([2**31 - 1, -2**31, 0, -1, 5, 6, 7], np.int32)] * 3
    feeds = {**dict(zip(xs, data)), **dict(zip(ints, idata))}
    out, ref = run_both(g, [total, int_total], feeds)
    assert_matches(out[0], ref[0])
    assert_matches(out[0], ((data[0] + data[1]) + data[2]) + data[3])
    assert_matches(out[1], ref[1])


def test_add_n_refuses_mixed_shapes_and_dtypes():
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder((2,), name="a")
        b = ff.placeholder((3,), name="b")
        i = ff.placeholder((2,), "int32", name="i")
        with pytest.raises(ff.ShapeError, match="share a shape"):
            ff.add_n([a, b])
        with pytest.raises(ff.DTypeError, match="share a dtype"):
            ff.add_n([a, i])


def test_stop_gradient_is_the_identity(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5,), name="x")
        y = ff.stop_gradient(x) * 2.0
    xb = np.array([1, -2, np.nan, np.inf, 0], np.float32)
    out, ref = run_both(g, y, {x: xb})
    assert_matches(out, ref)
    assert_matches(out, xb * 2)


def test_sum_like_and_reshape_like(gl):
    g = ff.Graph()
    with g.as_default():
        big = ff.placeholder((4, 3, 5), name="big")
        small = ff.placeholder((3, 1), name="small")
        summed = ff.Tensor(autodiff_ops.sum_like(big.value, small.value))
        flat = ff.placeholder((15,), name="flat")
        shaped = ff.Tensor(autodiff_ops.reshape_like(flat.value, ff.zeros((3, 5)).value))
    b = rng.standard_normal((4, 3, 5)).astype(np.float32)
    f = rng.standard_normal(15).astype(np.float32)
    out, ref = run_both(g, [summed, shaped], {big: b, small: np.zeros((3, 1), np.float32),
                                             flat: f})
    assert_matches(out[0], ref[0], rtol=1e-5)
    assert_matches(out[0], b.sum(axis=(0, 2)).reshape(3, 1), rtol=1e-5)
    assert_matches(out[1], f.reshape(3, 5))


def test_strided_slice_grad_scatters_into_zeros(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 6), name="x")
        spec = index_spec((slice(3, 0, -2), None, slice(1, None, 2)), 2)
        dy = ff.placeholder((2, 1, 3), name="dy")
        scattered = ff.Tensor(autodiff_ops.strided_slice_grad(dy.value, x.value, spec))
        spec2 = index_spec((2, slice(None, None, -1)), 2)
        dy2 = ff.placeholder((6,), name="dy2")
        scattered2 = ff.Tensor(autodiff_ops.strided_slice_grad(dy2.value, x.value, spec2))
    d = rng.standard_normal((2, 1, 3)).astype(np.float32)
    d2 = rng.standard_normal(6).astype(np.float32)
    out, ref = run_both(g, [scattered, scattered2],
                        {x: np.zeros((4, 6), np.float32), dy: d, dy2: d2})
    expected = np.zeros((4, 6), np.float32)
    expected[3:0:-2, 1::2] = d[:, 0, :]
    expected2 = np.zeros((4, 6), np.float32)
    expected2[2, ::-1] = d2
    assert_matches(out[0], expected)
    assert_matches(ref[0], expected)
    assert_matches(out[1], expected2)
