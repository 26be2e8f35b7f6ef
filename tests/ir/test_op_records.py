"""Every op record is complete, and the tables other layers used to write by hand are
derived from the records: the ONNX exporter's and importer's maps (OpDef.onnx), the
passes' op-name sets (OpDef.pointwise, stateful, the reduce family) and the three
registration lists (registry.FAMILIES). The literal tables below are those the code held
before the derivation (issue 24), so that it is checked against them; ops added since
are not in them and only need to be consistent."""
import importlib.util

import pytest

import fragflow as ff
import fragflow.frontend as F
from fragflow.codegen.lower import LOWERINGS
from fragflow.frontend.onnx import exporter, op_table
from fragflow.ir.ops.registry import FAMILIES, Onnx, all_ops
from fragflow.ir.types import TensorType
from fragflow.passes import fusion, layout_transposes
from fragflow.passes.autodiff import GRADIENTS

OPS = sorted(all_ops().items())
IDS = [name for name, _ in OPS]
ELEMENTWISE = {name for name, opdef in OPS if opdef.family == "elementwise"}
SPECIAL = {"assign"}          # a copy kernel, codegen/lower.py (codegen/elementwise.py lower_copy)

# -- the tables as the code wrote them before ---------------------------------------------
OLD_EXPORT = {  # frontend/onnx/exporter.py UNARY and BINARY
    "relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "log": "Log",
    "sqrt": "Sqrt", "abs": "Abs", "neg": "Neg", "floor": "Floor", "ceil": "Ceil",
    "reciprocal": "Reciprocal", "sin": "Sin", "cos": "Cos", "tan": "Tan",
    "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh",
    "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh", "erf": "Erf", "sign": "Sign",
    "round": "Round", "softplus": "Softplus", "logical_not": "Not",
    "identity": "Identity", "is_nan": "IsNaN", "is_inf": "IsInf", "elu": "Elu",
    "selu": "Selu", "stop_gradient": "Identity",
    "add": "Add", "sub": "Sub", "mul": "Mul", "pow": "Pow", "maximum": "Max",
    "minimum": "Min", "equal": "Equal", "less": "Less", "greater": "Greater",
    "less_equal": "LessOrEqual", "greater_equal": "GreaterOrEqual",
    "logical_and": "And", "logical_or": "Or"}
OLD_IMPORT_UNARY = {  # frontend/onnx/op_table.py UNARY: ONNX type -> F.<function>
    "Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Exp": "exp", "Log": "log",
    "Sqrt": "sqrt", "Abs": "abs", "Neg": "neg", "Floor": "floor", "Ceil": "ceil",
    "Reciprocal": "reciprocal", "Sin": "sin", "Cos": "cos", "Tan": "tan",
    "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh",
    "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh", "Erf": "erf",
    "Sign": "sign", "Round": "round", "Softplus": "softplus", "Not": "logical_not",
    "Identity": "identity", "IsNaN": "is_nan"}
OLD_IMPORT_BINARY = {  # op_table.py BINARY
    "Add": "add", "Sub": "sub", "Mul": "mul", "Pow": "pow", "Equal": "equal",
    "Less": "less", "Greater": "greater", "LessOrEqual": "less_equal",
    "GreaterOrEqual": "greater_equal", "And": "logical_and", "Or": "logical_or"}
OLD_NOT_STEPS = {"fill", "range", "linspace", "assign"}     # passes/fusion.py
OLD_NOT_POINTWISE = {"fill", "range", "linspace"}           # passes/layout_transposes.py
OLD_REDUCTIONS = {"sum", "mean", "max", "min", "prod"}      # passes/layout_transposes.py
OLD_REDUCE_FAMILY = {"sum", "mean", "max", "min", "prod", "argmax", "argmin", "softmax",
                     "log_softmax", "logsumexp", "cumsum", "lrn", "lrn_grad"}
OLD_NEVER_FOLD_FAMILIES = {"random", "state"}               # passes/simplify.py
OLD_LOWERINGS = {"elementwise", "reduce", "matmul", "shape", "autodiff_ops", "conv",
                 "structure", "image", "loss", "random", "fused", "program", "update"}
OLD_GRADIENT_MODULES = {"autodiff_ops", "conv", "fused", "image", "loss", "matmul",
                        "program", "random", "reduce", "shape", "structure"}


def _on_old(derived: dict, old: dict) -> dict:
    return {k: v for k, v in derived.items() if k in old}


# -- every record is complete ------------------------------------------------------------
@pytest.mark.parametrize("name, opdef", OPS, ids=IDS)
def test_an_op_has_a_type_rule_and_a_numpy_reference(name, opdef):
    assert callable(opdef.infer), f"{name}: no type rule"
    assert callable(opdef.reference), f"{name}: no numpy reference"


@pytest.mark.parametrize("name, opdef", OPS, ids=IDS)
def test_an_op_has_a_lowering_or_needs_no_kernel(name, opdef):
    if opdef.kind in ("source", "view") or name in SPECIAL:
        return
    assert opdef.family in LOWERINGS, \
        f"{name}: a kernel op, but codegen/{opdef.family}.py has no lower_node"


@pytest.mark.parametrize("name, opdef", OPS, ids=IDS)
def test_an_op_has_a_gradient_rule_or_says_why_not(name, opdef):
    if opdef.differentiable:
        assert name in GRADIENTS, f"{name}: differentiable but no gradient rule"
    else:
        assert opdef.no_gradient, f"{name}: not differentiable: say why (no_gradient=)"


def test_every_op_is_of_a_listed_family_and_every_family_has_ops():
    families = {opdef.family for _, opdef in OPS}
    assert families <= set(FAMILIES), f"not in registry.FAMILIES: {families - set(FAMILIES)}"
    assert set(FAMILIES) <= families, f"families without ops: {set(FAMILIES) - families}"


# -- ONNX names ----------------------------------------------------------------------------
ONNX_OPS = [(name, opdef) for name, opdef in OPS if opdef.onnx is not None]
# one ONNX node of the same operands, no attributes: the derived maps' ops (an op with
# attributes names its type for its family's rules: exporter.REDUCE, op_table.reduce)
SIMPLE_OPS = [(name, opdef) for name, opdef in ONNX_OPS if not opdef.attrs]


def test_the_exporters_map_is_derived_from_the_records():
    assert _on_old(exporter.SIMPLE, OLD_EXPORT) == OLD_EXPORT
    for name, op_type in exporter.SIMPLE.items():
        assert all_ops()[name].onnx.op_type == op_type
        assert exporter.EXPORT_RULES[name] is not None


def test_the_importers_maps_are_derived_from_the_records():
    for derived, old in ((op_table.UNARY, OLD_IMPORT_UNARY),
                         (op_table.BINARY, OLD_IMPORT_BINARY)):
        assert _on_old(derived, old) == {t: getattr(F, n) for t, n in old.items()}


@pytest.mark.parametrize("name, opdef", ONNX_OPS, ids=[n for n, _ in ONNX_OPS])
def test_an_onnx_name_maps_back_to_its_op(name, opdef):
    onnx = opdef.onnx
    assert isinstance(onnx, Onnx) and onnx.op_type
    assert onnx.op_type in op_table.RULES, f"{name}: ff.onnx.load cannot read {onnx.op_type}"
    assert name in exporter.EXPORT_RULES, f"{name}: ff.onnx.export cannot write it"
    others = [n for n, o in SIMPLE_OPS
              if o.onnx.op_type == onnx.op_type and not o.onnx.imported_by]
    if opdef.attrs:
        assert not others, f"{onnx.op_type}: read back as {others}, not by {name}'s rule"
        return
    if onnx.imported_by:
        # the importer's own rule reads it (a record claiming it would be overwritten)
        assert name not in others
        return
    assert others == [name], f"{onnx.op_type} reads back as {others}"
    table = op_table.UNARY if opdef.num_inputs == 1 else op_table.BINARY
    assert table[onnx.op_type] is getattr(F, name)
    assert op_table.RULES[onnx.op_type] is not None


def _operand_dtype(opdef) -> str:
    for dtype in ("float32", "bool", "int32"):
        try:
            opdef.infer_types([TensorType((3,), dtype)] * (opdef.num_inputs or 1), opdef.attrs)
            return dtype
        except Exception:       # the type rule turns the dtype down
            continue
    raise AssertionError(f"{opdef.name}: no operand dtype found")


@pytest.mark.skipif(importlib.util.find_spec("onnx") is None,
                    reason="onnx (the test extra) is not installed")
@pytest.mark.parametrize("name, opdef", SIMPLE_OPS, ids=[n for n, _ in SIMPLE_OPS])
def test_an_onnx_mapped_op_round_trips_through_export_and_load(name, opdef):
    g = ff.Graph()
    with g.as_default():
        dtype = _operand_dtype(opdef)
        xs = [ff.placeholder((3,), dtype, name=f"x{k}") for k in range(opdef.num_inputs)]
        y = getattr(F, name)(*xs)
    model = ff.onnx.export(y, xs)
    # the op's node, then the Identity naming the graph's output
    assert [n.op_type for n in model.graph.node] == [opdef.onnx.op_type, "Identity"]
    loaded = ff.onnx.load(model)
    ops = [n.op for n in loaded.graph.nodes if n.op != "placeholder"]
    if not opdef.onnx.imported_by:
        assert ops == [name, "identity"], f"{opdef.onnx.op_type} was read back as {ops}"


# -- the passes' sets ------------------------------------------------------------------------
def test_fusions_steps_are_the_pointwise_ops():
    assert fusion.STEPS == ELEMENTWISE - OLD_NOT_STEPS
    assert fusion.STEPS == {name for name, opdef in OPS if opdef.pointwise}


def test_layout_transposes_moves_past_the_same_ops_as_before():
    assert layout_transposes.POINTWISE == ELEMENTWISE - OLD_NOT_POINTWISE
    assert layout_transposes.REDUCTIONS & OLD_REDUCE_FAMILY == OLD_REDUCTIONS
    assert all(all_ops()[n].family == "reduce" for n in layout_transposes.REDUCTIONS)


def test_pointwise_ops_have_operands_and_the_others_none_or_another_family():
    for name, opdef in OPS:
        if opdef.family == "elementwise" and not opdef.pointwise:
            assert opdef.num_inputs == 0, f"{name}: elementwise, not pointwise, has operands"


def test_simplify_never_folds_what_it_did_not_fold_before():
    # simplify folded no op of the random and state families; it now goes by `stateful`,
    # which holds for all of them but constant (no operands: never folded either)
    for name, opdef in OPS:
        if opdef.family in OLD_NEVER_FOLD_FAMILIES:
            assert opdef.stateful or opdef.num_inputs == 0, name


# -- the registration lists --------------------------------------------------------------
def test_the_lowerings_are_the_codegen_modules_of_the_families():
    assert set(LOWERINGS) >= OLD_LOWERINGS
    for family, lower_node in LOWERINGS.items():
        assert lower_node.__module__ == f"fragflow.codegen.{family}"


def test_the_gradient_modules_are_those_of_the_families():
    found = {f for f in FAMILIES
             if importlib.util.find_spec(f"fragflow.passes.autodiff.{f}") is not None}
    assert found >= OLD_GRADIENT_MODULES
    rules = {rule.__module__.rsplit(".", 1)[-1] for rule in GRADIENTS.values()
             if rule.__module__.startswith("fragflow.passes.autodiff.")}
    assert rules <= found


def test_the_reduction_maps_are_derived_from_the_records():
    """exporter.REDUCE and the importer's REDUCTIONS, written by hand before the
    reduce records named their ONNX types."""
    old = {"sum": "ReduceSum", "mean": "ReduceMean", "max": "ReduceMax", "min": "ReduceMin",
           "prod": "ReduceProd", "logsumexp": "ReduceLogSumExp"}
    assert exporter.REDUCE == old
    assert op_table.REDUCTIONS == {t: getattr(F, f"reduce_{n}") for n, t in old.items()}
