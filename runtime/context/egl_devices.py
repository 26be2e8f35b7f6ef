"""The GL devices of this host, as EGL enumerates them, and which one a process uses.

EGL_EXT_device_enumeration lists every device a driver offers: each GPU (NVIDIA's EGL,
Mesa's DRM render nodes) and Mesa's software rasteriser (llvmpipe, marked by
EGL_MESA_device_software). A device's index here is its position in that list; it is
what ``ff.Session(g, device=i)``, ``FRAGFLOW_DEVICE=i`` and ``ff.devices()`` mean.

Default device: the first GPU the process may use, else the software device.
"May use" follows CUDA_VISIBLE_DEVICES (Ray sets it for an actor given GPUs): NVIDIA's
EGL lists every GPU of the host whatever that variable says, so a device's CUDA ordinal
(EGL_CUDA_DEVICE_NV) is matched against it; the first listed there comes first.
Devices without a CUDA ordinal (Mesa's GPUs) are not restricted by it.

Like egl.py, plain ctypes: nothing here may import OpenGL (see _gl.py).
"""
from __future__ import annotations

import ctypes
import dataclasses
import json
import os
import subprocess
import sys
from ctypes import c_int32, c_uint32, c_void_p

from ...ir.errors import BackendError

EGL_EXTENSIONS = 0x3055
EGL_VENDOR = 0x3053
EGL_DRM_DEVICE_FILE_EXT = 0x3233
EGL_DRM_RENDER_NODE_FILE_EXT = 0x3377
EGL_CUDA_DEVICE_NV = 0x323A
EGL_RENDERER_EXT = 0x335F          # EGL_EXT_device_query_name
EGL_PLATFORM_DEVICE_EXT = 0x313F
EGL_DRAW, EGL_READ = 0x3059, 0x305A
GL_VENDOR, GL_RENDERER, GL_VERSION = 0x1F00, 0x1F01, 0x1F02


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """One GL device fragflow can run on (``ff.devices()``).

    index: what Session(device=...) and FRAGFLOW_DEVICE take. vendor, renderer, driver:
    GL_VENDOR, GL_RENDERER and GL_VERSION (the version string names the driver and its
    version). software: a CPU rasteriser (llvmpipe). node: the DRM device file, "" when
    none. cuda_device: the CUDA ordinal (NVIDIA), else None. default: the one a Session
    without device= uses in this process. error: why no context could be made on it
    ("" when one could)."""

    index: int
    vendor: str
    renderer: str
    driver: str
    software: bool
    node: str = ""
    cuda_device: int | None = None
    default: bool = False
    error: str = ""


@dataclasses.dataclass(frozen=True)
class RawDevice:
    """An enumerated EGL device before any context is made on it (cheap to get)."""

    index: int
    handle: int
    software: bool
    node: str
    cuda_device: int | None


def _split(ext: bytes | None) -> set[str]:
    return set((ext or b"").decode().split())


def enumerate_devices(egl) -> list[RawDevice]:
    """Every EGL device in driver order; [] where EGL cannot enumerate devices."""
    client = _split(egl.QueryString(None, EGL_EXTENSIONS))
    if not ({"EGL_EXT_device_enumeration", "EGL_EXT_platform_device"} <= client
            and egl.QueryDevices and egl.GetPlatformDisplay):
        return []
    count = c_int32()
    if not egl.QueryDevices(0, None, ctypes.byref(count)) or count.value <= 0:
        return []
    handles = (c_void_p * count.value)()
    egl.QueryDevices(count.value, handles, ctypes.byref(count))
    found = []
    for index, handle in enumerate(handles[:count.value]):
        ext = _split(egl.QueryDeviceString(handle, EGL_EXTENSIONS))
        node = ""
        for name, attr in (("EGL_EXT_device_drm", EGL_DRM_DEVICE_FILE_EXT),
                           ("EGL_EXT_device_drm_render_node", EGL_DRM_RENDER_NODE_FILE_EXT)):
            if not node and name in ext:
                node = (egl.QueryDeviceString(handle, attr) or b"").decode()
        cuda = None
        if "EGL_NV_device_cuda" in ext and egl.QueryDeviceAttrib:
            value = ctypes.c_ssize_t()
            if egl.QueryDeviceAttrib(handle, EGL_CUDA_DEVICE_NV, ctypes.byref(value)):
                cuda = int(value.value)
        found.append(RawDevice(index, handle, "EGL_MESA_device_software" in ext, node, cuda))
    return found


def visible_cuda_devices() -> list[int] | None:
    """CUDA ordinals CUDA_VISIBLE_DEVICES lets this process use, in its order; None when
    unrestricted (unset, or UUIDs/MIG names this module cannot map to ordinals)."""
    text = os.environ.get("CUDA_VISIBLE_DEVICES")
    if text is None:
        return None
    ordinals = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if not part.lstrip("-").isdigit():
            return None                    # GPU-<uuid> / MIG-<uuid>: not mappable here
        if int(part) < 0:                  # CUDA stops at the first invalid ordinal
            break
        ordinals.append(int(part))
    return ordinals


def default_hardware_order(devices: list[RawDevice]) -> list[RawDevice]:
    """The GPUs a default context tries, best first (see the module docstring)."""
    visible = visible_cuda_devices()
    gpus = [d for d in devices if not d.software]
    if visible is None:
        return gpus
    with_cuda = sorted((d for d in gpus if d.cuda_device in visible),
                       key=lambda d: visible.index(d.cuda_device))
    return with_cuda + [d for d in gpus if d.cuda_device is None]


def default_index(devices: list[RawDevice]) -> int | None:
    """The index a default context lands on (first GPU allowed, else software)."""
    gpus = default_hardware_order(devices)
    if gpus:
        return gpus[0].index
    software = [d for d in devices if d.software]
    return software[0].index if software else None


def requested_device() -> int | None:
    """FRAGFLOW_DEVICE as an index, None when unset; BackendError when not an integer."""
    text = os.environ.get("FRAGFLOW_DEVICE", "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise BackendError(f"FRAGFLOW_DEVICE={text!r} is not a device index; use an index "
                           f"from `fragflow info --devices` (or unset it)") from None


def check_index(devices: list[RawDevice], index, describe_all) -> RawDevice:
    """The device at `index`; BackendError naming the devices there are otherwise."""
    if isinstance(index, bool) or not isinstance(index, int):
        raise BackendError(f"device={index!r} is not a device index (an int from "
                           f"ff.devices())")
    for device in devices:
        if device.index == index:
            return device
    if not devices:
        raise BackendError(f"device={index} asked for, but EGL lists no devices here (no "
                           f"EGL_EXT_device_enumeration); leave device unset")
    listing = "; ".join(format_device(d) for d in describe_all())
    raise BackendError(f"there is no device {index}; the devices here are: {listing}")


def format_device(info: DeviceInfo) -> str:
    kind = "software" if info.software else "GPU"
    text = f"{info.index}: {info.renderer} ({kind}, {info.vendor})"
    return text + (f" [unusable: {info.error}]" if info.error else "")


def describe(egl, device: RawDevice, keep_display, is_default: bool) -> DeviceInfo:
    """A DeviceInfo for `device`, from a throwaway context on it (GL strings need one).

    Restores whatever context was current on this thread. keep_display(display) says
    whether the display is one a live fragflow context uses: that one is not
    terminated (a device's display is one handle per process)."""
    from .egl import context_on  # egl.py imports this module at its top

    base = dict(index=device.index, software=device.software, node=device.node,
                cuda_device=device.cuda_device, default=is_default)
    display = egl.GetPlatformDisplay(EGL_PLATFORM_DEVICE_EXT, device.handle, None)
    if not display:
        return DeviceInfo(vendor="?", renderer="?", driver="?",
                          error=egl.error("eglGetPlatformDisplayEXT"), **base)
    saved = (egl.GetCurrentDisplay(), egl.GetCurrentSurface(EGL_DRAW),
             egl.GetCurrentSurface(EGL_READ), egl.GetCurrentContext())
    keep = keep_display(display)
    try:
        context = context_on(egl, display, terminate_on_error=not keep)
    except BackendError as exc:
        return DeviceInfo(vendor="?", renderer="?", driver="?", error=str(exc), **base)
    try:
        get_string = ctypes.CFUNCTYPE(ctypes.c_char_p, c_uint32)(egl.get_proc(b"glGetString"))
        text = lambda name: (get_string(name) or b"?").decode()   # noqa: E731
        return DeviceInfo(vendor=text(GL_VENDOR), renderer=text(GL_RENDERER),
                          driver=text(GL_VERSION), **base)
    finally:
        egl.MakeCurrent(display, None, None, None)
        egl.DestroyContext(display, context)
        if not keep:
            egl.Terminate(display)
        if saved[3]:
            egl.MakeCurrent(*saved)


# Other GL implementations Mesa puts behind the same EGL platforms, chosen by the
# environment before a process makes its context (Mesa reads it once): name -> the
# variables that select it. zink is OpenGL 4.6 over Vulkan (on lavapipe without a GPU;
# Debian: mesa-vulkan-drivers); without LIBGL_ALWAYS_SOFTWARE EGL surfaceless does not
# initialise it.
IMPLEMENTATIONS = {"zink": {"LIBGL_ALWAYS_SOFTWARE": "1", "GALLIUM_DRIVER": "zink"}}

_LIST_DEVICES = """
import dataclasses, json
from fragflow.runtime.context import devices
print(json.dumps([dataclasses.asdict(d) for d in devices()]))
"""


@dataclasses.dataclass(frozen=True)
class Implementation:
    """A GL implementation this host has besides the one this process runs on: its
    name, the environment that selects it ("VAR=value ..."), its devices (DeviceInfo,
    as ff.devices() lists them in a process started with that environment), and why
    there are none ("" when there are)."""

    name: str
    environment: str
    devices: tuple = ()
    error: str = ""


def other_implementations(timeout: float = 60) -> list[Implementation]:
    """The implementations of IMPLEMENTATIONS that work here, each asked in a child
    process started with its environment (a process has one GL implementation, fixed by
    its first context); the one this process already runs is left out."""
    out = []
    for name, env in IMPLEMENTATIONS.items():
        if all(os.environ.get(k) == v for k, v in env.items()):
            continue                     # this process runs it: ff.devices() lists it
        environment = " ".join(f"{k}={v}" for k, v in env.items())
        child_env = {**os.environ, **env}
        child_env.pop("FRAGFLOW_DEVICE", None)
        try:
            result = subprocess.run([sys.executable, "-c", _LIST_DEVICES], env=child_env,
                                    capture_output=True, text=True, timeout=timeout)
            listed = json.loads(result.stdout.strip().splitlines()[-1]) \
                if result.returncode == 0 else None
        except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
            listed, result = None, exc
        if listed is None:
            reason = getattr(result, "stderr", str(result)).strip().splitlines()
            out.append(Implementation(name, environment,
                                      error=reason[-1] if reason else "no devices"))
            continue
        found = tuple(DeviceInfo(**{**d, "default": False}) for d in listed
                      if name in d["renderer"].lower())
        out.append(Implementation(name, environment, found,
                                  "" if found else f"Mesa gave no {name} device "
                                  f"({', '.join(d['renderer'] for d in listed) or 'none'})"))
    return out
