"""The process-wide GL resources: the context, the texture pool, the linked-shader cache.

Device.get() creates the context first and only then imports the modules that import
OpenGL.GL, so PyOpenGL binds the platform the chosen backend needs.

Every use of the pool, the shader cache or any texture happens inside
``with device.gl:`` (the context's GLSection: the process-wide GL lock, and the
context current on the calling thread), from whichever thread."""
from __future__ import annotations

import ctypes
import threading

from ..codegen.environment import use_bytecode_cache
from ..codegen.limits import Limits
from ..codegen.tuning import Tuning
from .context import check_device, get_context
from .shader_cache import cache_dir

_lock = threading.Lock()


class Device:
    _instance = None

    def __init__(self, device: int | None = None):
        self.context = get_context(device)
        use_bytecode_cache(cache_dir() / "templates")  # with Mesa's: a fast first run
        self.gl = self.context.section
        # gl_resources imports OpenGL: only now that the context exists
        from .gl_resources import LinkedShaderCache, TexturePool
        # the dialect and limits lowering plans with (codegen/limits.py)
        self.limits = Limits.from_context(self.context.info())
        # the knobs kernel choice follows on this device (codegen/tuning)
        self.tuning = Tuning.for_device(self.context.info())
        self.max_texture_size = self.limits.max_texture_size
        self.pool = TexturePool(self.gl)
        self.shaders = LinkedShaderCache(self.gl, self.limits)

    @classmethod
    def get(cls, index: int | None = None) -> Device:
        """The process's device. index: an EGL device index (ff.devices()); the first
        call fixes it for the process (None: FRAGFLOW_DEVICE, else the default GPU,
        else llvmpipe), and a later call naming another index raises BackendError:
        one process, one GL context (see runtime/context.get_context)."""
        device = cls._instance
        if device is None:
            with _lock:              # two threads' first sessions make one device
                if cls._instance is None:
                    cls._instance = cls(index)
                    return cls._instance
                device = cls._instance
        if index is not None:
            check_device(device.context, index)
        return device

    def stats(self) -> dict:
        """What the process holds on the GPU: textures (in use and pooled), linked shaders."""
        with self.gl:
            pool = self.pool.stats()
            return {"live_textures": pool["live"], "pool_textures": pool["free"],
                    "pool_bytes": pool["free_bytes"], "shaders": len(self.shaders),
                    "pinned_shaders": self.shaders.pinned()}

    @staticmethod
    def trim_heap() -> None:
        """Give the heap memory freed by deleted GL objects back to the OS. glibc keeps
        it mapped otherwise: after 500 batch sizes and close(), RSS went from 502 to
        444 MB with this (measured, llvmpipe). Elsewhere a no-op."""
        try:
            ctypes.CDLL(None).malloc_trim(0)
        except (OSError, AttributeError):     # not glibc
            pass
