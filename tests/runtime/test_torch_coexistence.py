"""fragflow and PyTorch (with triton) in one process, in either import order (issue 17).

Without the fix, creating a Mesa context (EGL, OSMesa, GLX) put the system libLLVM into the
global symbol scope and a later `import torch._dynamo` (which loads triton's
libtriton.so, with its own LLVM) died with SIGSEGV in libtriton.so's static
constructors. Each case runs in a fresh interpreter: a crash must show up as a failed
test, not take pytest down, and each order needs a process where nothing came before.

torch.compile uses backend="aot_eager": it traces through dynamo and AOTAutograd (the
paths that import triton) without the C++ compile that the inductor CPU backend starts,
which takes ~17 s cold on this machine (inductor was checked by hand: it works too).
"""

from __future__ import annotations

import ctypes.util
import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.runtime.test_context_backends import display  # noqa: F401  (a fixture: Xvfb)

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_TRITON = importlib.util.find_spec("triton") is not None
HAVE_EGL = ctypes.util.find_library("EGL") is not None
HAVE_OSMESA = ctypes.util.find_library("OSMesa") is not None

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"),
                       reason="one flat ELF symbol scope is a Linux matter"),
    pytest.mark.skipif(not HAVE_TORCH, reason="torch not installed (pip: torch==2.13.0)"),
    pytest.mark.skipif(not HAVE_TRITON, reason="triton not installed (pip: triton==3.7.1, the "
                                               "version torch 2.13.0's default wheels pin); "
                                               "without it there is nothing to collide"),
]

BACKENDS = [
    pytest.param("egl", marks=pytest.mark.skipif(not HAVE_EGL, reason="libEGL missing "
                                                 "(Debian: libegl1 libegl-mesa0)")),
    pytest.param("osmesa", marks=pytest.mark.skipif(not HAVE_OSMESA, reason="libOSMesa "
                                                    "missing (Debian: libosmesa6)")),
]

# Pieces the scripts are made of. Each step prints nothing; the last line is JSON.
PRELUDE = """
import json, sys
import numpy as np
results = {}
"""

FRAGFLOW_RUN = """
import fragflow as ff
g = ff.Graph()
with g.as_default():
    x = ff.placeholder((5,), "float32", name="x")
    y = ff.exp(x) * 2.0
feed = np.array([-1.0, 0.0, 0.5, 3.0, -0.0], np.float32)
with ff.Session(g) as sess:
    results.setdefault("fragflow", []).append(
        float(np.abs(sess.run(y, {x: feed}) - np.exp(feed.astype(np.float64)) * 2).max()))
    results["backend"] = sess._device.context.backend
"""

TORCH_COMPILE = """
import torch, torch._dynamo
@torch.compile(backend="aot_eager", fullgraph=True)
def f(a):
    return torch.sin(a) * 2.0 + a.relu()
a = torch.linspace(-3, 3, 7)
results.setdefault("torch", []).append(float((f(a) - (torch.sin(a) * 2.0 + a.relu())).abs().max()))
"""

# Where the crash happened: loading libtriton.so. Cheaper than torch (~0.2 s, not ~4 s).
TRITON_IMPORT = """
import triton, triton._C.libtriton
results["triton"] = triton.__version__
"""

EPILOGUE = """
from fragflow.runtime.context._bundled_llvm import preload_report
results["triton_loaded"] = "triton._C.libtriton" in sys.modules
results["preload"] = preload_report()
print(json.dumps(results))
"""


def run_script(*parts: str, backend: str, timeout: float = 120, display=None) -> dict:
    env = dict(os.environ, FRAGFLOW_GL=backend)
    for var in ("PYOPENGL_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(var, None)
    if display:
        env["DISPLAY"] = display
    code = textwrap.dedent(PRELUDE) + "".join(textwrap.dedent(p) for p in parts) + \
        textwrap.dedent(EPILOGUE)
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=timeout)
    died = f" (killed by signal {-proc.returncode})" if proc.returncode < 0 else ""
    assert proc.returncode == 0, \
        (f"exit status {proc.returncode}{died}\nstdout:\n{proc.stdout}\n"
         f"stderr:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check(result: dict, backend: str, fragflow_runs: int, torch_runs: int) -> None:
    assert result["backend"] == backend
    assert len(result["fragflow"]) == fragflow_runs and max(result["fragflow"]) < 1e-4
    assert len(result["torch"]) == torch_runs and max(result["torch"]) < 1e-6
    assert result["triton_loaded"]          # torch._dynamo did load triton: the test bites


@pytest.mark.parametrize("backend", BACKENDS)
def test_fragflow_first_then_torch_dynamo_and_compile(backend):
    # The order that crashed: a Session (context made, driver loaded), then torch._dynamo.
    result = run_script(FRAGFLOW_RUN, TORCH_COMPILE, FRAGFLOW_RUN, backend=backend)
    check(result, backend, fragflow_runs=2, torch_runs=1)
    assert result["preload"]["triton"].startswith("loaded "), result["preload"]
    assert "RTLD_LOCAL" in result["preload"]["triton"]


@pytest.mark.skipif(importlib.util.find_spec("glfw") is None, reason="pip: glfw missing")
def test_fragflow_on_a_glx_window_first_then_torch_dynamo(display):
    # Mesa's GLX driver is loaded the same way (RTLD_GLOBAL, libLLVM with it).
    result = run_script(FRAGFLOW_RUN, TORCH_COMPILE, backend="glfw", display=display)
    check(result, "glfw", fragflow_runs=1, torch_runs=1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_first_then_fragflow(backend):
    result = run_script(TORCH_COMPILE, FRAGFLOW_RUN, TORCH_COMPILE, backend=backend)
    check(result, backend, fragflow_runs=1, torch_runs=2)
    assert result["preload"]["triton"].startswith("already imported"), result["preload"]


@pytest.mark.skipif(not HAVE_EGL, reason="libEGL missing (Debian: libegl1 libegl-mesa0)")
def test_plain_import_torch_then_fragflow_then_dynamo():
    # `import torch` alone does not load triton; the Session in between is the danger.
    result = run_script("import torch\n", FRAGFLOW_RUN, TORCH_COMPILE, backend="egl")
    check(result, "egl", fragflow_runs=1, torch_runs=1)
    assert result["preload"]["triton"].startswith("loaded "), result["preload"]


@pytest.mark.skipif(not HAVE_OSMESA, reason="libOSMesa missing (Debian: libosmesa6)")
def test_llvm_made_global_by_someone_else_first():
    # Another GL library loaded Mesa before fragflow: the preload binds triton to itself
    # anyway (RTLD_DEEPBIND), so the later import still works.
    result = run_script(
        "import ctypes.util; "
        "ctypes.CDLL(ctypes.util.find_library('OSMesa'), mode=ctypes.RTLD_GLOBAL)\n",
        FRAGFLOW_RUN, TRITON_IMPORT, FRAGFLOW_RUN, backend="egl" if HAVE_EGL else "osmesa")
    assert "RTLD_DEEPBIND" in result["preload"]["triton"], result["preload"]
    assert result["triton_loaded"] and max(result["fragflow"]) < 1e-4


@pytest.mark.skipif(not (HAVE_EGL or HAVE_OSMESA), reason="neither libEGL nor libOSMesa")
def test_probing_backends_then_torch_dynamo():
    # available_backends() dlopens libOSMesa (which links libLLVM) without a context;
    # fragflow's own dlopens are RTLD_LOCAL, so nothing becomes global.
    result = run_script("""
        from fragflow.runtime.context import available_backends
        results["available"] = available_backends()
        """, TRITON_IMPORT, backend="egl")
    assert result["available"] and result["triton_loaded"]
    assert result["preload"] == {}                  # no context made: nothing preloaded


def test_preload_does_not_import_triton_and_is_idempotent():
    # In a subprocess: the test process itself must not load libtriton as a side effect.
    code = textwrap.dedent("""
        import json, sys
        from fragflow.runtime.context import _bundled_llvm as b
        first = b.preload_bundled_llvm()
        second = b.preload_bundled_llvm()
        maps = open("/proc/self/maps").read()
        print(json.dumps({"first": first, "same": first == second,
                          "imported": [m for m in sys.modules if m.startswith("triton")],
                          "mapped": "libtriton.so" in maps}))
        """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["first"]["triton"].startswith("loaded ") and result["same"]
    assert result["imported"] == [] and result["mapped"]
