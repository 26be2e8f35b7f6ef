"""Derives the package list from pyproject.toml's [tool.setuptools.package-dir].

Each top-level folder is the subpackage fragflow.<folder> (docs/ARCHITECTURE.md, "Layers"),
and every folder below it holding Python files is a package too. Listing them by hand
once left out fragflow.passes.autodiff: `pip install .` gave a fragflow that could not
be imported. Here a new subpackage is found; one without __init__.py stops the build.
Everything else is configured in pyproject.toml.
"""
import os

from setuptools import setup

try:
    import tomllib
except ModuleNotFoundError:          # Python 3.10: pyproject.toml's build requires tomli
    import tomli as tomllib

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = {"__pycache__"}
# Folders of package data (no Python files), installed as data-only packages so that
# setuptools knows them (it warns about importable folders it was not told of).
DATA_SUFFIXES = (".glsl.j2",)


def packages(package_dir: dict) -> list:
    found = set()
    for package, folder in package_dir.items():
        root = os.path.join(HERE, folder)
        for path, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in SKIP and not d.startswith("."))
            if not any(f.endswith(".py") for f in files):
                if any(f.endswith(DATA_SUFFIXES) for f in files):
                    rel = os.path.relpath(path, root)
                    found.add(f"{package}.{rel.replace(os.sep, '.')}")
                continue
            if "__init__.py" not in files:
                raise SystemExit(f"{os.path.relpath(path, HERE)} holds Python files but no "
                                 f"__init__.py: it would be left out of the package")
            rel = os.path.relpath(path, root)
            found.add(package if rel == "." else f"{package}.{rel.replace(os.sep, '.')}")
    return sorted(found)


with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
    PACKAGE_DIR = tomllib.load(f)["tool"]["setuptools"]["package-dir"]

setup(packages=packages(PACKAGE_DIR))
