"""OSMesa backend: Mesa's off-screen software renderer, for machines with neither a
display nor a working EGL. Always llvmpipe.

Preferred route: GLFW 3.4's null platform with an OSMesa context (GLFW finds
libOSMesa.so.8/.6 by itself; PyOpenGL's "osmesa" platform then loads the same
library). When that route is unavailable (no glfw package, GLFW < 3.4), OSMesa is
driven directly through ctypes; `detail` says which route was taken and why.
"""

from __future__ import annotations

import ctypes

from ...ir.errors import BackendError
from ._gl import fn, load_library
from ._glfw import import_glfw, open_window

PYOPENGL_PLATFORM = "osmesa"
INSTALL = "Debian: libosmesa6"
LIBRARY_NAMES = ("libOSMesa.so.8", "libOSMesa.so.6", "libOSMesa.so")

# osmesa.h
OSMESA_RGBA = 0x1908
OSMESA_FORMAT = 0x22
OSMESA_DEPTH_BITS = 0x30
OSMESA_PROFILE = 0x33
OSMESA_CORE_PROFILE = 0x34
OSMESA_CONTEXT_MAJOR_VERSION = 0x36
OSMESA_CONTEXT_MINOR_VERSION = 0x37
GL_UNSIGNED_BYTE = 0x1401


def _via_glfw():
    glfw = import_glfw()
    hints = {
        glfw.VISIBLE: False,
        glfw.CONTEXT_CREATION_API: glfw.OSMESA_CONTEXT_API,
        glfw.CONTEXT_VERSION_MAJOR: 3,
        glfw.CONTEXT_VERSION_MINOR: 3,
        glfw.OPENGL_PROFILE: glfw.OPENGL_CORE_PROFILE,
        # No OPENGL_FORWARD_COMPAT: GLFW refuses it for OSMesa.
    }
    return open_window(glfw, glfw.PLATFORM_NULL, hints, "GLFW null platform + OSMesa",
                       lambda glfw, window: PYOPENGL_PLATFORM)


class OSMesaContext:
    """An OSMesa context made current on a 1x1 RGBA buffer we never look at."""

    pyopengl_platform = PYOPENGL_PLATFORM

    def __init__(self, detail: str):
        lib = load_library(LIBRARY_NAMES, INSTALL)
        self._make = fn(lib, "OSMesaMakeCurrent", ctypes.c_ubyte, ctypes.c_void_p,
                        ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_int)
        self._destroy = fn(lib, "OSMesaDestroyContext", None, ctypes.c_void_p)
        create = fn(lib, "OSMesaCreateContextAttribs", ctypes.c_void_p,
                    ctypes.POINTER(ctypes.c_int), ctypes.c_void_p)
        attribs = (ctypes.c_int * 11)(OSMESA_FORMAT, OSMESA_RGBA, OSMESA_DEPTH_BITS, 0,
                                      OSMESA_PROFILE, OSMESA_CORE_PROFILE,
                                      OSMESA_CONTEXT_MAJOR_VERSION, 3,
                                      OSMESA_CONTEXT_MINOR_VERSION, 3, 0)
        self._context = create(attribs, None)
        if not self._context:
            raise BackendError("OSMesaCreateContextAttribs(3.3 core) failed")
        self._buffer = (ctypes.c_ubyte * 4)()  # must outlive the context
        self.detail = detail
        self.make_current()

    def make_current(self) -> None:
        if not self._make(self._context, self._buffer, GL_UNSIGNED_BYTE, 1, 1):
            raise BackendError("OSMesaMakeCurrent failed")

    def release(self) -> None:
        """Not current on the calling thread any more (OSMesaMakeCurrent(NULL, ...))."""
        self._make(None, None, 0, 0, 0)

    def destroy(self) -> None:
        self._destroy(self._context)


def create():
    try:
        return _via_glfw()
    except Exception as exc:  # any failure of the GLFW route: try OSMesa directly
        glfw_reason = str(exc)
    try:
        return OSMesaContext(f"OSMesa direct (GLFW route failed: {glfw_reason})")
    except BackendError as exc:
        raise BackendError(f"via GLFW: {glfw_reason}; direct: {exc}") from exc
