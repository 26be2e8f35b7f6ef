"""Reverse-mode autodiff (passes/autodiff/engine.py) and the gradient rules: those op
records carry (OpDef.gradient: every elementwise op's), and one module per other op
family (passes/autodiff/<family>.py, matching ir/ops/<family>.py)."""
from . import (  # noqa: F401  (the rules, registered on import)
    autodiff_ops,
    conv,
    fused,
    image,
    loss,
    matmul,
    program,
    random,
    reduce,
    shape,
    structure,
)
from .engine import gradients
from .registry import GRADIENTS, add_record_rules, gradient as register_gradient

add_record_rules()

__all__ = ["GRADIENTS", "gradients", "register_gradient"]
