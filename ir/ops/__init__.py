"""Op definitions, one module per family (registry.FAMILIES). Importing this package
registers them all."""
from importlib import import_module

from .registry import FAMILIES, REQUIRED, OpDef, all_ops, get_op, register

for _family in FAMILIES:
    import_module(f"{__name__}.{_family}")      # registers the family's ops

__all__ = ["FAMILIES", "OpDef", "REQUIRED", "all_ops", "get_op", "register", *FAMILIES]
