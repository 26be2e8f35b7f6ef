"""Lowering a compiled graph to a Program: a kernel per compute node (one per fused
group once fusion runs), views for the ops that only reshape, uploads for feeds and
constants, and the variables' textures."""
from __future__ import annotations

from ..ir.graph import Graph
from ..ir.ops.registry import get_op
from . import (conv, elementwise, fused, gradient, image, matmul, program, random, reduce,
               shape, structure)
from .kernel import Program
from .layout import layout_for

# Ops that keep row-major order: their output is the same texture, seen another way.
VIEW_OPS = {"reshape", "expand_dims", "squeeze", "identity", "reshape_like",
            "stop_gradient", "custom_gradient"}

# op family (ir/ops/<family>.py) -> lowering of one node to a Kernel
LOWERINGS = {
    "elementwise": elementwise.lower_node,
    "reduce": reduce.lower_node,
    "matmul": matmul.lower_node,
    "shape": shape.lower_node,
    "gradient": gradient.lower_node,
    "conv": conv.lower_node,
    "structure": structure.lower_node,
    "image": image.lower_node,
    "random": random.lower_node,
    "fused": fused.lower_node,
    "program": program.lower_node,
}


def lower(graph: Graph, max_texture_size: int) -> Program:
    layouts = {}
    for node in graph.nodes:
        for v in node.outputs:
            layouts[v.name] = layout_for(v.type, max_texture_size, f"{node.where()}'s output")
    program = Program(layouts=layouts, feeds=[], constants={}, variables={}, steps=[],
                      assigns=[], outputs=[v.name for v in graph.outputs])
    for node in graph.nodes:
        out = node.outputs[0].name if node.outputs else None
        if node.op in ("placeholder", "run_counter"):   # the session feeds run_counter
            program.feeds.append(out)
        elif node.op == "constant":
            program.constants[out] = node.attrs["value"]
        elif node.op == "variable":
            program.variables[out] = node.name
        elif node.op in VIEW_OPS:
            program.steps.append(("alias", out, node.inputs[0].name))
        elif any(layouts[v.name].size == 0 for v in node.outputs):
            program.steps.append(("empty", out))    # nothing to compute
        elif node.op == "assign":
            # The new value is copied into a texture of the run's own, which replaces
            # the variable's when the run ends (GL cannot read and write one texture).
            kernel = elementwise.lower_copy(node, layouts, f"k{len(program.kernels)}")
            program.steps.append(("kernel", kernel))
            program.assigns.append((node.inputs[0].node.name, out))
        else:
            family = get_op(node.op).family
            lowered = LOWERINGS[family](node, layouts, f"k{len(program.kernels)}")
            # a node may run as several kernels (a blocked matmul and its stitch); the
            # lowering registers the layouts of the values between them in `layouts`
            for kernel in lowered if isinstance(lowered, list) else [lowered]:
                program.steps.append(("kernel", kernel))
    return program
