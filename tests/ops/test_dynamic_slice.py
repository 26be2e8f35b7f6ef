"""dynamic_slice and dynamic_update_slice (JAX's lax ops; ir/ops/structure/dynamic_slice.py)
on GL against the numpy executor running the graph as built, and both against a float64
loop written here with XLA's clamp spelled out (start into [0, dim - size]). The starts
are fed, so the GL kernel reads them from their texture: negative, past the end, in
range; values with NaN and infinities; sizes that are not a multiple of 4; the three
dtypes; the ways of giving starts (one vector, a list of scalar tensors and ints);
ff.slice with a tensor begin; the errors. Gradients: tests/autodiff/
test_dynamic_slice_gradients.py."""
import itertools

import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.errors import FragflowError
from tests.reference import assert_matches, run_both

STARTS = [(0, 0, 0), (1, 2, 3), (-4, -1, -100), (5, 9, 100), (1, 0, 6), (2, 2, 2)]


def clamp_loop(starts, shape, sizes):
    out = []
    for s, d, k in zip(starts, shape, sizes):
        b = s
        if b < 0:
            b = 0
        if b > d - k:
            b = d - k
        out.append(b)
    return out


def slice_loop(x, starts, sizes):
    """The block, element by element, in float64 (or the input's int/bool dtype)."""
    x64 = x.astype(np.float64) if x.dtype == np.float32 else x
    b = clamp_loop(starts, x.shape, sizes)
    out = np.zeros(sizes, x64.dtype)
    for c in itertools.product(*[range(k) for k in sizes]):
        out[c] = x64[tuple(bi + ci for bi, ci in zip(b, c))]
    return out


def update_loop(x, u, starts):
    x64 = x.astype(np.float64) if x.dtype == np.float32 else x
    out = np.array(x64, copy=True)
    b = clamp_loop(starts, x.shape, u.shape)
    for c in itertools.product(*[range(k) for k in u.shape]):
        out[tuple(bi + ci for bi, ci in zip(b, c))] = u[c]
    return out


def data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        a = rng.standard_normal(shape).astype(np.float32)
        flat = a.reshape(-1)
        flat[::7] = np.nan
        flat[3::11] = np.inf
        flat[5::13] = -np.inf
        flat[1::17] = -0.0
        return a
    if dtype == "int32":
        return rng.integers(-2 ** 31, 2 ** 31 - 1, shape, dtype=np.int64).astype(np.int32)
    return rng.random(shape) < 0.5


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_dynamic_slice_and_update_against_a_loop(gl, dtype):
    shape, sizes, ushape = (3, 5, 7), (2, 3, 5), (1, 4, 3)
    a, upd = data(shape, dtype, 1), data(ushape, dtype, 2)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(shape, dtype, name="x")
        u = ff.placeholder(ushape, dtype, name="u")
        s = ff.placeholder((3,), "int32", name="starts")
        i = ff.placeholder((), "int32", name="i")
        fetches = {
            "slice, starts a vector": ff.dynamic_slice(x, s, sizes),
            "slice, scalars and ints": ff.dynamic_slice(x, [i, 1, s[2]], (3, 1, 6)),
            "slice, the whole tensor": ff.dynamic_slice(x, s, shape),
            "slice, one element": ff.dynamic_slice(x, s, (1, 1, 1)),
            "update": ff.dynamic_update_slice(x, u, s),
            "update, scalars": ff.dynamic_update_slice(x, u, [s[1], i, 2]),
            "update, operand as update": ff.dynamic_update_slice(x, x, s),
        }
    for starts in STARTS:
        iv = np.int32(starts[0])
        feeds = {x: a, u: upd, s: np.array(starts, np.int32), i: iv}
        out, ref = run_both(g, fetches, feeds)
        want = {
            "slice, starts a vector": slice_loop(a, starts, sizes),
            "slice, scalars and ints": slice_loop(a, [iv, 1, starts[2]], (3, 1, 6)),
            "slice, the whole tensor": slice_loop(a, starts, shape),
            "slice, one element": slice_loop(a, starts, (1, 1, 1)),
            "update": update_loop(a, upd, starts),
            "update, scalars": update_loop(a, upd, [starts[1], iv, 2]),
            "update, operand as update": update_loop(a, a, starts),
        }
        for label in fetches:
            what = f"{label} at starts {starts}"
            assert_matches(out[label], ref[label], rtol=0, atol=0, what=what + " (vs reference)")
            assert_matches(ref[label], want[label].astype(ref[label].dtype), rtol=0, atol=0,
                           what=what + " (reference vs loop)")


def test_reference_keeps_float64_and_2d_partial_texel(gl):
    # a (5, 6) operand, blocks of 3 and 5 elements per row: partial texels everywhere
    a = np.linspace(-3, 3, 30).reshape(5, 6).astype(np.float32)
    from fragflow.ir.ops.structure.dynamic_slice import _dus_ref, _dynamic_slice_ref
    a64 = a.astype(np.float64) / 3
    got = _dynamic_slice_ref([a64, np.array([4, -2], np.int32)], {"sizes": (2, 5)})
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, slice_loop(a64, [4, -2], (2, 5)))
    got = _dus_ref([a64, a64[:2, :3] * 0 + 1, np.array([9, 1], np.int32)], {})
    assert got.dtype == np.float64
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(a.shape, name="x")
        s = ff.placeholder((2,), "int32", name="s")
        y = ff.dynamic_slice(x, s, (3, 5)) * 2.0 + 1.0        # an epilogue reading it
        z = ff.dynamic_update_slice(x, ff.sqrt(ff.abs(x[:2, :3])), s)
    for starts in [(0, 1), (2, 0), (-1, 7), (3, 1)]:
        feeds = {x: a, s: np.array(starts, np.int32)}
        out, ref = run_both(g, [y, z], feeds)
        assert_matches(out[0], ref[0], rtol=1e-6, what=f"slice {starts}")
        assert_matches(out[1], ref[1], rtol=1e-6, what=f"update {starts}")
        assert_matches(ref[0], (slice_loop(a, starts, (3, 5)) * 2 + 1).astype(np.float32),
                       rtol=1e-6, what=f"slice {starts} vs loop")
        want = update_loop(a, np.sqrt(np.abs(a[:2, :3].astype(np.float64))), starts)
        assert_matches(ref[1], want.astype(np.float32), rtol=1e-6, what=f"update {starts}")


def test_slice_with_a_tensor_begin_is_a_dynamic_slice(gl):
    a = np.arange(4 * 9, dtype=np.float32).reshape(4, 9)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(a.shape, name="x")
        b = ff.placeholder((2,), "int32", name="b")
        i = ff.placeholder((), "int32", name="i")
        y = ff.slice(x, b, [2, 5])
        y2 = ff.slice(x, [1, i], [3, 2])
    assert y.value.node.op == "dynamic_slice"
    for begin in [(0, 0), (2, 4), (3, 8)]:
        feeds = {x: a, b: np.array(begin, np.int32), i: np.int32(begin[1])}
        out, ref = run_both(g, [y, y2], feeds)
        assert_matches(out[0], ref[0], rtol=0, atol=0)
        assert_matches(out[1], ref[1], rtol=0, atol=0)
        # in range (2, 4) and (0, 0): TensorFlow's tf.slice; (3, 8) clamped (TF raises)
        assert_matches(ref[0], slice_loop(a, begin, (2, 5)).astype(np.float32), 0, 0)
        assert_matches(ref[1], slice_loop(a, [1, begin[1]], (3, 2)).astype(np.float32), 0, 0)


def test_errors():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 4), name="x")
        s = ff.placeholder((2,), "int32", name="s")
        with pytest.raises(FragflowError, match="slice sizes .* must be in"):
            ff.dynamic_slice(x, s, [4, 1])
        with pytest.raises(FragflowError, match="one entry per axis"):
            ff.dynamic_slice(x, s, [1])
        with pytest.raises(FragflowError, match="must be int32"):
            ff.dynamic_slice(x, ff.placeholder((2,), name="f"), [1, 1])
        with pytest.raises(FragflowError, match="one per axis"):
            ff.dynamic_slice(x, [s[0]], [1, 1])
        with pytest.raises(FragflowError, match="one int32 vector of 2"):
            ff.dynamic_slice(x, ff.placeholder((3,), "int32"), [1, 1])
        with pytest.raises(FragflowError, match="update's shape"):
            ff.dynamic_update_slice(x, ff.zeros((4, 1)), s)
        with pytest.raises(FragflowError, match="the update is int32"):
            ff.dynamic_update_slice(x, ff.zeros((1, 1), "int32"), s)
        with pytest.raises(FragflowError, match="needs a static size"):
            ff.slice(x, s, [1, -1])


def test_empty_blocks(gl):
    a = np.arange(15, dtype=np.float32).reshape(3, 5)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(a.shape, name="x")
        s = ff.placeholder((2,), "int32", name="s")
        y = ff.dynamic_slice(x, s, [0, 3])
        z = ff.dynamic_update_slice(x, ff.zeros((0, 2)), s)
    out, ref = run_both(g, [y, z], {x: a, s: np.array([1, 4], np.int32)})
    assert out[0].shape == ref[0].shape == (0, 3)
    assert_matches(out[1], a, rtol=0, atol=0, what="an empty update changes nothing")
    assert_matches(ref[1], a, rtol=0, atol=0, what="an empty update changes nothing (ref)")
