"""One setup for everyone: CI runs the README's `make test` after installing system
packages only, so what the tests need from PyPI is the Makefile's to install, and a
newcomer's `make test` is CI's. And the repository stands on its own: no file cites
design pages kept outside it."""
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# pip, pip3, python -m pip, uv pip, pipx, poetry/conda installs: any Python package step
PYTHON_INSTALL = re.compile(r"\b(pip3?|uv|pipx|poetry|conda)\b")


def _code_lines(path):
    """(number, line) of a shell script's lines, comments dropped."""
    with open(path) as f:
        for number, line in enumerate(f, 1):
            code = line.split("#", 1)[0] if not line.startswith("#!") else ""
            if code.strip():
                yield number, code


def test_ci_installs_no_python_packages():
    found = [f".ci/run:{n}: {line.strip()}" for n, line in _code_lines(
        os.path.join(ROOT, ".ci", "run")) if PYTHON_INSTALL.search(line)]
    assert not found, ("CI must install what make test needs through the Makefile, not "
                       "beside it:\n" + "\n".join(found))


def test_ci_runs_make_test_last():
    lines = [line.strip() for _, line in _code_lines(os.path.join(ROOT, ".ci", "run"))]
    assert lines[-1] == "make test", f"the last command of .ci/run is {lines[-1]!r}"


def test_the_test_extra_names_what_the_tests_import():
    with open(os.path.join(ROOT, "pyproject.toml")) as f:
        text = f.read()
    block = text[text.index("test = ["):]
    block = block[:block.index("]\n") + 1]
    for package in ("pytest-xdist", "torch", "onnx", "onnxruntime", "triton", "ray",
                    "hypothesis", "setuptools", "keras", "h5py"):
        assert re.search(rf'"{package}\b', block), f"the test extra lacks {package}"


def test_the_makefile_installs_the_test_extra():
    with open(os.path.join(ROOT, "Makefile")) as f:
        text = f.read()
    assert re.search(r'pip install .*-e "\.\[test[,\]]', text), \
        "make test must install fragflow[test]"


def test_no_file_cites_pages_outside_the_repository():
    try:
        files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    cites = re.compile(r"shared/(DESIGN|STYLE)\.md|\.\./shared\b")
    found = []
    for name in files:
        if name == "tests/test_setup.py" or not name.endswith(
                (".py", ".md", ".toml", ".j2", ".js", ".html", ".sh", "Makefile", "run")):
            continue
        path = os.path.join(ROOT, name)
        if not os.path.isfile(path):
            continue
        with open(path, errors="replace") as f:
            for number, line in enumerate(f, 1):
                if cites.search(line):
                    found.append(f"{name}:{number}: {line.strip()}")
    assert not found, "\n".join(found)
