"""One process, two LLVMs: load triton's before the GL driver loads the system one (issue 17).

What was measured (Debian 12: Mesa 22.3.6 llvmpipe, libLLVM-15.so.1; torch 2.13.0,
triton 3.7.1; glibc 2.36):

- Mesa's DRI loader dlopens swrast_dri.so with RTLD_GLOBAL (EGL, GLX), and PyOpenGL's
  OSMesa platform loads libOSMesa.so.8 with RTLD_GLOBAL, so creating any Mesa context
  puts libLLVM-15.so.1 into the process's global symbol scope (LD_DEBUG=scopes:
  "add /lib/x86_64-linux-gnu/libLLVM-15.so.1 [0] to global scope").
- triton's libtriton.so (torch._dynamo, torch.compile and torch.optim import it) links
  its own, newer LLVM statically and exports its symbols. The dynamic linker searches
  the global scope before the library itself, so when libtriton.so is loaded after
  Mesa, 12,491 of its symbol references bind to libLLVM-15 instead of its own copies
  (LD_DEBUG=bindings), among them llvm::DebugCounter::instance().
- libtriton.so's first static constructor (_GLOBAL__sub_I_PassBuilder.cpp) registers a
  debug counter: it gets LLVM 15's DebugCounter object and runs its own, inlined
  MapVector/DenseMap::grow on it, whose layout differs; free() of a garbage pointer
  (0x14) -> SIGSEGV inside dlopen, before Python sees anything.

Loaded the other way round nothing collides: libtriton.so loaded RTLD_LOCAL (as Python
loads every extension module) binds to itself, and stays out of the global scope, so
Mesa's libLLVM-15 binds to itself too. That is why importing torch._dynamo before the
first context always worked. So before a GL driver is loaded, fragflow dlopens
libtriton.so the same way Python will (RTLD_NOW | RTLD_LOCAL), without importing
triton: its constructors run while its own symbols are the only LLVM ones around, and
the later `import triton` finds the library already loaded. Cost, measured: 20-40 ms once
per process, ~2.5 MB private memory (the ~90 MB more RSS are shared, file-backed pages
of the library). If an LLVM is already mapped (some other GL library came first), the
preload adds RTLD_DEEPBIND so libtriton.so still binds to itself first.

Linux (ELF) only: macOS and Windows bind symbols per library, where this cannot happen.
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
