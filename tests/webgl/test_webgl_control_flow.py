"""ff.webgl.export of graphs with while_loop, cond and scan, without a browser: the
schedule's nested program (docs/WEBGL.md, "Control flow"), which textures loops swap
or copy, what is read back, and the graphs an export refuses. The browser runs of the
same cases (tests/webgl/cases.py CONTROL_CASES) are in test_browser.py."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as ff
from fragflow.tools.webgl.export import kernel_source
from tests.webgl.cases import (
    conds,
    lstm,
    lstm_training_step,
    nested_loops,
    scans,
    while_loops,
)


def _export(case, tmp_path):
    return ff.webgl.export(case.fetches, list(case.feeds), tmp_path)


def _steps(steps):
    """Every step, nested ones too, in order."""
    for step in steps:
        yield step
        for part in ("cond", "body", "true", "false"):
            if step.get(part):
                yield from _steps(step[part]["steps"])


def _kernel_ranges(steps) -> list:
    return [k for s in _steps(steps) if s["kind"] == "kernels"
            for k in range(s["first"], s["first"] + s["count"])]


def test_a_graph_without_control_flow_keeps_the_version_1_schedule(tmp_path):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4,), "float32", name="x")
        y = ff.exp(x) * 2.0
    schedule = ff.webgl.export(y, [x], tmp_path).schedule
    assert schedule["version"] == 1 and "program" not in schedule


def test_the_program_runs_every_kernel_once_in_its_place(tmp_path):
    schedule = _export(nested_loops(), tmp_path).schedule
    assert schedule["version"] == 2
    kinds = [s["kind"] for s in _steps(schedule["program"])]
    assert {"while", "cond", "scan", "kernels"} <= set(kinds)
    # every kernel belongs to exactly one step: the top level's, a body's or a branch's
    assert sorted(_kernel_ranges(schedule["program"])) == list(range(len(schedule["kernels"])))
    for kernel in schedule["kernels"]:
        assert kernel_source(schedule, kernel).startswith("#version 300 es\n")


def _loop(schedule, name):
    return next(s for s in _steps(schedule["program"]) if s.get("name") == name)


def test_while_loops_read_their_predicate_unless_the_condition_is_a_constant(tmp_path):
    export = _export(while_loops(), tmp_path)
    schedule, slots = export.schedule, export.schedule["slots"]
    loops = [s for s in schedule["program"] if s["kind"] == "while"]
    assert len(loops) == 7
    counted = [s for s in loops if s["cond"] is None]
    assert [s["maxIterations"] for s in counted] == [6]      # `lambda w: True`, at most 6
    assert [s["maxIterations"] for s in loops if s["cond"]] == [None] * 3 + [2] + [None] * 2
    for step in loops:
        assert len(step["init"]) == len(step["vars"]) == len(step["next"]) == \
            len(step["body"]["outputs"])
        if step["cond"] is not None:
            pred = slots[step["cond"]["pred"]]
            assert pred["format"] == "i" and pred["width"] == pred["height"] == 1
        for var in step["vars"]:
            assert slots[var]["kind"] == "loop"


def test_results_swap_textures_unless_they_cannot(tmp_path):
    """A body's own result swaps textures with its variable; a variable returned as it
    is or in another's place is copied into a slot of the loop's first."""
    export = _export(while_loops(), tmp_path)
    slots = export.schedule["slots"]
    loops = [s for s in export.schedule["program"] if s["kind"] == "while"]
    def key(slot):
        return slots[slot]["width"], slots[slot]["height"], slots[slot]["format"]
    for step in loops:
        for var, out, nxt in zip(step["vars"], step["body"]["outputs"], step["next"]):
            if nxt == -1:
                assert slots[out]["kind"] == "scratch" and key(out) == key(var)
            else:
                assert slots[nxt]["kind"] == "loop" and key(nxt) == key(var)
    trading = loops[5]                     # (i, a, b) -> (i + 1, b, a)
    assert trading["next"][0] == -1 and trading["next"][1] >= 0 and trading["next"][2] >= 0
    assert trading["body"]["outputs"][1:] == trading["vars"][:0:-1]
    same = loops[6]                        # (i, s, c) -> (i + 1, s, big * 2)
    assert same["next"][1] >= 0 and same["body"]["outputs"][1] == same["vars"][1]
    for step in loops:                     # a swapped texture is never a variable's too
        swapped = [o for o, n in zip(step["body"]["outputs"], step["next"]) if n == -1]
        assert len(set(swapped)) == len(swapped) and not set(swapped) & set(step["vars"])


def test_a_scan_slices_its_elements_and_places_its_ys(tmp_path):
    export = _export(scans(), tmp_path)
    schedule, slots = export.schedule, export.schedule["slots"]
    steps = [s for s in schedule["program"] if s["kind"] == "scan"]
    # cumulative, map, fori_loop, zero steps forward; reverse, foldr, (sums, counts)
    assert sorted(s["reverse"] for s in steps) == [False] * 5 + [True] * 3
    two = next(s for s in steps if len(s["vars"]) == 2 and s["elems"])    # sums, counts
    assert [slots[v]["format"] for v in two["vars"]] == ["f", "i"]
    assert [n for _, n in two["ys"]] == [7, 1]
    assert [slots[y]["format"] for y, _ in two["ys"]] == ["f", "i"]
    x, empty = [i["slot"] for i in schedule["inputs"]]
    assert [s["length"] for s in steps] == [6, 6, 6, 6, 5, 6, 0, 0]   # fori_loop: 5 steps
    for step in steps:
        for elems, param, size in step["elems"]:      # rows, sliced from the feed's texture
            assert elems == (x if step["length"] else empty) and size == 7
            assert slots[param]["kind"] == "loop"
    assert [n for s in steps for _, n in s["ys"]] == [7, 7, 1, 7, 1, 7]


def test_a_cond_holds_both_branches_and_results_in_the_branch_taken(tmp_path):
    export = _export(conds(), tmp_path)
    slots = export.schedule["slots"]
    steps = [s for s in _steps(export.schedule["program"]) if s["kind"] == "cond"]
    assert len(steps) == 5
    for step in steps:
        assert slots[step["pred"]]["format"] == "i"
        assert [slots[o]["kind"] for o in step["outputs"]] == ["alias"]
        assert len(step["true"]["outputs"]) == len(step["false"]["outputs"]) == 1
        assert step["false"]["steps"]
    # `lambda: a`: no kernel, its result is the feed's texture (the runtime points the
    # cond's result at it)
    (same,) = [s for s in steps if not s["true"]["steps"]]
    a = next(i["slot"] for i in export.schedule["inputs"] if i["name"] == "a")
    assert same["true"]["outputs"] == [a]


def test_an_lstm_is_one_scan_reading_its_weights_where_they_are(tmp_path):
    export = _export(lstm(), tmp_path)
    schedule = export.schedule
    (scan,) = [s for s in _steps(schedule["program"]) if s["kind"] == "scan"]
    assert scan["length"] == 5 and len(scan["vars"]) == 2        # h and c
    body = set(_kernel_ranges(scan["body"]["steps"]))
    weights = {v["slot"] for v in schedule["variables"]}
    assert len(weights) == 3
    read = {i for k in body for i in schedule["kernels"][k]["inputs"]}
    assert weights & read, "the body reads the variables' textures, no copy"


def test_stages_compute_each_value_once_and_hand_it_on(tmp_path):
    """SGD through an LSTM: forward scan, the loss, two reverse scans of its gradient,
    the updates. A value that a later stage or the outputs read is fetched from the
    stage that computed it, not computed again."""
    export = _export(lstm_training_step(), tmp_path)
    program = export.schedule["program"]
    assert [s["kind"] for s in program] == ["kernels", "scan", "kernels", "scan", "scan",
                                            "kernels"]
    top = [k for s in program if s["kind"] == "kernels"
           for k in range(s["first"], s["first"] + s["count"])]
    nodes = [export.kernels[k].name.split("_", 1)[1] for k in top]
    assert len(nodes) == len(set(nodes)), sorted(nodes)
    assert len(export.schedule["assigns"]) == 6      # 5 weights and the step counter


def test_cli_exports_an_onnx_loop(tmp_path):
    """`fragflow export model.onnx --webgl`: an ONNX Loop (a while_loop) is a step."""
    pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
    from onnx import TensorProto, helper

    from fragflow.tools.cli import main
    f, b = TensorProto.FLOAT, TensorProto.BOOL
    body = helper.make_graph(
        [helper.make_node("Add", ["v_in", "v_in"], ["v_out"]),
         helper.make_node("ReduceSum", ["v_out"], ["s"], keepdims=0),
         helper.make_node("Less", ["s", "limit"], ["c_out"])], "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("c_in", b, []),
         helper.make_tensor_value_info("v_in", f, [3])],
        [helper.make_tensor_value_info("c_out", b, []),
         helper.make_tensor_value_info("v_out", f, [3])])
    graph = helper.make_graph(
        [helper.make_node("Loop", ["", "c0", "v0"], ["v"], body=body)], "loop",
        [helper.make_tensor_value_info("c0", b, []),
         helper.make_tensor_value_info("v0", f, [3]),
         helper.make_tensor_value_info("limit", f, [])],
        [helper.make_tensor_value_info("v", f, [3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (tmp_path / "loop.onnx").write_bytes(model.SerializeToString())
    assert main(["export", str(tmp_path / "loop.onnx"), "--webgl", "-o",
                 str(tmp_path / "web")]) == 0
    text = (tmp_path / "web" / "model.js").read_text()
    assert '"version":2' in text and '"kind":"while"' in text


def test_a_loop_variable_whose_shape_changes_is_refused_naming_the_loop(tmp_path):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2,), "float32", name="x")
        _, grown = ff.while_loop(lambda i, v: i < 3,
                                 lambda i, v: (i + 1, ff.concat([v, v], 0)), (0, x),
                                 shape_invariants=(ff.TensorShape([]),
                                                   ff.TensorShape([None])))
    with pytest.raises(ff.webgl.WebGLExportError,
                       match=r"while_loop 'while'.*test_webgl_control_flow.py.*shape "
                             r"invariant.*fixed shapes"):
        ff.webgl.export(grown, [x], tmp_path)


def test_a_loop_that_never_ends_is_refused(tmp_path):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2,), "float32", name="x")
        y = ff.while_loop(lambda v: True, lambda v: v + 1.0, x)
    with pytest.raises(ff.webgl.WebGLExportError, match=r"while_loop 'while'.*never ends"):
        ff.webgl.export(y, [x], tmp_path)


def test_a_loop_whose_condition_is_false_at_export_runs_no_iteration(tmp_path):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2,), "float32", name="x")
        y = ff.while_loop(lambda v: False, lambda v: v + 1.0, x)
    (step,) = [s for s in ff.webgl.export(y, [x], tmp_path).schedule["program"]
               if s["kind"] == "while"]
    assert step["cond"] is None and step["maxIterations"] == 0
    np.testing.assert_array_equal(
        ff.Session(g, backend="numpy").run(y, {x: np.ones(2, np.float32)}), [1.0, 1.0])


def test_a_while_loop_that_prints_is_refused_and_a_scan_that_prints_exports(tmp_path):
    # prints do not export (nothing prints in the page); a while_loop's printed values
    # grow per iteration, which fixed textures cannot hold; a scan's are its ys
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3,), name="x")

        def body(i, v):
            ff.print("v", v)
            return i + 1, v * 2.0
        _, y = ff.while_loop(lambda i, v: i < 3, body, (0, x))
        s = ff.scan(lambda a, e: ff.Print(a + e, [e], "e"), x, initializer=0.0)
    with pytest.raises(ff.FragflowError, match=r"while_loop 'while' \(.*"
                       r"test_webgl_control_flow\.py:\d+\): a printed value .* cannot hold"):
        ff.webgl.export(y, [x], tmp_path / "while")
    export = ff.webgl.export(s, [x], tmp_path / "scan")
    assert [o["name"] for o in export.schedule["outputs"]] == [s.name]


def test_the_assigns_of_a_loop_and_a_branch_are_in_the_schedule(tmp_path):
    # Session.run of the loop's result applies its body's assign and the cond's taken
    # branch's; the export's run does as well (the browser run: cases.side_effects)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3,), name="x")
        v = ff.Variable(np.zeros(3, np.float32), name="v")
        k = ff.Variable(0, name="k")

        def body(i, a):
            v.assign_add(a)
            return i + 1, a * 2.0
        _, y = ff.while_loop(lambda i, a: i < 3, body, (0, x))
        c = ff.cond(ff.reduce_sum(y) > 0, lambda: k.assign_add(1) + 0,
                    lambda: ff.identity(k))
    export = ff.webgl.export({"y": y, "c": c}, [x], tmp_path)
    by_slot = {v["slot"]: v["name"] for v in export.schedule["variables"]}
    assert {by_slot[var] for var, _ in export.schedule["assigns"]} == {"v", "k"}
