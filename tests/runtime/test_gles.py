"""OpenGL ES 3.0 contexts (FRAGFLOW_GL=egl-es, runtime/context/egl_es.py): kernels in
GLSL ES 3.00, GL calls through OpenGL.GLES3, the probe of what ES does not promise,
and a seeded sample of the suite run on ES. `make test-gles` runs the whole suite there.

Every ES context is made in a subprocess (PyOpenGL binds one platform and this process
may hold a desktop context); MESA_GLES_VERSION_OVERRIDE=3.0 makes Mesa's a true ES 3.0
(without it Mesa gives ES 3.2, which promises float render targets)."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ES_ENV = {"FRAGFLOW_GL": "egl-es", "MESA_GLES_VERSION_OVERRIDE": "3.0"}
REQUIRE_GL = bool(os.environ.get("FRAGFLOW_REQUIRE_GL"))
# about one test in SAMPLE_ONE_IN of tests/ops, autodiff and passes (sample_plugin.py):
# 72 tests, ~65 s on one core of llvmpipe
SAMPLE = "22/20"
SAMPLE_DIRS = ("tests/ops", "tests/autodiff", "tests/passes")


PRELUDE = """
import json
import fragflow as ff
try:
    info = ff.gl_info()
except ff.BackendError as err:
    print("NO_ES_CONTEXT", str(err).replace(chr(10), " "))
    raise SystemExit(0)
"""



def _run_es(code: str, timeout: int = 300, env=None, prelude: bool = True) -> dict:
    """Run `code` in a Python process on an ES 3.0 context (after PRELUDE, which makes
    it); its last line of output is JSON. Skips (fails under FRAGFLOW_REQUIRE_GL) where
    no ES context can be made."""
    env = {**os.environ, **ES_ENV, **(env or {})}
    code = (PRELUDE if prelude else "") + textwrap.dedent(code)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT,
                            env=env, capture_output=True, text=True, timeout=timeout)
    if "NO_ES_CONTEXT" in result.stdout:
        reason = result.stdout.split("NO_ES_CONTEXT", 1)[1].strip()
        if REQUIRE_GL:
            pytest.fail(f"FRAGFLOW_REQUIRE_GL is set but no ES context: {reason}")
        pytest.skip(f"no OpenGL ES 3.0 context: {reason}")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_an_es_context_runs_es_kernels_that_match_the_numpy_executor():
    out = _run_es("""
    import numpy as np
    rng = np.random.default_rng(0)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((64, 96), "float32", name="x")
        w = ff.Variable(rng.standard_normal((96, 40)).astype(np.float32), name="w")
        h = ff.nn.relu(x @ w)
        loss = ff.reduce_mean(ff.square(ff.reduce_sum(h, axis=0))) + ff.reduce_max(x)
        step = ff.optim.Adam(0.01).minimize(loss)
    feed = {x: np.where(rng.random((64, 96)) < 0.01, np.inf,
                        rng.standard_normal((64, 96))).astype(np.float32)}
    feed[x][0, :3] = np.nan
    sess, ref = ff.Session(g), ff.Session(g, backend="numpy", passes=[])
    finite = {x: np.nan_to_num(feed[x], nan=0.0, posinf=1.0)}
    value, reference = sess.run(h, finite), ref.run(h, finite)
    got, expected = [], []
    for _ in range(3):      # NaN gradients: the variable becomes NaN on both
        got.append(sess.run(loss, feed)); sess.run(step, feed)
        expected.append(ref.run(loss, feed)); ref.run(step, feed)
    kernels = sess.compile([loss, step], feeds=[x]).kernels
    print(json.dumps({
        "info": {k: info[k] for k in ("backend", "api", "version", "glsl_version")},
        "got": [float(v) for v in got], "expected": [float(v) for v in expected],
        "h_error": float(np.max(np.abs(value - reference) / (1 + np.abs(reference)))),
        "first_lines": sorted({k.source.splitlines()[0] for k in kernels}),
        "precision": all("precision highp int;" in k.source for k in kernels)}))
    """)
    assert out["info"]["backend"] == "egl-es" and out["info"]["api"] == "gles"
    assert out["info"]["version"].startswith("OpenGL ES 3.0")
    assert out["first_lines"] == ["#version 300 es"] and out["precision"]
    # NaN in x: every loss is NaN, on GL as in numpy
    assert all(v != v for v in out["got"]) and all(v != v for v in out["expected"])
    assert out["h_error"] < 1e-5


def test_an_es_training_step_matches_the_numpy_executor_step_for_step():
    out = _run_es("""
    import numpy as np
    rng = np.random.default_rng(1)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((8, 12, 12, 3), "float32", name="x")
        w = ff.Variable(0.3 * rng.standard_normal((3, 3, 3, 8)).astype(np.float32))
        v = ff.Variable(0.3 * rng.standard_normal((8 * 36, 5)).astype(np.float32))
        h = ff.nn.max_pool2d(ff.nn.relu(ff.nn.conv2d(x, w, 1, "SAME")), 2, 2, "VALID")
        logits = ff.reshape(h, (8, -1)) @ v
        loss = ff.reduce_mean(ff.nn.sparse_softmax_cross_entropy_with_logits(
            labels=ff.constant(np.arange(8, dtype=np.int32) % 5), logits=logits))
        step = ff.optim.Adam(0.01).minimize(loss)
    feed = {x: rng.standard_normal((8, 12, 12, 3)).astype(np.float32)}
    sess, ref = ff.Session(g), ff.Session(g, backend="numpy", passes=[])
    got, expected = [], []
    for _ in range(4):
        got.append(float(sess.run([loss, step], feed)[0]))
        expected.append(float(ref.run([loss, step], feed)[0]))
    print(json.dumps({"got": got, "expected": expected}))
    """)
    for a, e in zip(out["got"], out["expected"]):
        assert abs(a - e) <= 1e-4 * (1 + abs(e)), out


def test_the_probe_names_float_render_targets_when_the_extension_is_missing():
    out = _run_es("""
    from fragflow.runtime.context import get_context
    from fragflow.runtime.context.probe import check_es_needs
    ctx = get_context()
    with ctx.section:
        check_es_needs(ctx.gl, ctx.extensions, info["renderer"])   # this one passes
        try:
            check_es_needs(ctx.gl, frozenset(), info["renderer"])  # as if it lacked it
            message = None
        except ff.BackendError as err:
            message = str(err)
    print(json.dumps({"message": message}))
    """)
    assert "EXT_color_buffer_float" in out["message"]
    assert "OpenGL ES 3.0" in out["message"] and "FRAGFLOW_GL=egl" in out["message"]


def test_an_unknown_backend_lists_egl_es():
    out = _run_es("""
    import json
    import fragflow as ff
    try:
        ff.gl_info()
    except ff.BackendError as err:
        print(json.dumps({"message": str(err)}))
    """, env={"FRAGFLOW_GL": "gles"}, prelude=False)
    assert "egl-es" in out["message"]


@pytest.mark.skipif(os.environ.get("FRAGFLOW_GL") == "egl-es",
                    reason="the whole suite runs on ES already (make test-gles)")
def test_a_seeded_sample_of_the_suite_passes_on_es_3_0():
    """About one test in 20 of tests/ops, autodiff and passes, on ES 3.0 (make
    test-gles runs them all)."""
    _run_es("print(json.dumps({}))")      # skips here where ES is missing
    env = {**os.environ, **ES_ENV, "FRAGFLOW_TEST_SAMPLE": SAMPLE,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "tests" / "runtime"),
                                                       os.environ.get("PYTHONPATH")]))}
    env.pop("PYTEST_XDIST_WORKER", None)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             "-p", "sample_plugin", "-p", "no:randomly", *SAMPLE_DIRS],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    tail = result.stdout[-4000:] + result.stderr[-2000:]
    assert result.returncode == 0, tail
    assert " passed" in tail and " failed" not in tail
