"""Binding PyOpenGL to one window-system platform, and loading native libraries.

PyOpenGL picks its platform (how it finds GL entry points: GLX, EGL or OSMesa) once,
when OpenGL.platform is first imported, from $PYOPENGL_PLATFORM. So the backends create
their context with plain ctypes or glfw, and only then import OpenGL.GL with the
platform that context needs. A second, different platform in the same process is
impossible; that is reported as the reason the candidate failed.
"""

from __future__ import annotations

import ctypes
import os
import sys

from ...ir.errors import BackendError


def bound_platform() -> str | None:
    """The platform PyOpenGL already uses in this process ("egl", "glx", "osmesa", ...),
    or None while it is still free to choose."""
    platform_mod = sys.modules.get("OpenGL.platform")
    plugin = getattr(platform_mod, "PLATFORM", None)
    if plugin is None:
        return None
    # EGLPlatform -> "egl", GLXPlatform -> "glx", OSMesaPlatform -> "osmesa"
    return type(plugin).__name__.lower().removesuffix("platform")


def check_platform(wanted: str) -> None:
    """Raise when PyOpenGL is already bound to a platform other than `wanted`."""
    bound = bound_platform()
    if bound is not None and bound != wanted:
        raise BackendError(
            f"PyOpenGL is already bound to the {bound!r} platform in this process and this "
            f"backend needs {wanted!r} (one process, one platform: set FRAGFLOW_GL, or "
            f"create the context before anything imports OpenGL)")


def import_gl(platform: str, api: str = "gl"):
    """Bind PyOpenGL to `platform` (if nothing bound it yet) and return the module of
    GL entry points for `api`: OpenGL.GL ("gl", desktop OpenGL) or OpenGL.GLES3
    ("gles", OpenGL ES 3.x through libGLESv2).

    The single place where fragflow imports OpenGL, so the platform and the error
    checking switch are set before the first import, for every backend.
    """
    check_platform(platform)
    if bound_platform() is None:
        os.environ["PYOPENGL_PLATFORM"] = platform
        import OpenGL  # binds PyOpenGL's platform: only once it is chosen, here
        # PyOpenGL's per-call glGetError costs more than small draws themselves; the
        # runtime checks glGetError itself at chosen points. Only read at first import.
        OpenGL.ERROR_CHECKING = False
    if api == "gles":
        return _import_gles3()
    import OpenGL.GL as GL  # PyOpenGL's platform: bound just above
    return GL


def _import_gles3():
    """OpenGL.GLES3. PyOpenGL 3.1.10's raw/GLES2/_types.py builds an error checker even
    with ERROR_CHECKING off (OpenGL.error._ErrorChecker is None then, and the import
    fails calling it); a stand-in that builds nothing lets the import through, and no
    GLES function gets a checker (their _errors modules test _ErrorChecker first)."""
    if "OpenGL.GLES3" not in sys.modules:
        import OpenGL.error as error  # PyOpenGL's platform: bound by import_gl
        if error._ErrorChecker is None:
            error._ErrorChecker = lambda *args, **kwargs: None
            try:
                import OpenGL.raw.GLES2._types  # noqa: F401 (PyOpenGL: after import_gl)
            finally:
                error._ErrorChecker = None
    import OpenGL.GLES3 as GLES3  # PyOpenGL's platform: bound by import_gl
    return GLES3


def load_library(names: tuple[str, ...], install: str) -> ctypes.CDLL:
    """dlopen the first of `names` that loads; BackendError saying what to install if none.

    RTLD_LOCAL: fragflow calls through the handle, and nothing it loads should add
    symbols to the process's global scope; libOSMesa would bring libLLVM-15 there, where
    a later `import triton` binds to it and crashes (issue 17, see _bundled_llvm).
    """
    errors = []
    for name in names:
        try:
            return ctypes.CDLL(name, mode=ctypes.RTLD_LOCAL)
        except OSError as exc:
            errors.append(str(exc))
    raise BackendError(f"cannot load {' / '.join(names)} ({'; '.join(errors)}); install {install}")


def fn(lib, name: str, restype, *argtypes):
    """A typed ctypes function from `lib` (a CDLL, or a raw address from a GetProcAddress)."""
    proto = ctypes.CFUNCTYPE(restype, *argtypes)
    if isinstance(lib, int):
        return proto(lib)
    f = getattr(lib, name)
    f.restype, f.argtypes = restype, list(argtypes)
    return f
