"""The process-wide GL resources: the context, the texture pool, the program cache.

Device.get() creates the context first and only then imports the modules that import
OpenGL.GL, so PyOpenGL binds the platform the chosen backend needs."""
from __future__ import annotations

from .context import get_context


class Device:
    _instance = None

    def __init__(self):
        self.context = get_context()
        from ..codegen.environment import use_bytecode_cache
        from .shader_cache import cache_dir
        use_bytecode_cache(cache_dir() / "templates")  # with Mesa's: a fast first run
        from .gl_resources import ProgramCache, TexturePool
        self.max_texture_size = self.context.info()["max_texture_size"]
        self.pool = TexturePool()
        self.programs = ProgramCache()

    @classmethod
    def get(cls) -> "Device":
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance
