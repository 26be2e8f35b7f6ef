"""GL context backends.

Every context is made in a subprocess: PyOpenGL binds one platform (EGL, GLX, OSMesa)
per process, and the test process itself must stay free of any of them.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import select
import shutil
import subprocess
import sys
import textwrap

import pytest

# A value an 8-bit or half-float target would mangle: proves RGBA32F end to end.
CONSTANT = [1.5, -2.25, 3.0e6, 0.125]

RENDER = """
import json
import numpy as np
from fragflow.runtime.context import get_context

ctx = get_context()
ctx.make_current()     # raw GL calls below (fragflow's own run in `with ctx.section:`)
from OpenGL import GL  # after get_context(): the backend chose PyOpenGL's platform

def shader(kind, src):
    s = GL.glCreateShader(kind)
    GL.glShaderSource(s, src)
    GL.glCompileShader(s)
    assert GL.glGetShaderiv(s, GL.GL_COMPILE_STATUS), GL.glGetShaderInfoLog(s)
    return s

program = GL.glCreateProgram()
GL.glAttachShader(program, shader(GL.GL_VERTEX_SHADER, '''#version 330 core
void main() {  // one triangle covering the viewport, no vertex buffer (ctx.vao is bound)
    vec2 p = vec2((gl_VertexID << 1) & 2, gl_VertexID & 2);
    gl_Position = vec4(p * 2.0 - 1.0, 0.0, 1.0);
}'''))
GL.glAttachShader(program, shader(GL.GL_FRAGMENT_SHADER, '''#version 330 core
layout(location = 0) out vec4 color;
void main() { color = vec4(@CONSTANT@); }'''))
GL.glLinkProgram(program)
assert GL.glGetProgramiv(program, GL.GL_LINK_STATUS), GL.glGetProgramInfoLog(program)

W, H = 4, 2
tex = GL.glGenTextures(1)
GL.glBindTexture(GL.GL_TEXTURE_2D, tex)
GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA32F, W, H, 0, GL.GL_RGBA, GL.GL_FLOAT, None)
fbo = GL.glGenFramebuffers(1)
GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0, GL.GL_TEXTURE_2D, tex, 0)
assert GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER) == GL.GL_FRAMEBUFFER_COMPLETE
GL.glViewport(0, 0, W, H)
GL.glUseProgram(program)
GL.glDrawArrays(GL.GL_TRIANGLES, 0, 3)
pixels = np.zeros((H, W, 4), np.float32)
GL.glReadPixels(0, 0, W, H, GL.GL_RGBA, GL.GL_FLOAT, pixels)
assert GL.glGetError() == GL.GL_NO_ERROR
print(json.dumps({"info": ctx.info(), "failed": list(ctx.failed_attempts),
                  "vao": ctx.vao, "pixels": pixels.reshape(-1, 4).tolist()}))
""".replace("@CONSTANT@", ", ".join(map(repr, CONSTANT)))

INFO_KEYS = {"backend", "detail", "vendor", "renderer", "version", "glsl_version",
             "max_texture_size", "max_draw_buffers", "max_color_attachments",
             "max_texture_image_units", "shader_cache_dir"}


def _loadable(*names: str) -> bool:
    for name in names:
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            pass
    return False


HAVE_EGL = _loadable("libEGL.so.1", "libEGL.so")
HAVE_OSMESA = _loadable("libOSMesa.so.8", "libOSMesa.so.6", "libOSMesa.so")
HAVE_GLFW = importlib.util.find_spec("glfw") is not None
needs_egl = pytest.mark.skipif(not HAVE_EGL, reason="libEGL missing (Debian: libegl1 libegl-mesa0)")
needs_osmesa = pytest.mark.skipif(not HAVE_OSMESA, reason="libOSMesa missing (Debian: libosmesa6)")


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    # Shared by this module's subprocesses: later ones reuse the shader cache.
    return tmp_path_factory.mktemp("fragflow-cache")


@pytest.fixture(scope="module")
def display():
    """An X display for the glfw backend: $DISPLAY, else a private Xvfb."""
    if os.environ.get("DISPLAY"):
        yield os.environ["DISPLAY"]
        return
    if not shutil.which("Xvfb"):
        pytest.skip("no DISPLAY and Xvfb missing (Debian: xvfb)")
    # -displayfd: Xvfb picks a free display number itself and writes it to the pipe.
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write_end), "-screen", "0", "64x64x24",
                             "-nolisten", "tcp"], pass_fds=(write_end,),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write_end)
    try:
        ready, _, _ = select.select([read_end], [], [], 10)
        number = os.read(read_end, 32).decode().strip() if ready else ""
        if not number:
            pytest.fail("Xvfb did not report a display number within 10 s")
        yield f":{number}"
    finally:
        os.close(read_end)
        proc.terminate()
        proc.wait(timeout=10)


def _run(code: str, cache_dir, env: dict[str, str | None] | None = None, check=True):
    """Run `code` in a fresh interpreter; return the CompletedProcess (parsed JSON of the
    last stdout line as .json when check)."""
    full_env = dict(os.environ, FRAGFLOW_CACHE_DIR=str(cache_dir))
    for var in ("FRAGFLOW_GL", "PYOPENGL_PLATFORM", "DISPLAY", "WAYLAND_DISPLAY",
                "MESA_SHADER_CACHE_DIR", "MESA_GLSL_CACHE_DIR", "MESA_SHADER_CACHE_DISABLE"):
        full_env.pop(var, None)
    for key, value in (env or {}).items():
        if value is not None:
            full_env[key] = value
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=full_env,
                          capture_output=True, text=True, timeout=60)
    if check:
        assert proc.returncode == 0, f"subprocess failed:\n{proc.stdout}\n{proc.stderr}"
        proc.json = json.loads(proc.stdout.strip().splitlines()[-1])
    return proc


def _check_render(result: dict, backend: str) -> dict:
    info = result["info"]
    assert info["backend"] == backend
    assert set(info) >= INFO_KEYS
    assert info["max_texture_size"] >= 4096
    assert info["max_draw_buffers"] >= 1 and info["max_color_attachments"] >= 1
    major, minor = map(int, info["version"].split()[0].split(".")[:2])
    assert (major, minor) >= (3, 3)
    assert result["vao"] > 0
    assert result["pixels"] == [CONSTANT] * 8
    return info


BACKEND_PARAMS = [
    pytest.param("egl", marks=needs_egl),
    pytest.param("osmesa", marks=needs_osmesa),
    pytest.param("glfw", marks=pytest.mark.skipif(not HAVE_GLFW, reason="pip: glfw missing")),
]


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_backend_renders_constant_into_rgba32f(backend, cache_dir, request):
    env = {"FRAGFLOW_GL": backend}
    if backend == "glfw":
        env["DISPLAY"] = request.getfixturevalue("display")
    info = _check_render(_run(RENDER, cache_dir, env).json, backend)
    print(f"{backend}: {info['detail']} | {info['vendor']} | {info['renderer']} | "
          f"{info['version']}")
    assert info["shader_cache_dir"] == str(cache_dir / "mesa")
    if "Mesa" in info["version"]:  # other drivers keep their own caches
        assert any(files for _, _, files in os.walk(cache_dir / "mesa")), "Mesa cache stayed empty"


@needs_osmesa
def test_osmesa_without_glfw_drives_osmesa_directly(cache_dir):
    code = ("import fragflow.runtime.context.osmesa as osmesa\n"
            "def no_glfw(): raise ImportError('simulated: no glfw')\n"
            "osmesa._via_glfw = no_glfw\n") + RENDER
    info = _check_render(_run(code, cache_dir, {"FRAGFLOW_GL": "osmesa"}).json, "osmesa")
    assert info["detail"].startswith("OSMesa direct (GLFW route failed: simulated: no glfw")


@pytest.mark.skipif(not (HAVE_EGL or HAVE_OSMESA), reason="neither libEGL nor libOSMesa")
def test_default_order_singleton_and_close(cache_dir):
    result = _run("""
        import json
        from fragflow.runtime.context import get_context, available_backends
        ctx = get_context()
        same = get_context() is ctx
        ctx.close(); ctx.close()  # closing twice is harmless
        ctx2 = get_context()
        print(json.dumps({"available": available_backends(), "first": ctx.backend,
                          "same": same, "new": ctx2 is not ctx, "second": ctx2.info()}))
        """, cache_dir).json
    # No display: glfw is not a candidate; egl comes before osmesa.
    assert result["available"] == [b for b in ("egl", "osmesa") if {"egl": HAVE_EGL,
                                                                       "osmesa": HAVE_OSMESA}[b]]
    assert result["first"] == result["available"][0]
    assert result["same"] and result["new"]
    assert result["second"]["backend"] == result["first"]


def test_importing_context_does_not_bind_pyopengl(cache_dir):
    # If anything imported OpenGL at import time, PyOpenGL would pick its platform
    # before get_context() could choose it, and EGL/OSMesa would become unusable.
    result = _run("""
        import json, sys
        import fragflow.runtime.context
        print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "OpenGL")))
        """, cache_dir).json
    assert result == [], f"importing fragflow.runtime.context imported {result}"


def test_unknown_backend_names_the_allowed_ones(cache_dir):
    proc = _run("from fragflow.runtime.context import get_context; get_context()", cache_dir,
                {"FRAGFLOW_GL": "bogus"}, check=False)
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("fragflow.ir.errors.BackendError: FRAGFLOW_GL='bogus'")
    assert "egl, glfw, osmesa" in last


def test_when_nothing_works_every_attempt_is_listed(cache_dir):
    # Each backend's create() is replaced by a failing one (monkeypatching in the child,
    # no test hook in the library); the last case exercises a real missing library.
    result = _run("""
        import json, os
        from fragflow.ir.errors import BackendError
        from fragflow.runtime import context
        from fragflow.runtime.context import egl, glfw_window, osmesa

        def failing(name):
            def create():
                raise BackendError(f"simulated {name} failure")
            return create

        def message():
            try:
                context.get_context()
            except BackendError as exc:
                return str(exc)
            raise AssertionError("get_context() did not fail")

        real_osmesa_create = osmesa.create
        for module, name in ((egl, "egl"), (glfw_window, "glfw"), (osmesa, "osmesa")):
            module.create = failing(name)
        os.environ["DISPLAY"] = ":0"
        with_display = message()
        del os.environ["DISPLAY"]
        without_display = message()

        osmesa.create = real_osmesa_create
        osmesa._via_glfw = failing("glfw route")
        osmesa.LIBRARY_NAMES = ("libOSMesa-not-here.so.8",)
        os.environ["FRAGFLOW_GL"] = "osmesa"
        missing_library = message()
        print(json.dumps([with_display, without_display, missing_library]))
        """, cache_dir).json
    with_display, without_display, missing_library = result
    for name in ("glfw", "egl", "osmesa"):
        assert f"  {name}: simulated {name} failure" in with_display
    assert with_display.index("glfw:") < with_display.index("egl:") < with_display.index("osmesa:")
    for hint in ("libegl-mesa0", "libosmesa6", "xvfb", "PyOpenGL", "glfw"):
        assert hint in with_display
    assert "glfw: not tried, no DISPLAY or WAYLAND_DISPLAY" in without_display
    assert "egl: simulated egl failure" in without_display
    assert "osmesa: via GLFW: simulated glfw route failure; direct: cannot load " \
           "libOSMesa-not-here.so.8" in missing_library
    assert "egl:" not in missing_library.split("Tried:")[1].split("To get one")[0]


@needs_osmesa
def test_pyopengl_bound_elsewhere_falls_through_to_matching_backend(cache_dir):
    result = _run("""
        import json
        import OpenGL.GL  # binds PyOpenGL to $PYOPENGL_PLATFORM=osmesa before fragflow
        from fragflow.runtime.context import get_context
        ctx = get_context()
        print(json.dumps({"backend": ctx.backend, "failed": list(ctx.failed_attempts)}))
        """, cache_dir, {"PYOPENGL_PLATFORM": "osmesa"}).json
    assert result["backend"] == "osmesa"
    if HAVE_EGL:
        (egl_failure,) = result["failed"]
        assert egl_failure.startswith("egl: PyOpenGL is already bound to the 'osmesa' platform")
        assert "one process, one platform" in egl_failure


def test_configure_shader_cache(tmp_path, monkeypatch):
    from fragflow.runtime.shader_cache import configure_shader_cache

    for var in ("FRAGFLOW_CACHE_DIR", "XDG_CACHE_HOME", "MESA_SHADER_CACHE_DIR",
                "MESA_GLSL_CACHE_DIR"):
        monkeypatch.delenv(var, raising=False)  # also restores whatever the call sets
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert configure_shader_cache() == str(tmp_path / "home" / ".cache" / "fragflow" / "mesa")

    monkeypatch.delenv("MESA_SHADER_CACHE_DIR")
    monkeypatch.delenv("MESA_GLSL_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert configure_shader_cache() == str(tmp_path / "xdg" / "fragflow" / "mesa")

    monkeypatch.delenv("MESA_SHADER_CACHE_DIR")
    monkeypatch.delenv("MESA_GLSL_CACHE_DIR")
    monkeypatch.setenv("FRAGFLOW_CACHE_DIR", str(tmp_path / "ff"))
    mesa = configure_shader_cache()
    assert mesa == str(tmp_path / "ff" / "mesa") and os.path.isdir(mesa)
    assert os.environ["MESA_SHADER_CACHE_DIR"] == os.environ["MESA_GLSL_CACHE_DIR"] == mesa

    # A directory the user chose wins.
    monkeypatch.setenv("MESA_SHADER_CACHE_DIR", str(tmp_path / "mine"))
    monkeypatch.delenv("MESA_GLSL_CACHE_DIR")
    assert configure_shader_cache() == str(tmp_path / "mine")
    assert "MESA_GLSL_CACHE_DIR" not in os.environ


GRAPH = """
import json
import numpy as np
import fragflow as ff

g = ff.Graph()
with g.as_default():
    x = ff.placeholder((None, 5), "float32", name="x")
    w = ff.Variable(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3), name="w")
    y = ff.sum(ff.relu(x @ w - 0.1) * 2.0, axis=0)
    k = ff.argmax(x, axis=1)
xb = np.random.default_rng(0).standard_normal((7, 5)).astype(np.float32)
with ff.Session(g) as sess:
    gl_y, gl_k = sess.run([y, k], {x: xb})
with ff.Session(g, backend="numpy", passes=[]) as ref:
    np_y, np_k = ref.run([y, k], {x: xb})
print(json.dumps({"backend": ff.gl_info()["backend"],
                  "error": float(np.max(np.abs(gl_y - np_y))),
                  "argmax_equal": bool((gl_k == np_k).all())}))
"""


@pytest.mark.parametrize("backend", BACKEND_PARAMS)
def test_a_fragflow_graph_runs_under_each_backend(backend, cache_dir, request):
    env = {"FRAGFLOW_GL": backend}
    if backend == "glfw":
        env["DISPLAY"] = request.getfixturevalue("display")
    result = _run(GRAPH, cache_dir, env).json
    assert result["backend"] == backend
    assert result["error"] < 1e-5 and result["argmax_equal"]
