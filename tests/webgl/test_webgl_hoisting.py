"""Hoisting in the WebGL export: kernels whose inputs are constants, variables no assign
of the export writes, or such kernels' outputs are marked `once` in the schedule, and
runtime.js draws them at the first run only (their textures are their own). Checked in
the schedule, and in Chromium (both rasterisers): runs against float64 products, and a
profile after the runs in which the `once` kernels draw no more."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

import fragflow as ff
from tests.webgl.browser import CONFIGS, chromium, run_cases

RNG = np.random.default_rng(35)
X = RNG.standard_normal((64, 256)).astype(np.float32)
X[0, :5] = [0.0, -0.0, np.inf, -np.inf, np.nan]
W = RNG.standard_normal((256, 256)).astype(np.float32)
C = RNG.standard_normal((256, 256)).astype(np.float32)
RUNS = 3


def _graph(assign: bool):
    """x @ w (a variable), x @ C (a constant), both over matmul.packed's bounds; with
    assign, a step halving w (so w's panel is packed every run, C's once)."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((64, 256), "float32", name="x")
        w = ff.Variable(W, name="w")
        fetches = {"y": ff.matmul(x, w), "z": ff.matmul(x, ff.constant(C))}
        if assign:
            fetches["step"] = w.assign(w * 0.5)
    return g, x, fetches


def _loop():
    """A while_loop whose body multiplies by a constant made in the body."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((64, 256), "float32", name="x")
        _, out = ff.while_loop(
            lambda i, v: i < 3,
            lambda i, v: (i + 1, ff.tanh(ff.matmul(v, ff.constant(C * 0.05)))),
            (ff.constant(np.int32(0)), x))
    return g, x, {"out": out}


def _want(x, w):
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(np.float64) @ w.astype(np.float64)


def _once(schedule) -> list:
    return [k["op"] for k in schedule["kernels"] if k.get("once")]


def test_packs_of_constants_and_unassigned_variables_are_marked_once(tmp_path):
    g, x, fetches = _graph(assign=False)
    export = ff.webgl.export(fetches, [x], tmp_path / "a")
    assert _once(export.schedule) == ["matmul_pack", "matmul_pack"]
    g, x, fetches = _graph(assign=True)
    export = ff.webgl.export(fetches, [x], tmp_path / "b")
    assert _once(export.schedule) == ["matmul_pack"]             # C's; w is assigned
    g, x, fetches = _loop()
    export = ff.webgl.export(fetches, [x], tmp_path / "c")
    assert "program" in export.schedule and len(_once(export.schedule)) == 1


@pytest.fixture(scope="module")
def results():
    if chromium() is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    root = tempfile.mkdtemp(prefix="fragflow-hoist-")
    specs = []
    for name, (_g, x, fetches) in {"plain": _graph(False), "assigned": _graph(True),
                                  "loop": _loop()}.items():
        export = ff.webgl.export(fetches, [x], os.path.join(root, name), page=False)
        specs.append({"id": name, "dir": name, "runs": RUNS, "profile": True,
                      "feeds": {"x": (X, "float32")},
                      "outputs": {o["name"]: (tuple(o["shape"]), o["dtype"])
                                  for o in export.schedule["outputs"]},
                      "variables": {}, "schedule": export.schedule})
    return {config: (run_cases(root, specs, config), {s["id"]: s["schedule"] for s in specs})
            for config in CONFIGS}


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-3)


def _check_profile(result, schedule):
    calls = [c for _, c in result["profile"]]
    assert len(calls) == len(schedule["kernels"])
    for record, count in zip(schedule["kernels"], calls):     # the profile runs last
        if record.get("once"):
            assert count == 0, record["name"]
        else:
            assert count >= 1, record["name"]
    assert any(record.get("once") for record in schedule["kernels"])


@pytest.mark.parametrize("config", list(CONFIGS))
def test_every_run_is_right_and_once_kernels_draw_once(results, config):
    got, schedules = results[config]
    for name in ("plain", "assigned", "loop"):
        assert got[name]["error"] is None, got[name]["error"]
    for run in range(RUNS):
        plain, assigned = got["plain"]["outputs"][run], got["assigned"]["outputs"][run]
        _close(plain["y"], _want(X, W))
        _close(plain["z"], _want(X, C))
        _close(assigned["y"], _want(X, W * 0.5 ** run))
        _close(assigned["z"], _want(X, C))
        want = X.astype(np.float64)
        for _ in range(3):
            with np.errstate(invalid="ignore"):
                want = np.tanh(want @ (C * 0.05).astype(np.float64))
        _close(got["loop"]["outputs"][run]["out"], want)
    for name in ("plain", "assigned", "loop"):
        _check_profile(got[name], schedules[name])
