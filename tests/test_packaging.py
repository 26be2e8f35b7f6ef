"""`pip install .` gives a fragflow that works on its own: the wheel, installed into a
fresh venv outside the source tree, imports, runs a graph on GL and `fragflow info`.

The wheel is built from a copy of the sources (a stale build/ folder in the checkout
could otherwise slip files into it) and installed without network: the fresh venv has no
pip and no site-packages of its own but the wheel's; the dependencies (numpy, jinja2,
PyOpenGL, ...) come from this interpreter's site-packages through a .pth line. That
folder holds the editable install of the checkout, but an editable install works only
through its own .pth hook, which a folder added by a .pth line never runs: the test
checks that fragflow is imported from the fresh venv and that no `ir`, `passes`, ...
is importable. The child processes get a clean environment: no PYTHONPATH, cwd in a
temporary folder. About 10-20 s.
"""
import glob
import importlib.util
import os
import shutil
import site
import subprocess
import sys
import textwrap
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = ("frontend", "ir", "passes", "codegen", "runtime", "tools", "distributed")
IGNORED = shutil.ignore_patterns(".venv", "venv", "build", "dist", "*.egg-info", ".git",
                                 "__pycache__", ".pytest_cache", ".hypothesis", "tests",
                                 "benchmarks", "examples", "out", "*.npz")


def _subpackages_in_the_sources():
    """fragflow.<layer>[.<sub>...] for every source folder holding Python files."""
    found = {"fragflow"}
    for layer in LAYERS:
        for path, dirs, files in os.walk(os.path.join(ROOT, layer)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            if any(f.endswith(".py") for f in files):
                rel = os.path.relpath(path, ROOT).replace(os.sep, ".")
                found.add(f"fragflow.{rel}")
    return found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    if not all(importlib.util.find_spec(m) for m in ("setuptools", "wheel")):
        pytest.skip("setuptools and wheel are needed to build a wheel offline")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=IGNORED)
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp / "dist"), str(src)], capture_output=True, text=True, timeout=300,
        cwd=str(tmp))
    assert result.returncode == 0, result.stdout + result.stderr
    (path,) = glob.glob(str(tmp / "dist" / "fragflow-*.whl"))
    return path


def test_wheel_holds_every_subpackage_and_nothing_top_level(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"fragflow", "fragflow-0.1.0.dist-info"}
    packages = {os.path.dirname(n).replace("/", ".") for n in names
                if n.endswith("/__init__.py")}
    assert packages == _subpackages_in_the_sources()
    assert "fragflow.passes.autodiff" in packages
    assert "fragflow/codegen/templates/prologue.glsl.j2" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "fragflow = fragflow.tools.cli:main" in \
        zipfile.ZipFile(wheel).read(entry_points).decode()


USER_SCRIPT = textwrap.dedent("""\
    import importlib.util, os, sys
    import numpy as np
    import fragflow as ff
    assert os.path.realpath(ff.__file__).startswith(os.path.realpath(sys.prefix)), ff.__file__
    for layer in ("ir", "passes", "frontend", "codegen", "runtime", "tools"):
        assert importlib.util.find_spec(layer) is None, layer + " is importable top-level"
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 5), "float32", name="x")
        w = ff.Variable(np.linspace(-1, 1, 20, dtype=np.float32).reshape(5, 4))
        loss = ff.reduce_mean(ff.square(ff.relu(x @ w)))
        dw, = ff.gradients(loss, [w])
    print("source", x.op.source)
    feed = {x: np.arange(15, dtype=np.float32).reshape(3, 5) / 7}
    ref = ff.Session(g, backend="numpy", passes=[]).run([loss, dw], feed)
    try:
        sess = ff.Session(g)
    except ff.BackendError as err:
        print("no GL:", err)
        raise SystemExit(3)
    out = sess.run([loss, dw], feed)
    for a, b in zip(out, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    print("GL matches numpy")
""")


def _clean_env(tmp, venv):
    env = {"PATH": os.pathsep.join([str(venv / "bin"), "/usr/local/bin", "/usr/bin",
                                    "/bin"]),
           "HOME": str(tmp), "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
           "FRAGFLOW_CACHE_DIR": str(tmp / "cache")}
    for key in ("FRAGFLOW_GL", "LIBGL_ALWAYS_SOFTWARE", "EGL_PLATFORM", "DISPLAY"):
        if key in os.environ:              # which GL to use, not where code comes from
            env[key] = os.environ[key]
    return env


def test_the_wheel_installed_in_a_fresh_venv_runs_a_graph_and_the_cli(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig."
                              "get_paths()['purelib'])"], capture_output=True, text=True,
                             check=True, env={"PATH": "/usr/bin:/bin"}).stdout.strip()
    deps = [p for p in site.getsitepackages() + [site.getusersitepackages()]
            if os.path.isdir(p)]
    with open(os.path.join(purelib, "outer_dependencies.pth"), "w") as f:
        f.write("\n".join(deps) + "\n")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
         "--no-index", "-q", wheel], capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1"), cwd=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr

    work = tmp_path / "work"
    work.mkdir()
    (work / "user.py").write_text(USER_SCRIPT)
    env = _clean_env(tmp_path, venv)
    run = subprocess.run([str(python), "user.py"], capture_output=True, text=True,
                         env=env, cwd=str(work), timeout=300)
    assert "source user.py:9" in run.stdout, run.stdout + run.stderr
    if run.returncode == 3:
        pytest.skip(f"the wheel imports; no GL context here: {run.stdout.strip()}")
    assert run.returncode == 0, run.stdout + run.stderr
    assert "GL matches numpy" in run.stdout

    info = subprocess.run([str(venv / "bin" / "fragflow"), "info"], capture_output=True,
                          text=True, env=env, cwd=str(work), timeout=300)
    assert info.returncode == 0, info.stdout + info.stderr
    assert "renderer" in info.stdout.lower() and str(tmp_path / "cache") in info.stdout
