"""Reverse-mode autodiff (passes/autodiff/engine.py) and the gradient rules, one module
per op family (passes/autodiff/<family>.py, matching ir/ops/<family>.py)."""
from . import (conv, elementwise, fused, gradient, image, matmul, program,  # noqa: F401
               random, reduce, shape, structure)                     # (rules)
from .engine import gradients
from .registry import GRADIENTS, gradient as register_gradient

__all__ = ["gradients", "GRADIENTS", "register_gradient"]
