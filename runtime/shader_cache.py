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
import warnings
from pathlib import Path

# Mesa >= 20.3 reads MESA_SHADER_CACHE_DIR; older Mesa reads MESA_GLSL_CACHE_DIR
# (newer Mesa only warns about the old name when the new one is unset).
_MESA_VARS = ("MESA_SHADER_CACHE_DIR", "MESA_GLSL_CACHE_DIR")


def cache_dir() -> Path:
    """fragflow's cache directory: $FRAGFLOW_CACHE_DIR, else $XDG_CACHE_HOME/fragflow,
    else ~/.cache/fragflow. Not created here."""
    explicit = os.environ.get("FRAGFLOW_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
    return Path(base).expanduser() / "fragflow"


def configure_shader_cache() -> str:
    """Point Mesa's shader disk cache at <cache_dir()>/mesa and return the directory in use.

    Must run before the first GL context of the process exists: Mesa reads these
    variables when the driver screen is created. A directory the user chose through
    MESA_SHADER_CACHE_DIR / MESA_GLSL_CACHE_DIR wins and is returned unchanged.
    Returns "" when the cache directory cannot be created (Mesa then uses its default).
    """
    for var in _MESA_VARS:
        if os.environ.get(var):
            return os.environ[var]
    mesa_dir = cache_dir() / "mesa"
    try:
        mesa_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        # A read-only home must not stop fragflow from running; it only runs slower.
        warnings.warn(f"fragflow: cannot create shader cache {mesa_dir}: {exc}", stacklevel=2)
        return ""
    for var in _MESA_VARS:
        os.environ[var] = str(mesa_dir)
    return str(mesa_dir)
