"""Staged TF.js models (docs/TFJS.md, "Staged models"): TF1 control flow, TensorArrays,
TensorLists, NonMaxSuppression, Where and a computed TopKV2 k, each against TF.js 4.22
in node on the same inputs (numpy executor and GL), with edge values: NMS ties, soft-NMS,
padding, no box above the score threshold, every box suppressed, an empty Where; and the
plan cache (a plan per branch taken, replayed, rebuilt where a host op's count changes)."""
from __future__ import annotations

import concurrent.futures
import time

import numpy as np
import pytest
import tfjs_corpus as corpus
from tfjs_builder import ModelBuilder

import fragflow as ff
from fragflow.frontend.tfjs.staged import non_max_suppression

CASES = {}


def case(fn):
    CASES[fn.__name__[5:]] = fn
    return fn


BOXES = np.array([[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11],
                  [0, 10.1, 1, 11.1], [0, 100, 1, 101], [1, 1, 0, 0], [5, 5, 5, 6]],
                 np.float32)       # flipped corners (6), a zero-area box (7)
SCORES = np.array([0.9, 0.75, 0.6, 0.95, 0.5, 0.3, 0.9, 0.8], np.float32)  # a tie: 0, 6


def _nms_inputs(b, max_size, iou, score, sigma=None):
    b.placeholder("boxes", [8, 4])
    b.placeholder("scores", [8])
    b.const("max", np.array(max_size, np.int32))
    b.const("iou", np.array(iou, np.float32))
    b.const("score", np.array(score, np.float32))
    if sigma is not None:
        b.const("sigma", np.array(sigma, np.float32))
    b.const("axis", np.array(0, np.int32))


def _gathered(b, indices):
    """What follows an NMS: its boxes gathered (shapes known only at run time)."""
    b.op("GatherV2", "picked", ["boxes", indices, "axis"], batch_dims=0)
    b.op("Shape", "count", ["picked"])
    return ["picked", "count"]


@case
def case_nms_v3(b):
    _nms_inputs(b, 6, 0.5, 0.1)
    b.op("NonMaxSuppressionV3", "nms", ["boxes", "scores", "max", "iou", "score"])
    return {"boxes": BOXES, "scores": SCORES}, ["nms", *_gathered(b, "nms")]


@case
def case_nms_v3_max_output_size(b):
    _nms_inputs(b, 2, 0.5, 0.0)
    b.op("NonMaxSuppressionV3", "nms", ["boxes", "scores", "max", "iou", "score"])
    return {"boxes": BOXES, "scores": SCORES}, ["nms", *_gathered(b, "nms")]


@case
def case_nms_v4_padded(b):
    _nms_inputs(b, 7, 0.5, 0.1)
    b.op("NonMaxSuppressionV4", "nms", ["boxes", "scores", "max", "iou", "score"],
         pad_to_max_output_size=True)
    return {"boxes": BOXES, "scores": SCORES}, ["nms", "nms:1"]


@case
def case_nms_v5_soft(b):
    _nms_inputs(b, 8, 0.9, 0.2, sigma=0.5)
    b.op("NonMaxSuppressionV5", "nms", ["boxes", "scores", "max", "iou", "score", "sigma"],
         pad_to_max_output_size=False)
    return {"boxes": BOXES, "scores": SCORES}, ["nms", "nms:1", *_gathered(b, "nms")]


@case
def case_nms_nothing_above_the_threshold(b):
    _nms_inputs(b, 5, 0.5, 0.99)
    b.op("NonMaxSuppressionV5", "nms", ["boxes", "scores", "max", "iou", "score", "score"],
         pad_to_max_output_size=False)
    return {"boxes": BOXES, "scores": SCORES}, ["nms", "nms:1", *_gathered(b, "nms")]


@case
def case_nms_all_suppressed_but_one(b):
    _nms_inputs(b, 8, 0.5, 0.0)
    b.op("NonMaxSuppressionV3", "nms", ["boxes", "scores", "max", "iou", "score"])
    same = np.tile(np.array([[0, 0, 2, 2]], np.float32), (8, 1))
    ties = np.full(8, 0.5, np.float32)          # all tied: the lowest index is kept
    return {"boxes": same, "scores": ties}, ["nms", *_gathered(b, "nms")]


@case
def case_where(b):
    b.placeholder("x", [3, 4])
    b.const("zero", np.array(0.0, np.float32))
    b.op("Greater", "pos", ["x", "zero"])
    b.op("Where", "where", ["pos"])
    b.op("GatherNd", "values", ["x", "where"])
    b.op("Sum", "total", ["values", "axis"], keep_dims=False)
    b.const("axis", np.array([0], np.int32))
    x = np.array([[1, -1, 2, 0], [0, 0, 0, 0], [-3, 4, 5, -6]], np.float32)
    return {"x": x}, ["where", "values", "total"]


@case
def case_where_empty(b):
    b.placeholder("x", [2, 3])
    b.const("zero", np.array(0.0, np.float32))
    b.op("Greater", "pos", ["x", "zero"])
    b.op("Where", "where", ["pos"])
    b.op("Shape", "count", ["where"])
    return {"x": -np.ones((2, 3), np.float32)}, ["where", "count"]


@case
def case_top_k_of_a_fed_k(b):
    b.placeholder("x", [2, 6])
    b.placeholder("k", [], "int32")
    b.op("TopKV2", "top", ["x", "k"], sorted=True)
    x = np.array([[0.5, 2.0, 2.0, -1.0, 2.0, 0.0], [3.0, 1.0, 4.0, 1.0, 5.0, 9.0]],
                 np.float32)
    return {"x": x, "k": np.array(4, np.int32)}, ["top", "top:1"]


def _cond(b):
    """y = x * 2 if ratio > 0.5 else x + 1, as TF1's cond: Switch and Merge."""
    b.placeholder("x", [2, 3])
    b.placeholder("ratio", [])
    b.const("half", np.array(0.5, np.float32))
    b.const("two", np.array(2.0, np.float32))
    b.const("one", np.array(1.0, np.float32))
    b.op("Greater", "pred", ["ratio", "half"])
    b.op("Switch", "sw", ["x", "pred"])
    b.op("Mul", "then", ["sw:1", "two"])
    b.op("AddV2", "else", ["sw", "one"])
    b.op("Merge", "merge", ["else", "then"], N=2)
    return ["merge"]


X23 = np.arange(6, dtype=np.float32).reshape(2, 3) - 2


@case
def case_cond_true(b):
    return {"x": X23, "ratio": np.array(0.75, np.float32)}, _cond(b)


@case
def case_cond_false(b):
    return {"x": X23, "ratio": np.array(0.25, np.float32)}, _cond(b)


def _enter(b, name, src, constant):
    return b.op("Enter", name, [src], frame_name="loop", is_constant=constant,
                parallel_iterations=10)


@case
def case_while_loop_with_tensor_arrays(b):
    """acc = sum of x's rows and out[i] = x[i] * x[i], by a TF1 loop over a TensorArray
    (what tf.map_fn and tf.foldl make)."""
    b.placeholder("x", [3, 4])
    b.const("n", np.array(3, np.int32))
    b.const("zero_i", np.array(0, np.int32))
    b.const("one_i", np.array(1, np.int32))
    b.const("acc0", np.zeros(4, np.float32))
    b.const("rows", np.arange(3, dtype=np.int32))
    b.op("TensorArrayV3", "ta", ["n"], dtype="DT_FLOAT",
         dynamic_size=False, clear_after_read=True, identical_element_shapes=True,
         tensor_array_name="")
    b.nodes[-1]["attr"]["element_shape"] = {"shape": {"unknownRank": True}}
    b.op("TensorArrayScatterV3", "scatter", ["ta", "rows", "x", "ta:1"])
    b.op("TensorArrayV3", "out", ["n"], dtype="DT_FLOAT", dynamic_size=False,
         clear_after_read=True, identical_element_shapes=True, tensor_array_name="")
    b.nodes[-1]["attr"]["element_shape"] = {"shape": {"unknownRank": True}}
    _enter(b, "e_i", "zero_i", False)
    _enter(b, "e_acc", "acc0", False)
    _enter(b, "e_flow", "out:1", False)
    _enter(b, "e_n", "n", True)
    _enter(b, "e_one", "one_i", True)
    _enter(b, "e_ta", "ta", True)
    _enter(b, "e_scatter", "scatter", True)
    _enter(b, "e_out", "out", True)
    b.op("Merge", "m_i", ["e_i", "n_i"], N=2)
    b.op("Merge", "m_acc", ["e_acc", "n_acc"], N=2)
    b.op("Merge", "m_flow", ["e_flow", "n_flow"], N=2)
    b.op("Less", "less", ["m_i", "e_n"])
    b.op("LoopCond", "cond", ["less"])
    b.op("Switch", "s_i", ["m_i", "cond"])
    b.op("Switch", "s_acc", ["m_acc", "cond"])
    b.op("Switch", "s_flow", ["m_flow", "cond"])
    b.op("Identity", "i", ["s_i:1"])
    b.op("TensorArrayReadV3", "row", ["e_ta", "i", "e_scatter"], dtype="DT_FLOAT")
    b.op("AddV2", "acc", ["s_acc:1", "row"])
    b.op("Mul", "sq", ["row", "row"])
    b.op("TensorArrayWriteV3", "write", ["e_out", "i", "sq", "s_flow:1"])
    b.op("AddV2", "i1", ["i", "e_one"])
    b.op("NextIteration", "n_i", ["i1"])
    b.op("NextIteration", "n_acc", ["acc"])
    b.op("NextIteration", "n_flow", ["write"])
    b.op("Exit", "x_acc", ["s_acc"])
    b.op("Exit", "x_flow", ["s_flow"])
    b.op("TensorArraySizeV3", "size", ["out", "x_flow"])
    b.op("TensorArrayGatherV3", "stacked", ["out", "rows", "x_flow"], dtype="DT_FLOAT")
    b.nodes[-1]["attr"]["element_shape"] = {"shape": {"dim": [{"size": "4"}]}}
    x = np.arange(12, dtype=np.float32).reshape(3, 4) / 4 - 1
    return {"x": x}, ["x_acc", "stacked", "size"]


@case
def case_while_loop_with_tensor_lists(b):
    """out[i] = x[i] * 2 by a TF1 loop over TensorLists (TF2's tf.map_fn, as handtrack
    has it): FromTensor, GetItem, SetItem on a Reserved list, Stack."""
    b.placeholder("x", [2, 3])
    b.const("n", np.array(2, np.int32))
    b.const("zero_i", np.array(0, np.int32))
    b.const("one_i", np.array(1, np.int32))
    b.const("two", np.array(2.0, np.float32))
    b.const("eshape", np.array([3], np.int32))
    b.op("TensorListFromTensor", "lst", ["x", "eshape"], element_dtype="DT_FLOAT",
         shape_type="DT_INT32")
    b.op("TensorListReserve", "res", ["eshape", "n"], element_dtype="DT_FLOAT",
         shape_type="DT_INT32")
    _enter(b, "e_i", "zero_i", False)
    _enter(b, "e_res", "res", False)
    _enter(b, "e_lst", "lst", False)
    for c in ("n", "one_i", "two", "eshape"):
        _enter(b, f"e_{c}", c, True)
    for v in ("i", "res", "lst"):
        b.op("Merge", f"m_{v}", [f"e_{v}", f"n_{v}"], N=2)
    b.op("Less", "less", ["m_i", "e_n"])
    b.op("LoopCond", "cond", ["less"])
    for v in ("i", "res", "lst"):
        b.op("Switch", f"s_{v}", [f"m_{v}", "cond"])
    b.op("Identity", "i", ["s_i:1"])
    b.op("TensorListGetItem", "item", ["s_lst:1", "i", "e_eshape"], element_dtype="DT_FLOAT")
    b.op("Mul", "y", ["item", "e_two"])
    b.op("TensorListSetItem", "set", ["s_res:1", "i", "y"], element_dtype="DT_FLOAT")
    b.op("AddV2", "i1", ["i", "e_one_i"])
    b.op("NextIteration", "n_i", ["i1"])
    b.op("NextIteration", "n_res", ["set"])
    b.op("NextIteration", "n_lst", ["s_lst:1"])
    b.op("Exit", "x_res", ["s_res"])
    b.op("TensorListStack", "stacked", ["x_res", "eshape"], element_dtype="DT_FLOAT",
         num_elements=2)
    return {"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5}, ["stacked"]


def _fed_count_loop(b):
    """acc = x; while i < n (fed): acc = acc * 1.5 - 0.25; i += 1. The condition is
    computed by the graph: one ff.while_loop, not a guard per iteration."""
    b.placeholder("x", [2, 2])
    b.placeholder("n", [], "int32")
    b.const("zero_i", np.array(0, np.int32))
    b.const("one_i", np.array(1, np.int32))
    b.const("k", np.array(1.5, np.float32))
    b.const("c", np.array(0.25, np.float32))
    _enter(b, "e_i", "zero_i", False)
    _enter(b, "e_acc", "x", False)
    for name in ("n", "one_i", "k", "c"):
        _enter(b, f"e_{name}", name, True)
    b.op("Merge", "m_i", ["e_i", "n_i"], N=2)
    b.op("Merge", "m_acc", ["e_acc", "n_acc"], N=2)
    b.op("Less", "less", ["m_i", "e_n"])
    b.op("LoopCond", "cond", ["less"])
    b.op("Switch", "s_i", ["m_i", "cond"])
    b.op("Switch", "s_acc", ["m_acc", "cond"])
    b.op("Mul", "scaled", ["s_acc:1", "e_k"])
    b.op("Sub", "acc", ["scaled", "e_c"])
    b.op("AddV2", "i1", ["s_i:1", "e_one_i"])
    b.op("NextIteration", "n_i", ["i1"])
    b.op("NextIteration", "n_acc", ["acc"])
    b.op("Exit", "x_acc", ["s_acc"])
    b.op("Exit", "x_i", ["s_i"])
    return ["x_acc", "x_i"]


X22 = np.array([[1.0, -2.0], [0.5, 3.0]], np.float32)


@case
def case_while_loop_of_a_fed_count(b):
    return {"x": X22, "n": np.array(5, np.int32)}, _fed_count_loop(b)


@case
def case_while_loop_of_a_fed_count_zero(b):
    return {"x": X22, "n": np.array(0, np.int32)}, _fed_count_loop(b)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    corpus.require_tfjs()
    out = {}
    for name, fn in CASES.items():
        b = ModelBuilder()
        feeds, outputs = fn(b)
        outputs = [b.op("Identity", f"out{k}", [o]) for k, o in enumerate(outputs)]
        sig = {"inputs": {}, "outputs": {o: {"name": f"{o}:0"} for o in outputs}}
        for n in b.nodes:
            if n["op"] == "Placeholder":
                sig["inputs"][n["name"]] = {"name": n["name"] + ":0"}
        path = b.write(str(tmp_path_factory.mktemp(name)), b.model_json(signature=sig))
        out[name] = (path, feeds)
    results = corpus.tfjs_run_many(list(out.values()))
    return {name: (*out[name], r) for name, r in zip(out, results)}


def _compare(name, got, want, tol):
    assert not isinstance(want, str), f"TF.js failed: {want}"
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.shape == w.shape, f"{name} output {k}: shape {g.shape} vs TF.js {w.shape}"
        if w.dtype == np.int32 or g.dtype in (np.int32, np.bool_):
            np.testing.assert_array_equal(g.astype(np.int64), w.astype(np.int64),
                                          err_msg=f"{name} output {k}")
        elif w.size:
            assert corpus.max_error(g, w) <= tol, (f"{name} output {k}: error "
                                                   f"{corpus.max_error(g, w):.2e}")


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_staged_rule_matches_tfjs(built, name, backend):
    path, feeds, want = built[name]
    model = ff.tfjs.load(path)
    assert isinstance(model, ff.tfjs.StagedTfjsModel)
    kwargs = {"backend": "numpy", "passes": []} if backend == "numpy" else {}
    got = model.run(feeds, **kwargs)
    _compare(name, list(got.values()), want, 1e-5 if backend == "numpy" else 1e-4)


def test_a_plan_per_branch_replayed_from_the_cache(built):
    path, feeds, _ = built["cond_true"]
    model = ff.tfjs.load(path)
    kwargs = {"backend": "numpy", "passes": []}
    first = model.run(feeds, **kwargs)
    other = model.run({**feeds, "ratio": np.array(0.1, np.float32)}, **kwargs)
    assert model.builds == 2                # the predicate is a guard: one plan per branch
    again = model.run(feeds, **kwargs)
    model.run({**feeds, "x": feeds["x"] * 3}, **kwargs)   # same shapes, same branch
    assert model.builds == 2
    np.testing.assert_array_equal(first["out0"], again["out0"])
    np.testing.assert_array_equal(other["out0"], X23 + 1)
    np.testing.assert_array_equal(first["out0"], X23 * 2)
    stage = model.stage(feeds, **kwargs)
    assert [type(b).__name__ for b in stage.boundaries] == ["Guard"]


def test_runs_from_several_threads_share_one_plan_per_branch(built):
    path, feeds, _ = built["cond_true"]
    model = ff.tfjs.load(path)
    kwargs = {"backend": "numpy", "passes": []}
    build = model._build

    def slow_build(runtime):                # widen the window in which threads could race
        time.sleep(0.05)
        return build(runtime)

    model._build = slow_build
    branches = [feeds, {**feeds, "ratio": np.array(0.1, np.float32)}] * 4
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda f: model.run(f, **kwargs)["out0"], branches))
    assert model.builds == 2                # one plan per branch, whatever the threads did
    for k, out in enumerate(got):
        np.testing.assert_array_equal(out, X23 * 2 if k % 2 == 0 else X23 + 1)


def test_a_host_result_of_another_shape_builds_another_plan(built):
    path, feeds, _ = built["where"]
    model = ff.tfjs.load(path)
    kwargs = {"backend": "numpy", "passes": []}
    model.run(feeds, **kwargs)
    model.run({"x": feeds["x"] + 10}, **kwargs)         # 12 true entries instead of 5
    assert model.builds == 2
    got = model.run({"x": feeds["x"] + 20}, **kwargs)    # 12 again: replayed
    assert model.builds == 2
    assert got["out0"].shape == (12, 2)


def _float64_nms(boxes, scores, max_size, iou_threshold, score_threshold):
    """Hard NMS as TF defines it, in float64: best score first (ties: lower index),
    dropped at IoU >= the threshold with a kept box."""
    b = boxes.astype(np.float64)
    order = sorted((i for i in range(len(scores)) if scores[i] > score_threshold),
                   key=lambda i: (-float(scores[i]), i))
    kept = []
    for i in order:
        if len(kept) == max_size:
            break
        ok = True
        for j in kept:
            y0, x0 = np.minimum(b[i, :2], b[i, 2:]), np.minimum(b[j, :2], b[j, 2:])
            y1, x1 = np.maximum(b[i, :2], b[i, 2:]), np.maximum(b[j, :2], b[j, 2:])
            ai, aj = np.prod(y1 - y0), np.prod(x1 - x0)
            if ai <= 0 or aj <= 0:
                continue
            inter = np.prod(np.maximum(np.minimum(y1, x1) - np.maximum(y0, x0), 0))
            if inter / (ai + aj - inter) >= iou_threshold:
                ok = False
                break
        if ok:
            kept.append(i)
    return kept


def test_hard_nms_matches_a_float64_formula():
    rng = np.random.default_rng(3)
    for _ in range(20):
        corner = rng.random((40, 2), dtype=np.float32) * 4
        boxes = np.concatenate([corner, corner + rng.random((40, 2), dtype=np.float32)], 1)
        scores = np.round(rng.random(40), 1).astype(np.float32)     # many ties
        got, _ = non_max_suppression(boxes, scores, 15, 0.4, 0.2)
        assert got.tolist() == _float64_nms(boxes, scores, 15, 0.4, 0.2)


def test_nested_loops_are_refused_naming_the_node(tmp_path):
    b = ModelBuilder()
    b.placeholder("x", [2])
    b.op("Enter", "outer", ["x"], frame_name="a", is_constant=False, parallel_iterations=1)
    b.op("Enter", "inner", ["outer"], frame_name="b", is_constant=False,
         parallel_iterations=1)
    b.op("Exit", "done", ["inner"])
    path = b.write(str(tmp_path))
    with pytest.raises(ff.tfjs.TfjsImportError, match=r"Enter node 'inner'.*nested"):
        ff.tfjs.load(path)


def test_functional_while_is_refused_with_the_way_out(tmp_path):
    b = ModelBuilder()
    b.placeholder("x", [2])
    b.op("StatelessWhile", "w", ["x"])
    path = b.write(str(tmp_path))
    with pytest.raises(ff.tfjs.TfjsImportError, match=r"StatelessWhile node 'w'.*TF1"):
        ff.tfjs.load(path)


def test_a_staged_model_has_no_single_graph_and_checks_its_feeds(built):
    path, feeds, _ = built["where"]
    model = ff.tfjs.load(path)
    assert "Where node 'where'" in model.staged_by
    assert model.inputs_by_name["x"].shape == (3, 4)
    for what in ("graph", "outputs", "outputs_by_name"):
        with pytest.raises(ff.tfjs.TfjsImportError, match=r"no single graph.*model\.run"):
            getattr(model, what)
    with pytest.raises(ff.tfjs.TfjsImportError, match=r"'y', not an input"):
        model.run({"y": feeds["x"]})
    with pytest.raises(ff.tfjs.TfjsImportError, match=r"x missing"):
        model.run({})


def test_a_loop_that_never_ends_is_refused(tmp_path, monkeypatch):
    from fragflow.frontend.tfjs import importer
    monkeypatch.setattr(importer, "MAX_LOOP_ITERATIONS", 5)
    b = ModelBuilder()
    b.placeholder("x", [2])
    b.const("yes", np.array(True))
    _enter(b, "e_x", "x", False)
    _enter(b, "e_yes", "yes", True)
    b.op("Merge", "m_x", ["e_x", "n_x"], N=2)
    b.op("LoopCond", "cond", ["e_yes"])
    b.op("Switch", "s_x", ["m_x", "cond"])
    b.op("Neg", "neg", ["s_x:1"])
    b.op("NextIteration", "n_x", ["neg"])
    b.op("Exit", "out", ["s_x"])
    path = b.write(str(tmp_path))
    model = ff.tfjs.load(path)
    with pytest.raises(ff.tfjs.TfjsImportError, match=r"ran 5 iterations without"):
        model.run({"x": np.zeros(2, np.float32)}, backend="numpy", passes=[])


def test_a_loop_whose_condition_the_graph_computes_is_one_while_loop(built):
    path, feeds, _ = built["while_loop_of_a_fed_count"]
    model = ff.tfjs.load(path)
    kwargs = {"backend": "numpy", "passes": []}
    stage = model.stage(feeds, **kwargs)
    assert stage.boundaries == []                     # no guard: the count is not baked in
    assert sum(n.op == "while_loop" for n in stage.graph.nodes) == 1
    for n in (0, 3, 9):
        got = model.run({**feeds, "n": np.array(n, np.int32)}, **kwargs)
        want = X22.astype(np.float64)
        for _ in range(n):
            want = want * 1.5 - 0.25
        np.testing.assert_allclose(got["out0"], want, rtol=1e-6)
        assert int(got["out1"]) == n
    assert model.builds == 1
