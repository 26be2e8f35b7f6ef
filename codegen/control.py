"""Control flow (ir/ops/control.py: while_loop, cond, scan) has no kernel of its own:
the GL runtime runs a loop's body or a branch as a plan of its own, replayed per
iteration (runtime/control_flow.py ControlFlowPlan, which the compile driver builds
for such graphs). What lowers a whole graph to one kernel list (the WebGL export, the
plan cache) cannot hold one: lowering it is a clear error, not a KeyError."""
from __future__ import annotations

from ..ir.errors import FragflowError


class ControlFlowOnGLError(FragflowError, NotImplementedError):
    """A control-flow op where a graph must lower to one list of kernels."""


def lower_node(node, layouts, name):
    raise ControlFlowOnGLError(
        f"{node.where()}: {node.op} has no kernel: a Session on GL runs its sub-graphs "
        f"as plans of their own (runtime/control_flow.py), but a graph lowered to one "
        f"list of kernels (ff.webgl.export, the plan cache) cannot hold it yet")
