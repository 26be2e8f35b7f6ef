"""The op registry: one OpDef per op, declared in ir/ops/<family>.py (or the package
ir/ops/<family>/).

An OpDef is the one record of an op: its attrs (with defaults), its type inference, its
numpy reference, and the facts the other layers read instead of keeping lists of op
names: its kind (source, view or kernel), its gradient rule or the reason it has none,
its GLSL expression (elementwise ops), whether it is pointwise, TensorFlow's and ONNX's
names for it and the argument of its generated frontend function. Rules and kernels not
held here are found by the op's family (passes/autodiff/<family>.py,
codegen/<family>.py, codegen/templates/<family>.glsl.j2; FAMILIES lists the families).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import AttrError, GraphError
from ..types import TensorType

REQUIRED = object()   # an attr default meaning "must be given"

KINDS = ("source", "view", "kernel")

# The op families, in registration order (ir/ops/<family>.py registers them on import;
# fused and update after the ops they fuse). A family's lowering is codegen/<family>.py's
# lower_node and its gradient rules are in passes/autodiff/<family>.py, where those exist.
FAMILIES = ("conv", "elementwise", "autodiff_ops", "image", "matmul", "random", "reduce",
            "shape", "state", "structure", "loss", "control", "fused", "program", "update")


@dataclass(frozen=True)
class Onnx:
    """An op's ONNX name. The exporter writes the op as one `op_type` node of the same
    operands (frontend/onnx/exporter.py); the importer reads `op_type` back as this op
    (frontend/onnx/op_table.py) unless `imported_by` names the importer's own rule for
    it and why (attributes this op lacks, a variadic form, another op of that name)."""
    op_type: str
    imported_by: str = ""


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
    # "source": its value comes from outside the computation (a feed, a constant, a
    # variable): no kernel; "view": its output is its first input's texture seen as
    # another shape (row-major order kept): no kernel; "kernel": computed by a kernel.
    kind: str = "kernel"
    # rule(node, dy) -> [gradient per input], built with the ir builders; None: the
    # rule is in passes/autodiff/<family>.py, or there is none (no_gradient says why)
    gradient: Callable | None = None
    no_gradient: str = ""             # why no gradient flows; setting it clears differentiable
    # elementwise: GLSL of the operands {0}, {1}, ... (scalars in epilogues, vec4 in
    # elementwise kernels, so it must work for both), {t} their GLSL type and {<attr>}
    # a float attr as a literal; "": a macro of the op's name in
    # templates/elementwise_ops.glsl.j2 (where the GLSL depends on the type)
    glsl: str = ""
    tf: str = "—"                     # TensorFlow's name (its raw op name for internal ones)
    # ONNX's name (an Onnx; a str s means Onnx(s)): derives the ONNX exporter's and
    # importer's tables; None: written by a rule of its own there, or not at all
    onnx: Onnx | None = None
    # pointwise: output element i from element i of each (broadcast) operand, with at
    # least one operand. Fusion chains these into one kernel (passes/fusion.py) and
    # layout_transposes moves transposes past them; fill, range, linspace (no operands,
    # computed from the index) are not.
    pointwise: bool = False
    # the argument name of the generated frontend function ff.<name>(<arg>, name=None)
    # ("x", TensorFlow's "features"); "": written by hand, or internal
    wrapper_arg: str = ""
    # printing (ir/printer.py): printer(node, format_attr) gives the text after "=" where
    # the usual `op(%a, %b) {attrs}` does not fit (constants, placeholders, variables);
    # hidden_attrs are left out of the braces (provenance and bookkeeping)
    printer: Callable | None = None
    hidden_attrs: tuple = ()
    # a reduction's record (ir/ops/reduce.py Reduction: its combine, finish step, shift)
    reduction: object = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise GraphError(f"op '{self.name}': kind must be one of {KINDS}, not {self.kind!r}")
        if self.no_gradient:
            object.__setattr__(self, "differentiable", False)
        if isinstance(self.onnx, str):
            object.__setattr__(self, "onnx", Onnx(self.onnx))
        if self.pointwise and self.num_inputs == 0:
            raise GraphError(f"op '{self.name}': pointwise, so it needs operands")

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


def ops_where(fact: Callable) -> frozenset:
    """The names of the registered ops whose record satisfies fact(opdef)."""
    return frozenset(name for name, opdef in _REGISTRY.items() if fact(opdef))
