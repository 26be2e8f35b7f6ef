"""Exported models run in headless Chromium on SwiftShader and on Mesa (ANGLE over
EGL) and match the numpy executor on the graph as built: the op families, a CNN, an
ONNX import, training steps whose variables after 3 steps in the page equal
Session.run's, one case per kernel strategy row and the attention shapes
(strategy_cases.py). A run resolves or rejects, never hangs (issue 36): a context lost
before a run and in the middle of one, and a run past load({timeoutMs: 1}) (a 1024 x
1024 x 1024 matmul), reject with a FragflowError saying what happened and naming the
kernel not yet done; load() again after the losses gives the numpy executor's
numbers; the export's index.html shows the error.

One file: the exports and the two browser launches are session fixtures, and
`make test` deals tests to workers a file at a time."""
from __future__ import annotations

import os
import re

import numpy as np
import pytest

from fragflow.tools.webgl.export import kernel_source, schedule_for
from tests.reference import assert_matches
from tests.webgl.browser import CONFIGS
from tests.webgl.cases import CONTROL_CASES
from tests.webgl.conftest import BROWSER_CASES, GUARDED, LATE, PROGRAM_CACHE, reference
from tests.webgl.strategy_cases import REDUCTION_MODES, case_id, strategy_tables

ROWS = [s.name for table in strategy_tables().values() for s in table]

# Where a rasteriser's arithmetic is not IEEE's, and how (docs/WEBGL.md): these
# outputs are compared where their inputs are not NaN, and must differ where they are.
# None now: SwiftShader's exp(NaN) is not NaN, but exp and sigmoid keep NaN by a select
# (ff_exp_nan, ff_sigmoid in elementwise_lib), and the elementwise case checks both.
NOT_IEEE: dict = {}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_browser_is_the_rasteriser_asked_for(browser_results, config):
    renderer = browser_results[config]["info"]["renderer"]
    if config == "swiftshader":
        assert "SwiftShader" in renderer
    else:               # the system's GL through EGL: llvmpipe here, a GPU's driver there
        assert "SwiftShader" not in renderer and "OpenGL" in renderer, renderer


@pytest.mark.parametrize("config", list(CONFIGS))
def test_models_on_one_context_share_their_linked_programs(browser_results, config):
    a, b, c, d = (browser_results[config][name]["timings"] for name in PROGRAM_CACHE)
    assert a["programs"] >= 3 and a["programs"] == b["programs"] == c["programs"], a
    # a was disposed before b loaded: its programs stayed linked, idle, for b
    assert b["programsReused"] == b["programs"] and c["programsReused"] == c["programs"]
    # c kept no idle programs (programCache: 0), so d linked every one itself
    assert d["programsReused"] == 0, d


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", list(BROWSER_CASES))
def test_export_matches_the_numpy_executor(exported, browser_results, config, name):
    case, spec, _ = exported[1][name]
    got = browser_results[config][name]
    assert got["error"] is None, got["error"]
    runs, variables = reference(case)
    for run, (want, have) in enumerate(zip(runs, got["outputs"])):
        for key, value in want.items():
            expected = np.asarray(value)
            assert key in have, f"run {run}: output {key} missing"
            if (config, name, key) in NOT_IEEE:
                nan = np.isnan(case.feeds[next(iter(case.feeds))])
                assert not np.isnan(have[key][nan]).any(), "now IEEE: drop NOT_IEEE's row"
                have[key][nan] = expected[nan] = 0
            assert_matches(have[key], expected, rtol=case.rtol, atol=case.atol,
                           what=f"{name} ({config}) run {run} output {key}")
    for key, value in variables.items():
        assert_matches(got["variables"][key], value, rtol=case.rtol, atol=case.atol,
                       what=f"{name} ({config}) variable {key} after {case.runs} runs")


@pytest.mark.parametrize("config", list(CONFIGS))
def test_the_variant_for_8_targets_takes_over_after_the_first_run(exported, browser_results,
                                                                   config):
    """Every case is exported with max_draw_buffers=(4, 8): the first run takes the
    4-target schedule (matched above), and after it load()'s model switches to the
    variant (runtime.js _upgrade); one more run then matches the numpy executor too.
    A model that assigns variables keeps one schedule."""
    switched = []
    for name in BROWSER_CASES:
        case, _, export = exported[1][name]
        got = browser_results[config][name]
        if not export.schedule.get("variants") or export.schedule["assigns"]:
            assert got["variant"] is None, name
            continue
        assert got["timings"]["drawBuffers"] == 4, name
        assert got["variant"]["drawBuffers"] == 8 and got["variant"]["ms"] > 0, name
        want = reference(case, extra=1)[0][-1]
        for key, value in want.items():
            assert_matches(got["reload"]["variant"][key], np.asarray(value), rtol=case.rtol,
                           atol=case.atol, what=f"{name} ({config}) on the variant: {key}")
        switched.append(name)
    assert len(switched) >= 10, switched


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", ["cnn_training_step", "nested_loops"])
def test_index_html_runs_the_model_and_shows_every_kernel(exported, browser_results,
                                                          config, name):
    _, spec, export = exported[1][name]
    page = browser_results[config][name]["page"]
    assert page is not None and page["result"] is not None, "the page did not finish"
    assert page["result"]["ok"], page["result"].get("error")
    assert page["outputs"] == len(export.schedule["outputs"])
    # a model that assigns variables runs its variant for 8 targets from the start
    ran = schedule_for(export.schedule, browser_results[config]["info"]["maxDrawBuffers"])
    kernels = ran["kernels"]
    assert page["kernels"] == page["profile"] == len(kernels)
    assert page["sources"] == [kernel_source(ran, k) for k in kernels]  # all


@pytest.mark.parametrize("config", list(CONFIGS))
def test_profile_times_every_kernel(exported, browser_results, config):
    rows = browser_results[config]["small_cnn"]["profile"]
    assert len(rows) == len(exported[1]["small_cnn"][2].schedule["kernels"])
    assert all(t is None or t >= 0 for t, _ in rows)   # NaN (JSON null): a disjoint query
    assert [calls for _, calls in rows] == [1] * len(rows)


@pytest.mark.parametrize("config", list(CONFIGS))
def test_profile_counts_a_scans_kernels_once_a_step(exported, browser_results, config):
    schedule = exported[1]["lstm"][2].schedule
    (scan,) = [s for s in schedule["program"] if s["kind"] == "scan"]
    body = {k for s in scan["body"]["steps"] for k in range(s["first"], s["first"] + s["count"])}
    rows = browser_results[config]["lstm"]["profile"]
    assert len(rows) == len(schedule["kernels"]) and body
    assert [calls for _, calls in rows] == [5 if k in body else 1 for k in range(len(rows))]


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("name", CONTROL_CASES)
def test_control_flow_reads_back_its_predicates_only(exported, browser_results, config,
                                                     name):
    """One readPixels per test of a while_loop's condition and per cond, none for a
    scan or a loop whose condition is a constant (cases.py counts them per case)."""
    case = exported[1][name][0]
    assert browser_results[config][name]["reads"] == [case.reads] * case.runs


# -- every strategy row (strategy_cases.py) ----------------------------------------------
@pytest.mark.parametrize("row", ROWS)
def test_each_rows_case_is_lowered_by_that_row(exported, row):
    _, _, export = exported[1][case_id(row)]
    assert row in {k.strategy for k in export.kernels}, \
        f"{case_id(row)}'s kernels come from {sorted({k.strategy for k in export.kernels})}"
    # what the page compiles: these kernels' sources, headers and all
    assert [k["name"] for k in export.schedule["kernels"]] == [k.name for k in export.kernels]


def test_merged_projections_are_read_in_place_in_the_export(exported):
    """attention_bert_merged: q, k and v one product (merge_matmuls) whose columns the
    walk and q kᵀ read, no slice kernels; its outputs are test_export_matches's."""
    _, _, export = exported[1]["attention_bert_merged"]
    ops = [k.op for k in export.kernels]
    assert "strided_slice" not in ops and ops.count("fused_attention") == 1, ops
    assert ops.count("fused_matmul") == 1, ops


def _header(source: str) -> tuple:
    """(template, {param: value}) from a kernel header's first lines."""
    found = re.search(r"^// fragflow kernel \S+: .*?, from (\S+) \((.*)\)$", source, re.M)
    if found is None:
        return None, {}
    params = dict(p.split("=", 1) for p in found.group(2).split(", ") if "=" in p)
    return found.group(1), params


def test_the_reduction_rows_run_every_kind_and_mode_of_the_tree_kernels(exported):
    seen = set()
    for row in ROWS:
        _, _, export = exported[1][case_id(row)]
        for kernel in export.schedule["kernels"]:
            template, params = _header(kernel["header"])
            if template == "reduce_tree.glsl.j2":
                seen.add((params["kind"], params.get("mode", ""),
                          int(params.get("targets", 1)) > 1))
    assert REDUCTION_MODES <= seen, f"not run: {sorted(REDUCTION_MODES - seen)}"


# -- a run that cannot hang (issue 36) -----------------------------------------------------
def _guards(browser_results, config):
    guards = browser_results[config][GUARDED]["guards"]
    assert guards is not None, "the harness did not finish the guarded runs"
    return guards


def _kernel_names(exported):
    with open(os.path.join(exported[0], LATE, "model.js")) as f:
        return re.findall(r'"name":"(k[^"]*)"', f.read())


@pytest.mark.parametrize("config", list(CONFIGS))
def test_a_run_on_a_context_lost_before_it_rejects_saying_the_context_was_lost(
        browser_results, config):
    seen = _guards(browser_results, config)["lostBefore"]
    assert seen["name"] == "FragflowError", seen
    assert "the WebGL context was lost before this run" in seen["message"], seen
    assert "framebuffer" not in seen["message"]


@pytest.mark.parametrize("config", list(CONFIGS))
def test_a_context_lost_in_the_middle_of_a_run_rejects_naming_the_kernel(
        exported, browser_results, config):
    seen = _guards(browser_results, config)["lostDuring"]
    assert seen["name"] == "FragflowError", seen
    assert seen["message"].startswith("the WebGL context was lost while kernel "), seen
    named = [k for k in exported[1][GUARDED][2].schedule["kernels"]
             if f"kernel {k['name']} ({k['op']} '{k['node']}'" in seen["message"]]
    assert len(named) == 1, seen["message"]


@pytest.mark.parametrize("config", list(CONFIGS))
def test_a_run_past_timeout_ms_rejects_naming_the_kernel(exported, browser_results, config):
    seen = _guards(browser_results, config)["timeout"]
    assert seen["name"] == "FragflowError", seen
    assert seen["message"].startswith("the run did not finish in 1 ms (load({timeoutMs})): "
                                      "kernel "), seen
    assert any(f"kernel {name} (" in seen["message"] for name in _kernel_names(exported))


@pytest.mark.parametrize("config", list(CONFIGS))
@pytest.mark.parametrize("context", ["new", "restored"])
def test_load_again_after_a_lost_context_gives_the_numpy_executors_numbers(
        exported, browser_results, config, context):
    case = exported[1][GUARDED][0]
    (want,), _ = reference(case)
    have = browser_results[config][GUARDED]["reload"].get(context)
    assert have is not None, f"no run on the {context} context after the loss"
    for key, value in want.items():
        assert_matches(have[key], np.asarray(value), rtol=case.rtol, atol=case.atol,
                       what=f"{GUARDED} ({config}) {key} on a {context} context")


@pytest.mark.parametrize("config", list(CONFIGS))
def test_a_run_on_a_lost_context_its_owner_restores_rejects_too(browser_results, config):
    seen = _guards(browser_results, config)["lostRestored"]
    assert seen["name"] == "FragflowError", seen
    assert "the WebGL context was lost before this run" in seen["message"], seen


@pytest.mark.parametrize("config", list(CONFIGS))
def test_index_html_shows_the_runs_error(browser_results, config):
    page = browser_results[config][GUARDED]["page"]
    assert page is not None and page["result"] is not None, "the page did not finish"
    assert not page["result"]["ok"]
    assert page["result"]["error"].startswith("FragflowError: the run did not finish in 1 ms")
    assert "FragflowError: the run did not finish in 1 ms" in page["status"]
