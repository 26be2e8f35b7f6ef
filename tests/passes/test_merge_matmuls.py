"""merge_matmuls: q, k and v projections of one input (constant or variable weights,
with or without a bias) become one matmul over the weights side by side and column
slices, which fused_attention reads in place (`q_columns`, ...): the results equal the
graph as built (numpy float64 and the numpy executor), edge values included (NaN, inf,
negatives, zeros), and gradients through the merged form equal finite differences.
Siblings the attention would not read in place, trained weights, and the knob off
leave the graph as it was, the report saying why."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.runtime import NumpyPlan, NumpyVariables
from fragflow.runtime.driver import optimize
from tests.gradcheck import numeric_gradient
from tests.passes.test_attention import _attention
from tests.reference import assert_matches, run_both

rng = np.random.default_rng(34)


def _projections(x, heads, d, weights="constant", bias=True):
    """x @ w_r (+ b_r) for r in q, k, v (x [B, L, E] broadcast against w [E, N])."""
    e = x.shape[-1]
    out, ws = [], []
    for r in "qkv":
        n = heads * d
        w = (rng.standard_normal((e, n)) * 0.3).astype(np.float32)
        w = ff.constant(w) if weights == "constant" else ff.Variable(w, name=f"w{r}")
        ws.append(w)
        y = ff.matmul(x, w)
        if bias:
            y = y + ff.constant(rng.standard_normal(n).astype(np.float32))
        out.append(y)
    return out, ws


def _layer(batch, length, e, heads, d, mask=True, **kwargs):
    """BERT's self-attention: the projections split into heads [B, L, H, D],
    transposed to [B, H, L, D], attention, the heads merged back."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((batch, length, e), name="x")
        g.projections, g.weights = _projections(x, heads, d, **kwargs)
        q, k, v = (ff.transpose(ff.reshape(t, (batch, length, heads, d)), [0, 2, 1, 3])
                   for t in g.projections)
        m = ff.constant(np.where(np.arange(length) >= length - 2, -np.inf, 0)
                        .astype(np.float32)) if mask else None
        out = _attention(q, k, v, m, scale=np.sqrt(d), k_as_kt=False)
        y = ff.reshape(ff.transpose(out, [0, 2, 1, 3]), (batch, length, heads * d))
    return g, x, y


def _feeds(x, edges=True):
    a = rng.standard_normal(x.shape).astype(np.float32)
    if edges:
        a[0, 0, :] = 0.0                     # zeros
        a[0, 1, :] = -np.abs(a[0, 1, :])     # negatives
        a[-1, 2, 3] = np.nan                 # a NaN token: its row, and every row
        a[-1, 3, 1] = np.inf                 # that attends to it, NaN
    return {x: a}


def _float64(graph, fetch, feeds):
    """fetch computed in float64 on the graph as built (no pass)."""
    types = {v.value: ff.TensorType(np.shape(a), v.dtype) for v, a in feeds.items()}
    compiled = optimize(graph, [fetch.value], types, passes=[])
    plan = NumpyPlan(compiled.graph, NumpyVariables(), float64=True)
    names = compiled.feed_names
    return plan.run({names[v.value]: np.float64(a) for v, a in feeds.items()})[0]


def _merged(graph, fetch, feeds, tuning=None):
    """The compiled GL graph's ops and its fusion report."""
    fn = ff.Session(graph, tuning=tuning).compile([fetch], feeds=list(feeds))
    return fn, [n.op for n in fn.graph.nodes]


# batch, tokens, width, heads, head width, projections' keyword arguments
CASES = {
    "bert_like": (2, 9, 16, 2, 8, {}),
    "variables": (2, 7, 12, 3, 4, dict(weights="variable")),
    "no_bias_heads_6_wide": (2, 5, 8, 2, 6, dict(bias=False)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_merged_projections_match_the_graph_as_built(case, gl):
    batch, length, e, heads, d, kwargs = CASES[case]
    g, x, y = _layer(batch, length, e, heads, d, **kwargs)
    feeds = _feeds(x)
    got, want = run_both(g, y, feeds)
    want64 = _float64(g, y, feeds)
    assert np.isnan(want[-1]).any() and np.isfinite(want[0]).all()
    assert_matches(got, want, rtol=1e-5, atol=2e-6)
    assert_matches(got, want64.astype(np.float32), rtol=1e-4, atol=1e-5)
    fn, ops = _merged(g, y, feeds)
    # one product of the three, its slices read in place by the attention
    assert ops.count("fused_matmul") + ops.count("matmul") == 1, ops
    assert "strided_slice" not in ops, ops
    node = next(n for n in fn.graph.nodes if n.op == "fused_attention")
    assert [node.attrs[f"{r}_columns"] for r in "qkv"] == \
        [(i * heads * d, heads, d) for i in range(3)]
    assert any("merged 3 matmuls" in line for line in fn.fusion_report), fn.fusion_report
    # constant weights (and the biases: constants in every case) are concatenated at
    # compile time, one constant and no kernel; variables by a concat kernel (hoisted:
    # drawn once per plan)
    assert ops.count("concat") == (kwargs.get("weights") == "variable"), ops
    # the numpy executor's pipeline merges too, and agrees
    with ff.Session(g, backend="numpy") as sess:
        assert_matches(sess.run(y, feeds), want, rtol=1e-5, atol=2e-6)


def test_slices_read_elsewhere_stay_slices(gl):
    """attention_columns off: the merged product's slices are strided_slice kernels."""
    g, x, y = _layer(2, 6, 8, 2, 4)
    feeds = _feeds(x, edges=False)
    tuning = ff.Tuning().with_({"matmul.attention_columns": False})
    got, want = run_both(g, y, feeds, tuning=tuning)
    assert_matches(got, want, rtol=1e-5, atol=2e-6)
    _, ops = _merged(g, y, feeds, tuning)
    assert ops.count("strided_slice") == 3 and ops.count("fused_matmul") == 1, ops


def test_knob_off_and_widths_not_whole_texels_leave_three_products(gl):
    g, x, y = _layer(1, 5, 8, 2, 4)
    feeds = _feeds(x, edges=False)
    off = ff.Tuning().with_({"matmul.merge_siblings": False})
    fn, ops = _merged(g, y, feeds, off)
    assert ops.count("fused_matmul") == 3, ops
    assert "merge_matmuls is off (Tuning matmul.merge_siblings)" in fn.fusion_report
    # heads 3 wide: 6 columns a projection, not a multiple of 4
    g, x, y = _layer(1, 5, 8, 2, 3)
    feeds = _feeds(x, edges=False)
    got, want = run_both(g, y, feeds)
    assert_matches(got, want, rtol=1e-5, atol=2e-6)
    fn, ops = _merged(g, y, feeds)
    assert ops.count("fused_matmul") == 3, ops
    assert any("not a multiple of 4" in line for line in fn.fusion_report), \
        fn.fusion_report


def test_projections_read_elsewhere_are_not_merged(gl):
    """k's projection also fetched: its slice would be a kernel of its own."""
    g, x, y = _layer(2, 6, 8, 2, 4)
    fetches = [y, g.projections[1]]
    feeds = _feeds(x, edges=False)
    got, want = run_both(g, fetches, feeds)
    for a, b in zip(got, want):
        assert_matches(a, b, rtol=1e-5, atol=2e-6)
    fn = ff.Session(g).compile(fetches, feeds=list(feeds))
    assert [n.op for n in fn.graph.nodes].count("fused_matmul") == 3
    assert any("not merged" in line and "not read only by a reshape" in line
               for line in fn.fusion_report), fn.fusion_report


def test_assigned_weights_are_not_merged(gl):
    """A graph assigning a weight (a training step's): the concat would be a kernel
    every run, not once."""
    g, x, y = _layer(2, 6, 8, 2, 4, weights="variable")
    with g.as_default():
        update = g.weights[0].assign(g.weights[0] * 0.5)
    feeds = _feeds(x, edges=False)
    got, want = run_both(g, [y, update], feeds)
    assert_matches(got[0], want[0], rtol=1e-5, atol=2e-6)
    fn = ff.Session(g).compile([y, update], feeds=list(feeds))
    # q's own product; k's and v's (not assigned) merged
    assert [n.op for n in fn.graph.nodes].count("fused_matmul") == 2
    assert any("is assigned in this graph" in line for line in fn.fusion_report), \
        fn.fusion_report


def test_gradients_through_the_merged_form_match_finite_differences(gl):
    """The merged graph (matmul, concat, add, strided_slice) differentiated again: its
    gradient wrt x equals central differences of the graph as built (float64)."""
    g, x, y = _layer(1, 5, 8, 2, 4, mask=False)
    feeds = _feeds(x, edges=False)
    r = rng.uniform(0.5, 1.5, y.shape).astype(np.float32)
    types = {x.value: ff.TensorType(x.shape, "float32")}
    merged = optimize(g, [y.value], types, passes=["merge_matmuls"]).graph
    assert [n.op for n in merged.nodes].count("matmul") == 3    # 1 merged + q kᵀ, p v
    assert "strided_slice" in [n.op for n in merged.nodes]
    with merged.as_default():
        xm = ff.Tensor(next(n for n in merged.nodes if n.op == "placeholder").outputs[0])
        ym = ff.Tensor(merged.outputs[0])
        loss = ff.reduce_sum(ym * ff.constant(r))
        grad, = ff.gradients(loss, [xm])
    with ff.Session(merged) as sess:
        got = sess.run(grad, {xm: feeds[x]})
    with g.as_default():
        loss0 = ff.reduce_sum(y * ff.constant(r))
    want = numeric_gradient(g, loss0, x, feeds)
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-4)


# every product blocked: the merged projection's, q kᵀ's
BLOCKED = ff.Tuning().with_({"matmul.blocked_min_macs": 1})


def _blocks_reads(fn):
    """(the merged product's kernels, the attention's kernels' inputs)."""
    merged = [k for k in fn.kernels if k.op in ("matmul", "fused_matmul", "matmul_stitch",
                                                "fused_matmul_stitch")
              and not (k.strategy or "").startswith("attention.")]
    attention = [b.value for k in fn.kernels if (k.strategy or "").startswith("attention.")
                 for b in k.inputs]
    return merged, attention


@pytest.mark.parametrize("case", ["bert_like", "variables"])
def test_attention_reads_the_merged_product_from_its_render_targets(case, gl):
    """matmul.attention_reads_blocks: the merged q, k, v product (blocked, K not split)
    applies its bias itself and has no stitch; q kᵀ's blocked kernel reads q and k, the
    walk v, from its render targets (codegen/attention.py reads_blocks). Batch 2, 9 and
    7 tokens (rows not a multiple of 4), NaN, inf, zeros and negatives: equal to float64
    on the graph as built, and to the knob off (the stitch)."""
    batch, length, e, heads, d, kwargs = CASES[case]
    g, x, y = _layer(batch, length, e, heads, d, **kwargs)
    # NaN and inf make the last batch entry NaN throughout; the finite feeds (zeros
    # and negatives) check every entry's values
    edges, finite = _feeds(x), _feeds(x, edges=False)
    finite[x][0, 0, :] = 0.0
    finite[x][1, 1, :] = -np.abs(finite[x][1, 1, :])
    want64 = _float64(g, y, edges)
    assert np.isnan(want64[-1]).any() and np.isfinite(want64[0]).all()
    outs = {}
    for on in (True, False):
        tuning = BLOCKED.with_({"matmul.attention_reads_blocks": on})
        with ff.Session(g, tuning=tuning) as sess:
            fn = sess.compile([y], feeds=[x])
            outs[on] = fn(edges[x])[0]
            assert_matches(fn(finite[x])[0],
                           _float64(g, y, finite).astype(np.float32), rtol=1e-4, atol=1e-5)
        assert_matches(outs[on], want64.astype(np.float32), rtol=1e-4, atol=1e-5)
        merged, read = _blocks_reads(fn)
        assert [k.strategy for k in fn.kernels if k.op == "fused_attention"] == \
            ["attention.scores_blocks"], [(k.op, k.strategy) for k in fn.kernels]
        if on:
            assert len(merged) == 1 and "stitch" not in merged[0].op, \
                [k.op for k in merged]
            assert any("/merged" in v and v.endswith("#blocks") for v in read), read
            assert not any("/merged" in v and "#" not in v for v in read), read
        else:
            assert [k.op.endswith("stitch") for k in merged] == [False, True], \
                [k.op for k in merged]
            assert not any(v.endswith("#blocks") and "merged" in v for v in read), read
    assert_matches(outs[True], outs[False], rtol=0, atol=0)


def test_attention_leaves_the_stitch_where_it_cannot_read_the_targets(gl):
    """Heads 6 wide (q's texels straddle heads) and a merged product fetched as well
    keep the stitch, with the same results."""
    batch, length, e, heads, d, kwargs = CASES["no_bias_heads_6_wide"]
    g, x, y = _layer(batch, length, e, heads, d, **kwargs)
    feeds = _feeds(x)
    fn = ff.Session(g, tuning=BLOCKED).compile([y], feeds=[x])
    merged, read = _blocks_reads(fn)
    assert not any("#blocks" in v and "merged" in v for v in read), read
    assert_matches(fn(feeds[x])[0], _float64(g, y, feeds).astype(np.float32), rtol=1e-4,
                   atol=1e-5)
    batch, length, e, heads, d, kwargs = CASES["bert_like"]
    g, x, y = _layer(batch, length, e, heads, d, **kwargs)
    feeds = _feeds(x)
    fn = ff.Session(g, tuning=BLOCKED).compile([y, g.projections[0]], feeds=[x])
    merged, read = _blocks_reads(fn)
    assert not any("#blocks" in v and "merged" in v for v in read), read
    got, q = fn(feeds[x])
    assert_matches(got, _float64(g, y, feeds).astype(np.float32), rtol=1e-4, atol=1e-5)
    assert_matches(q, _float64(g, g.projections[0], feeds).astype(np.float32), rtol=1e-5,
                   atol=1e-5)
