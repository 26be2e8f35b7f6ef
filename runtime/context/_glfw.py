"""Shared by the two GLFW-based backends: init on a chosen platform, one hidden window."""

from __future__ import annotations

import contextlib

from ...ir.errors import BackendError

INSTALL_GLFW = "pip: glfw (>= 2.7, bundles GLFW 3.4)"


def import_glfw():
    try:
        import glfw  # optional (fragflow[glfw]); its import loads the library
    except ImportError as exc:  # also raised by the glfw package when its library is missing
        raise BackendError(f"cannot import glfw ({exc}); install {INSTALL_GLFW}") from exc
    return glfw


@contextlib.contextmanager
def _raising(glfw):
    # The glfw package only warns on GLFW errors by default; we want the exact message
    # as the failure reason, and must not change the setting for other glfw users.
    saved, glfw.ERROR_REPORTING = glfw.ERROR_REPORTING, "raise"
    try:
        yield
    except glfw.GLFWError as exc:
        _code, description = glfw.get_error()  # str(exc) shows the text as a bytes repr
        raise BackendError(f"GLFW: {description.decode() if description else exc}") from exc
    finally:
        glfw.ERROR_REPORTING = saved


class GlfwWindow:
    """A hidden window whose only purpose is to own a GL context."""

    def __init__(self, glfw, window, detail: str, pyopengl_platform: str):
        self._glfw, self._window = glfw, window
        self.detail, self.pyopengl_platform = detail, pyopengl_platform

    def make_current(self) -> None:
        self._glfw.make_context_current(self._window)

    def release(self) -> None:
        """Not current on the calling thread any more (GLFW allows any thread)."""
        self._glfw.make_context_current(None)

    def destroy(self) -> None:
        self._glfw.destroy_window(self._window)
        self._glfw.terminate()


def open_window(glfw, platform: int | None, hints: dict[int, int], detail: str,
                pyopengl_platform) -> GlfwWindow:
    """glfw.init on `platform`, create a tiny hidden window with `hints`, make it current.

    `platform` None means GLFW's default choice (and works with GLFW 3.3, which has no
    platform hint). `pyopengl_platform` is a function of the window: it can depend on
    what GLFW chose.
    """
    with _raising(glfw):
        if platform is not None:
            glfw.init_hint(glfw.PLATFORM, platform)
        elif hasattr(glfw, "get_platform"):
            # Init hints outlive glfw.terminate(): undo a null-platform hint of an
            # earlier OSMesa context in this process.
            glfw.init_hint(glfw.PLATFORM, glfw.ANY_PLATFORM)
        glfw.init()
        try:
            glfw.default_window_hints()
            for hint, value in hints.items():
                glfw.window_hint(hint, value)
            window = glfw.create_window(16, 16, "fragflow", None, None)
            glfw.make_context_current(window)
        except BaseException:
            glfw.terminate()
            raise
    return GlfwWindow(glfw, window, detail.format(platform=_platform_name(glfw)),
                      pyopengl_platform(glfw, window))


def _platform_name(glfw) -> str:
    if not hasattr(glfw, "get_platform"):  # GLFW 3.3: X11 is the only Linux platform
        return "X11"
    names = {glfw.PLATFORM_X11: "X11", glfw.PLATFORM_WAYLAND: "Wayland",
             glfw.PLATFORM_NULL: "null", glfw.PLATFORM_COCOA: "Cocoa",
             glfw.PLATFORM_WIN32: "Win32"}
    return names.get(glfw.get_platform(), "unknown")
