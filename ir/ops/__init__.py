"""Op definitions, one module per family. Importing this package registers them all."""
from . import (conv, elementwise, autodiff_ops, image, matmul, random,  # noqa: F401
               reduce, shape, state, structure)                  # (registration)
from . import loss  # noqa: F401,E402  (registration)
from . import fused, program, update  # noqa: F401,E402  (fused, update: after
#                                             the ops they fuse)
from .registry import REQUIRED, OpDef, all_ops, get_op, register

__all__ = ["OpDef", "REQUIRED", "all_ops", "get_op", "register",
           "autodiff_ops", "conv", "elementwise", "image", "matmul", "random", "reduce", "shape",
           "state", "structure"]
