"""EGL backend: a desktop OpenGL 3.3 core context with no surface at all.

fragflow renders only into FBOs, so no window or pbuffer is needed. A real GPU is
reached through the device platform (EGL_EXT_platform_device, e.g. NVIDIA headless);
otherwise Mesa's surfaceless platform gives llvmpipe (or a Mesa GPU driver).

Plain ctypes rather than PyOpenGL's OpenGL.EGL: importing OpenGL.EGL binds PyOpenGL to
the EGL platform even if no context comes of it, which would block the OSMesa fallback
(and OpenGL.EGL fails to import with OpenGL.ERROR_CHECKING = False in PyOpenGL 3.1.10).
"""

from __future__ import annotations

import ctypes
from ctypes import POINTER, c_char_p, c_int32, c_uint32, c_void_p

from ...ir.errors import BackendError
from . import egl_devices
from ._gl import fn, load_library

PYOPENGL_PLATFORM = "egl"
INSTALL = "Debian: libegl1 libegl-mesa0 libgl1-mesa-dri (GPU: the vendor's EGL driver)"

EGL_SUCCESS = 0x3000
EGL_NONE = 0x3038
EGL_VENDOR = 0x3053
EGL_EXTENSIONS = 0x3055
EGL_SURFACE_TYPE = 0x3033
EGL_RENDERABLE_TYPE = 0x3040
EGL_OPENGL_BIT = 0x0008
EGL_OPENGL_ES3_BIT = 0x0040
EGL_OPENGL_API = 0x30A2
EGL_OPENGL_ES_API = 0x30A0
EGL_CONTEXT_MAJOR_VERSION = 0x3098
EGL_CONTEXT_MINOR_VERSION = 0x30FB
EGL_CONTEXT_OPENGL_PROFILE_MASK = 0x30FD
EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT = 0x1
EGL_PLATFORM_DEVICE_EXT = 0x313F
EGL_PLATFORM_SURFACELESS_MESA = 0x31DD
EGL_DRM_DEVICE_FILE_EXT = 0x3233

_ERROR_NAMES = {0x3001: "EGL_NOT_INITIALIZED", 0x3002: "EGL_BAD_ACCESS",
                0x3003: "EGL_BAD_ALLOC", 0x3004: "EGL_BAD_ATTRIBUTE",
                0x3005: "EGL_BAD_CONFIG", 0x3006: "EGL_BAD_CONTEXT",
                0x3008: "EGL_BAD_DISPLAY", 0x3009: "EGL_BAD_MATCH",
                0x300C: "EGL_BAD_PARAMETER"}


def _attribs(*pairs: int):
    values = list(pairs) + [EGL_NONE]
    return (c_int32 * len(values))(*values)


class _Egl:
    """The dozen EGL entry points fragflow needs, typed."""

    def __init__(self):
        lib = load_library(("libEGL.so.1", "libEGL.so"), INSTALL)
        self.GetError = fn(lib, "eglGetError", c_int32)
        self.QueryString = fn(lib, "eglQueryString", c_char_p, c_void_p, c_int32)
        self.Initialize = fn(lib, "eglInitialize", c_uint32, c_void_p, POINTER(c_int32),
                             POINTER(c_int32))
        self.Terminate = fn(lib, "eglTerminate", c_uint32, c_void_p)
        self.ChooseConfig = fn(lib, "eglChooseConfig", c_uint32, c_void_p, POINTER(c_int32),
                               POINTER(c_void_p), c_int32, POINTER(c_int32))
        self.BindAPI = fn(lib, "eglBindAPI", c_uint32, c_uint32)
        self.CreateContext = fn(lib, "eglCreateContext", c_void_p, c_void_p, c_void_p, c_void_p,
                                POINTER(c_int32))
        self.DestroyContext = fn(lib, "eglDestroyContext", c_uint32, c_void_p, c_void_p)
        self.MakeCurrent = fn(lib, "eglMakeCurrent", c_uint32, c_void_p, c_void_p, c_void_p,
                              c_void_p)
        self.ReleaseThread = fn(lib, "eglReleaseThread", c_uint32)
        get_proc = fn(lib, "eglGetProcAddress", c_void_p, c_char_p)

        def ext(name, restype, *argtypes):
            addr = get_proc(name.encode())
            return fn(addr, name, restype, *argtypes) if addr else None

        # Extension entry points only exist through eglGetProcAddress.
        self.QueryDevices = ext("eglQueryDevicesEXT", c_uint32, c_int32, POINTER(c_void_p),
                                POINTER(c_int32))
        self.QueryDeviceString = ext("eglQueryDeviceStringEXT", c_char_p, c_void_p, c_int32)
        self.GetPlatformDisplay = ext("eglGetPlatformDisplayEXT", c_void_p, c_uint32, c_void_p,
                                      POINTER(c_int32))
        # EGLAttrib is pointer-sized (EGL 1.5)
        self.QueryDeviceAttrib = ext("eglQueryDeviceAttribEXT", c_uint32, c_void_p, c_int32,
                                     POINTER(ctypes.c_ssize_t))
        self.GetCurrentDisplay = fn(lib, "eglGetCurrentDisplay", c_void_p)
        self.GetCurrentContext = fn(lib, "eglGetCurrentContext", c_void_p)
        self.GetCurrentSurface = fn(lib, "eglGetCurrentSurface", c_void_p, c_int32)
        self.get_proc = get_proc

    def error(self, call: str) -> str:
        code = self.GetError()
        return f"{call} failed ({_ERROR_NAMES.get(code, hex(code))})"


class EglContext:
    pyopengl_platform = PYOPENGL_PLATFORM

    def __init__(self, egl: _Egl, display, context, detail: str, device_index: int | None = None,
                 api: str = "gl"):
        self._egl, self._display, self._context, self.detail = egl, display, context, detail
        self.api = api          # "gl" (desktop OpenGL 3.3 core) or "gles" (OpenGL ES 3.x)
        # Index in egl_devices.enumerate_devices() (None: EGL lists no devices here).
        self.device_index = device_index

    def proc_address(self, name: str) -> int | None:
        return self._egl.get_proc(name.encode()) or None

    def make_current(self) -> None:
        if not self._egl.MakeCurrent(self._display, None, None, self._context):
            raise BackendError(self._egl.error("eglMakeCurrent"))

    def release(self) -> None:
        """Not current on the calling thread any more (another thread may take it)."""
        if not self._egl.MakeCurrent(self._display, None, None, None):
            raise BackendError(self._egl.error("eglMakeCurrent(EGL_NO_CONTEXT)"))

    def destroy(self) -> None:
        egl = self._egl
        egl.MakeCurrent(self._display, None, None, None)
        egl.DestroyContext(self._display, self._context)
        egl.Terminate(self._display)
        egl.ReleaseThread()


def _split(ext: bytes | None) -> set[str]:
    return set((ext or b"").decode().split())


def _candidate_displays(egl: _Egl, devices: list):
    """Yield (display, node, device index): the GPUs this process may use (egl_devices:
    CUDA_VISIBLE_DEVICES first), then Mesa surfaceless, which is the software device
    (llvmpipe) reached the simple way."""
    client = _split(egl.QueryString(None, EGL_EXTENSIONS))
    if egl.GetPlatformDisplay is None:
        raise BackendError("libEGL lacks eglGetPlatformDisplayEXT (EGL_EXT_platform_base)")
    for dev in egl_devices.default_hardware_order(devices):
        yield egl.GetPlatformDisplay(EGL_PLATFORM_DEVICE_EXT, dev.handle, None), dev.node, dev.index
    if "EGL_MESA_platform_surfaceless" in client:
        software = [d.index for d in devices if d.software]
        yield (egl.GetPlatformDisplay(EGL_PLATFORM_SURFACELESS_MESA, None, None), None,
               software[0] if software else None)


# api -> (eglBindAPI's argument, EGL_RENDERABLE_TYPE bit, eglCreateContext's attribs, name)
_APIS = {
    "gl": (EGL_OPENGL_API, EGL_OPENGL_BIT, (EGL_CONTEXT_MAJOR_VERSION, 3,
                                            EGL_CONTEXT_MINOR_VERSION, 3,
                                            EGL_CONTEXT_OPENGL_PROFILE_MASK,
                                            EGL_CONTEXT_OPENGL_CORE_PROFILE_BIT),
           "OpenGL 3.3 core"),
    # ES 3.0 or later: the driver gives its newest (MESA_GLES_VERSION_OVERRIDE=3.0 caps it)
    "gles": (EGL_OPENGL_ES_API, EGL_OPENGL_ES3_BIT, (EGL_CONTEXT_MAJOR_VERSION, 3),
             "OpenGL ES 3"),
}


def context_on(egl: _Egl, display, terminate_on_error: bool = True, api: str = "gl"):
    """Initialize `display` and create + make current a context on it: desktop OpenGL
    3.3 core (api "gl") or OpenGL ES 3.x ("gles")."""
    bind, renderable, attribs, name = _APIS[api]
    if not egl.Initialize(display, None, None):
        raise BackendError(egl.error("eglInitialize"))
    try:
        if not egl.BindAPI(bind):
            raise BackendError(egl.error(f"eglBindAPI({name})"))
        # Surface type 0 matches every config: there will never be a surface.
        config, n = c_void_p(), c_int32()
        if not egl.ChooseConfig(display, _attribs(EGL_SURFACE_TYPE, 0, EGL_RENDERABLE_TYPE,
                                                  renderable), ctypes.byref(config), 1,
                                ctypes.byref(n)) or n.value == 0:
            raise BackendError(egl.error(f"eglChooseConfig({name})") + ", no config")
        context = egl.CreateContext(display, config, None, _attribs(*attribs))
        if not context:
            raise BackendError(egl.error(f"eglCreateContext({name})"))
        if not egl.MakeCurrent(display, None, None, context):
            reason = egl.error("eglMakeCurrent(EGL_NO_SURFACE)")
            egl.DestroyContext(display, context)
            raise BackendError(reason)
        return context
    except BackendError:
        if terminate_on_error:
            egl.Terminate(display)
        raise


def create(device: int | None = None, api: str = "gl") -> EglContext:
    """A context on EGL device `device` (an index of egl_devices.enumerate_devices()), or
    by default on the first GPU this process may use, else on llvmpipe. api: "gl"
    (desktop OpenGL 3.3 core) or "gles" (OpenGL ES 3.x, the egl-es backend)."""
    egl = _Egl()
    devices = egl_devices.enumerate_devices(egl)
    if device is not None:
        return _create_on_device(egl, devices, device, api)
    reasons = []
    for display, node, index in _candidate_displays(egl, devices):
        where = "Mesa surfaceless" if node is None else f"device {node or '?'}"
        if not display:
            reasons.append(f"{where}: {egl.error('eglGetPlatformDisplayEXT')}")
            continue
        try:
            context = context_on(egl, display, api=api)
        except BackendError as exc:
            reasons.append(f"{where}: {exc}")
            continue
        vendor = (egl.QueryString(display, EGL_VENDOR) or b"?").decode()
        if node is None:
            detail = f"EGL Mesa surfaceless ({vendor})"
        else:
            detail = f"EGL device platform: {vendor}" + (f" ({node})" if node else "")
        if api == "gles":
            detail += ", OpenGL ES"
        return EglContext(egl, display, context, detail, device_index=index, api=api)
    raise BackendError("; ".join(reasons) or
                       "no usable EGL display (no GPU device, no EGL_MESA_platform_surfaceless)")


def _create_on_device(egl: _Egl, devices: list, index: int, api: str = "gl") -> EglContext:
    dev = egl_devices.check_index(devices, index, lambda: [])   # get_context checked it
    display = egl.GetPlatformDisplay(EGL_PLATFORM_DEVICE_EXT, dev.handle, None)
    if not display:
        raise BackendError(f"device {index}: {egl.error('eglGetPlatformDisplayEXT')}")
    try:
        context = context_on(egl, display, api=api)
    except BackendError as exc:
        raise BackendError(f"device {index}: {exc}") from None
    vendor = (egl.QueryString(display, EGL_VENDOR) or b"?").decode()
    kind = "software" if dev.software else (dev.node or "GPU")
    es = ", OpenGL ES" if api == "gles" else ""
    return EglContext(egl, display, context, f"EGL device {index}: {vendor} ({kind}){es}",
                      device_index=index, api=api)
