"""GLFW backend: a hidden window on the user's display (X11 or Wayland) owns the context.

The usual choice on a desktop: it reaches the same driver the user's other GL
applications use. Needs a display; headless machines use EGL or OSMesa instead.
"""

from __future__ import annotations

from ._glfw import import_glfw, open_window

INSTALL = "a display (DISPLAY/WAYLAND_DISPLAY; headless: xvfb) and pip: glfw"


def _pyopengl_platform(glfw, window) -> str:
    # GLFW makes GLX contexts on X11 and EGL contexts on Wayland (or when asked to);
    # PyOpenGL must look entry points up through the same one.
    api = glfw.get_window_attrib(window, glfw.CONTEXT_CREATION_API)
    on_wayland = hasattr(glfw, "get_platform") and glfw.get_platform() == glfw.PLATFORM_WAYLAND
    return "egl" if api == glfw.EGL_CONTEXT_API or on_wayland else "glx"


def create():
    glfw = import_glfw()
    hints = {
        glfw.VISIBLE: False,
        glfw.CONTEXT_VERSION_MAJOR: 3,
        glfw.CONTEXT_VERSION_MINOR: 3,
        glfw.OPENGL_PROFILE: glfw.OPENGL_CORE_PROFILE,
        glfw.OPENGL_FORWARD_COMPAT: True,  # macOS only gives core contexts this way
    }
    return open_window(glfw, None, hints, "GLFW hidden window ({platform})", _pyopengl_platform)
