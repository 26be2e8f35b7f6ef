"""fragflow.runtime: GL contexts, textures, linked shaders and plans; the numpy executor.

Nothing here imports OpenGL at import time: PyOpenGL binds its platform on first import,
and only runtime.context knows which one the chosen backend needs. The GL modules
(gl_resources, gl_plan) are imported by whoever needs them after get_context()."""
from .context import get_context
from .numpy_executor import NumpyPlan, NumpyVariables

__all__ = ["NumpyPlan", "NumpyVariables", "get_context"]
