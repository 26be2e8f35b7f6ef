"""Op definitions, one module per family. Importing this package registers them all."""
from . import elementwise, matmul, reduce, shape, state  # noqa: F401  (registration)
from .registry import REQUIRED, OpDef, all_ops, get_op, register

__all__ = ["OpDef", "REQUIRED", "all_ops", "get_op", "register",
           "elementwise", "matmul", "reduce", "shape", "state"]
