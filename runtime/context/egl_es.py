"""egl-es backend: an OpenGL ES 3.x context through EGL (eglBindAPI(EGL_OPENGL_ES_API), an
EGL_OPENGL_ES3_BIT config, context version 3), on the same displays as the egl backend:
a GPU through the EGL device platform, else Mesa surfaceless (llvmpipe).

Kernels render as GLSL ES 3.00 (codegen/limits.py), GL calls go through OpenGL.GLES3
(libGLESv2), and at creation a probe checks what fragflow needs beyond ES 3.0: float
render targets and IEEE NaN and infinities in shaders (runtime/context/probe.py).
Selected with FRAGFLOW_GL=egl-es; never tried by default. MESA_GLES_VERSION_OVERRIDE=3.0
makes Mesa give a true ES 3.0 context."""
from __future__ import annotations

from . import egl

PYOPENGL_PLATFORM = "egl"
INSTALL = egl.INSTALL + " and libgles2 (libGLESv2)"


def create(device: int | None = None) -> egl.EglContext:
    return egl.create(device, api="gles")
