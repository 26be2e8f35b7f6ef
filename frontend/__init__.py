"""fragflow.frontend: what users write — tensors, op functions, sessions."""
from . import ops
from .ops import *  # noqa: F401,F403
from .session import CompiledFunction, Session
from .tensor import Tensor, Variable

__all__ = list(ops.__all__) + ["Session", "CompiledFunction"]
