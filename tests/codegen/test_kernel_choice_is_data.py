"""Issue 24's measures, kept: kernel choice lives in the strategy tables and the Tuning
(codegen/tuning), not in module constants; lowering functions stay short; no template
grows past 200 lines; tests choose kernels through a Tuning, never by patching knobs."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CODEGEN = ROOT / "codegen"

# module constants that are not knobs of kernel choice, and why
NOT_KNOBS = {
    # the row layout of every texture: a data format the runtime, the plan cache and
    # the WebGL runtime (tools/webgl/runtime.js) read too, not a kernel's choice
    ("layout.py", "ROW_TEXELS"), ("layout.py", "MIN_ROW_TEXELS"),
    # a vec4's four lanes: what a texel is
    ("structure.py", "LANES"), ("top_k.py", "LANES"),
    # where float32 division by a reciprocal stays exact: arithmetic, not a choice
    ("environment.py", "FLOAT_DIVISION_BOUND"),
}


def _number(value):
    try:
        return ast.literal_eval(value)
    except ValueError:
        try:        # 1 << 17 and the like
            return eval(compile(ast.Expression(value), "constant", "eval"), {})  # noqa: S307
        except Exception:       # noqa: BLE001 - a name, a call: not a literal
            return None


def _constants(path):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            targets, value = [t.id for t in node.targets if isinstance(t, ast.Name)], node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            targets, value = [node.target.id], node.value
        else:
            continue
        for name in targets:
            if value is not None and re.fullmatch(r"[A-Z][A-Z0-9_]*", name):
                yield name, _number(value)


def test_no_module_constant_steers_kernel_choice():
    found = [f"{path.name}:{name} = {value!r}"
             for path in sorted(CODEGEN.glob("*.py")) if path.name != "limits.py"
             for name, value in _constants(path)
             if isinstance(value, (bool, int, float)) and (path.name, name) not in NOT_KNOBS]
    assert found == [], f"knobs belong in codegen/tuning: {found}"


def test_lowering_functions_are_at_most_40_lines():
    long = []
    for path in sorted(CODEGEN.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("lower"):
                lines = node.end_lineno - node.lineno + 1
                if lines > 40:
                    long.append(f"{path.name}:{node.name} ({lines} lines)")
    assert long == []


@pytest.mark.parametrize("template", sorted(p.name for p in (CODEGEN / "templates").iterdir()))
def test_templates_are_at_most_200_lines(template):
    lines = len((CODEGEN / "templates" / template).read_text().splitlines())
    assert lines <= 200, f"{template}: {lines} lines; split it, sharing macros"


def _codegen_aliases(text: str) -> set:
    """The names a test file binds to fragflow.codegen modules."""
    names = set()
    for match in re.finditer(r"from fragflow\.codegen(?:\.\w+)? import "
                             r"(?:\(([^)]*)\)|([^\n(]+))", text):
        imported = match.group(1) or match.group(2)
        names |= {part.split(" as ")[-1].strip() for part in imported.split(",")}
    names |= set(re.findall(r"import fragflow\.codegen\.\w+ as (\w+)", text))
    return names - {""}


def test_tests_choose_kernels_through_a_tuning_not_by_patching_knobs():
    patched = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        text = path.read_text()
        aliases = _codegen_aliases(text)
        for i, line in enumerate(text.splitlines(), 1):
            match = re.search(r"monkeypatch\.setattr\(\s*([\w.]+)\s*,\s*['\"][A-Z]", line)
            if match and (match.group(1).split(".")[0] in aliases
                          or match.group(1).startswith("fragflow.codegen")):
                patched.append(f"{path.relative_to(ROOT)}:{i}")
    assert patched == [], "pass ff.Tuning().with_(...) instead: " + ", ".join(patched)
