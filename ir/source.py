"""The user's file:line for a node: the first stack frame outside fragflow."""
from __future__ import annotations

import os
import sys

# Installed, the layers are fragflow/ir, fragflow/frontend...; in a source checkout
# (pip install -e) they are top-level folders beside fragflow/. Both live under the
# parent of this folder.
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_LAYERS = ("fragflow", "frontend", "ir", "passes", "codegen", "runtime", "tools")
_INTERNAL = tuple(os.path.join(_ROOT, name) + os.sep for name in _LAYERS)
_INTERNAL_FILES = (os.path.join(_ROOT, "__init__.py"),)
_STDLIB = os.path.dirname(os.__file__) + os.sep     # contextlib, functools...
_SITE = os.path.join(_STDLIB, "site-packages")


def is_internal(filename: str) -> bool:
    """True for fragflow's own files and Python's (not site-packages): frames there are
    skipped when looking for the user's line."""
    return (filename.startswith(_INTERNAL) or filename in _INTERNAL_FILES
            or (filename.startswith(_STDLIB) and not filename.startswith(_SITE))
            or filename.startswith("<frozen"))


def user_location() -> str:
    """'model.py:12' for the innermost frame that is user code ('' if none)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not is_internal(filename):
            return f"{_short(filename)}:{frame.f_lineno}"
        frame = frame.f_back
    return ""


def _short(filename: str) -> str:
    try:
        rel = os.path.relpath(filename)
    except ValueError:          # another drive on Windows
        return filename
    return filename if rel.startswith("..") else rel
