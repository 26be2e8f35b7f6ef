"""The examples check their optional dependencies and say what to install instead of
failing with a ModuleNotFoundError traceback (issue 26). Each runs as a script in a
subprocess in which the package is hidden (sys.modules[name] = None: import fails and
importlib.util.find_spec finds nothing)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_without(script, hidden):
    code = ("import runpy, sys\n"
            f"for name in {hidden!r}: sys.modules[name] = None\n"
            f"sys.argv = [{script!r}]\n"
            f"runpy.run_path({script!r}, run_name='__main__')\n")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


@pytest.mark.parametrize("script, hidden, says", [
    ("examples/onnx_resnet.py", ["torch"], "needs torch, which is not installed here: "
                                           "pip install torch"),
    ("examples/onnx_resnet.py", ["torch", "onnxruntime"], "needs torch, onnxruntime, which "
                                                          "are not installed"),
    ("examples/distributed_digits.py", ["ray"], "pip install ray[data]"),
    ("examples/train_digits.py", ["matplotlib"], "pip install matplotlib"),
])
def test_example_without_an_optional_package_says_what_to_install(script, hidden, says):
    result = run_without(script, hidden)
    assert result.returncode == 1
    assert says in result.stderr
    assert "Traceback" not in result.stderr and "ModuleNotFoundError" not in result.stderr
