"""Control flow (ir/ops/control.py: while_loop, cond, scan) has no kernel of its own:
a loop's body would run as a plan of its own, replayed per iteration (issue 25). Until
the GL runtime does that, lowering one is a clear error, not a KeyError."""
from __future__ import annotations

from ..ir.errors import FragflowError


class ControlFlowOnGLError(FragflowError, NotImplementedError):
    """A control-flow op in a graph compiled for GL, which cannot run it yet."""


def lower_node(node, layouts, name):
    raise ControlFlowOnGLError(
        f"{node.where()}: {node.op} runs on backend='numpy' only for now (the GL backend "
        f"cannot run control flow yet: issue 25); use ff.Session(graph, backend='numpy'), "
        f"or build the loop unrolled with Python")
