"""The examples in fragflow's docstrings run and print what they say: one test per
module that has examples, so a failure names the module. A module whose optional
dependency is missing (onnx, ray) is skipped with the reason."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import fragflow

LAYERS = ("frontend", "ir", "passes", "codegen", "runtime", "tools", "distributed")
# Modules that import an optional package at import time, and that package.
OPTIONAL = {"fragflow.frontend.onnx": "onnx", "fragflow.distributed": "ray"}
KNOWN_FAILING: dict = {}   # module name: why its examples fail (each one a bug to fix)


def _ignore(name):              # walk_packages could not import a package: its test says why
    pass


def _module_names() -> list:
    """fragflow and every module below it. The layers are separate folders mapped to
    fragflow.<layer> (pyproject.toml), so each is walked from its own __path__."""
    names = [info.name for info in
             pkgutil.walk_packages(fragflow.__path__, "fragflow.", onerror=_ignore)]
    for layer in LAYERS:
        package = _import(f"fragflow.{layer}")
        if package is None:
            names.append(f"fragflow.{layer}")
            continue
        names.append(package.__name__)
        names += [info.name for info in
                  pkgutil.walk_packages(package.__path__, f"fragflow.{layer}.",
                                        onerror=_ignore)]
    return sorted(set(names) | {"fragflow"})


def _import(name):
    """The module, or None when it needs a missing optional package."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        if any(name.startswith(prefix) and package in str(err)
               for prefix, package in OPTIONAL.items()):
            return None
        raise


def _examples(name) -> list:
    module = _import(name)
    if module is None:
        return []
    return [t for t in doctest.DocTestFinder().find(module, name) if t.examples]


def _params() -> list:
    params = []
    for name in _module_names():
        if _import(name) is None:
            params.append(pytest.param(name, marks=pytest.mark.skip(
                reason=f"{name} needs an optional package that is not installed")))
        elif _examples(name):
            marks = [pytest.mark.xfail(reason=KNOWN_FAILING[name], strict=False)] \
                if name in KNOWN_FAILING else []
            params.append(pytest.param(name, marks=marks))
    return params


@pytest.mark.parametrize("name", _params())
def test_docstring_examples(name):
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in _examples(name):
        runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"


def test_every_layer_is_walked():
    names = _module_names()
    for layer in LAYERS[:-1]:
        assert any(n.startswith(f"fragflow.{layer}.") for n in names), layer
    assert "fragflow.frontend.ops_math" in names and "fragflow.frontend.models.losses" in names
