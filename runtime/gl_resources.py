"""Textures, their pool, and linked shaders (GL program objects: a fragment shader
linked with the shared vertex shader), cached in memory by source.

Importing OpenGL.GL binds PyOpenGL's platform (see runtime/context/_gl.py), so this
module creates the process's GL context (get_context()) before it imports OpenGL.GL:
importing it first thing in a script is harmless, and where no context can be made
the import raises the BackendError that says what was tried.

Both the pool and the linked-shader cache are bounded: linked shaders no live plan uses
are deleted beyond MAX_IDLE_SHADERS (least recently used first), free textures beyond
MAX_FREE_TEXTURES or MAX_FREE_BYTES (least recently released first). Measured before
the bounds (issue 12): one session fed 500 batch sizes held 1,000 linked shaders and 1,086
free textures and grew from 143 MB to 1,180 MB RSS. Every method that touches GL
enters the context's section itself (re-entrant, so nesting in a plan's is cheap)."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections import OrderedDict, defaultdict

import numpy as np

from ..codegen.environment import render
from ..codegen.limits import Limits
from ..ir.errors import BackendError, ShaderCompileError
from .context import get_context

# Creating the context binds PyOpenGL to the backend's platform; its module of entry
# points is OpenGL.GL (desktop) or OpenGL.GLES3 (the egl-es backend), which share names.
GL = get_context().gl
_DESKTOP = get_context().api == "gl"     # OpenGL, not OpenGL ES: glGetTexImage

# linked shaders kept that no live plan uses: ~1 MB each on llvmpipe (measured), and
# Mesa's shader disk cache (runtime/shader_cache.py) makes linking an evicted one again cheap
MAX_IDLE_SHADERS = 64
MAX_FREE_TEXTURES = 64         # free textures the pool keeps for reuse ...
MAX_FREE_BYTES = 128 << 20     # ... and their bytes at most

_FORMATS = {
    # key: (internal format, pixel format, pixel type, numpy dtype)
    "rgba32f": (GL.GL_RGBA32F, GL.GL_RGBA, GL.GL_FLOAT, np.float32),
    "rgba32i": (GL.GL_RGBA32I, GL.GL_RGBA_INTEGER, GL.GL_INT, np.int32),
    # a float16 weight nothing writes (gl_plan.GLVariables): half the memory, the
    # same numbers read; uploads and readbacks in float32, which GL converts exactly
    "rgba16f": (GL.GL_RGBA16F, GL.GL_RGBA, GL.GL_FLOAT, np.float32),
}
_TEXEL_BYTES = {"rgba32f": 16, "rgba32i": 16, "rgba16f": 8}

_GL_ERRORS = {GL.GL_INVALID_ENUM: "GL_INVALID_ENUM", GL.GL_INVALID_VALUE: "GL_INVALID_VALUE",
              GL.GL_INVALID_OPERATION: "GL_INVALID_OPERATION",
              GL.GL_OUT_OF_MEMORY: "GL_OUT_OF_MEMORY",
              GL.GL_INVALID_FRAMEBUFFER_OPERATION: "GL_INVALID_FRAMEBUFFER_OPERATION"}


def check_gl(what: str) -> None:
    """PyOpenGL's per-call checking is off (it costs more than a small draw): the
    runtime asks once per run and names what it was doing."""
    code = GL.glGetError()
    if code != GL.GL_NO_ERROR:
        name = _GL_ERRORS.get(code, hex(code))
        if code == GL.GL_OUT_OF_MEMORY:
            raise BackendError(f"the GPU ran out of memory while {what}")
        raise BackendError(f"OpenGL reported {name} while {what}; this is a fragflow bug, "
                           f"please report it with the graph (ff.dump)")


class Texture:
    """An RGBA texture of one format, with a framebuffer to render into it."""
    __slots__ = ("id", "fbo", "width", "height", "format")
    target = GL.GL_TEXTURE_2D          # what draw() binds it as

    def __init__(self, width: int, height: int, fmt: str):
        internal, pixel_format, pixel_type, _ = _FORMATS[fmt]
        self.width, self.height, self.format = width, height, fmt
        self.id = int(GL.glGenTextures(1))
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.id)
        GL.glTexImage2D(GL.GL_TEXTURE_2D, 0, internal, width, height, 0, pixel_format,
                        pixel_type, None)
        # texelFetch ignores filtering, but integer textures are incomplete without NEAREST
        for pname in (GL.GL_TEXTURE_MIN_FILTER, GL.GL_TEXTURE_MAG_FILTER):
            GL.glTexParameteri(GL.GL_TEXTURE_2D, pname, GL.GL_NEAREST)
        GL.glTexParameteri(GL.GL_TEXTURE_2D, GL.GL_TEXTURE_MAX_LEVEL, 0)
        self.fbo = int(GL.glGenFramebuffers(1))
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, GL.GL_COLOR_ATTACHMENT0,
                                  GL.GL_TEXTURE_2D, self.id, 0)
        status = GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER)
        if status != GL.GL_FRAMEBUFFER_COMPLETE:
            self.delete()
            raise BackendError(f"cannot render into a {width}x{height} {fmt} texture "
                               f"(framebuffer status {status:#x})")

    @property
    def key(self) -> tuple:
        return (self.width, self.height, self.format)

    @property
    def nbytes(self) -> int:
        return self.width * self.height * _TEXEL_BYTES[self.format]

    def upload(self, flat: np.ndarray) -> None:
        """flat: width*height*4 elements of the texture's numpy dtype."""
        _, pixel_format, pixel_type, _ = _FORMATS[self.format]
        GL.glBindTexture(GL.GL_TEXTURE_2D, self.id)
        GL.glTexSubImage2D(GL.GL_TEXTURE_2D, 0, 0, 0, self.width, self.height,
                           pixel_format, pixel_type, flat)

    def readback(self) -> np.ndarray:
        _, pixel_format, pixel_type, dtype = _FORMATS[self.format]
        out = np.empty(self.width * self.height * 4, dtype)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        GL.glReadPixels(0, 0, self.width, self.height, pixel_format, pixel_type, out)
        return out

    def delete(self) -> None:
        GL.glDeleteFramebuffers(1, [self.fbo])
        GL.glDeleteTextures(1, [self.id])


class ArrayTexture:
    """An RGBA32F 2D array texture: a blocked kernel's render targets, one layer each,
    which its stitch kernel reads as one sampler2DArray (one fetch, no branch on the
    target: llvmpipe runs both sides of a branch, so choosing among 8 textures fetched
    from all 8). Owned by the plan that made it, not pooled."""
    __slots__ = ("id", "width", "height", "layers")
    target = GL.GL_TEXTURE_2D_ARRAY
    format = "rgba32f"

    def __init__(self, width: int, height: int, layers: int):
        self.width, self.height, self.layers = width, height, layers
        self.id = int(GL.glGenTextures(1))
        GL.glBindTexture(GL.GL_TEXTURE_2D_ARRAY, self.id)
        GL.glTexImage3D(GL.GL_TEXTURE_2D_ARRAY, 0, GL.GL_RGBA32F, width, height, layers, 0,
                        GL.GL_RGBA, GL.GL_FLOAT, None)
        for pname in (GL.GL_TEXTURE_MIN_FILTER, GL.GL_TEXTURE_MAG_FILTER):
            GL.glTexParameteri(GL.GL_TEXTURE_2D_ARRAY, pname, GL.GL_NEAREST)
        GL.glTexParameteri(GL.GL_TEXTURE_2D_ARRAY, GL.GL_TEXTURE_MAX_LEVEL, 0)

    @property
    def nbytes(self) -> int:
        return self.width * self.height * 16 * self.layers

    def delete(self) -> None:
        GL.glDeleteTextures(1, [self.id])


class RenderTargets:
    """A framebuffer with several color attachments (COLOR_ATTACHMENT0, 1, ..): one draw
    writes them all. Either textures, or the layers of one ArrayTexture. Stands where a
    Texture stands as a launch's output: `fbo`, and readback() of the first one;
    readback_layers() reads them all."""
    __slots__ = ("fbo", "width", "height", "count", "array")
    format = "rgba32f"

    def __init__(self, textures=(), array=None):
        textures = list(textures)
        count = array.layers if array is not None else len(textures)
        first = array if array is not None else textures[0]
        self.width, self.height, self.count = first.width, first.height, count
        self.array = array
        self.fbo = int(GL.glGenFramebuffers(1))
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        attachments = [GL.GL_COLOR_ATTACHMENT0 + j for j in range(count)]
        for j, attachment in enumerate(attachments):
            if array is not None:
                GL.glFramebufferTextureLayer(GL.GL_FRAMEBUFFER, attachment, array.id, 0, j)
            else:
                GL.glFramebufferTexture2D(GL.GL_FRAMEBUFFER, attachment, GL.GL_TEXTURE_2D,
                                          textures[j].id, 0)
        GL.glDrawBuffers(count, attachments)    # per-framebuffer state: set once
        GL.glReadBuffer(GL.GL_COLOR_ATTACHMENT0)
        status = GL.glCheckFramebufferStatus(GL.GL_FRAMEBUFFER)
        if status != GL.GL_FRAMEBUFFER_COMPLETE:
            self.delete()
            raise BackendError(f"cannot render into {count} textures at once "
                               f"(framebuffer status {status:#x})")

    def readback(self) -> np.ndarray:
        out = np.empty(self.width * self.height * 4, np.float32)
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        GL.glReadPixels(0, 0, self.width, self.height, GL.GL_RGBA, GL.GL_FLOAT, out)
        return out

    def readback_layers(self) -> np.ndarray:
        """[attachment, width * height * 4]: each attachment's texels. An array's
        layers in one glGetTexImage on desktop GL (8 glReadPixels cost 0.05 ms more
        than one on llvmpipe); else glReadBuffer chooses the one glReadPixels reads
        (ES 3.0 has no glGetTexImage)."""
        out = np.empty((self.count, self.width * self.height * 4), np.float32)
        if self.array is not None and _DESKTOP:
            GL.glBindTexture(GL.GL_TEXTURE_2D_ARRAY, self.array.id)
            GL.glGetTexImage(GL.GL_TEXTURE_2D_ARRAY, 0, GL.GL_RGBA, GL.GL_FLOAT, out)
            return out
        GL.glBindFramebuffer(GL.GL_FRAMEBUFFER, self.fbo)
        for j in range(self.count):
            GL.glReadBuffer(GL.GL_COLOR_ATTACHMENT0 + j)
            GL.glReadPixels(0, 0, self.width, self.height, GL.GL_RGBA, GL.GL_FLOAT, out[j])
        GL.glReadBuffer(GL.GL_COLOR_ATTACHMENT0)
        return out

    def delete(self) -> None:
        GL.glDeleteFramebuffers(1, [self.fbo])


class TexturePool:
    """Textures by (width, height, format): plans take them when they are built and
    give them back when they are released, so a rebuilt plan allocates nothing. At most
    max_free free textures (and max_free_bytes) are kept; beyond that the least recently
    released are deleted, so varying shapes cannot grow GPU memory without bound."""

    def __init__(self, section=None, max_free: int = MAX_FREE_TEXTURES,
                 max_free_bytes: int = MAX_FREE_BYTES):
        self.gl = section if section is not None else get_context().section
        self.max_free, self.max_free_bytes = max_free, max_free_bytes
        self._free = defaultdict(list)     # key -> free textures, last released last
        self._order: OrderedDict = OrderedDict()   # free texture -> None, oldest first
        self._free_bytes = 0
        self.created = 0
        self.deleted = 0

    def acquire(self, key: tuple) -> Texture:
        with self.gl:
            free = self._free.get(key)
            if free:
                texture = free.pop()
                del self._order[texture]
                self._free_bytes -= texture.nbytes
                return texture
            texture = Texture(*key)
            self.created += 1
            return texture

    def release(self, texture: Texture) -> None:
        with self.gl:
            self._free[texture.key].append(texture)
            self._order[texture] = None
            self._free_bytes += texture.nbytes
            self.shrink(self.max_free, self.max_free_bytes)

    def shrink(self, max_free: int, max_free_bytes: int) -> int:
        """Delete free textures, least recently released first, until at most max_free
        (and max_free_bytes) remain; returns how many were deleted."""
        count = 0
        with self.gl:
            while self._order and (len(self._order) > max_free or
                                   self._free_bytes > max_free_bytes):
                texture, _ = self._order.popitem(last=False)
                same_key = self._free[texture.key]
                same_key.remove(texture)
                if not same_key:
                    del self._free[texture.key]
                self._free_bytes -= texture.nbytes
                texture.delete()
                count += 1
            self.deleted += count
        return count

    def trim(self) -> int:
        """Delete every texture nobody holds; returns how many."""
        return self.shrink(0, 0)

    def stats(self) -> dict:
        """live: textures that exist (held or free); free: kept for reuse, and bytes."""
        with self.gl:
            return {"live": self.created - self.deleted, "free": len(self._order),
                    "free_bytes": self._free_bytes}


def vertex_shader(limits) -> str:
    """The shared vertex shader (templates/vertex.glsl.j2) in the limits' dialect (its
    version line; a vertex shader needs no precision statements: highp is its default)."""
    return render("vertex.glsl.j2", dialect=limits)


def numbered(source: str) -> str:
    return "\n".join(f"{i:4d}  {line}" for i, line in enumerate(source.splitlines(), 1))


def _text(log) -> str:
    """An info log as text (PyOpenGL returns bytes or str depending on the platform)."""
    return log.decode(errors="replace") if isinstance(log, bytes) else str(log)


def _compile(kind, source: str, name: str, user_code=None) -> int:
    log_path = os.environ.get("FRAGFLOW_SHADER_LOG")
    if log_path:        # one line per shader compiled: its sha256, its kernel's name
        with open(log_path, "a", encoding="utf-8") as f:
            f.write(f"{hashlib.sha256(source.encode()).hexdigest()} {name}\n")
    shader = GL.glCreateShader(kind)
    GL.glShaderSource(shader, source)
    GL.glCompileShader(shader)
    if not GL.glGetShaderiv(shader, GL.GL_COMPILE_STATUS):
        log = _text(GL.glGetShaderInfoLog(shader))
        GL.glDeleteShader(shader)
        if user_code is not None:
            raise ShaderCompileError(user_code_error(log, user_code, source))
        raise ShaderCompileError(f"kernel {name} did not compile:\n{log.strip()}\n"
                                 f"source:\n{numbered(source)}")
    return shader


# Mesa writes "0:12(5): error: ...", NVIDIA "0(12) : error ...": the source line is the
# number after the first "0:" or "0(".
_LOG_LINE = re.compile(r"^\s*(?:ERROR:\s*)?\d+[:(](\d+)\)?(?:\((\d+)\))?\s*:\s*")


def user_code_error(log: str, user_code, source: str) -> str:
    """The driver's messages with line numbers in the user's GLSL, and the lines."""
    program, first, text = user_code
    user_lines = text.splitlines()
    out = [f"program '{program}': its GLSL did not compile:"]
    for line in log.strip().splitlines():
        match = _LOG_LINE.match(line)
        if match and first <= int(match.group(1)) < first + len(user_lines):
            n = int(match.group(1)) - first + 1
            column = f", column {match.group(2)}" if match.group(2) else ""
            out.append(f"  line {n}{column}: {line[match.end():]}")
            out.append(f"  {n:4d} | {user_lines[n - 1].rstrip()}")
        elif "warning" not in line.lower():
            out.append(f"  {line}  (in fragflow's part of the shader)")
    out.append("the whole shader:\n" + numbered(source))
    return "\n".join(out)


_VALIDATED: set = set()     # sources glslangValidator accepted in this process


def validate_with_glslang(source: str, name: str, user_code=None) -> None:
    """FRAGFLOW_VALIDATE_SHADERS=1: a second, strict compiler (Khronos' reference
    front end) checks every fragment shader before the driver compiles it, so that a
    shader llvmpipe accepts but a stricter GPU driver would reject fails here too."""
    if source in _VALIDATED:
        return
    tool = shutil.which("glslangValidator")
    if tool is None:
        raise BackendError("FRAGFLOW_VALIDATE_SHADERS is set but glslangValidator is not "
                           "on PATH (Debian/Ubuntu: apt-get install glslang-tools)")
    result = subprocess.run([tool, "--stdin", "-S", "frag"], input=source,
                            capture_output=True, text=True, timeout=60)
    if result.returncode != 0:
        log = "\n".join(line for line in (result.stdout + result.stderr).splitlines()
                        if line.strip() and line.strip() != "stdin" and
                        not re.search(r"compilation terminated|\d+ compilation errors",
                                      line))
        if user_code is not None:
            first, _, rest = user_code_error(log, user_code, source).partition("\n")
            raise ShaderCompileError(f"{first.rstrip(':')} (glslangValidator; "
                                     f"FRAGFLOW_VALIDATE_SHADERS is set):\n{rest}")
        raise ShaderCompileError(f"kernel {name} was rejected by glslangValidator "
                                 f"(FRAGFLOW_VALIDATE_SHADERS is set):\n{log.strip()}\n"
                                 f"source:\n{numbered(source)}")
    _VALIDATED.add(source)


class LinkedShaderCache:
    """Linked shaders (GL program objects) by kernel body (the source without its header
    comment), in this process's memory; Mesa's on-disk cache of compiled shaders, across
    processes, is runtime/shader_cache.py's.

    Plans pin() the shaders they launch and unpin() them when released; evict()
    deletes the least recently used shaders that no plan pins beyond max_idle. Only
    evict() deletes, so a shader get() returned stays valid until the caller evicts."""

    def __init__(self, section=None, limits=None, max_idle: int = MAX_IDLE_SHADERS):
        self.gl = section if section is not None else get_context().section
        # the vertex shader's dialect: the context's unless given
        self.limits = Limits.from_context(get_context().info()) if limits is None else limits
        self.max_idle = max_idle
        self._shaders: OrderedDict = OrderedDict()    # source -> id, least recent first
        self._pins: dict = {}                         # source -> plans launching it
        self._vertex = None
        self.compiles = 0
        self.deleted = 0

    def get(self, kernel) -> int:
        key = kernel.compiled_source
        with self.gl:
            shader = self._shaders.get(key)
            if shader is None:
                shader = self._link(kernel)
                self._shaders[key] = shader
            else:
                self._shaders.move_to_end(key)
            return shader

    def pin(self, kernels) -> None:
        """A plan launches these kernels' shaders: keep them until unpin()."""
        with self.gl:
            for kernel in kernels:
                key = kernel.compiled_source
                self._pins[key] = self._pins.get(key, 0) + 1

    def unpin(self, kernels) -> None:
        with self.gl:
            for kernel in kernels:
                key = kernel.compiled_source
                count = self._pins.get(key, 0) - 1
                if count > 0:
                    self._pins[key] = count
                else:
                    self._pins.pop(key, None)

    def pinned(self) -> int:
        return len(self._pins)

    def evict(self, max_idle: int | None = None) -> int:
        """Delete the least recently used unpinned shaders beyond max_idle (default
        self.max_idle); returns how many were deleted."""
        limit = self.max_idle if max_idle is None else max_idle
        with self.gl:
            idle = [key for key in self._shaders if key not in self._pins]
            doomed = idle[:max(0, len(idle) - limit)]
            for key in doomed:
                GL.glDeleteProgram(self._shaders.pop(key))
            self.deleted += len(doomed)
            return len(doomed)

    def _link(self, kernel) -> int:
        if os.environ.get("FRAGFLOW_VALIDATE_SHADERS"):
            validate_with_glslang(kernel.compiled_source, kernel.name,
                                  kernel.compiled_user_code)
        if self._vertex is None:
            self._vertex = _compile(GL.GL_VERTEX_SHADER, vertex_shader(self.limits),
                                    "vertex")
        fragment = _compile(GL.GL_FRAGMENT_SHADER, kernel.compiled_source, kernel.name,
                            kernel.compiled_user_code)
        linked = GL.glCreateProgram()
        GL.glAttachShader(linked, self._vertex)
        GL.glAttachShader(linked, fragment)
        GL.glLinkProgram(linked)
        GL.glDetachShader(linked, fragment)
        GL.glDeleteShader(fragment)
        if not GL.glGetProgramiv(linked, GL.GL_LINK_STATUS):
            log = _text(GL.glGetProgramInfoLog(linked))
            GL.glDeleteProgram(linked)
            raise ShaderCompileError(f"kernel {kernel.name} did not link:\n{log.strip()}\n"
                                     f"source:\n{numbered(kernel.compiled_source)}")
        GL.glUseProgram(linked)
        for unit, binding in enumerate(kernel.inputs):     # samplers never change units
            GL.glUniform1i(GL.glGetUniformLocation(linked, binding.sampler), unit)
        self.compiles += 1
        return linked

    def uniform_setters(self, shader: int, kernel) -> tuple:
        """(setter, location, value) per uniform a launch sets (values can differ between
        kernels that share one linked shader)."""
        setters = {"float": GL.glUniform1f, "int": GL.glUniform1i, "bool": GL.glUniform1i,
                   "uint": GL.glUniform1ui}
        out = []
        with self.gl:
            for name, (glsl_type, value) in kernel.uniforms.items():
                location = GL.glGetUniformLocation(shader, name)
                if location >= 0:        # the compiler drops uniforms the code never reads
                    out.append((setters[glsl_type], location, value))
        return tuple(out)

    def __len__(self):
        return len(self._shaders)

    def clear(self) -> None:
        with self.gl:
            for shader in self._shaders.values():
                GL.glDeleteProgram(shader)
            self.deleted += len(self._shaders)
            self._shaders.clear()
            self._pins.clear()
            if self._vertex is not None:
                GL.glDeleteShader(self._vertex)
                self._vertex = None
