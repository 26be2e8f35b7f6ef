"""Lowering of the conv op family to templates/conv.glsl.j2."""
from __future__ import annotations

from ..ir.errors import FragflowError


def lower_node(node, layouts, prefix):
    raise FragflowError(f"{node.where()}: no GL kernel for '{node.op}' yet")
