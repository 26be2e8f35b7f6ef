"""The op registry: one OpDef per op, declared in ir/ops/<family>.py.

An OpDef is the single definition of an op: its attrs (with defaults), its type
inference and its numpy reference. Gradient rules (passes/autodiff) and kernels
(codegen/templates/<family>.glsl.j2) are looked up by the same name.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..errors import AttrError, GraphError
from ..types import TensorType

REQUIRED = object()   # an attr default meaning "must be given"


@dataclass(frozen=True)
class OpDef:
    name: str
    family: str                       # ir/ops/<family>.py, templates/<family>.glsl.j2
    infer: Callable                   # (input types, attrs) -> TensorType | [TensorType]
    reference: Callable               # (numpy inputs, attrs) -> array | [arrays]
    attrs: dict = field(default_factory=dict)    # name -> default (or REQUIRED)
    num_inputs: int | None = None     # None: any number
    differentiable: bool = True       # False: no gradient flows (comparisons, argmax...)
    stateful: bool = False            # placeholders, variables, assign: never folded
    doc: str = ""

    def check_attrs(self, given: dict) -> dict:
        unknown = set(given) - set(self.attrs)
        if unknown:
            raise AttrError(f"unknown attribute(s) {sorted(unknown)}; "
                            f"{self.name} takes {sorted(self.attrs) or 'none'}")
        out = {}
        for key, default in self.attrs.items():
            if key in given:
                out[key] = given[key]
            elif default is REQUIRED:
                raise AttrError(f"missing attribute '{key}'")
            else:
                out[key] = default
        return out

    def infer_types(self, types: list, attrs) -> list:
        if self.num_inputs is not None and len(types) != self.num_inputs:
            raise AttrError(f"takes {self.num_inputs} input(s), got {len(types)}")
        result = self.infer(types, attrs)
        return [result] if isinstance(result, TensorType) else list(result)

    def run_reference(self, arrays: list, attrs) -> list:
        result = self.reference(arrays, attrs)
        return list(result) if isinstance(result, (list, tuple)) else [result]


_REGISTRY: dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    if opdef.name in _REGISTRY:
        raise GraphError(f"op '{opdef.name}' is registered twice")
    _REGISTRY[opdef.name] = opdef
    return opdef


def get_op(name: str) -> OpDef:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise GraphError(f"unknown op '{name}'") from None


def all_ops() -> dict:
    return dict(_REGISTRY)
