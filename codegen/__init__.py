"""fragflow.codegen: lowering compiled graphs to GLSL kernels (Jinja templates)."""
from .kernel import Binding, Kernel, LoweredGraph
from .layout import Layout, layout_for
from .lower import lower

__all__ = ["Binding", "Kernel", "LoweredGraph", "Layout", "layout_for", "lower"]
