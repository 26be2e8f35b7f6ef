"""The examples run as written; the digits CNN meets its accuracy and time."""
import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_train_digits_reaches_97_percent_within_two_minutes(gl, tmp_path):
    pytest.importorskip("sklearn", reason="the examples extra (scikit-learn) is missing")
    pytest.importorskip("matplotlib", reason="the examples extra (matplotlib) is missing")
    result = subprocess.run(
        [sys.executable, os.path.join("examples", "train_digits.py"), "--out",
         str(tmp_path)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    accuracy = float(re.search(r"test accuracy\s+([0-9.]+)", result.stdout).group(1))
    seconds = float(re.search(r"training time\s+([0-9.]+) s", result.stdout).group(1))
    print(result.stdout[-600:])
    assert accuracy >= 0.97
    assert seconds < 120          # the bound, on this class of machine
    assert (tmp_path / "loss.png").stat().st_size > 1000
    assert "conv2d" in (tmp_path / "graph.txt").read_text()
    shaders = os.listdir(tmp_path / "shaders")
    assert len(shaders) > 10 and all(s.endswith(".frag") for s in shaders)
