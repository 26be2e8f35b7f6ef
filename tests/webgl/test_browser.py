"""Exported models run in headless Chromium on SwiftShader and on Mesa (ANGLE over
EGL) and match the numpy executor on the graph as built: the op families, a CNN, an
ONNX import, and training steps whose variables after 3 steps in the page equal
Session.run's."""
from __future__ import annotations

import numpy as np
import pytest

from tests.reference import assert_matches
from tests.webgl.browser import CONFIGS
from tests.webgl.cases import CASES, CONTROL_CASES
from tests.webgl.conftest import reference

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
@pytest.mark.parametrize("name", list(CASES))
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
@pytest.mark.parametrize("name", ["cnn_training_step", "nested_loops"])
def test_index_html_runs_the_model_and_shows_every_kernel(exported, browser_results,
                                                          config, name):
    _, spec, export = exported[1][name]
    page = browser_results[config][name]["page"]
    assert page is not None and page["result"] is not None, "the page did not finish"
    assert page["result"]["ok"], page["result"].get("error")
    assert page["outputs"] == len(export.schedule["outputs"])
    kernels = export.schedule["kernels"]
    assert page["kernels"] == page["profile"] == len(kernels)
    assert page["sources"] == [k["source"] for k in kernels]   # headers and all


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
