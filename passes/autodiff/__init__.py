"""Reverse-mode autodiff (passes/autodiff/engine.py) and the gradient rules: those op
records carry (OpDef.gradient: every elementwise op's), and one module per other op
family (passes/autodiff/<family>.py, matching ir/ops/<family>.py), whose rules register
on import (registry.gradient)."""
from importlib import import_module
from importlib.util import find_spec

from ...ir.ops.registry import FAMILIES
from .engine import gradients
from .registry import GRADIENTS, add_record_rules, gradient as register_gradient

for _family in sorted(FAMILIES):
    if find_spec(f"{__name__}.{_family}"):
        import_module(f"{__name__}.{_family}")      # registers the family's rules

add_record_rules()

__all__ = ["GRADIENTS", "gradients", "register_gradient"]
