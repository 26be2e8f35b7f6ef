"""The structure family on GL against the numpy reference executor and against plain
numpy (np.concatenate, np.pad, np.tile, ...) or small loop-based references written
here: concat, stack, unstack, split, slice, strided_slice (TensorFlow's masks), pad,
mirror_pad, tile, reverse, broadcast_to, gather, gather_nd, unsorted_segment_sum,
one_hot, top_k (top_k_rank + top_k_indices + gather), space_to_batch_nd,
batch_to_space_nd, and the adjoint kernels gather_grad, gather_nd_grad and
mirror_pad_grad. Every op moves elements (exact) except the sums (1e-5, scaled).

Each test builds one graph with many fetches (each kernel costs ~100 ms of JIT).
"""
import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.ops import structure as st
from tests.reference import assert_matches, run_both

DTYPES = ["float32", "int32", "bool"]


def data_of(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    if dtype == "int32":
        return rng.integers(-2 ** 31, 2 ** 31 - 1, shape, dtype=np.int64).astype(np.int32)
    return rng.random(shape) < 0.5


def check_all(graph, fetches, feeds, expected, summed=()):
    """Every fetch against the numpy executor and against `expected` (exact, except
    the labels in `summed`, which add floats)."""
    out, ref = run_both(graph, fetches, feeds)
    for label in fetches:
        tol = {"rtol": 1e-5} if label in summed else {"rtol": 0, "atol": 0}
        assert_matches(out[label], ref[label], what=f"{label} (vs reference)", **tol)
        if label in expected:
            want = np.asarray(expected[label])
            assert_matches(out[label], want.astype(out[label].dtype),
                           what=f"{label} (vs numpy)", **tol)
    return out


# -- joining and cutting ------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_concat_stack_unstack_split_slice(gl, dtype):
    a, b = data_of((3, 5, 7), dtype, 1), data_of((3, 2, 7), dtype, 2)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(a.shape, dtype, name="x")
        y = ff.placeholder(b.shape, dtype, name="y")
        parts = ff.split(x, [2, -1, 1], axis=-2)
        thirds = ff.split(x[:, :3], 3, axis=1)
        rows = ff.unstack(x, axis=1)
        fetches = {
            "concat axis 1": ff.concat([x, y, x], axis=1),
            "concat axis -2 with an empty part": ff.concat([y, x[:, :0], x], axis=-2),
            "concat axis 0": ff.concat([x, x[1:]], axis=0),
            "concat one input": ff.concat([y], axis=2),
            "concat of 11 (a tree)": ff.concat([x[:, i:i + 1] for i in range(5)] +
                                               [y[:, :1]] * 6, axis=1),
            "stack axis 0": ff.stack([x, x, x], axis=0),
            "stack axis -1": ff.stack([y, y[::-1]], axis=-1),
            "unstack[0]": rows[0], "unstack[4]": rows[4],
            "unstack axis -1": ff.unstack(y, axis=-1)[6],
            "split[0]": parts[0], "split[1]": parts[1], "split[2]": parts[2],
            "split 3 ways": thirds[2],
            "slice": ff.slice(x, [1, 2, 0], [2, -1, 5]),
            "slice empty": ff.slice(x, [1, 5, 0], [2, 0, -1]),
        }
    assert len(rows) == 5 and len(thirds) == 3
    check_all(g, fetches, {x: a, y: b}, {
        "concat axis 1": np.concatenate([a, b, a], 1),
        "concat axis -2 with an empty part": np.concatenate([b, a], 1),
        "concat axis 0": np.concatenate([a, a[1:]], 0),
        "concat one input": b,
        "concat of 11 (a tree)": np.concatenate([a] + [b[:, :1]] * 6, 1),
        "stack axis 0": np.stack([a, a, a]), "stack axis -1": np.stack([b, b[::-1]], -1),
        "unstack[0]": a[:, 0], "unstack[4]": a[:, 4], "unstack axis -1": b[..., 6],
        "split[0]": a[:, :2], "split[1]": a[:, 2:4], "split[2]": a[:, 4:],
        "split 3 ways": a[:, 2:3], "slice": a[1:3, 2:, 0:5], "slice empty": a[1:3, 5:5, :]})


def tf_strided_slice(x, begin, end, strides, begin_mask=0, end_mask=0, ellipsis_mask=0,
                     new_axis_mask=0, shrink_axis_mask=0):
    """TensorFlow's strided_slice on a numpy array, element by element (its documented
    semantics, independent of fragflow's translation to an index key)."""
    dims, spec = list(x.shape), []     # spec: per output-or-new axis
    n_real = sum(1 for i in range(len(begin))
                 if not (ellipsis_mask | new_axis_mask) >> i & 1)
    axis = 0
    for i in range(len(begin)):
        bit = 1 << i
        if ellipsis_mask & bit:
            for _ in range(x.ndim - n_real):
                spec.append(("all", axis))
                axis += 1
        elif new_axis_mask & bit:
            spec.append(("new",))
        elif shrink_axis_mask & bit:
            spec.append(("one", axis, begin[i] % dims[axis]))
            axis += 1
        else:
            d, s = dims[axis], strides[i]
            lo, hi = (0, d) if s > 0 else (-1, d - 1)
            b = (lo if s > 0 else hi) if begin_mask & bit else begin[i]
            e = (hi if s > 0 else lo) if end_mask & bit else end[i]
            if not begin_mask & bit:
                b = min(max(b + d if b < 0 else b, lo), hi)
            if not end_mask & bit:
                e = min(max(e + d if e < 0 else e, lo), hi)
            spec.append(("range", axis, list(range(b, e, s))))
            axis += 1
    while axis < x.ndim:
        spec.append(("all", axis))
        axis += 1
    shape = [1 if e[0] == "new" else dims[e[1]] if e[0] == "all" else len(e[2])
             for e in spec if e[0] != "one"]
    out = np.zeros(shape, x.dtype)
    for pos in np.ndindex(*shape):
        src, k = [], 0
        for e in spec:
            if e[0] == "one":
                src.append(e[2])
                continue
            if e[0] == "all":
                src.append(pos[k])
            elif e[0] == "range":
                src.append(e[2][pos[k]])
            k += 1
        out[pos] = x[tuple(src)]
    return out


STRIDED = [  # (begin, end, strides, masks)
    ([1, 0, 2], [3, 0, 0], [1, 1, -1], {"end_mask": 0b100, "shrink_axis_mask": 0b010}),
    ([0, 0], [0, 0], [1, 1], {"ellipsis_mask": 0b01, "new_axis_mask": 0b10}),
    ([-1, 4, 1], [-4, 0, 6], [-1, -2, 2], {}),
    ([0, 1, 0, 0], [0, 4, 0, 0], [1, 3, 1, 1],
     {"begin_mask": 0b1001, "end_mask": 0b1001, "new_axis_mask": 0b0100}),
    ([2, 0], [1, 0], [1, 1], {"ellipsis_mask": 0b10}),                     # empty
    ([-2, 3], [0, 0], [1, 1], {"shrink_axis_mask": 0b11}),
    ([1, 0, -1], [100, 0, -100], [2, 1, -3], {"end_mask": 0b010}),
]


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_strided_slice_with_tensorflow_masks(gl, dtype):
    value = data_of((4, 5, 7), dtype, 3)
    g = ff.Graph()
    fetches, expected = {}, {}
    with g.as_default():
        x = ff.placeholder(value.shape, dtype, name="x")
        for n, (b, e, s, masks) in enumerate(STRIDED):
            label = f"#{n} {b} {e} {s} {masks}"
            fetches[label] = ff.strided_slice(x, b, e, s, **masks)
            expected[label] = tf_strided_slice(value, b, e, s, **masks)
    check_all(g, fetches, {x: value}, expected)


# -- padding, tiling, reversing, broadcasting ------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_pad_mirror_pad_tile_reverse_broadcast_to(gl, dtype):
    a = data_of((3, 5, 6), dtype, 4)
    fill = {"float32": -2.5, "int32": 7, "bool": True}[dtype]
    pads = [[1, 2], [0, 3], [2, 0]]
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(a.shape, dtype, name="x")
        fetches = {
            "pad": ff.pad(x, pads, constant_values=fill),
            "pad zeros": ff.pad(x, [[0, 0], [1, 1], [0, 0]]),
            "pad nothing": ff.pad(x, [[0, 0]] * 3),
            "mirror_pad REFLECT": ff.mirror_pad(x, [[2, 2], [4, 1], [0, 5]], "REFLECT"),
            "pad SYMMETRIC": ff.pad(x, [[3, 3], [5, 2], [1, 6]], mode="SYMMETRIC"),
            "tile": ff.tile(x, [2, 1, 3]),
            "tile zero times": ff.tile(x, [1, 0, 2]),
            "tile of a size-1 axis": ff.tile(x[:, :1], [1, 4, 1]),
            "reverse": ff.reverse(x, [0, -1]),
            "reverse one axis": ff.reverse(x, 1),
            "reverse no axis": ff.reverse(x, []),
            "broadcast_to": ff.broadcast_to(x[:, :1], (2, 3, 5, 6)),
            "broadcast_to same": ff.broadcast_to(x, (3, 5, 6)),
        }
    check_all(g, fetches, {x: a}, {
        "pad": np.pad(a, pads, constant_values=fill),
        "pad zeros": np.pad(a, [[0, 0], [1, 1], [0, 0]]), "pad nothing": a,
        "mirror_pad REFLECT": np.pad(a, [[2, 2], [4, 1], [0, 5]], mode="reflect"),
        "pad SYMMETRIC": np.pad(a, [[3, 3], [5, 2], [1, 6]], mode="symmetric"),
        "tile": np.tile(a, [2, 1, 3]), "tile zero times": np.tile(a, [1, 0, 2]),
        "tile of a size-1 axis": np.tile(a[:, :1], [1, 4, 1]),
        "reverse": a[::-1, :, ::-1], "reverse one axis": a[:, ::-1], "reverse no axis": a,
        "broadcast_to": np.broadcast_to(a[:, :1], (2, 3, 5, 6)),
        "broadcast_to same": a})


def test_pad_keeps_nan_and_inf(gl):
    a = np.array([[np.nan, np.inf, -np.inf, -0.0, 1.5]], np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(a.shape, name="x")
        fetches = {"pad nan": ff.pad(x, [[1, 0], [2, 1]], constant_values=np.nan),
                   "reflect": ff.pad(x, [[0, 0], [4, 4]], mode="REFLECT"),
                   "symmetric": ff.pad(x, [[1, 1], [5, 5]], mode="SYMMETRIC")}
    check_all(g, fetches, {x: a}, {
        "pad nan": np.pad(a, [[1, 0], [2, 1]], constant_values=np.nan),
        "reflect": np.pad(a, [[0, 0], [4, 4]], mode="reflect"),
        "symmetric": np.pad(a, [[1, 1], [5, 5]], mode="symmetric")})


def mirror_fold(dy, paddings, mode):
    """mirror_pad's adjoint by brute force: the Jacobian of np.pad, transposed."""
    shape = tuple(d - b - e for d, (b, e) in zip(dy.shape, paddings))
    out = np.zeros(shape, np.float64)
    for pos in np.ndindex(*shape):
        unit = np.zeros(shape)
        unit[pos] = 1
        out[pos] = np.sum(np.pad(unit, paddings, mode=mode.lower()) * dy)
    return out.astype(np.float32)


def test_mirror_pad_grad_folds_the_border_back(gl):
    dy = data_of((7, 11), "float32", 5)
    ints = np.arange(7 * 11, dtype=np.int32).reshape(7, 11)
    cases = {"REFLECT": [[2, 1], [3, 3]], "SYMMETRIC": [[2, 2], [4, 0]]}
    g = ff.Graph()
    fetches, expected = {}, {}
    with g.as_default():
        x = ff.placeholder(dy.shape, name="dy")
        k = ff.placeholder(ints.shape, "int32", name="k")
        for mode, pads in cases.items():
            fetches[f"mirror_pad_grad {mode}"] = ff.Tensor(st.mirror_pad_grad(x.value, pads, mode))
            expected[f"mirror_pad_grad {mode}"] = mirror_fold(dy, pads, mode)
            fetches[f"int {mode}"] = ff.Tensor(st.mirror_pad_grad(k.value, pads, mode))
            expected[f"int {mode}"] = mirror_fold(ints.astype(np.float64), pads, mode)
    check_all(g, fetches, {x: dy, k: ints}, expected,
              summed=[f"mirror_pad_grad {m}" for m in cases])


# -- gathers and their adjoints --------------------------------------------------------------
def gather_loop(params, indices, axis, batch_dims):
    """tf.gather by its definition, 0 for out-of-range indices (TensorFlow on GPUs)."""
    out_shape = params.shape[:axis] + indices.shape[batch_dims:] + params.shape[axis + 1:]
    out = np.zeros(out_shape, params.dtype)
    n_idx = indices.ndim - batch_dims
    for pos in np.ndindex(*out_shape):
        before, ipos, after = pos[:axis], pos[axis:axis + n_idx], pos[axis + n_idx:]
        k = indices[before[:batch_dims] + ipos]
        if 0 <= k < params.shape[axis]:
            out[pos] = params[before + (k,) + after]
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_gather_nd_one_hot(gl, dtype):
    p = data_of((4, 6, 5), dtype, 6)
    idx = np.array([[0, 5, -1], [6, 3, 3]], np.int32)             # -1 and 6: out of range
    batch_idx = np.array([[0, 2], [1, 1], [4, 9], [-3, 4]], np.int32)
    nd = np.array([[0, 1], [3, 5], [4, 0], [2, -1], [1, 2]], np.int32)
    hot = np.array([[0, 3, -1], [2, 4, 1]], np.int32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(p.shape, dtype, name="x")
        i = ff.placeholder(idx.shape, "int32", name="i")
        fetches = {
            "gather axis 0": ff.gather(x, i),
            "gather axis 1": ff.gather(x, i, axis=1),
            "gather axis -1": ff.gather(x, i, axis=-1),
            "gather batch_dims 1": ff.gather(x, batch_idx, axis=1, batch_dims=1),
            "gather batch_dims 1 axis 2": ff.gather(x, batch_idx, axis=2, batch_dims=1),
            "gather scalar index": ff.gather(x, 2, axis=1),
            "gather_nd pairs": ff.gather_nd(x, nd),
            "gather_nd full tuples": ff.gather_nd(x, [[1, 2, 3], [3, 5, 4], [0, 0, 5]]),
            "one_hot": ff.one_hot(hot, 5, dtype=dtype),
            "one_hot axis 0 on/off": ff.one_hot(hot, 4, on_value=3, off_value=-1, axis=0),
        }
        if dtype == "float32":
            fetches["one_hot float values axis 1"] = ff.one_hot(hot, 6, 2.5, -0.5, axis=1)
    expected = {
        "gather axis 0": gather_loop(p, idx, 0, 0), "gather axis 1": gather_loop(p, idx, 1, 0),
        "gather axis -1": gather_loop(p, idx, 2, 0),
        "gather batch_dims 1": gather_loop(p, batch_idx, 1, 1),
        "gather batch_dims 1 axis 2": gather_loop(p, batch_idx, 2, 1),
        "gather scalar index": p[:, 2],
        "gather_nd pairs": np.stack([p[0, 1], p[3, 5], np.zeros_like(p[0, 0]),
                                     np.zeros_like(p[0, 0]), p[1, 2]]),
        "gather_nd full tuples": np.array([p[1, 2, 3], p[3, 5, 4], 0], p.dtype),
        "one_hot": (hot[..., None] == np.arange(5)).astype(dtype),
        "one_hot axis 0 on/off": np.where(np.arange(4)[:, None, None] == hot, 3, -1),
        "one_hot float values axis 1": np.where(hot[:, None] == np.arange(6)[:, None],
                                                2.5, -0.5),
    }
    check_all(g, fetches, {x: p, i: idx}, expected)


def scatter_loop(data, ids, num_segments):
    out = np.zeros((num_segments,) + data.shape[ids.ndim:], np.float64)
    for pos in np.ndindex(*ids.shape):
        if 0 <= ids[pos] < num_segments:
            out[ids[pos]] += data[pos]
    return out


def test_unsorted_segment_sum_and_the_gather_adjoints(gl):
    rng = np.random.default_rng(7)
    data = rng.standard_normal((6, 3, 5)).astype(np.float32)
    ints = rng.integers(-1000, 1000, (6, 3, 5)).astype(np.int32)
    ids = np.array([[2, 0, 7], [2, -1, 3], [0, 0, 1], [3, 3, 3], [5, 2, 0], [1, 4, 9]],
                   np.int32)                      # 7, -1 and 9 are dropped
    params = np.zeros((4, 6, 5), np.float32)
    gidx = np.array([[0, 5, -1], [6, 3, 3]], np.int32)
    dy = rng.standard_normal((4, 2, 3, 5)).astype(np.float32)
    nd = np.array([[0, 1], [3, 5], [0, 1], [2, -1], [1, 2]], np.int32)
    dnd = rng.standard_normal((5, 5)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        d = ff.placeholder(data.shape, name="data")
        k = ff.placeholder(ints.shape, "int32", name="ints")
        s = ff.placeholder(ids.shape, "int32", name="ids")
        y = ff.placeholder(dy.shape, name="dy")
        q = ff.constant(params)
        fetches = {
            "unsorted_segment_sum 2-d ids": ff.unsorted_segment_sum(d, s, 6),
            "unsorted_segment_sum 1-d ids": ff.unsorted_segment_sum(d, [1, 1, -2, 0, 3, 1], 4),
            "int unsorted_segment_sum": ff.unsorted_segment_sum(k, s, 5),
            "gather_grad axis 1": ff.Tensor(st.gather_grad(
                y.value, ff.constant(gidx).value, q.value, axis=1)),
            "gather_nd_grad": ff.Tensor(st.gather_nd_grad(
                ff.constant(dnd).value, ff.constant(nd).value, q.value)),
        }
    gg = np.zeros(params.shape, np.float64)
    for a in range(4):
        for pos in np.ndindex(*gidx.shape):
            if 0 <= gidx[pos] < 6:
                gg[a, gidx[pos]] += dy[(a,) + pos]
    gnd = np.zeros(params.shape, np.float64)
    for r, (u, v) in enumerate(nd):
        if 0 <= u < 4 and 0 <= v < 6:
            gnd[u, v] += dnd[r]
    sums = [k for k in fetches if k != "int unsorted_segment_sum"]
    check_all(g, fetches, {d: data, k: ints, s: ids, y: dy}, {
        "unsorted_segment_sum 2-d ids": scatter_loop(data, ids, 6),
        "unsorted_segment_sum 1-d ids": scatter_loop(data, np.array([1, 1, -2, 0, 3, 1]), 4),
        "int unsorted_segment_sum": scatter_loop(ints, ids, 5).astype(np.int32),
        "gather_grad axis 1": gg, "gather_nd_grad": gnd}, summed=sums)


def test_loops_near_llvmpipe_iteration_limit(gl):
    """4 elements per fragment x 20000 candidates = 80000 loop steps, past llvmpipe's
    65535 per fragment: the loops must be unrolled or the sums come out short."""
    rng = np.random.default_rng(8)
    n = 20000
    ids = rng.integers(0, 5, n).astype(np.int32)
    data = rng.uniform(0.5, 1.5, (n, 2)).astype(np.float32)
    big = rng.permutation(17000).astype(np.float32)          # distinct values
    g = ff.Graph()
    with g.as_default():
        d = ff.placeholder(data.shape, name="data")
        s = ff.placeholder(ids.shape, "int32", name="ids")
        b = ff.placeholder(big.shape, name="big")
        top = ff.top_k(b, k=6)
        fetches = {"segment sum of 20000": ff.unsorted_segment_sum(d, s, 5),
                   "top_k of 17000": top.values, "top_k indices of 17000": top.indices}
    order = np.argsort(-big, kind="stable")[:6]
    check_all(g, fetches, {d: data, s: ids, b: big}, {
        "segment sum of 20000": scatter_loop(data, ids, 5),
        "top_k of 17000": big[order], "top_k indices of 17000": order},
        summed=["segment sum of 20000"])


# -- top_k ------------------------------------------------------------------------------------
def test_top_k_ties_full_k_and_nan(gl):
    rng = np.random.default_rng(9)
    ties = rng.integers(-3, 3, (4, 7)).astype(np.float32)       # many equal values
    ints = rng.integers(-5, 5, (3, 2, 9)).astype(np.int32)
    nan = np.array([1.0, np.nan, np.inf, -np.inf, 1.0, -0.0, 0.0], np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(ties.shape, name="x")
        k = ff.placeholder(ints.shape, "int32", name="k")
        v = ff.placeholder(nan.shape, name="nan")
        t3, t7, ti, tn = ff.top_k(x, 3), ff.top_k(x, k=7), ff.top_k(k, 9), ff.top_k(v, 7)
        t1 = ff.top_k(x)
        fetches = {"values k=3": t3.values, "indices k=3": t3.indices,
                   "values k=n": t7.values, "indices k=n": t7.indices,
                   "int values": ti.values, "int indices": ti.indices,
                   "k=1": t1.values, "nan values": tn.values, "nan indices": tn.indices,
                   "top_k_rank": ff.Tensor(st.top_k_rank(x.value)),
                   "top_k_indices k=0": ff.Tensor(st.top_k_indices(st.top_k_rank(x.value), 0))}
    order = np.argsort(-ties, axis=-1, kind="stable")     # descending, ties by index
    iorder = np.argsort(-ints, axis=-1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(7), axis=-1)
    out = check_all(g, fetches, {x: ties, k: ints, v: nan}, {
        "values k=3": np.take_along_axis(ties, order[:, :3], -1), "indices k=3": order[:, :3],
        "values k=n": np.take_along_axis(ties, order, -1), "indices k=n": order,
        "int values": np.take_along_axis(ints, iorder, -1), "int indices": iorder,
        "k=1": np.take_along_axis(ties, order[:, :1], -1),
        "nan indices": [1, 2, 0, 4, 5, 6, 3], "top_k_rank": rank,
        "top_k_indices k=0": np.zeros((4, 0))})
    assert np.isnan(out["nan values"][0]) and out["nan values"][1] == np.inf


# -- space <-> batch --------------------------------------------------------------------------
def space_to_batch_loop(x, block, pads):
    """TensorFlow's definition, element by element."""
    m = len(block)
    padded = np.pad(x, [(0, 0)] + list(pads) + [(0, 0)] * (x.ndim - m - 1))
    batch = x.shape[0]
    out_shape = (batch * int(np.prod(block)),) + tuple(
        padded.shape[1 + i] // block[i] for i in range(m)) + x.shape[m + 1:]
    out = np.zeros(out_shape, x.dtype)
    for pos in np.ndindex(*out_shape):
        offs = np.unravel_index(pos[0] // batch, block)
        src = (pos[0] % batch,) + tuple(pos[1 + i] * block[i] + offs[i] for i in range(m))
        out[pos] = padded[src + pos[m + 1:]]
    return out


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_space_to_batch_nd_and_back(gl, dtype):
    a = data_of((2, 5, 3, 3), dtype, 10)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(a.shape, dtype, name="x")
        s2b = ff.space_to_batch_nd(x, [2, 3], [[1, 0], [2, 1]])
        s2b1 = ff.space_to_batch_nd(x, [3], [[0, 1]])
        fetches = {"space_to_batch_nd 2-d": s2b, "space_to_batch_nd 1-d": s2b1,
                   "batch_to_space_nd undoes it": ff.batch_to_space_nd(
                       s2b, [2, 3], [[1, 0], [2, 1]]),
                   "batch_to_space_nd 1-d no crop": ff.batch_to_space_nd(s2b1, [3], [[0, 0]])}
    check_all(g, fetches, {x: a}, {
        "space_to_batch_nd 2-d": space_to_batch_loop(a, [2, 3], [[1, 0], [2, 1]]),
        "space_to_batch_nd 1-d": space_to_batch_loop(a, [3], [[0, 1]]),
        "batch_to_space_nd undoes it": a,
        "batch_to_space_nd 1-d no crop": np.pad(a, [(0, 0), (0, 1), (0, 0), (0, 0)])})


def test_none_batch_dimension(gl):
    a = data_of((3, 4), "float32", 11)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 4), name="x")
        fetches = {"concat": ff.concat([x, x], axis=1), "pad": ff.pad(x, [[1, 0], [0, 2]]),
                   "gather": ff.gather(x, [3, 0], axis=1), "reverse": ff.reverse(x, [0])}
        assert fetches["concat"].shape == (None, 8)
    check_all(g, fetches, {x: a}, {"concat": np.concatenate([a, a], 1),
                                   "pad": np.pad(a, [[1, 0], [0, 2]]),
                                   "gather": a[:, [3, 0]], "reverse": a[::-1]})


# -- errors -----------------------------------------------------------------------------------
def _raises(error, match, fn):
    g = ff.Graph()
    with g.as_default(), pytest.raises(error, match=match) as info:
        fn()
    return str(info.value)


def test_errors_name_the_problem():
    x = lambda: ff.placeholder((2, 3), name="x")       # noqa: E731
    msg = _raises(ff.ShapeError, r"\(2, 4\).*\(2, 3\)",
                  lambda: ff.concat([x(), ff.zeros((2, 4))], axis=0))
    assert "concat" in msg and "test_structure.py" in msg
    _raises(ff.ShapeError, "rank", lambda: ff.concat([x(), ff.zeros((2, 3, 1))], axis=1))
    _raises(ff.DTypeError, "int32", lambda: ff.concat([x(), ff.zeros((2, 3), "int32")], 0))
    _raises(ff.ShapeError, "axis 2 is out of range", lambda: ff.concat([x(), x()], axis=2))
    _raises(ff.ShapeError, "out of range", lambda: ff.stack([x(), x()], axis=3))
    _raises(ff.ShapeError, r"add up to 4, not to the size of axis 1 \(3\)",
            lambda: ff.split(x(), [1, 3], axis=1))
    _raises(ff.ShapeError, "one -1", lambda: ff.split(x(), [-1, -1, 1], axis=1))
    _raises(ff.ShapeError, "3 equal parts", lambda: ff.split(x(), 3, axis=0))
    _raises(ff.ShapeError, "negative padding", lambda: ff.pad(x(), [[0, 0], [-1, 2]]))
    _raises(ff.ShapeError, "one .before, after. pair per axis", lambda: ff.pad(x(), [[1, 1]]))
    _raises(ff.ShapeError, "REFLECT padding .* larger", lambda: ff.pad(x(), [[0, 0], [3, 0]],
                                                                        mode="REFLECT"))
    _raises(ff.AttrError, "REFLECT or SYMMETRIC", lambda: ff.mirror_pad(x(), [[0, 0]] * 2, "EDGE"))
    _raises(ff.ShapeError, "multiples", lambda: ff.tile(x(), [2]))
    _raises(ff.ShapeError, "out of range", lambda: ff.reverse(x(), [2]))
    _raises(ff.ShapeError, "cannot broadcast", lambda: ff.broadcast_to(x(), (2, 4)))
    _raises(ff.DTypeError, "indices must be int32",
            lambda: ff.gather(x(), ff.zeros((2,), "float32")))
    _raises(ff.ShapeError, "batch dimension 0", lambda: ff.gather(x(), [[0], [1], [0]],
                                                                   axis=1, batch_dims=1))
    _raises(ff.ShapeError, "axis 3 is out of range", lambda: ff.gather(x(), [0], axis=3))
    _raises(ff.ShapeError, "index tuples of length 3", lambda: ff.gather_nd(x(), [[0, 1, 2]]))
    _raises(ff.ShapeError, "prefix", lambda: ff.unsorted_segment_sum(x(), [0, 1, 2], 3))
    _raises(ff.ShapeError, "k = 4 is larger", lambda: ff.top_k(x(), 4))
    _raises(ff.ShapeError, "does not fit", lambda: ff.slice(x(), [1, 0], [2, -1]))
    _raises(ff.ShapeError, "same|one length", lambda: ff.strided_slice(x(), [0], [1, 2]))
    _raises(ff.ShapeError, "out of bounds",
            lambda: ff.strided_slice(x(), [5], [0], shrink_axis_mask=1))
    _raises(ff.ShapeError, "multiples of block_shape",
            lambda: ff.space_to_batch_nd(ff.zeros((1, 5, 2)), [2], [[0, 0]]))
