"""The WebGL tests' shared run: every case of cases.py and strategy_cases.py exported
once, and run in ONE
headless Chromium launch per rasteriser (SwiftShader, Mesa through ANGLE's GL-EGL
backend), each page loading every export in turn. Skips with the reason where
chromium is missing (.ci/run installs it: apt-get install chromium)."""
from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import pytest

import fragflow as ff
from tests.webgl.browser import CONFIGS, chromium, run_cases
from tests.webgl.cases import CASES, Case, layers
from tests.webgl.strategy_cases import (
    ATTENTION_CASES,
    BLOCKS_CASES,
    ROW_CASES,
    case_id,
    matmul_1024,
)

# every browser case: cases.py's, one per strategy row, the attention shapes, the
# readers of another node's render targets
BROWSER_CASES = {**CASES, **{case_id(row): build for row, build in ROW_CASES.items()},
                 **ATTENTION_CASES, **BLOCKS_CASES}
# FRAGFLOW_REQUIRE_CHROMIUM=1: fail instead of skipping where chromium is missing
# exports whose index.html the harness opens too, and whose profile it takes
PAGES = ("cnn_training_step", "nested_loops", case_id("matmul.packed"))
PROFILES = ("small_cnn", "lstm")
# the case whose runs the harness also loses the context of and loads again, and opens
# the index.html of with ?timeoutMs=1; the export a run of which times out (1 ms)
GUARDED = case_id("matmul.packed")
LATE = "matmul_1024"
REQUIRE = os.environ.get("FRAGFLOW_REQUIRE_CHROMIUM", "") not in ("", "0")


def _program_cache_case(seed):
    def build():
        g, x, y = layers((12, 12, 12), seed=seed)
        rng = np.random.default_rng(seed)
        return Case(g, {"y": y}, {x: rng.standard_normal((6, 12)).astype(np.float32)},
                    rtol=1e-5, atol=1e-6)
    return build


# four exports of equal layers (other weights), loaded one after another on the page's
# context: b and c link nothing (runtime.js programCache); c's load({programCache: 0})
# deletes every idle program when it is disposed, so d links them all again
PROGRAM_CACHE = {f"program_cache_{k}": _program_cache_case(20 + i)
                 for i, k in enumerate("abcd")}
BROWSER_CASES.update(PROGRAM_CACHE)
LOAD_OPTIONS = {"program_cache_c": {"programCache": 0}}


def _exported(root):
    """{case name: (Case, browser case dict)} with every case exported under root."""
    out = {}
    for name, build in BROWSER_CASES.items():
        case = build()
        session = None
        if case.session_steps:
            session = ff.Session(case.graph, backend="numpy", passes=[])
            for _ in range(case.session_steps):
                session.run(case.fetches, case.feeds)
        feeds = list(case.feeds)
        # with the variant for 8 targets: the first run takes the 4-target schedule, the
        # harness runs once more after load() switched to the variant (runtime.js)
        export = ff.webgl.export(case.fetches, feeds, os.path.join(root, name),
                                 session=session, page=name in PAGES, tuning=case.tuning,
                                 max_draw_buffers=(4, 8))
        if session is not None:
            session.close()
        spec = {
            "id": name, "dir": name, "runs": case.runs, "page": name in PAGES,
            "profile": name in PROFILES, "guards": LATE if name == GUARDED else "",
            "page_query": "?timeoutMs=1" if name == GUARDED else "",
            "load_options": LOAD_OPTIONS.get(name, {}),
            "feeds": {p.value.node.name: (a, p.dtype) for p, a in case.feeds.items()},
            "outputs": {o["name"]: (tuple(o["shape"]), o["dtype"])
                        for o in export.schedule["outputs"]},
            "variables": {v.value.node.name: (tuple(v.shape), v.dtype)
                          for v in case.variables},
        }
        out[name] = (case, spec, export)
    late = matmul_1024()
    ff.webgl.export(late.fetches, list(late.feeds), os.path.join(root, LATE), page=False)
    return out


@pytest.fixture(scope="session")
def exported():
    if chromium() is None:
        if REQUIRE:
            pytest.fail("FRAGFLOW_REQUIRE_CHROMIUM is set but chromium is not on PATH")
        pytest.skip("chromium is not installed (Debian: apt-get install chromium); the "
                    "WebGL exports cannot be run")
    root = tempfile.mkdtemp(prefix="fragflow-webgl-")
    yield root, _exported(root)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def browser_results(exported):
    """{config: results of browser.run_cases} for both rasterisers."""
    root, cases = exported
    specs = [spec for _, spec, _ in cases.values()]
    return {config: run_cases(root, specs, config) for config in CONFIGS}


def reference(case, extra: int = 0):
    """The numpy executor on the graph as built: outputs per run (and `extra` runs
    more), then the variables."""
    session = ff.Session(case.graph, backend="numpy", passes=[])
    with session:
        for _ in range(case.session_steps):
            session.run(case.fetches, case.feeds)
        runs = [session.run(case.fetches, case.feeds) for _ in range(case.runs + extra)]
        variables = {v.value.node.name: np.asarray(session.get(v)) for v in case.variables}
    return runs, variables
