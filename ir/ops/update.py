"""fused_update: elementwise steps with several results, computed by one kernel that
writes one render target per result.

It is what passes/fuse_updates.py makes of an optimizer's update of a variable: Adam's
new m, new v and new variable are one expression DAG over (grad, var, m, v, lr, ...)
in which the new variable reads the new m and v. As three fused_elementwise kernels
the DAG's shared part runs three times and m, v are written and read back; as one
fused_update it runs once and writes the three results in the same draw.

    fused_update(*operands) {steps, results}

steps are those of fused_elementwise (ir/ops/fused.py): (op, attrs, args) with args
("in", k) or ("step", j). results: the indices of the steps that are outputs, in
output order. All results have one type (one draw writes them, so one viewport)."""
from __future__ import annotations

from ..errors import AttrError
from .fused import eval_steps, infer_step, reference_step
from .registry import REQUIRED, OpDef, register


def every_step(steps, operands, run) -> list:
    """Every step's result, in order (eval_steps gives the last one only)."""
    results = []

    def record(op, attrs, args):
        results.append(run(op, attrs, args))
        return results[-1]
    eval_steps(steps, operands, record)
    return results


def _chosen(attrs, values) -> list:
    indices = tuple(attrs["results"])
    if not indices:
        raise AttrError("fused_update needs at least one result")
    for j in indices:
        if not isinstance(j, int) or not 0 <= j < len(values):
            raise AttrError(f"result {j!r} is not a step index (there are "
                            f"{len(values)} steps)")
    return [values[j] for j in indices]


def _infer(types, attrs):
    chosen = _chosen(attrs, every_step(attrs["steps"], types, infer_step))
    if any(t != chosen[0] for t in chosen):
        raise AttrError(f"the results of one fused_update must have one type, got "
                        f"{', '.join(str(t) for t in chosen)}")
    return chosen


def _reference(arrays, attrs):
    return _chosen(attrs, every_step(attrs["steps"], arrays, reference_step))


register(OpDef(
    "fused_update", "update", _infer, _reference,
    attrs={"steps": REQUIRED, "results": REQUIRED, "nodes": ()}, hidden_attrs=("nodes",),
    no_gradient="made after autodiff (passes/fuse_updates.py) from assigned values",
    tf="— (TensorFlow's fused training ops: ApplyAdam, ApplyMomentum, ...)",
    doc="Elementwise steps with several results (an optimizer's update of a variable "
        "and its slots) in one kernel writing one render target per result."))
