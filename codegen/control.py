"""Control flow (ir/ops/control.py: while_loop, cond, scan) has no kernel of its own:
the GL runtime runs a loop's body or a branch as a plan of its own, replayed per
iteration (runtime/control_flow.py ControlFlowPlan, which the compile driver builds
for such graphs; ff.webgl.export and the plan cache do likewise). lower() called on a
whole graph holding one is a clear error, not a KeyError."""
from __future__ import annotations

from ..ir.errors import FragflowError


class ControlFlowOnGLError(FragflowError, NotImplementedError):
    """A control-flow op where a graph must lower to one list of kernels."""


def lower_node(node, layouts, name):
    raise ControlFlowOnGLError(
        f"{node.where()}: {node.op} has no kernel: a Session on GL runs its sub-graphs "
        f"as plans of their own (runtime/control_flow.py; ff.webgl.export does the same), "
        f"but lower() on the whole graph gives one list of kernels, which cannot hold it")
