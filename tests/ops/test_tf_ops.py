"""TensorFlow functions of issue 15 built from fragflow's ops (frontend/ops_composite.py,
frontend/ops_linalg.py): GL and the numpy executor against numpy written independently
(np.einsum, np.linalg.norm, explicit index loops), on data with negatives, zeros, NaN,
sizes that are not multiples of 4 and 1-element axes; gradients against finite
differences."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as ff
from tests.gradcheck import check_gradients
from tests.reference import fed_placeholders

RNG = np.random.default_rng(15)


def _f32(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


def _both(build, *arrays):
    """build(*placeholders) fed with arrays: [the numpy executor on the graph as built,
    GL with every pass]. Fed, not constants: constant folding would compute the GL side
    with the numpy reference too."""
    g = ff.Graph()
    with g.as_default():
        feeds, feed = fed_placeholders(arrays)
        out = build(*feeds)
    return [ff.Session(g, backend="numpy", passes=[]).run(out, feed),
            ff.Session(g).run(out, feed)]


def _check(build, reference, *arrays, rtol=1e-5, atol=1e-6):
    want = reference(*arrays)
    for got in _both(build, *arrays):
        if isinstance(want, (list, tuple)):
            for g_, w_ in zip(got, want):
                np.testing.assert_allclose(g_, w_, rtol=rtol, atol=atol)
        else:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


# -- elementwise and reductions --------------------------------------------------------------
@pytest.mark.parametrize("name", ["math.divide_no_nan", "div_no_nan", "math.div_no_nan"])
def test_divide_no_nan_and_tf1_s_div_no_nan_on_edge_values(gl, name):
    """TF's rule: 0 wherever y is 0 or -0 (x = 0, NaN or inf too), else x / y as IEEE
    divides (NaN for y = NaN or inf / inf, 0 for finite / inf, inf past float32's range).
    Every x against every y by broadcasting; the reference divides in float64 and rounds
    to float32."""
    fn = ff
    for part in name.split("."):
        fn = getattr(fn, part)
    edges = [0.0, -0.0, 1.0, -2.0, 7.5, np.nan, np.inf, -np.inf]
    x = np.float32(edges + [3e38])[:, None]
    y = np.float32(edges + [-0.5])[None, :]

    def reference(a, b):
        a, b = a.astype(np.float64), b.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.where(b == 0, 0.0, a / b).astype(np.float32)
    want = reference(x, y)
    assert np.isnan(want).sum() == 19 and np.isinf(want).sum() == 9  # the edges are hit
    _check(fn, reference, x, y)


def test_logical_xor_and_bool_reductions(gl):
    a = RNG.random((3, 5, 1)) > 0.5
    b = RNG.random((3, 5, 1)) > 0.3
    _check(ff.math.logical_xor, np.logical_xor, a, b)
    for axis, keepdims in [(None, False), (1, False), ((0, 2), True), (2, False)]:
        _check(lambda x: ff.reduce_all(x, axis=axis, keepdims=keepdims),
               lambda x: np.all(x, axis=axis, keepdims=keepdims), a)
        _check(lambda x: ff.reduce_any(x, axis=axis, keepdims=keepdims),
               lambda x: np.any(x, axis=axis, keepdims=keepdims), a)
    with pytest.raises(ff.DTypeError, match="bool"):
        ff.reduce_all(ff.constant([1.0]))


def test_log_sigmoid_is_stable(gl):
    x = np.float32([-200, -30, -1, 0, 1e-3, 2, 50, 200, np.nan])
    with np.errstate(invalid="ignore"):              # the NaN input
        _check(ff.math.log_sigmoid, lambda v: -np.logaddexp(0, -v.astype(np.float64)), x,
               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis, keepdims", [(None, False), (0, False), (-1, True),
                                            ((0, 2), False), (1, True)])
def test_reduce_variance_and_std(gl, axis, keepdims):
    x = _f32(5, 1, 7, scale=3.0) + 10.0
    _check(lambda t: ff.math.reduce_variance(t, axis, keepdims),
           lambda v: np.var(v.astype(np.float64), axis=axis, keepdims=keepdims), x,
           rtol=1e-4, atol=1e-4)
    _check(lambda t: ff.math.reduce_std(t, axis, keepdims),
           lambda v: np.std(v.astype(np.float64), axis=axis, keepdims=keepdims), x,
           rtol=1e-4, atol=1e-4)


def test_reduce_variance_propagates_nan(gl):
    x = np.float32([[1, np.nan, 3], [1, 2, 3]])
    for got in _both(lambda t: ff.math.reduce_variance(t, axis=1), x):
        assert np.isnan(got[0]) and np.isclose(got[1], 2 / 3)


def test_l2_normalize_and_norms(gl):
    x = _f32(3, 6)
    x[1] = 0.0                                   # a zero row: epsilon keeps it finite
    _check(lambda t: ff.nn.l2_normalize(t, axis=1),
           lambda v: v / np.sqrt(np.maximum((v ** 2).sum(1, keepdims=True), 1e-12)), x)
    m = _f32(2, 5, 3)
    cases = [("euclidean", None), ("fro", (1, 2)), (1, -1), (np.inf, 1), (2, 0), (3, 2),
             (1, (1, 2)), (np.inf, (1, 2))]
    for ord_, axis in cases:
        def ref(v, ord_=ord_, axis=axis):
            v = v.astype(np.float64)
            if axis is None:
                return np.linalg.norm(v.ravel())
            if isinstance(axis, tuple):
                return np.linalg.norm(v, ord=ord_, axis=axis)
            return np.linalg.norm(v, ord=ord_, axis=axis)
        _check(lambda t, ord_=ord_, axis=axis: ff.norm(t, ord=ord_, axis=axis), ref, m,
               rtol=1e-5, atol=1e-5)
    with pytest.raises(ff.AttrError, match="ord"):
        ff.norm(ff.constant(m), ord=-1)


def test_clip_by_norm_and_global_norm(gl):
    x = _f32(4, 3, scale=2.0)
    z = np.zeros((2, 2), np.float32)
    for clip, axes in [(1.0, None), (100.0, None), (0.5, 1), (0.5, [0])]:
        def ref(v, clip=clip, axes=axes):
            ax = None if axes is None else tuple(np.atleast_1d(axes))
            n = np.sqrt((v.astype(np.float64) ** 2).sum(axis=ax, keepdims=True))
            return v * clip / np.maximum(n, clip)
        _check(lambda t, clip=clip, axes=axes: ff.clip_by_norm(t, clip, axes), ref, x,
               rtol=1e-5, atol=1e-6)
    _check(lambda t: ff.clip_by_norm(t, 1.0), lambda v: v, z)
    y = _f32(5)

    def ref_global(a, b):
        n = np.sqrt((a.astype(np.float64) ** 2).sum() + (b.astype(np.float64) ** 2).sum())
        return [a * 2.0 / max(n, 2.0), b * 2.0 / max(n, 2.0), n]

    def build(a, b):
        clipped, n = ff.clip_by_global_norm([a, b], 2.0)
        return [*clipped, n]
    _check(build, ref_global, x, y, rtol=1e-5, atol=1e-6)


# -- linear algebra ------------------------------------------------------------------------
@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", [(3, 5), (5, 2)]), ("bij,bjk->bik", [(2, 3, 5), (2, 5, 7)]),
    ("ij->ji", [(3, 5)]), ("ii->", [(4, 4)]), ("ii->i", [(5, 5)]), ("bii->b", [(2, 3, 3)]),
    ("i,j->ij", [(3,), (5,)]), ("ij->i", [(3, 5)]), ("ij->", [(3, 5)]),
    ("ij,ij->i", [(3, 5), (3, 5)]), ("i,i->", [(7,), (7,)]), ("ij,kj->ik", [(2, 3), (4, 3)]),
    ("bhqd,bhkd->bhqk", [(1, 2, 3, 5), (1, 2, 4, 5)]), ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,jk", [(3, 5), (5, 2)]),
])
def test_einsum_patterns(gl, equation, shapes):
    arrays = [_f32(*s) for s in shapes]
    _check(lambda *ts: ff.einsum(equation, *ts),
           lambda *vs: np.einsum(equation, *[v.astype(np.float64) for v in vs]), *arrays,
           rtol=1e-4, atol=1e-5)


def test_einsum_bad_input():
    g = ff.Graph()
    with g.as_default():
        a = ff.constant(_f32(2, 3))
        with pytest.raises(ff.ShapeError, match="rank"):
            ff.einsum("ijk->i", a)
        with pytest.raises(ff.AttrError, match="operands"):
            ff.einsum("ij,jk->ik", a)
        with pytest.raises(ff.ShapeError, match="size"):
            ff.einsum("ij,ij->i", a, ff.constant(_f32(2, 4)))


@pytest.mark.parametrize("axes, shapes", [(1, [(3, 4), (4, 5)]), (2, [(2, 3, 4), (3, 4, 5)]),
                                          (0, [(2,), (3,)]),
                                          ([[1, 0], [0, 2]], [(3, 4, 5), (4, 2, 3)]),
                                          ([2, 0], [(2, 3, 5), (5, 3)])])
def test_tensordot(gl, axes, shapes):
    a, b = [_f32(*s) for s in shapes]
    _check(lambda x, y: ff.tensordot(x, y, axes),
           lambda x, y: np.tensordot(x.astype(np.float64), y.astype(np.float64), axes), a, b,
           rtol=1e-4, atol=1e-5)


def test_eye_diag_diag_part_band_part_trace(gl):
    g = ff.Graph()
    with g.as_default():
        e = ff.eye(3, 5, batch_shape=[2])
    np.testing.assert_array_equal(ff.Session(g, backend="gl").run(e),
                                  np.broadcast_to(np.eye(3, 5), (2, 3, 5)))
    v = _f32(2, 5)
    _check(ff.linalg.diag, lambda x: np.stack([np.diag(r) for r in x]), v)
    for shape in [(4, 4), (3, 6), (2, 6, 3), (1, 1)]:
        m = _f32(*shape)
        m.flat[1 % m.size] = np.nan               # NaN off the diagonal must not leak
        _check(ff.linalg.diag_part, lambda x: np.diagonal(x, axis1=-2, axis2=-1), m)
        for lower, upper in [(0, 0), (1, 0), (-1, 0), (0, -1), (2, 1), (-1, -1)]:
            def ref(x, lower=lower, upper=upper):
                i = np.arange(x.shape[-2])[:, None]
                j = np.arange(x.shape[-1])[None, :]
                keep = ((lower < 0) | (i - j <= lower)) & ((upper < 0) | (j - i <= upper))
                return np.where(keep, x, 0)
            _check(lambda x, lower=lower, upper=upper: ff.linalg.band_part(x, lower, upper),
                   ref, m)
    s = _f32(3, 4, 4)
    _check(ff.linalg.trace, lambda x: np.trace(x, axis1=-2, axis2=-1), s, rtol=1e-5)
    i = RNG.integers(-5, 5, (3, 3)).astype(np.int32)
    _check(ff.linalg.diag_part, lambda x: np.diagonal(x), i)


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid(gl, indexing):
    a, b, c = _f32(3), _f32(5), _f32(2)
    _check(lambda x, y, z: ff.meshgrid(x, y, z, indexing=indexing),
           lambda x, y, z: np.meshgrid(x, y, z, indexing=indexing), a, b, c)
    _check(lambda x, y: ff.meshgrid(x, y, indexing=indexing),
           lambda x, y: np.meshgrid(x, y, indexing=indexing), a, b)


# -- nn ---------------------------------------------------------------------------------------
def test_bias_add(gl):
    x, b = _f32(2, 3, 5, 7), _f32(7)
    _check(ff.nn.bias_add, lambda v, w: v + w, x, b)
    xc, bc = _f32(2, 3, 5), _f32(3)
    _check(lambda v, w: ff.nn.bias_add(v, w, data_format="NCHW"),
           lambda v, w: v + w[:, None], xc, bc)


def test_fused_batch_norm(gl):
    x = _f32(3, 4, 5, 6, scale=2.0) + 1.0
    scale, offset = _f32(6), _f32(6)
    n = 3 * 4 * 5

    def ref(v, s, o):
        v = v.astype(np.float64)
        mean, var = v.mean((0, 1, 2)), v.var((0, 1, 2))
        return [(v - mean) / np.sqrt(var + 1e-3) * s + o, mean, var * n / (n - 1)]
    _check(lambda v, s, o: list(ff.nn.fused_batch_norm(v, s, o)), ref, x, scale, offset,
           rtol=1e-4, atol=1e-4)
    mean, var = _f32(6), np.abs(_f32(6)) + 0.5
    _check(lambda v, s, o, m, w: ff.nn.fused_batch_norm(v, s, o, m, w, epsilon=0.01,
                                                        is_training=False)[0],
           lambda v, s, o, m, w: (v - m) / np.sqrt(w + 0.01) * s + o,
           x, scale, offset, mean, var, rtol=1e-4, atol=1e-4)


def _depth_to_space_ref(x, b):
    n, h, w, c = x.shape
    out = np.zeros((n, h * b, w * b, c // (b * b)), x.dtype)
    for i in range(h * b):
        for j in range(w * b):
            for k in range(c // (b * b)):
                out[:, i, j, k] = x[:, i // b, j // b, ((i % b) * b + j % b) * (c // (b * b)) + k]
    return out


@pytest.mark.parametrize("shape, block", [((2, 3, 5, 12), 2), ((1, 2, 2, 9), 3),
                                          ((1, 1, 1, 4), 2)])
def test_depth_to_space_and_back(gl, shape, block):
    x = _f32(*shape)
    _check(lambda t: ff.nn.depth_to_space(t, block), lambda v: _depth_to_space_ref(v, block), x)
    y = _depth_to_space_ref(x, block)
    _check(lambda t: ff.nn.space_to_depth(t, block), lambda v: x, y)
    with pytest.raises(ff.ShapeError, match="divisible"):
        ff.nn.space_to_depth(ff.constant(_f32(1, 3, 3, 1)), 2)


# -- gradients against finite differences ------------------------------------------------------
GRADIENT_CASES = {
    "divide_no_nan": (lambda a, b: ff.math.divide_no_nan(a, b),
                      # no zero divisors: there x / y jumps (see the test below)
                      {"a": _f32(2, 3), "b": np.float32([[0.5, 1, -2], [1.5, 3, -1]])}),
    "log_sigmoid": (ff.math.log_sigmoid, {"x": _f32(3, 5, scale=3)}),
    "reduce_std": (lambda x: ff.math.reduce_std(x, axis=1), {"x": _f32(3, 5)}),
    "reduce_variance": (lambda x: ff.math.reduce_variance(x, axis=0, keepdims=True),
                        {"x": _f32(4, 3)}),
    "l2_normalize": (lambda x: ff.nn.l2_normalize(x, axis=-1), {"x": _f32(2, 5)}),
    "norm": (lambda x: ff.norm(x, axis=1), {"x": _f32(3, 4)}),
    "clip_by_norm": (lambda x: ff.clip_by_norm(x, 1.0), {"x": _f32(2, 3)}),
    "tensordot": (lambda a, b: ff.tensordot(a, b, [[1, 2], [0, 1]]),
                  {"a": _f32(2, 3, 4), "b": _f32(3, 4, 2)}),
    "einsum": (lambda a, b: ff.einsum("bij,bkj->bik", a, b),
               {"a": _f32(2, 3, 4), "b": _f32(2, 5, 4)}),
    "einsum_trace": (lambda a: ff.einsum("ii->", a), {"a": _f32(3, 3)}),
    "bias_add": (ff.nn.bias_add, {"x": _f32(2, 3, 4), "b": _f32(4)}),
    "fused_batch_norm": (lambda x, s, o: ff.nn.fused_batch_norm(x, s, o)[0],
                         {"x": _f32(2, 2, 3, 3), "s": _f32(3), "o": _f32(3)}),
    "depth_to_space": (lambda x: ff.nn.depth_to_space(x, 2), {"x": _f32(1, 2, 3, 8)}),
    "diag_part": (ff.linalg.diag_part, {"x": _f32(2, 3, 4)}),
    "band_part": (lambda x: ff.linalg.band_part(x, 1, 0), {"x": _f32(4, 3)}),
    "diag": (ff.linalg.diag, {"x": _f32(2, 3)}),
}


@pytest.mark.parametrize("case", sorted(GRADIENT_CASES))
def test_gradients_against_finite_differences(gl, case):
    build, inputs = GRADIENT_CASES[case]
    check_gradients(build, inputs, backend="gl", rtol=2e-3, atol=2e-4)


def test_divide_no_nan_gradient_is_zero_where_the_divisor_is(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(ff.float32, [3])
        y = ff.placeholder(ff.float32, [3])
        dx, dy = ff.gradients(ff.reduce_sum(ff.math.divide_no_nan(x, y)), [x, y])
    out = ff.Session(g).run([dx, dy], {x: np.float32([1, 2, 3]), y: np.float32([0, 2, 0])})
    np.testing.assert_array_equal(out[0], [0, 0.5, 0])
    np.testing.assert_array_equal(out[1], [0, -0.5, 0])


# -- scans, searches, scatters ---------------------------------------------------------------
@pytest.mark.parametrize("axis, exclusive, reverse", [(1, False, False), (0, True, False),
                                                      (-1, False, True), (1, True, True)])
def test_cumprod(gl, axis, exclusive, reverse):
    x = _f32(3, 5, 2)
    x[1, 2, 0] = 0.0
    x[2, 1, 1] = np.nan

    def ref(v):
        v = np.moveaxis(v.astype(np.float64), axis, -1)
        if reverse:
            v = v[..., ::-1]
        if exclusive:
            v = np.concatenate([np.ones_like(v[..., :1]), v[..., :-1]], -1)
        out = np.cumprod(v, -1)
        if reverse:
            out = out[..., ::-1]
        return np.moveaxis(out, -1, axis)
    _check(lambda t: ff.math.cumprod(t, axis, exclusive, reverse), ref, x, rtol=1e-5,
           atol=1e-6)
    i = RNG.integers(-3, 4, (2, 7)).astype(np.int32)
    _check(lambda t: ff.math.cumprod(t, 1), lambda v: np.cumprod(v, 1), i)


def test_in_top_k(gl):
    p = np.float32([[0.1, 0.9, 0.5, 0.5], [1, 2, 3, 4], [np.nan, 1, 0, 0],
                    [0.2, np.inf, 0.2, 0.1], [3, 2, 1, 0]])
    t = np.int32([2, 0, 0, 2, 7])
    # TF's rule: in the top k iff fewer than k predictions beat the target's; a
    # non-finite target prediction or an out-of-range target gives False
    expected = np.array([True, False, False, True, False])
    for got in _both(lambda a, b: ff.nn.in_top_k(a, b, 2), p, t):
        np.testing.assert_array_equal(got, expected)
    for got in _both(lambda a, b: ff.math.in_top_k(b, a, k=1), p, t):   # TF2's order
        np.testing.assert_array_equal(got, [False, False, False, False, False])


@pytest.mark.parametrize("side", ["left", "right"])
def test_searchsorted(gl, side):
    seq = np.sort(_f32(3, 9), axis=1)
    seq[1, 3:6] = seq[1, 3]                       # ties
    values = np.concatenate([_f32(3, 4), seq[:, 2:4], np.full((3, 1), np.inf, np.float32)],
                            axis=1)
    _check(lambda s, v: ff.searchsorted(s, v, side=side),
           lambda s, v: np.stack([np.searchsorted(s[i], v[i], side=side) for i in range(3)]),
           seq, values)


def test_scatter_nd_and_tensor_scatter(gl):
    indices = np.int32([[1, 0], [3, 2], [1, 0], [0, 5], [9, 0]])   # a duplicate, two out
    updates = _f32(5)
    want = np.zeros((4, 3), np.float32)
    for (i, j), u in zip(indices, updates):
        if i < 4 and j < 3:
            want[i, j] += u
    _check(lambda a, b: ff.scatter_nd(a, b, [4, 3]), lambda a, b: want, indices, updates)
    rows = np.int32([[2], [0]])
    slices = _f32(2, 3)
    base = _f32(4, 3)
    replaced = base.copy()
    replaced[[2, 0]] = slices
    _check(ff.tensor_scatter_nd_update, lambda t, i, u: replaced, base, rows, slices)
    added = base.copy()
    added[[2, 0]] += slices
    _check(ff.tensor_scatter_nd_add, lambda t, i, u: added, base, rows, slices)
    with pytest.raises(ff.ShapeError, match="updates"):
        ff.scatter_nd(ff.constant(rows), ff.constant(_f32(3, 3)), [4, 3])


def test_bincount(gl):
    arr = np.int32([1, 1, 3, 0, 5, 3, 3])
    w = _f32(7)
    _check(lambda a: ff.math.bincount(a, minlength=6), lambda a: np.bincount(a), arr)
    _check(lambda a, b: ff.math.bincount(a, weights=b, minlength=8),
           lambda a, b: np.bincount(a, weights=b, minlength=8), arr, w, rtol=1e-5)
    _check(lambda a: ff.math.bincount(a, maxlength=3),
           lambda a: np.bincount(a[a < 3], minlength=3), arr)
    g = ff.Graph()
    with g.as_default(), pytest.raises(ff.ShapeError, match="maxlength"):
        ff.math.bincount(ff.placeholder(ff.int32, [4]))


SCATTER_GRADIENT_CASES = {
    "cumprod": (lambda x: ff.math.cumprod(x, axis=1), {"x": _f32(2, 5)}),
    "cumprod_reverse_exclusive": (lambda x: ff.math.cumprod(x, 0, True, True),
                                  {"x": _f32(4, 2)}),
    "scatter_nd": (lambda u: ff.scatter_nd(np.int32([[1], [0], [1]]), u, [3, 2]),
                   {"u": _f32(3, 2)}),
    "tensor_scatter_nd_update": (
        lambda t, u: ff.tensor_scatter_nd_update(t, np.int32([[0, 1], [2, 0]]), u),
        {"t": _f32(3, 2), "u": _f32(2)}),
}


@pytest.mark.parametrize("case", sorted(SCATTER_GRADIENT_CASES))
def test_scan_and_scatter_gradients(gl, case):
    build, inputs = SCATTER_GRADIENT_CASES[case]
    check_gradients(build, inputs, backend="gl", rtol=2e-3, atol=2e-4)


# -- conv3d_transpose ----------------------------------------------------------------------
@pytest.mark.parametrize("padding, strides, out_shape", [("same", 2, [2, 6, 8, 10, 4]),
                                                         ("VALID", 1, [2, 5, 6, 7, 4]),
                                                         ("SAME", 1, [2, 3, 4, 5, 4])])
def test_conv3d_transpose_matches_torch(gl, padding, strides, out_shape):
    torch = pytest.importorskip("torch", reason="torch is not installed (the test extra brings it)")
    x = _f32(2, 3, 4, 5, 6)
    w = _f32(3, 3, 3, 4, 6)

    def ref(a, b):
        k = 3
        pads = []
        for size, inner in zip(out_shape[1:4], a.shape[1:4]):   # TF's padding, per axis
            total = max((inner - 1) * strides + k - size, 0) if padding.upper() == "SAME" else 0
            pads.append(total // 2)
        t = torch.nn.functional.conv_transpose3d(
            torch.from_numpy(a).double().permute(0, 4, 1, 2, 3),
            torch.from_numpy(b).double().permute(4, 3, 0, 1, 2), stride=strides)
        t = t.permute(0, 2, 3, 4, 1).numpy()
        return t[:, pads[0]:pads[0] + out_shape[1], pads[1]:pads[1] + out_shape[2],
                 pads[2]:pads[2] + out_shape[3]]
    _check(lambda a, b: ff.nn.conv3d_transpose(a, b, out_shape, strides, padding), ref, x, w,
           rtol=1e-4, atol=1e-4)


def test_conv3d_transpose_gradients_and_bad_shape(gl):
    check_gradients(lambda a, b: ff.nn.conv3d_transpose(a, b, [1, 4, 4, 2, 2], 2, "SAME"),
                    {"a": _f32(1, 2, 2, 1, 3), "b": _f32(2, 2, 2, 2, 3)}, backend="gl",
                    rtol=2e-3, atol=2e-4)
    g = ff.Graph()
    with g.as_default(), pytest.raises(ff.ShapeError, match="output_shape"):
        ff.nn.conv3d_transpose(ff.constant(_f32(1, 2, 2, 2, 3)), ff.constant(_f32(2, 2, 2, 2, 3)),
                               [1, 4, 4, 4], 2)


# -- max_pool_with_argmax, crop_and_resize ---------------------------------------------------
def _pool_argmax_ref(x, k, s, padding, include_batch):
    n, h, w, c = x.shape
    if padding == "SAME":
        oh, ow = -(-h // s), -(-w // s)
        top = max((oh - 1) * s + k - h, 0) // 2
        left = max((ow - 1) * s + k - w, 0) // 2
    else:
        oh, ow, top, left = (h - k) // s + 1, (w - k) // s + 1, 0, 0
    values = np.zeros((n, oh, ow, c), np.float32)
    arg = np.zeros((n, oh, ow, c), np.int32)
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for ch in range(c):
                    best, where = -np.inf, -1
                    for dy in range(k):
                        for dx in range(k):
                            y, xx = i * s - top + dy, j * s - left + dx
                            if 0 <= y < h and 0 <= xx < w and x[b, y, xx, ch] > best:
                                best, where = x[b, y, xx, ch], (y * w + xx) * c + ch
                    values[b, i, j, ch] = best
                    arg[b, i, j, ch] = where + (b * h * w * c if include_batch else 0)
    return [values, arg]


@pytest.mark.parametrize("k, s, padding, include_batch", [(2, 2, "VALID", False),
                                                          (3, 2, "SAME", True),
                                                          (3, 1, "same", False)])
def test_max_pool_with_argmax(gl, k, s, padding, include_batch):
    x = _f32(2, 7, 5, 3)
    x[0, 1, 1, 0] = x[0, 1, 2, 0] = 9.0                       # a tie: the first wins
    _check(lambda t: list(ff.nn.max_pool_with_argmax(t, k, s, padding,
                                                     include_batch_index=include_batch)),
           lambda v: _pool_argmax_ref(v, k, s, padding.upper(), include_batch), x)


def _crop_ref(image, boxes, index, size, method, extrapolation):
    _, h, w, c = image.shape
    ch, cw = size
    out = np.zeros((len(boxes), ch, cw, c), np.float64)
    for b, (y1, x1, y2, x2) in enumerate(boxes.astype(np.float64)):
        for i in range(ch):
            in_y = y1 * (h - 1) + i * (y2 - y1) * (h - 1) / (ch - 1) if ch > 1 \
                else 0.5 * (y1 + y2) * (h - 1)
            for j in range(cw):
                in_x = x1 * (w - 1) + j * (x2 - x1) * (w - 1) / (cw - 1) if cw > 1 \
                    else 0.5 * (x1 + x2) * (w - 1)
                if not (0 <= in_y <= h - 1 and 0 <= in_x <= w - 1):
                    out[b, i, j] = extrapolation
                    continue
                img = image[index[b]].astype(np.float64)
                if method == "nearest":
                    out[b, i, j] = img[int(np.round(in_y)), int(np.round(in_x))]
                    continue
                t, lft = int(np.floor(in_y)), int(np.floor(in_x))
                bt, rt = int(np.ceil(in_y)), int(np.ceil(in_x))
                yl, xl = in_y - t, in_x - lft
                top = img[t, lft] + (img[t, rt] - img[t, lft]) * xl
                bottom = img[bt, lft] + (img[bt, rt] - img[bt, lft]) * xl
                out[b, i, j] = top + (bottom - top) * yl
    return out


@pytest.mark.parametrize("method, size", [("bilinear", (3, 4)), ("nearest", (5, 2)),
                                          ("bilinear", (1, 1))])
def test_crop_and_resize(gl, method, size):
    image = _f32(2, 5, 7, 3)
    boxes = np.float32([[0, 0, 1, 1], [0.13, 0.21, 0.77, 1.3], [0.9, 0.8, 0.1, 0.05],
                        [-0.2, 0.3, 0.4, 0.6]])
    index = np.int32([1, 0, 1, 0])
    _check(lambda a, b, i: ff.image.crop_and_resize(a, b, i, size, method, -1.0),
           lambda a, b, i: _crop_ref(a, b, i, size, method, -1.0), image, boxes, index,
           rtol=1e-4, atol=1e-5)


def test_crop_and_resize_and_argmax_pool_gradients(gl):
    boxes = np.float32([[0.11, 0.07, 0.83, 0.91], [0.52, 0.33, 0.14, 0.62]])
    check_gradients(lambda img, b: ff.image.crop_and_resize(img, b, np.int32([0, 1]), [3, 2]),
                    {"img": _f32(2, 4, 5, 2), "b": boxes}, backend="gl", rtol=2e-3,
                    atol=2e-4)
    check_gradients(lambda x: ff.nn.max_pool_with_argmax(x, 2, 2, "SAME")[0],
                    {"x": _f32(1, 5, 5, 2)}, backend="gl", rtol=2e-3, atol=2e-4)
