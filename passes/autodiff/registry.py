"""Gradient rules by op name. A rule is `rule(node, dy) -> [gradient per input]`
where dy is the gradient of the node's output (a list, one per output, for ops with
several outputs; the engine fills missing ones with zeros). A None entry means "no
gradient to that input". Rules build with the ir op builders, so gradients are graph
tensors that can themselves be differentiated."""
from __future__ import annotations

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
