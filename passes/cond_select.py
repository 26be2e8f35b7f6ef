"""A cond whose branches are cheap runs as a select: both branches computed in the graph
around it and `where(pred, true value, false value)` picking each output.

On GL a cond otherwise reads its predicate back and runs the taken branch's plan
(runtime/control_flow.py): a sync and a stage boundary. Where both branches are a few
elementwise ops or views (at most MAX_BRANCH_OPS each, outputs of at most
MAX_SELECT_ELEMENTS elements) and free of side effects (no random draw or user
program; a branch's assigns and prints are values by then, frontend/control_effects.py,
so a select keeps them to the branch taken), computing both costs less than the
sync, and fusion then takes the branches into the kernels around them. The values
are the same: `where` picks elementwise, so a NaN of the branch not taken never
reaches the result. A cond with a constant predicate becomes its taken branch. Every
decision is reported, with the reason for a cond that stays one."""
from __future__ import annotations

from ..ir.ops import control as _control
from ..ir.ops.registry import get_op
from .rewrite import FreshNames, rebuild

MAX_BRANCH_OPS = 16
MAX_SELECT_ELEMENTS = 1 << 20


def _cost(branch) -> str | int:
    """The branch's op count, or why it is not cheap."""
    ops = [n for n in branch.nodes if n.op not in ("placeholder", "constant")]
    for n in ops:
        opdef = get_op(n.op)
        if opdef.family != "elementwise" and opdef.kind != "view":
            return f"its {n.op} '{n.name.rsplit('/', 1)[-1]}' is not elementwise"
        if opdef.stateful:
            return f"its {n.op} has an effect"
    if len(ops) > MAX_BRANCH_OPS:
        return f"{len(ops)} ops, more than {MAX_BRANCH_OPS}"
    return len(ops)


def _why_not(node) -> str | None:
    for v in node.outputs:
        if not v.type.is_static:
            return f"output {v.index} has shape {v.type.shape}, known only at run time"
        if v.type.size > MAX_SELECT_ELEMENTS:
            return f"output {v.index} has {v.type.size} elements"
    for label in ("true_branch", "false_branch"):
        cost = _cost(node.attrs[label])
        if isinstance(cost, str):
            return f"the {label.replace('_', ' ')}: {cost}"
    return None


def _constant_pred(value):
    node = value.node
    return bool(node.attrs["value"]) if node.op == "constant" else None


def _inline(names, new, cond, label: str, args: list) -> list:
    """The branch's outputs computed in `new` from args: its nodes copied in, named
    '<cond>_<branch>_<name>' (names: a FreshNames)."""
    sub = cond.attrs[label]
    mapping = dict(zip(_control.params(sub), args))
    for node in sub.nodes:
        if node.op == "placeholder":
            continue
        base = f"{cond.name}_{label.split('_')[0]}_{node.name.rsplit('/', 1)[-1]}"
        copy = new.add_node(node.op, [mapping[v] for v in node.inputs], dict(node.attrs),
                            exact_name=names.fresh(new, base), scope=cond.scope,
                            source=node.source)
        mapping.update(zip(node.outputs, copy.outputs))
    return [mapping[v] for v in sub.outputs]


def select_conds(graph, report):
    """Every cheap cond as a select, every cond of a constant predicate as its branch."""
    if not any(n.op == "cond" for n in graph.nodes):
        return graph
    names = FreshNames(graph)

    def transform(node, inputs, new, mapping):
        if node.op != "cond":
            return None
        pred, tcaps, fcaps = _control._cond_split(inputs, node.attrs)
        taken = _constant_pred(node.inputs[0])
        if taken is not None:
            label = "true_branch" if taken else "false_branch"
            report.append(f"cond '{node.name}': the predicate is constant, only its "
                          f"{label.replace('_', ' ')} is computed")
            return _inline(names, new, node, label, tcaps if taken else fcaps)
        why = _why_not(node)
        if why is not None:
            report.append(f"cond '{node.name}' runs the taken branch only: {why}")
            return None
        t = _inline(names, new, node, "true_branch", tcaps)
        f = _inline(names, new, node, "false_branch", fcaps)
        report.append(f"cond '{node.name}' as a select: both branches cheap "
                      f"({_cost(node.attrs['true_branch'])} and "
                      f"{_cost(node.attrs['false_branch'])} ops), no sync")
        out = []
        for v, a, b in zip(node.outputs, t, f):
            picked = new.add_node("where", [pred, a, b], {},
                                  exact_name=names.fresh(new, f"{node.name}_select"),
                                  scope=node.scope, source=node.source).outputs[0]
            if picked.type != v.type:       # a scalar pred broadcasts; shapes agree
                picked = new.add_node("reshape", [picked], {"shape": v.type.shape},
                                      exact_name=names.fresh(new, f"{node.name}_select"),
                                      scope=node.scope, source=node.source).outputs[0]
            out.append(picked)
        return out

    return rebuild(graph, transform)
