"""Exported models run in headless Chromium on SwiftShader and on Mesa (ANGLE over
EGL) and match the numpy executor on the graph as built: the op families, a CNN, an
ONNX import, and training steps whose variables after 3 steps in the page equal
Session.run's."""
from __future__ import annotations

import numpy as np
import pytest

from tests.reference import assert_matches
from tests.webgl.browser import CONFIGS
from tests.webgl.cases import CASES
from tests.webgl.conftest import reference

# Where a rasteriser's arithmetic is not IEEE's, and how (docs/WEBGL.md): these
# outputs are compared where their inputs are not NaN, and must differ where they are.
NOT_IEEE = {
    ("swiftshader", "elementwise", "sigmoid"):
        "SwiftShader's exp(NaN) is not NaN, so 1 / (1 + exp(-x)) gives 0 for x = NaN",
}


@pytest.mark.parametrize("config", list(CONFIGS))
def test_browser_is_the_rasteriser_asked_for(browser_results, config):
    renderer = browser_results[config]["info"]["renderer"]
    assert ("SwiftShader" if config == "swiftshader" else "llvmpipe") in renderer


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
