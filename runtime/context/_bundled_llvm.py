"""One process, two LLVMs: load triton's before the GL driver loads the system one (issue 17).

Creating a Mesa context puts Mesa's libLLVM into the process's global symbol scope (the
DRI loader and PyOpenGL's OSMesa platform load with RTLD_GLOBAL). triton's libtriton.so
(torch._dynamo, torch.compile and torch.optim import it) links its own, newer LLVM
statically and exports its symbols; loaded after Mesa, thousands of its references bind
to Mesa's LLVM instead, and its first static constructor crashes inside dlopen. Loaded
the other way round nothing collides. So before a GL driver is loaded, fragflow dlopens
libtriton.so as Python will (RTLD_NOW | RTLD_LOCAL), without importing triton; where an
LLVM is already mapped it adds RTLD_DEEPBIND. Linux (ELF) only: macOS and Windows bind
symbols per library. docs/RUNTIME.md ("torch and Mesa: two LLVMs") has what was
measured and what the preload costs.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
import time

__all__ = ["preload_bundled_llvm", "preload_report"]

# Python packages that ship a shared library with their own LLVM in it, symbols exported:
# (package, path of the library inside the package, module name Python imports it as).
_BUNDLED = (("triton", ("_C", "libtriton.so"), "triton._C.libtriton"),)

_report: dict[str, str] = {}  # package -> what preload_bundled_llvm() did, for `info`
_handles: list[ctypes.CDLL] = []  # never closed: the library must stay loaded


def preload_bundled_llvm() -> dict[str, str]:
    """Load the LLVM-carrying libraries of installed packages (triton) before any GL
    driver is loaded; idempotent, and cheap when they are absent or already imported.

    Returns {package: what was done} (also kept for preload_report()).
    """
    if not sys.platform.startswith("linux"):
        return {}
    for package, parts, module in _BUNDLED:
        if package not in _report:
            _report[package] = _preload(package, parts, module)
    return dict(_report)


def preload_report() -> dict[str, str]:
    """What preload_bundled_llvm() did in this process, {package: outcome}."""
    return dict(_report)


def _preload(package: str, parts: tuple[str, ...], module: str) -> str:
    if module in sys.modules:
        return "already imported (it came first: nothing to do)"
    try:
        spec = importlib.util.find_spec(package)  # a top-level package: not imported
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return "not installed"
    path = os.path.join(list(spec.submodule_search_locations)[0], *parts)
    if not os.path.isfile(path):
        return f"not installed ({path} missing)"
    mode = os.RTLD_NOW | os.RTLD_LOCAL  # what Python's import uses (sys.getdlopenflags())
    how = "RTLD_LOCAL"
    if _llvm_already_mapped():
        # Too late for the plain order: make the library look up its own symbols first.
        mode |= os.RTLD_DEEPBIND
        how = "RTLD_LOCAL | RTLD_DEEPBIND, a libLLVM was already loaded"
    start = time.perf_counter()
    try:
        _handles.append(ctypes.CDLL(path, mode=mode))
    except OSError as exc:
        # `import triton` will fail the same way, with an ImportError rather than a crash.
        return f"could not be loaded ({exc})"
    return f"loaded {path} first ({how}, {(time.perf_counter() - start) * 1e3:.0f} ms)"


def _llvm_already_mapped() -> bool:
    """Whether some libLLVM*.so is already in this process (e.g. another GL library's)."""
    try:
        with open("/proc/self/maps") as maps:
            return any("/libLLVM" in line for line in maps)
    except OSError:
        return True  # cannot tell: RTLD_DEEPBIND is safe either way
