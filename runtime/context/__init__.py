"""The process-wide offscreen OpenGL context fragflow runs its shaders in.

Backends (docs/ARCHITECTURE.md, "Runtime"; docs/RUNTIME.md): ``egl`` (no window
system: a GPU through the EGL device platform, else Mesa's surfaceless llvmpipe),
``egl-es`` (the same through OpenGL ES 3.x, GLSL ES 3.00 kernels; only when asked for),
``glfw`` (a hidden window on the user's display) and ``osmesa`` (Mesa's off-screen
renderer through GLFW's null platform). ``FRAGFLOW_GL=egl|egl-es|glfw|osmesa`` forces
one; otherwise glfw (with a display), then egl, then osmesa. This module must not
import OpenGL: PyOpenGL fixes its platform at first import, and only the backend that
succeeds knows which one it needs.

Every piece of GL work runs inside ``with ctx.section:``: the process-wide GL lock, the
context made current on the calling thread and released at the end (a context is
current on one thread at a time; elsewhere GL calls do nothing). Sections nest; only
the outermost switches the context (docs/RUNTIME.md, "Threads", has its cost).

    >>> from fragflow.runtime.context import get_context
    >>> with get_context().section:
    ...     pass                # GL calls here run on the context, from any thread
"""

from __future__ import annotations

import collections
import ctypes
import dataclasses
import importlib
import os
import threading

from ...ir.errors import BackendError
from ..shader_cache import configure_shader_cache, shader_cache_note
from . import egl, egl_devices
from ._bundled_llvm import preload_bundled_llvm
from ._gl import check_platform, import_gl, load_library
from ._glfw import import_glfw
from .egl_devices import check_index, default_index, describe, requested_device
from .probe import check_es_needs

__all__ = ["GLContext", "get_context", "available_backends", "devices", "BACKENDS"]

# name -> module in this package
_MODULES = {"egl": "egl", "glfw": "glfw_window", "osmesa": "osmesa", "egl-es": "egl_es"}
BACKENDS = tuple(_MODULES)

_INSTALL = {
    "egl": "Debian: libegl1 libegl-mesa0 libgl1-mesa-dri",
    "egl-es": "Debian: libegl1 libegl-mesa0 libgl1-mesa-dri libgles2",
    "glfw": "a display (headless: Xvfb, Debian: xvfb) and pip: glfw",
    "osmesa": "Debian: libosmesa6",
}

_lock = threading.RLock()
_current: GLContext | None = None


def _has_display() -> bool:
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _candidates() -> tuple[list[str], list[str]]:
    """(backends to try in order, notes on those left out)."""
    forced = os.environ.get("FRAGFLOW_GL", "").strip().lower()
    if forced:
        if forced not in _MODULES:
            raise BackendError(
                f"FRAGFLOW_GL={os.environ['FRAGFLOW_GL']!r} is not a backend; use one of "
                f"{', '.join(BACKENDS)} (or unset it to try them in the default order)")
        return [forced], []
    if _has_display():
        return ["glfw", "egl", "osmesa"], []
    return ["egl", "osmesa"], ["glfw: not tried, no DISPLAY or WAYLAND_DISPLAY is set"]


def _module(name: str):
    return importlib.import_module(f".{_MODULES[name]}", __name__)


def available_backends() -> list[str]:
    """Backends that could work here, in the default order (ignores FRAGFLOW_GL).

    A cheap check (libraries load, a display exists); it creates no context and does
    not bind PyOpenGL, so a backend listed here can still fail in get_context().
    """
    order = ["glfw", "egl", "osmesa"] if _has_display() else ["egl", "osmesa"]
    found = []
    for name in order:
        try:
            if name == "glfw":

                import_glfw()
            elif name == "egl":
                load_library(("libEGL.so.1", "libEGL.so"), _INSTALL[name])
            else:
                load_library(_module("osmesa").LIBRARY_NAMES, _INSTALL[name])
        except BackendError:
            continue
        found.append(name)
    return found


def _int(GL, pname) -> int:
    value = GL.glGetIntegerv(pname)
    return int(getattr(value, "flat", [value])[0])  # PyOpenGL may return an array


class GLSection:
    """``with ctx.section:`` -- the GL calls in the block run on ctx, from any thread.

    Holds the process-wide GL lock (re-entrant), makes the context current on the
    calling thread when the outermost section begins and releases it from the thread
    when that section ends. Work handed to defer() (e.g. by a garbage-collected
    session, which must not make GL calls from whatever thread the collector runs on)
    runs at the start of the next outermost section."""

    __slots__ = ("_context", "_lock", "_depth", "_deferred")

    def __init__(self, context: GLContext):
        self._context = context
        self._lock = threading.RLock()
        self._depth = 0                    # touched only by the thread holding _lock
        self._deferred = collections.deque()

    def __enter__(self) -> GLContext:
        self._lock.acquire()
        if self._depth == 0:
            try:
                self._context._bind()
            except BaseException:
                self._lock.release()
                raise
            self._depth = 1
            if self._deferred:
                self._run_deferred()
        else:
            self._depth += 1
        return self._context

    def __exit__(self, *exc) -> None:
        self._depth -= 1
        try:
            if self._depth == 0:
                self._context._unbind()
        finally:
            self._lock.release()

    def defer(self, work) -> None:
        """Run work() inside the next outermost section (deque.append is thread-safe and
        takes no lock, so this is safe from __del__ and from any thread)."""
        self._deferred.append(work)

    def _run_deferred(self) -> None:
        while self._deferred:
            work = self._deferred.popleft()
            try:
                work()
            except Exception:   # a release that failed must not fail the caller's run
                pass


def _text(value) -> str:
    """A GL string as text: OpenGL.GL returns bytes, OpenGL.GLES3 a GLubyte pointer."""
    if value is None:
        return ""
    if not isinstance(value, bytes):
        value = ctypes.cast(value, ctypes.c_char_p).value or b""
    return value.decode(errors="replace")


def _string(GL, pname) -> str:
    return _text(GL.glGetString(pname))


def _extensions(GL) -> frozenset:
    return frozenset(_text(GL.glGetStringi(GL.GL_EXTENSIONS, i))
                     for i in range(_int(GL, GL.GL_NUM_EXTENSIONS)))


class GLContext:
    """An OpenGL >= 3.3 core context, or an OpenGL ES >= 3.0 one (the egl-es backend;
    `api` says which), with one empty VAO bound (core profile draws nothing without
    one; fragflow's full-screen triangle needs no vertex data). GL work runs in
    ``with ctx.section:`` (see the module's docstring on threads)."""

    def __init__(self, backend: str, native, shader_cache_dir: str, failed_attempts):
        self.backend = backend
        self.detail = native.detail
        # Candidates tried before this one, "name: reason" (e.g. for `fragflow info`).
        self.failed_attempts = tuple(failed_attempts)
        self._native = native
        # The EGL device index it runs on (runtime/context/egl_devices.py); None for
        # glfw/osmesa and where EGL enumerates no devices.
        self.device_index = getattr(native, "device_index", None)
        self._owner = threading.get_ident()    # the backend made it current here
        self.section = GLSection(self)
        # "gl": desktop OpenGL through OpenGL.GL; "gles": OpenGL ES through OpenGL.GLES3
        self.api = getattr(native, "api", "gl")
        GL = import_gl(native.pyopengl_platform, self.api)
        major, minor = _int(GL, GL.GL_MAJOR_VERSION), _int(GL, GL.GL_MINOR_VERSION)
        text = lambda pname: _string(GL, pname)  # noqa: E731
        self.extensions = _extensions(GL)
        if self.api == "gles":      # ES has no profiles (no GL_CONTEXT_PROFILE_MASK)
            if (major, minor) < (3, 0):
                raise BackendError(f"got OpenGL ES {major}.{minor} ({text(GL.GL_RENDERER)}); "
                                   f"need ES 3.0+")
        else:
            core = _int(GL, GL.GL_CONTEXT_PROFILE_MASK) & GL.GL_CONTEXT_CORE_PROFILE_BIT
            if (major, minor) < (3, 3) or not core:
                raise BackendError(
                    f"got OpenGL {major}.{minor} {'core' if core else 'compatibility'} "
                    f"({text(GL.GL_RENDERER)}); need 3.3+ core")
        self.gl = GL
        self.vao = int(GL.glGenVertexArrays(1))
        GL.glBindVertexArray(self.vao)
        # GPU timers: GL 3.3 core has GL_TIME_ELAPSED queries; ES only through
        # EXT_disjoint_timer_query (else runs are timed on the CPU clock after glFinish)
        self.timer_query = self.api == "gl" or \
            "GL_EXT_disjoint_timer_query" in self.extensions
        if self.api == "gles":
            check_es_needs(GL, self.extensions, text(GL.GL_RENDERER))
        self._info = {
            "backend": backend,
            "api": self.api,
            "detail": self.detail,
            "device": "-" if self.device_index is None else self.device_index,
            "vendor": text(GL.GL_VENDOR),
            "renderer": text(GL.GL_RENDERER),
            "version": text(GL.GL_VERSION),
            "glsl_version": text(GL.GL_SHADING_LANGUAGE_VERSION),
            "max_texture_size": _int(GL, GL.GL_MAX_TEXTURE_SIZE),
            "max_draw_buffers": _int(GL, GL.GL_MAX_DRAW_BUFFERS),
            "max_color_attachments": _int(GL, GL.GL_MAX_COLOR_ATTACHMENTS),
            "max_texture_image_units": _int(GL, GL.GL_MAX_TEXTURE_IMAGE_UNITS),
            "timer_query": self.timer_query,
            "shader_cache_dir": shader_cache_dir,
            # "" when the cache works; else why not, and what that costs
            "shader_cache_note": shader_cache_note(),
        }

    def proc_address(self, name: str) -> int | None:
        """The address of an extension entry point (eglGetProcAddress), or None where the
        backend cannot say (glfw, osmesa)."""
        get = getattr(self._native, "proc_address", None)
        return get(name) if get is not None else None

    def info(self) -> dict:
        """What the context is: backend, driver strings and the limits codegen plans with."""
        return dict(self._info)

    def make_current(self) -> None:
        """Make this context current on the calling thread until release_current(), for
        single-threaded scripts that call GL themselves; fragflow itself uses section."""
        self._bind()

    def release_current(self) -> None:
        """Undo make_current(): the context is current on no thread afterwards."""
        if self._owner == threading.get_ident():
            self._unbind()

    def _bind(self) -> None:
        if self._native is None:
            raise BackendError("this GL context was closed; call get_context() for a new one")
        me = threading.get_ident()
        if self._owner == me:
            return
        if self._owner is not None:
            raise BackendError(
                f"the GL context is current on another thread (id {self._owner}), made "
                f"current there outside fragflow's GL lock; call ctx.release_current() on "
                f"that thread, or do GL work inside `with ctx.section:`")
        self._native.make_current()
        self._owner = me

    def _unbind(self) -> None:
        if self._native is not None and self._owner is not None:
            self._owner = None
            self._native.release()

    def close(self) -> None:
        """Destroy the context; get_context() afterwards creates a new one."""
        global _current
        if self._native is None:
            return                          # closing twice is harmless
        with self.section, _lock:           # the order Session work takes them in
            try:
                self.gl.glDeleteVertexArrays(1, [self.vao])
            finally:
                self._native.destroy()
                self._native = None
                self._owner = None
                if _current is self:
                    _current = None

    def __repr__(self) -> str:
        state = "closed" if self._native is None else self.detail
        return f"<GLContext {self.backend}: {state}>"


def _open(name: str, shader_cache_dir: str, failed, device: int | None = None) -> GLContext:
    module = _module(name)
    if hasattr(module, "PYOPENGL_PLATFORM"):
        check_platform(module.PYOPENGL_PLATFORM)  # before making a context we cannot use
    native = module.create() if device is None else module.create(device=device)
    try:
        return GLContext(name, native, shader_cache_dir, failed)
    except BaseException:
        native.destroy()
        raise


def get_context(device: int | None = None) -> GLContext:
    """The process-wide GL context, created on first call. It is current on no thread
    when this returns: do GL work inside ``with ctx.section:`` (or make_current()).

    device: an index from devices(); None means $FRAGFLOW_DEVICE, else the default (the
    first GPU CUDA_VISIBLE_DEVICES allows, else llvmpipe; egl_devices.py). One process
    has one context: the first call fixes its device, and a later call naming another
    device raises BackendError (run that device in another process).

    Raises BackendError when FRAGFLOW_GL names no backend, or when no backend works;
    the message lists every attempt with its reason and what to install.
    """
    global _current
    with _lock:
        if _current is not None:
            if device is not None:
                check_device(_current, device)
            return _current
        if device is None:
            device = requested_device()
            if device is not None:
                try:
                    return _open_device(device)
                except BackendError as exc:
                    raise BackendError(f"FRAGFLOW_DEVICE={device}: {exc}") from None
        if device is not None:
            return _open_device(device)
        names, notes = _candidates()
        cache_dir = configure_shader_cache()  # Mesa reads it when the first context is made
        preload_bundled_llvm()  # triton's LLVM before the driver's (issue 17; see _bundled_llvm)
        failed = []
        for name in names:
            try:
                context = _open(name, cache_dir, failed)
                context.release_current()   # made current on this thread by the backend
                _current = context
                return _current
            except Exception as exc:  # any failure means: try the next backend
                reason = str(exc) if isinstance(exc, BackendError) \
                    else f"{type(exc).__name__}: {exc}"
                failed.append(f"{name}: {reason}")
        lines = [f"  {line}" for line in failed + notes]
        hints = [f"  {name}: {_INSTALL[name]}" for name in BACKENDS]
        wanted = "OpenGL ES 3" if names == ["egl-es"] else "OpenGL 3.3 core"
        raise BackendError(f"no {wanted} context could be created. Tried:\n"
                           + "\n".join(lines) + "\nTo get one, install for\n" + "\n".join(hints)
                           + "\n  and pip: PyOpenGL, glfw. FRAGFLOW_GL=egl|egl-es|glfw|osmesa "
                             "forces one.")


def _egl_devices():
    """(egl, enumerated devices); BackendError when libEGL is missing."""
    lib = egl._Egl()
    return lib, egl_devices.enumerate_devices(lib)


def _open_device(device: int) -> GLContext:
    """The process's context on EGL device `device` (caller holds _lock)."""
    global _current
    forced = os.environ.get("FRAGFLOW_GL", "").strip().lower()
    if forced and forced not in ("egl", "egl-es"):
        raise BackendError(f"device={device} selects an EGL device, but FRAGFLOW_GL={forced!r} "
                           f"forces another backend; unset one of them")
    _, found = _egl_devices()
    check_index(found, device, devices)
    cache_dir = configure_shader_cache()
    preload_bundled_llvm()
    context = _open(forced or "egl", cache_dir, [], device=device)
    context.release_current()
    _current = context
    return _current


def check_device(context: GLContext, device) -> None:
    """BackendError unless `context` runs on EGL device index `device` (see get_context)."""
    if device == context.device_index and not isinstance(device, bool):
        return
    _, found = _egl_devices()
    check_index(found, device, devices)          # a bad index says so first
    where = (f"device {context.device_index}" if context.device_index is not None
             else f"the {context.backend} backend (no EGL device index)")
    raise BackendError(
        f"this process's GL context is already open on {where} ({context.info()['renderer']}) "
        f"and device={device} asks for another: a process has one GL context, opened by its "
        f"first GL Session, and every Session shares it. Use device={context.device_index} "
        f"(or none) here, and run device {device} in another process (one per device, as "
        f"fragflow.distributed does)")


_devices_cache: list | None = None


def devices() -> list:
    """The GL devices of this host (egl_devices.DeviceInfo), in EGL's order, the software
    device (llvmpipe) among them; ``default`` marks the one this process's context is on
    (or would be opened on). Each is described from a throwaway context on it, once per
    process. [] where EGL cannot enumerate devices (the default context still works)."""
    global _devices_cache

    with _lock:
        if _devices_cache is None:
            lib, found = _egl_devices()
            in_use = getattr(getattr(_current, "_native", None), "_display", None)
            _devices_cache = [describe(lib, d, lambda display: display == in_use, False)
                              for d in found]
            _devices_cache.append(default_index(found))
        *described, fallback = _devices_cache
        if _current is not None:
            default = _current.device_index
        else:
            requested = requested_device()
            default = fallback if requested is None else requested
        return [dataclasses.replace(d, default=d.index == default) for d in described]
