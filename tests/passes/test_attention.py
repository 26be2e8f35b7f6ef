"""fuse_attention and the fused_attention kernel: softmax(q kᵀ / c + mask) v as torch,
TF and Keras write it becomes one node and one kernel (codegen/attention.py), computing
what the graph as built computes on the numpy executor, edge values included (-inf
masks, fully masked rows, large logits, key counts not a multiple of 4); the pass on
its own keeps the results; every softmax left alone says why. Its gradients:
tests/autodiff/test_attention_gradients.py."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, run_both

rng = np.random.default_rng(34)
# each row of codegen/attention.py's table (attention.online takes every row of v here)
# (attention.scores_blocks wherever q kᵀ runs blocked: blocked_min_macs 1)
ROWS = {"attention.online": ff.Tuning().with_({"matmul.attention_one_kernel_texels": 64}),
        "attention.scores_blocks": ff.Tuning(exclude=("attention.online",)).with_(
            {"matmul.blocked_min_macs": 1}),
        "attention.scores": ff.Tuning(exclude=("attention.online",
                                               "attention.scores_blocks"))}


def _attention(q, k, v, mask=None, scale=None, divide=True, k_as_kt=False):
    """Attention written out op by op: torch's (k.transpose(-1, -2) as its own
    transpose) where k_as_kt, else matmul(..., transpose_b=True) as TF does."""
    if k_as_kt:
        perm = list(range(len(k.shape) - 2)) + [len(k.shape) - 1, len(k.shape) - 2]
        scores = ff.matmul(q, ff.transpose(k, perm))
    else:
        scores = ff.matmul(q, k, transpose_b=True)
    if scale is not None:
        scores = scores / np.float32(scale) if divide else scores * np.float32(scale)
    if mask is not None:
        scores = scores + mask
    return ff.matmul(ff.softmax(scores, axis=-1), v)


def _graph(batch, lq, lk, d, dv, mask_shape=None, **kwargs):
    g = ff.Graph()
    with g.as_default():
        q = ff.placeholder(batch + (lq, d), name="q")
        k = ff.placeholder(batch + (lk, d), name="k")
        v = ff.placeholder(batch + (lk, dv), name="v")
        m = ff.placeholder(mask_shape, name="mask") if mask_shape else None
        out = _attention(q, k, v, m, **kwargs)
    feeds = {q: rng.standard_normal(q.shape).astype(np.float32),
             k: rng.standard_normal(k.shape).astype(np.float32),
             v: rng.standard_normal(v.shape).astype(np.float32)}
    return g, out, feeds, m


def _causal(lq, lk):
    return np.where(np.arange(lk)[None, :] > np.arange(lq)[:, None], -np.inf,
                    0).astype(np.float32)


CASES = {
    # batch, lq, lk, d, dv, mask shape, kwargs
    "bert_heads": ((2, 4), 8, 8, 16, 16, (2, 1, 1, 8), dict(scale=4.0)),
    "seven_keys": ((3,), 5, 7, 8, 8, None, dict(scale=np.sqrt(8))),
    "torch_kt_odd": ((2, 2), 6, 13, 6, 5, (6, 13), dict(scale=0.4, divide=False,
                                                        k_as_kt=True)),
    "no_scale_no_mask": ((1,), 3, 9, 4, 3, None, {}),
    "long_keys": ((1, 2), 4, 70, 12, 8, (1, 1, 4, 70), dict(scale=2.0)),
    # q·k 264 long: the blocked product splits K in two (the walk adds the halves)
    "split_k": ((2,), 5, 9, 264, 8, (5, 9), dict(scale=16.0)),
}


@pytest.mark.parametrize("row", sorted(ROWS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_fused_attention_matches_the_graph_as_built(case, row, gl):
    batch, lq, lk, d, dv, mask_shape, kwargs = CASES[case]
    g, out, feeds, m = _graph(batch, lq, lk, d, dv, mask_shape, **kwargs)
    if m is not None:
        mask = rng.standard_normal(m.shape).astype(np.float32)
        feeds[m] = mask
    got, want = run_both(g, out, feeds, tuning=ROWS[row])
    assert_matches(got, want, rtol=1e-5, atol=2e-6)
    fn = ff.Session(g, tuning=ROWS[row]).compile([out], feeds=list(feeds))
    fn(*feeds.values())
    kernels = [k for k in fn.kernels if k.op != "transpose"]
    assert {k.strategy for k in kernels} == {row}, fn.fusion_report
    # attention.scores: q kᵀ by the matmul table (a blocked one is two kernels), the walk;
    # attention.scores_blocks: the blocked kernel and the walk reading its targets
    counts = {"attention.online": 1, "attention.scores_blocks": 2}
    assert len(kernels) == counts[row] if row in counts else len(kernels) <= 3


@pytest.mark.parametrize("row", sorted(ROWS))
def test_minus_inf_masks_and_fully_masked_rows_behave_as_unfused(row, gl):
    """Causal masks (-inf above the diagonal), a query row with every key masked (NaN,
    as softmax gives) and large logits."""
    lq, lk = 6, 7
    g, out, feeds, m = _graph((2,), lq, lk, 8, 4, (2, lq, lk), scale=0.5)
    mask = np.stack([_causal(lq, lk), _causal(lq, lk)])
    mask[1, 2, :] = -np.inf                          # row 2 of batch 1: no key at all
    feeds[m] = mask
    q = next(p for p in feeds if p.name.startswith("q"))
    feeds[q] = feeds[q] * 300.0                     # logits in the thousands
    got, want = run_both(g, out, feeds)
    assert np.isnan(want[1, 2]).all() and np.isfinite(want[0]).all()
    got, _ = run_both(g, out, feeds, tuning=ROWS[row])
    assert_matches(got, want, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("row", sorted(ROWS))
def test_nan_and_inf_in_scores_give_nan_rows_as_softmax_does(row, gl):
    g, out, feeds, m = _graph((1,), 4, 5, 4, 4, (4, 5))
    mask = np.zeros((4, 5), np.float32)
    mask[1, 3] = np.nan
    mask[2, 0] = np.inf
    feeds[m] = mask
    got, want = run_both(g, out, feeds)
    assert np.isnan(want[0, 1:3]).all() and np.isfinite(want[0, [0, 3]]).all()
    got, _ = run_both(g, out, feeds, tuning=ROWS[row])
    assert_matches(got, want, rtol=1e-5, atol=2e-6)


@pytest.mark.parametrize("row", sorted(ROWS))
@pytest.mark.parametrize("tile", [1, 3, 8, 16])
def test_every_key_tile_size_gives_the_same_results(tile, row, gl):
    g, out, feeds, m = _graph((2,), 5, 11, 8, 6, (5, 11), scale=3.0)
    feeds[m] = _causal(5, 11)
    tuning = ROWS[row].with_({"matmul.attention_key_tile": tile})
    got, want = run_both(g, out, feeds, tuning=tuning)
    assert_matches(got, want, rtol=1e-5, atol=2e-6)


def test_the_pass_alone_keeps_the_results_and_leaves_one_node():
    g, out, feeds, m = _graph((2, 3), 5, 9, 8, 8, (2, 1, 1, 9), scale=2.0)
    feeds[m] = np.where(rng.random((2, 1, 1, 9)) < 0.3, -np.inf, 0).astype(np.float32)
    with ff.Session(g, backend="numpy", passes=[]) as before, \
            ff.Session(g, backend="numpy", passes=["fuse_attention"]) as after:
        fn = after.compile([out], feeds=list(feeds))
        assert_matches(fn(*feeds.values())[0], before.run(out, feeds), rtol=1e-6)
    ops = [n.op for n in fn.graph.nodes]
    assert ops.count("fused_attention") == 1
    assert not {"softmax", "matmul", "div", "add"} & set(ops), ops
    node = next(n for n in fn.graph.nodes if n.op == "fused_attention")
    assert node.attrs["scale"] == 2.0 and node.attrs["divide"] and node.attrs["transpose_k"]
    assert [op for _, op, _ in node.attrs["nodes"]] == ["matmul", "div", "add", "softmax",
                                                        "matmul"]


def test_a_mask_of_the_scores_shape_added_first_and_q_as_k_fuse(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 7, 8), name="x")
        mask = ff.placeholder((2, 7, 7), name="mask")
        out = ff.matmul(ff.softmax(mask + ff.matmul(x, x, transpose_b=True) * 0.5,
                                   axis=-1), x)
    feeds = {x: rng.standard_normal((2, 7, 8)).astype(np.float32),
             mask: np.where(rng.random((2, 7, 7)) < 0.3, -np.inf, 0).astype(np.float32)}
    for row, tuning in ROWS.items():
        got, want = run_both(g, out, feeds, tuning=tuning)
        assert_matches(got, want, rtol=1e-5, atol=2e-6, what=row)
        fn = ff.Session(g, tuning=tuning).compile([out], feeds=[x, mask])
        fn(*feeds.values())
        assert {k.strategy for k in fn.kernels} == {row}, fn.fusion_report


def test_a_subtracted_mask_as_keras_attention_lowers_it_fuses(gl):
    """Keras' Attention: scores - 1e9 * (1 - allowed), softmax, @ v."""
    g = ff.Graph()
    with g.as_default():
        q = ff.placeholder((2, 5, 8), name="q")
        v = ff.placeholder((2, 6, 8), name="v")
        allowed = ff.placeholder((2, 1, 6), name="allowed")
        scores = ff.matmul(q, v, transpose_b=True) - 1e9 * (1.0 - allowed)
        out = ff.matmul(ff.softmax(scores, axis=-1), v)
    feeds = {q: rng.standard_normal((2, 5, 8)).astype(np.float32),
             v: rng.standard_normal((2, 6, 8)).astype(np.float32),
             allowed: (rng.random((2, 1, 6)) < 0.6).astype(np.float32)}
    feeds[allowed][1] = 0.0                       # nothing allowed: uniform weights
    for row, tuning in ROWS.items():
        got, want = run_both(g, out, feeds, tuning=tuning)
        assert_matches(got, want, rtol=1e-5, atol=2e-6, what=row)
        fn = ff.Session(g, tuning=tuning).compile([out], feeds=list(feeds))
        fn(*feeds.values())
        assert row in {k.strategy for k in fn.kernels}, fn.fusion_report
    node = next(n for n in fn.graph.nodes if n.op == "fused_attention")
    assert node.attrs["subtract_mask"]


def test_the_tuning_knob_turns_the_fusion_off(gl):
    g, out, feeds, _ = _graph((2,), 8, 8, 8, 8, None, scale=2.0)
    sess = ff.Session(g, tuning=ff.Tuning().with_({"matmul.attention_fuse": False}))
    fn = sess.compile([out], feeds=list(feeds))
    fn(*feeds.values())
    assert "fused_attention" not in [k.op for k in fn.kernels]
    assert len(fn.kernels) >= 3
    assert any("fuse_attention is off" in line for line in fn.fusion_report)


def test_a_walk_past_the_tuning_bound_stays_unfused_and_says_why(gl):
    g, out, feeds, _ = _graph((2,), 8, 8, 8, 8, None, scale=2.0)
    sess = ff.Session(g, tuning=ff.Tuning().with_({"matmul.attention_max_walk": 100}))
    fn = sess.compile([out], feeds=list(feeds))
    fn(*feeds.values())
    assert "fused_attention" not in [k.op for k in fn.kernels]
    assert any("exceeds the Tuning's matmul.attention_max_walk (100)" in line
               for line in fn.fusion_report), fn.fusion_report


def _report(build, shape=(2, 4, 4)):
    g = ff.Graph()
    with g.as_default():
        q, k, v = (ff.placeholder(shape, name=n) for n in "qkv")
        fetches = build(q, k, v)
    feeds = {p: rng.standard_normal(shape).astype(np.float32) for p in (q, k, v)}
    fn = ff.Session(g, backend="numpy").compile(fetches, feeds=[q, k, v])
    got = fn(*feeds.values())
    with ff.Session(g, backend="numpy", passes=[]) as ref:
        for a, e in zip(got, ref.run(fetches, feeds)):
            assert_matches(a, e, rtol=1e-6)
    return "\n".join(fn.fusion_report), [n.op for n in fn.graph.nodes]


def test_fetched_probabilities_stay_unfused_and_say_why():
    def build(q, k, v):
        p = ff.softmax(ff.matmul(q, k, transpose_b=True) / 2.0, axis=-1)
        return [ff.matmul(p, v), p]
    report, ops = _report(build)
    assert "fused_attention" not in ops
    assert "the probabilities" in report and "is fetched" in report, report


def test_scores_read_twice_stay_unfused_and_say_why():
    def build(q, k, v):
        s = ff.matmul(q, k, transpose_b=True)
        return [ff.matmul(ff.softmax(s, axis=-1), v) + ff.reduce_sum(s)]
    report, ops = _report(build)
    assert "fused_attention" not in ops
    assert "rejected softmax" in report and "has 2 consumers" in report, report


def test_a_softmax_over_another_axis_or_without_matmul_says_why():
    def build(q, k, v):
        a = ff.matmul(ff.softmax(ff.matmul(q, k, transpose_b=True), axis=1), v)
        b = ff.matmul(ff.softmax(q * 2.0, axis=-1), v)
        return [a, b]
    report, ops = _report(build)
    assert "fused_attention" not in ops
    assert "not the last" in report and "not matmul(q, k)" in report, report


def test_the_fused_op_built_directly_equals_the_ops(gl):
    g = ff.Graph()
    with g.as_default():
        q, k, v = (ff.placeholder((2, 6, 8), name=n) for n in "qkv")
        fused = ff.fused.attention(q, k, v, scale=0.5, divide=False)
        plain = _attention(q, k, v, scale=0.5, divide=False)
    feeds = {p: rng.standard_normal((2, 6, 8)).astype(np.float32) for p in (q, k, v)}
    got, want = run_both(g, [fused, plain], feeds)
    assert_matches(got[0], want[1], rtol=1e-5, atol=2e-6)
    assert_matches(want[0], want[1], rtol=0, atol=0)


def _heads_graph(b, length, heads, d, mask=True, fetch_v=False):
    """A BERT layer's attention: [B, L, H*D] split into heads (reshape, then transpose
    to [B, H, L, D]) for q, k (torch's kᵀ as a second transpose) and v, the result
    transposed back and merged."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((b, length, 3 * heads * d), name="x")
        m = ff.placeholder((b, 1, 1, length), name="mask") if mask else None

        def split(t):
            return ff.transpose(ff.reshape(t, (b, length, heads, d)), [0, 2, 1, 3])
        q, k, v = (split(x[:, :, i * heads * d:(i + 1) * heads * d]) for i in range(3))
        out = _attention(q, k, v, m, scale=np.sqrt(d), k_as_kt=True)
        merged = ff.reshape(ff.transpose(out, [0, 2, 1, 3]), (b, length, heads * d))
    feeds = {x: rng.standard_normal(x.shape).astype(np.float32)}
    if mask:
        feeds[m] = np.where(np.arange(length) >= length - 3, -np.inf,
                            0).astype(np.float32) * np.ones((b, 1, 1, 1), np.float32)
        feeds[m][-1] = -np.inf                    # the last batch fully masked: NaN
    fetches = [merged, v] if fetch_v else [merged]
    return g, fetches, feeds


# batch, tokens, heads, head width: 6 (not a multiple of 4) takes the lane-per-row walk
HEADS = {"bert_like": (2, 9, 3, 8), "odd_width": (2, 7, 2, 6), "four_heads": (2, 5, 4, 4)}
# q kᵀ reading q and k as [B, L, H, D]: the plain product (these sizes) and the blocked
HEAD_TUNINGS = {"plain": ROWS["attention.scores"],
                "blocked": ROWS["attention.scores"].with_({"matmul.blocked_min_macs": 1}),
                "blocks": ROWS["attention.scores_blocks"],
                "online_row": ROWS["attention.online"]}


@pytest.mark.parametrize("tuning", sorted(HEAD_TUNINGS))
@pytest.mark.parametrize("case", sorted(HEADS))
def test_head_transposes_fold_into_the_node(case, tuning, gl):
    name, tuning = tuning, HEAD_TUNINGS[tuning]
    g, fetches, feeds = _heads_graph(*HEADS[case])
    got, want = run_both(g, fetches, feeds, tuning=tuning)
    assert np.isnan(want[0][-1]).all() and np.isfinite(want[0][0]).all()
    assert_matches(got[0], want[0], rtol=1e-5, atol=2e-6)
    fn = ff.Session(g, tuning=tuning).compile(fetches, feeds=list(feeds))
    node = next(n for n in fn.graph.nodes if n.op == "fused_attention")
    assert all(node.attrs[f"{r}_heads"] for r in ("q", "k", "v", "out")), fn.fusion_report
    assert node.attrs["transpose_k"]              # torch's kᵀ: [B, L, H, D] read as k
    ops = [k.op for k in fn.kernels]
    # every head transpose is the node's; q kᵀ is a product of its own (attention.online
    # does not read q and k in [B, L, H, D])
    assert "transpose" not in ops and {k.strategy for k in fn.kernels
                                       if k.op == "fused_attention"} == \
        {"attention.scores_blocks" if name == "blocks" else "attention.scores"}, ops
    # q's and k's off: their transposes are kernels again, v's and the result's not
    qk_off = tuning.with_({"matmul.attention_qk_heads": False})
    fn = ff.Session(g, tuning=qk_off).compile(fetches, feeds=list(feeds))
    assert_matches(fn(*feeds.values())[0], want[0], rtol=1e-5, atol=2e-6)
    assert [k.op for k in fn.kernels].count("transpose") == 2, [k.op for k in fn.kernels]
    off = tuning.with_({"matmul.attention_heads": False})
    node = next(n for n in ff.Session(g, tuning=off).compile(fetches, feeds=list(feeds))
                .graph.nodes if n.op == "fused_attention")
    assert not any(node.attrs[f"{r}_heads"] for r in ("q", "k", "v", "out"))


def test_head_transposes_read_elsewhere_stay_and_the_pass_alone_keeps_results():
    g, fetches, feeds = _heads_graph(2, 6, 2, 4, fetch_v=True)
    with ff.Session(g, backend="numpy", passes=[]) as before, \
            ff.Session(g, backend="numpy", passes=["fuse_attention"]) as after:
        fn = after.compile(fetches, feeds=list(feeds))
        for a, e in zip(fn(*feeds.values()), before.run(fetches, feeds)):
            assert_matches(a, e, rtol=1e-6)
    node = next(n for n in fn.graph.nodes if n.op == "fused_attention")
    # v is fetched: its transpose stays; q's and the result's fold (k's kᵀ is a second
    # transpose here: simplify, not run alone, makes the two one, which then folds)
    assert not node.attrs["v_heads"] and node.attrs["out_heads"]
    assert node.attrs["q_heads"] and not node.attrs["k_heads"]
    assert [op for _, op, _ in node.attrs["nodes"]][-1] == "transpose"


def test_heads_attrs_need_rank_four():
    g = ff.Graph()
    with g.as_default():
        q, k, v = (ff.placeholder((2, 6, 8), name=n) for n in "qkv")
        with pytest.raises(ff.FragflowError, match="v_heads needs operands of rank 4"):
            ff.fused.attention(q, k, v, v_heads=True)


@pytest.mark.parametrize("row", sorted(ROWS))
@pytest.mark.parametrize("aligned", [True, False])
def test_columns_of_one_value_read_in_place(row, aligned, gl):
    """q, k and v as column slices of one [B, L, W] value (q_columns, ...: a merged
    projection's), starts and W multiples of 4 or not (read a column at a time): the
    kernels against the numpy executor on the node as built (its reference slices)."""
    width = 40 if aligned else 30
    cols = {"q": (4, 2, 4), "k": (12, 2, 4), "v": (20, 2, 8)} if aligned else \
        {"q": (2, 2, 4), "k": (10, 2, 4), "v": (18, 2, 6)}
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 7, width), name="x")
        mask = ff.placeholder((2, 1, 1, 7), name="mask")
        out = ff.fused.attention(x, x, x, mask, scale=2.0, q_heads=True, k_heads=True,
                                 v_heads=True, out_heads=True, q_columns=cols["q"],
                                 k_columns=cols["k"], v_columns=cols["v"])
    assert out.shape == (2, 7, 2, cols["v"][2])
    feeds = {x: rng.standard_normal((2, 7, width)).astype(np.float32),
             mask: np.where(np.arange(7) >= 5, -np.inf, 0).astype(np.float32)
             * np.ones((2, 1, 1, 1), np.float32)}
    feeds[x][1, 3, cols["k"][0]] = np.nan        # head 0's key 3 of batch 1: NaN rows
    got, want = run_both(g, out, feeds, tuning=ROWS[row])
    assert np.isnan(want[1, :, 0]).all() and np.isfinite(want[1, :, 1]).all()
    assert np.isfinite(want[0]).all()
    assert_matches(got, want, rtol=1e-5, atol=2e-6)
    # the reference: the slices, reshapes and attention written out in float64
    x64 = feeds[x].astype(np.float64)

    def view(r):
        start, h, d = cols[r]
        return x64[..., start:start + h * d].reshape(2, 7, h, d).transpose(0, 2, 1, 3)
    s = view("q") @ view("k").transpose(0, 1, 3, 2) / 2.0 + feeds[mask]
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = ((p / p.sum(-1, keepdims=True)) @ view("v")).transpose(0, 2, 1, 3)
    assert_matches(got[0], ref[0].astype(np.float32), rtol=1e-4, atol=1e-5)


def test_columns_outside_the_operand_are_refused():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 6, 16), name="x")
        with pytest.raises(ff.FragflowError, match="q_columns must be"):
            ff.fused.attention(x, x, x, q_heads=True, k_heads=True, v_heads=True,
                               q_columns=(12, 2, 4), k_columns=(0, 2, 4),
                               v_columns=(8, 2, 4))
        with pytest.raises(ff.FragflowError, match="k_columns must be"):
            ff.fused.attention(x, x, x, q_heads=True, v_heads=True,
                               q_columns=(0, 2, 4), k_columns=(8, 2, 4),
                               v_columns=(8, 2, 4))
