"""The README's quick start and `make demo`'s script run as written."""
import os
import re
import subprocess
import sys

from tests.reference import version_line

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def quick_start() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = text.split("## Quick start", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def run(args, **kwargs):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, **kwargs)


def test_quick_start_runs_as_written(gl, tmp_path):
    script = tmp_path / "quick_start.py"
    script.write_text(quick_start())
    assert len(quick_start().strip().splitlines()) <= 15
    result = run([str(script)])
    assert result.returncode == 0, result.stderr
    assert version_line() in result.stdout and "matmul(%x, %w)" in result.stdout


def test_demo_runs_and_matches_numpy(gl):
    result = run([os.path.join("examples", "demo.py")])
    assert result.returncode == 0, result.stderr
    assert "GL matches numpy." in result.stdout and "== graph ==" in result.stdout


def test_fragflow_info_prints_backend_and_limits(gl):
    result = run(["-m", "fragflow.tools.cli", "info"])
    assert result.returncode == 0, result.stderr
    for key in ("backend", "vendor", "renderer", "version", "max_texture_size",
                "max_draw_buffers"):
        assert re.search(rf"^{key}\s+\S", result.stdout, re.M), key


def test_fragflow_dump_prints_a_saved_graph(tmp_path):
    import fragflow as ff
    g = ff.Graph("saved")
    with g.as_default():
        x = ff.placeholder((2,), name="x")
        ff.exp(x, name="e")
    path = tmp_path / "g.json"
    ff.save_graph(g, str(path))
    result = run(["-m", "fragflow.tools.cli", "dump", str(path)])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ff.dump(g)
    bad = run(["-m", "fragflow.tools.cli", "dump", str(tmp_path / "missing.json")])
    assert bad.returncode == 2 and "neither JSON text nor an existing file" in bad.stderr
