"""Where fragflow keeps its on-disk caches, and pointing Mesa's shader cache there.

Mesa (llvmpipe, and the hardware drivers) can keep compiled shaders on disk, keyed by
source and driver. Pointing that cache into fragflow's own directory keeps it next to
the rest of fragflow's state and lets a user wipe both at once.

Measured on llvmpipe (Mesa 22.3.6, LLVM 15, 2 cores, EGL surfaceless), six distinct
fragment shaders compiled, linked and drawn once (llvmpipe JITs at first draw), each
a fresh process with the same cache directory:
  6 texelFetch+sin steps per shader:  first process 193 ms/shader, second 4 ms/shader
  40 steps per shader:                first process 1033 ms/shader, second 7 ms/shader
With MESA_SHADER_CACHE_DISABLE=true every process pays the first-process cost.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

# Mesa >= 20.3 reads MESA_SHADER_CACHE_DIR; older Mesa reads MESA_GLSL_CACHE_DIR
# (newer Mesa only warns about the old name when the new one is unset).
_MESA_VARS = ("MESA_SHADER_CACHE_DIR", "MESA_GLSL_CACHE_DIR")
_DISABLE_VARS = ("MESA_SHADER_CACHE_DISABLE", "MESA_GLSL_CACHE_DISABLE")
_COST = "every new process compiles its shaders again (~80-1000 ms each on llvmpipe)"

_note = ""     # why the last configure_shader_cache() could not give Mesa a cache


def cache_dir() -> Path:
    """fragflow's cache directory: $FRAGFLOW_CACHE_DIR, else $XDG_CACHE_HOME/fragflow,
    else ~/.cache/fragflow. Not created here."""
    explicit = os.environ.get("FRAGFLOW_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(base).expanduser() / "fragflow"


def unusable(directory: Path) -> str:
    """Why Mesa could not keep its cache in directory ("" when it can): the directory
    is created if missing, then a file is written into it and removed."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".fragflow-probe-"):
            pass
    except OSError as exc:
        return f"{type(exc).__name__}: {exc.strerror or exc}"
    return ""


def configure_shader_cache() -> str:
    """Point Mesa's shader disk cache at <cache_dir()>/mesa and return the directory in use.

    Must run before the first GL context of the process exists: Mesa reads these
    variables when the driver screen is created. A directory the user chose through
    MESA_SHADER_CACHE_DIR / MESA_GLSL_CACHE_DIR wins and is returned unchanged when it
    is usable. Returns "" when no usable directory is in force: fragflow's own cannot
    be written (Mesa then tries its default, ~/.cache/mesa_shader_cache), the user's
    choice cannot be written, or the cache is disabled; shader_cache_note() says which,
    and a warning says so once (fragflow still runs, only slower).
    """
    global _note
    _note = ""
    for var in _DISABLE_VARS:
        if os.environ.get(var, "").strip().lower() in ("1", "true", "yes"):
            _note = f"disabled by {var}={os.environ[var]}: {_COST}"
            return ""
    for var in _MESA_VARS:
        if os.environ.get(var):
            chosen = os.environ[var]
            why = unusable(Path(chosen).expanduser())
            if not why:
                return chosen
            _note = f"{var}={chosen} cannot be used ({why}): Mesa caches nothing; {_COST}"
            warnings.warn(f"fragflow: shader cache {_note}", stacklevel=2)
            return ""
    mesa_dir = cache_dir() / "mesa"
    why = unusable(mesa_dir)
    if why:
        # A read-only home must not stop fragflow from running; it only runs slower.
        where = "FRAGFLOW_CACHE_DIR" if os.environ.get("FRAGFLOW_CACHE_DIR") else \
            "fragflow's cache directory"
        _note = (f"{where} {mesa_dir} cannot be used ({why}); Mesa uses its default "
                 f"location if it can (set FRAGFLOW_CACHE_DIR to a writable directory)")
        warnings.warn(f"fragflow: shader cache: {_note}", stacklevel=2)
        return ""
    for var in _MESA_VARS:
        os.environ[var] = str(mesa_dir)
    return str(mesa_dir)


def shader_cache_note() -> str:
    """"" when the last configure_shader_cache() gave Mesa a usable cache directory;
    otherwise what is wrong with it and what that costs (gl_info()["shader_cache_note"])."""
    return _note
