"""`pip install .` installs one package, fragflow, with its templates, and nothing
top-level named ir, passes, ..."""
import glob
import importlib.util
import os
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("setuptools", "wheel")),
                    reason="setuptools and wheel are needed to build a wheel offline")
def test_wheel_holds_only_the_fragflow_package(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path), ROOT], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    (wheel,) = glob.glob(str(tmp_path / "fragflow-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"fragflow", "fragflow-0.1.0.dist-info"}
    for sub in ("frontend", "ir", "ir/ops", "passes", "codegen", "runtime",
                "runtime/context", "tools"):
        assert f"fragflow/{sub}/__init__.py" in names, sub
    assert "fragflow/codegen/templates/prologue.glsl.j2" in names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "fragflow = fragflow.tools.cli:main" in \
        zipfile.ZipFile(wheel).read(entry_points).decode()

    # Installed from the wheel (not the source tree), it imports and knows user lines.
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target",
                    str(target), wheel], check=True, capture_output=True, timeout=300)
    script = tmp_path / "user.py"
    script.write_text("import fragflow as ff\nx = ff.constant(1.0)\nprint(x.op.source)\n")
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=env, cwd=str(tmp_path), timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "user.py:2"
