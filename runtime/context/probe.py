"""What fragflow needs of an OpenGL ES context beyond what ES 3.0 promises, checked once
when the context is made, so that a device lacking it fails with a clear message
instead of computing wrong values:

- float render targets: every kernel writes RGBA32F (or RGBA32I) textures; ES 3.0 makes
  RGBA32F color-renderable only with EXT_color_buffer_float (core in ES 3.2);
- IEEE NaN and infinities in shaders: GLSL ES 3.00 leaves them undefined, fragflow's
  kernels propagate them as numpy does (templates/probe.glsl.j2 draws them into a
  float target and reads them back).

GL calls go through the module the context was made with (OpenGL.GLES3), passed in:
nothing here imports OpenGL."""
from __future__ import annotations

import numpy as np

from ...codegen.environment import render
from ...codegen.limits import Limits
from ...ir.errors import BackendError


def check_es_needs(GL, extensions: frozenset, renderer: str) -> None:
    """BackendError naming what this ES context lacks, else nothing."""
    missing = []
    major = int(np.asarray(GL.glGetIntegerv(GL.GL_MAJOR_VERSION)).flat[0])
    minor = int(np.asarray(GL.glGetIntegerv(GL.GL_MINOR_VERSION)).flat[0])
    if (major, minor) < (3, 2) and "GL_EXT_color_buffer_float" not in extensions:
        missing.append("float render targets (EXT_color_buffer_float, core in ES 3.2)")
    else:
        pixel = _draw_probe(GL)
        if pixel is None:
            missing.append("float render targets (an RGBA32F framebuffer is incomplete)")
        else:
            nan_plus_one, inf, computed_nan, tests = pixel
            if not (np.isnan(nan_plus_one) and np.isposinf(inf) and np.isnan(computed_nan)
                    and tests == 1.0):
                missing.append(f"IEEE NaN and infinities in shaders (the probe read "
                               f"{pixel.tolist()}, expected [nan, inf, nan, 1.0])")
    if missing:
        raise BackendError(f"this OpenGL ES {major}.{minor} context ({renderer}) lacks what "
                           f"fragflow's kernels need: {'; '.join(missing)}. Use a desktop "
                           f"OpenGL context (FRAGFLOW_GL=egl) or another device")


def _draw_probe(GL):
    """The probe's one pixel (4 floats), or None where RGBA32F cannot be rendered to."""
    dialect = Limits(glsl="300 es")
    texture = int(GL.glGenTextures(1))
    fbo = int(GL.glGenFramebuffers(1))
    shaders, program = [], 0
    try:
        GL.glBindTexture(GL.GL_TEXTURE_2D, texture)
        GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, GL.GL_RGBA32F, 1, 1, 0, GL.GL_RGBA, GL.GL_FLOAT,
                        None)
        for pname in (GL.GL_TEXTURE_MIN_FILTER, GL.GL_TEXTURE_MAG_FILTER):
            GL.glTexParameteri(GL.GL_TEXTURE_2D, pname, GL.GL_NEAREST)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, fbo)
        GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0,
                                  GL.GL_TEXTURE_2D, texture, 0)
        if GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER) != GL.GL_FRAMEBUFFER_COMPLETE:
            return None
        program = GL.glCreateProgram()
        for kind, template in ((GL.GL_VERTEX_SHADER, "vertex.glsl.j2"),
                               (GL.GL_FRAGMENT_SHADER, "probe.glsl.j2")):
            shader = GL.glCreateShader(kind)
            GL.glShaderSource(shader, render(template, dialect=dialect))
            GL.glCompileShader(shader)
            if not GL.glGetShaderiv(shader, GL.GL_COMPILE_STATUS):
                raise BackendError(f"the context's probe shader ({template}) did not "
                                   f"compile: {GL.glGetShaderInfoLog(shader)!r}")
            GL.glAttachShader(program, shader)
            shaders.append(shader)
        GL.glLinkProgram(program)
        if not GL.glGetProgramiv(program, GL.GL_LINK_STATUS):
            raise BackendError(f"the context's probe shader did not link: "
                               f"{GL.glGetProgramInfoLog(program)!r}")
        GL.glUseProgram(program)
        GL.glUniform1f(GL.glGetUniformLocation(program, "zero"), 0.0)
        GL.glViewport(0, 0, 1, 1)
        GL.glDrawArrays(GL.GL_TRIANGLES, 0, 3)
        out = np.zeros(4, np.float32)
        GL.glReadPixels(0, 0, 1, 1, GL.GL_RGBA, GL.GL_FLOAT, out)
        return out
    finally:
        GL.glUseProgram(0)
        for shader in shaders:
            GL.glDeleteShader(shader)
        if program:
            GL.glDeleteProgram(program)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, 0)
        GL.glDeleteFramebuffers(1, [fbo])
        GL.glDeleteTextures(1, [texture])
