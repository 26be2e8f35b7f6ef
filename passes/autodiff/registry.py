"""Gradient rules by op name. A rule is `rule(node, dy) -> [gradient per input]`
where dy is the gradient of the node's output (a list, one per output, for ops with
several outputs; the engine fills missing ones with zeros). A None entry means "no
gradient to that input". Rules build with the ir op builders, so gradients are graph
tensors that can themselves be differentiated.

An op's record may carry its rule (OpDef.gradient, e.g. the one-input elementwise ops);
`add_record_rules` adds those to GRADIENTS, so GRADIENTS holds every rule."""
from __future__ import annotations

from ...ir.ops.registry import all_ops, get_op

GRADIENTS: dict = {}


def gradient(*ops):
    """Decorator: register a rule for one or more ops."""
    def register(rule):
        for op in ops:
            if op in GRADIENTS:
                raise ValueError(f"two gradient rules for '{op}'")
            GRADIENTS[op] = rule
        return rule
    return register


def add_record_rules() -> None:
    """Registers the rules that op records carry (OpDef.gradient) not registered yet;
    an op with a rule in both places is an error."""
    for name, opdef in all_ops().items():
        if opdef.gradient is not None and GRADIENTS.get(name) is not opdef.gradient:
            gradient(name)(opdef.gradient)


def rule_for(op: str):
    """The gradient rule of op, or None."""
    rule = GRADIENTS.get(op)
    if rule is None:
        rule = get_op(op).gradient
    return rule
