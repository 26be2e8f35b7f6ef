"""The op registry keeps an op's facets in step (CONTRIBUTING.md, "Adding an op"): a definition in
ir/ops/<family>.py, a kernel (templates/<family>.glsl.j2 or a view), a gradient rule or
a non-differentiable mark, and tests naming it."""
import glob
import os
import re

import pytest

from fragflow.codegen.lower import LOWERINGS, VIEW_OPS
from fragflow.ir.ops.registry import all_ops
from fragflow.passes.autodiff import GRADIENTS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATES = os.path.join(ROOT, "codegen", "templates")
# Ops the executors provide themselves (no kernel) and ops lowered specially.
NO_KERNEL = {name for name, opdef in all_ops().items() if opdef.kind == "source"}
# control flow (while_loop, cond, scan): the runtime runs their sub-graphs, no kernel
NO_KERNEL |= {name for name, opdef in all_ops().items() if opdef.family == "control"}
SPECIAL = {"assign"}          # a copy kernel (codegen/elementwise.py lower_copy)
# Gradient-support ops whose gradients are exercised through second-order tests of the
# ops that emit them, not by name.
SECOND_ORDER_ONLY = {"sum_like", "reshape_like", "strided_slice_grad", "custom_gradient"}


def _text(pattern):
    return "\n".join(open(p, encoding="utf-8").read()
                     for p in glob.glob(os.path.join(ROOT, pattern), recursive=True))


OP_TESTS = _text("tests/ops/*.py") + _text("tests/frontend/*.py") + _text("tests/passes/*.py")
# gradients of fused ops are checked where fusion makes them
GRAD_TESTS = _text("tests/autodiff/*.py") + _text("tests/passes/test_fusion.py")
# control flow has a folder of its own (issue 25)
OP_TESTS += _text("tests/control_flow/*.py")
GRAD_TESTS += _text("tests/control_flow/test_cf_gradients.py")


def _gradient_test_rows() -> set:
    """Ops the parametrized gradient tests run over whose rows live with the op's other
    test data (a math op's row in tests/ops/test_math.py), so no autodiff file names them."""
    from tests.autodiff.test_math_gradients import UNARY
    return set(UNARY)
OPS = sorted(all_ops().items())


def _named(name, text):
    # underscores count as separators: test_strided_slice_... names strided_slice
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", text) is not None


@pytest.mark.parametrize("name, opdef", OPS, ids=[n for n, _ in OPS])
def test_op_has_a_kernel(name, opdef):
    if name in NO_KERNEL | SPECIAL | VIEW_OPS:
        return
    assert opdef.family in LOWERINGS, f"{name}: no lowering for family {opdef.family}"
    assert os.path.exists(os.path.join(TEMPLATES, f"{opdef.family}.glsl.j2")) or \
        opdef.family == "fused", f"{name}: no templates/{opdef.family}.glsl.j2"


@pytest.mark.parametrize("name, opdef", OPS, ids=[n for n, _ in OPS])
def test_op_has_a_gradient_rule_or_is_marked_non_differentiable(name, opdef):
    assert not opdef.differentiable or name in GRADIENTS, \
        f"{name} is differentiable but has no rule in passes/autodiff/{opdef.family}.py"


@pytest.mark.parametrize("name, opdef", OPS, ids=[n for n, _ in OPS])
def test_op_is_named_by_a_gl_test_and_a_gradient_test(name, opdef):
    if name in NO_KERNEL:
        return
    assert _named(name, OP_TESTS) or name in SECOND_ORDER_ONLY, \
        f"{name}: no test under tests/ops names it"
    if opdef.differentiable and name not in SECOND_ORDER_ONLY:
        assert _named(name, GRAD_TESTS) or name in _gradient_test_rows(), \
            f"{name}: no gradient test under tests/autodiff"


def test_the_op_table_in_docs_is_the_registry():
    from fragflow.tools.optable import table
    with open(os.path.join(ROOT, "docs", "OPS.md"), encoding="utf-8") as f:
        assert f.read() == table(), \
            "docs/OPS.md is stale: python -m fragflow.tools.optable > docs/OPS.md"
    assert "MISSING RULE" not in table()


@pytest.mark.parametrize("name, opdef", OPS, ids=[n for n, _ in OPS])
def test_an_op_without_gradient_says_why(name, opdef):
    assert opdef.differentiable or opdef.no_gradient, \
        f"{name} is not differentiable: give the reason as no_gradient= in its OpDef"


ELEMENTWISE_MACROS = set(re.findall(r"\{% macro (\w+)\(",
                                    _text("codegen/templates/elementwise_ops.glsl.j2")))


@pytest.mark.parametrize("name, opdef", OPS, ids=[n for n, _ in OPS])
def test_an_elementwise_op_has_its_glsl_in_its_record_or_a_macro(name, opdef):
    if opdef.family != "elementwise" or opdef.num_inputs == 0 or opdef.kind != "kernel":
        return          # fill, range, linspace: from the index (codegen/elementwise.py)
    assert bool(opdef.glsl) != (name in ELEMENTWISE_MACROS), \
        f"{name}: GLSL in its record (OpDef.glsl) or a macro in elementwise_ops.glsl.j2, " \
        f"exactly one"
    if opdef.glsl:
        import string
        fields = {f for _, f, _, _ in string.Formatter().parse(opdef.glsl) if f is not None}
        operands = {str(k) for k in range(opdef.num_inputs or 1)}
        assert fields <= operands | {"t"} | set(opdef.attrs), \
            f"{name}: its GLSL names {sorted(fields - operands - {'t'} - set(opdef.attrs))}, " \
            f"which are neither operands ({{0}}...), {{t}} nor its attrs"
