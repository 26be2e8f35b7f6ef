"""Starting GL: importing the GL modules first thing, and shader caches that cannot be
used (issue 12). Each case runs in a fresh interpreter: PyOpenGL binds its platform
once per process.

Before: `import fragflow.runtime.gl_resources` ahead of the first Session bound
PyOpenGL to the wrong platform and every Session failed ("no OpenGL 3.3 core context
could be created"); gl_info() named a shader cache directory Mesa could not write to."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

RUN_A_GRAPH = """
import json, warnings
import numpy as np
import fragflow as ff
g = ff.Graph()
with g.as_default():
    x = ff.placeholder((None, 5), name="x")
    y = ff.sum(ff.relu(x * 2.0 - 1.0), axis=1)
xb = np.arange(15, dtype=np.float32).reshape(3, 5) - 7
with ff.Session(g) as sess, ff.Session(g, backend="numpy", passes=[]) as ref:
    equal = bool(np.array_equal(sess.run(y, {x: xb}), ref.run(y, {x: xb})))
info = ff.gl_info()
print(json.dumps({"equal": equal, "shader_cache_dir": info["shader_cache_dir"],
                  "note": info.get("shader_cache_note", ""),
                  "warnings": [str(w.message) for w in caught]}))
"""


def run(prelude: str, env: dict, tmp_path) -> dict:
    code = "import warnings\nwarnings.simplefilter('always')\n" \
           "caught = []\nwarnings.showwarning = lambda m, *a, **k: caught.append(" \
           "warnings.WarningMessage(m, *a[:3]))\n" + textwrap.dedent(prelude) + RUN_A_GRAPH
    full = dict(os.environ, FRAGFLOW_CACHE_DIR=str(tmp_path / "cache"))
    for var in ("MESA_SHADER_CACHE_DIR", "MESA_GLSL_CACHE_DIR", "MESA_SHADER_CACHE_DISABLE",
                "PYOPENGL_PLATFORM"):
        full.pop(var, None)
    full.update(env)
    proc = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("module", ["fragflow.runtime.gl_resources",
                                    "fragflow.runtime.gl_plan"])
def test_importing_the_gl_modules_first_is_harmless(gl, module, tmp_path):
    result = run(f"import {module}\n", {}, tmp_path)
    assert result["equal"]


def test_a_shader_cache_dir_that_cannot_be_made_is_reported_not_named(gl, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    result = run("", {"FRAGFLOW_CACHE_DIR": str(blocker / "cache")}, tmp_path)
    assert result["equal"]                      # it runs, only without a disk cache
    assert result["shader_cache_dir"] == ""
    assert str(blocker / "cache" / "mesa") in result["note"]
    assert "FRAGFLOW_CACHE_DIR" in result["note"]
    assert any("shader cache" in w for w in result["warnings"])


def test_a_mesa_cache_dir_the_user_chose_but_cannot_be_used(gl, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    chosen = str(blocker / "mesa")
    result = run("", {"MESA_SHADER_CACHE_DIR": chosen}, tmp_path)
    assert result["equal"]
    assert result["shader_cache_dir"] == ""
    assert f"MESA_SHADER_CACHE_DIR={chosen} cannot be used" in result["note"]
    assert any("shader cache" in w for w in result["warnings"])


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0,
                    reason="root writes into read-only directories")
def test_a_read_only_cache_dir_is_reported(gl, tmp_path):
    cache = tmp_path / "ro"
    (cache / "mesa").mkdir(parents=True)
    (cache / "mesa").chmod(0o555)
    try:
        result = run("", {"FRAGFLOW_CACHE_DIR": str(cache)}, tmp_path)
    finally:
        (cache / "mesa").chmod(0o755)
    assert result["equal"] and result["shader_cache_dir"] == ""
    assert "Permission" in result["note"]


def test_a_usable_cache_dir_is_named_with_no_note(gl, tmp_path):
    result = run("", {}, tmp_path)
    assert result["shader_cache_dir"] == str(tmp_path / "cache" / "mesa")
    assert result["note"] == "" and not result["warnings"]


def test_a_disabled_cache_says_so(gl, tmp_path):
    result = run("", {"MESA_SHADER_CACHE_DISABLE": "true"}, tmp_path)
    assert result["equal"] and result["shader_cache_dir"] == ""
    assert "MESA_SHADER_CACHE_DISABLE" in result["note"]
