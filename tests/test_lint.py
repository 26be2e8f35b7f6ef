"""ruff finds nothing: lint and import order, with the rules of pyproject.toml's
[tool.ruff] (`make lint` runs the same check). Skipped, with the reason, where ruff is
not installed (it is in the test extra)."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None,
                    reason="ruff is not installed (pip install -e '.[test]')")
def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                             "--output-format", "concise", str(ROOT)],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, f"ruff check found:\n{result.stdout}{result.stderr}"
