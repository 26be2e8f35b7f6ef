"""How many loop iterations a user's GLSL (ff.gpgpu_program) runs, where its bounds are
known, and the warning when that is more than llvmpipe runs.

llvmpipe (Mesa's CPU driver) ends a shader invocation's loops after 65,535 iterations
in total, silently: every loop of the shader shares one counter, and the result is
whatever the loops had computed by then. fragflow computes up to four elements per
invocation (one RGBA texel, templates/prologue.glsl.j2), so a program's loops may run
about 65,535 / 4 = 16,382 iterations per element in all (nested loops multiply).

The count is a lower bound read from `for` headers of the forms
`for (int k = A; k < B; k += C)` (<, <=, >, >=; ++, --, +=, -=, k = k + C) where A, B
and C are expressions of integer/float literals, `const int/float` names declared in
the program, int/float uniforms, and the shape constants (outSize, outShape, <name>Size,
<name>Shape, with .x/.y/.z/.w or [i]). Loops it cannot read (while loops, bounds read
from a texture, a dimension unknown until feed time) count as zero iterations, so it
never warns about a program that might be fine."""
from __future__ import annotations

import ast
import math
import operator
import re
import warnings

from .errors import LoopLimitWarning

LLVMPIPE_LOOP_LIMIT = 65535
ELEMENTS_PER_INVOCATION = 4       # one RGBA texel per fragment shader invocation
# main()'s own loop over the texel's four elements counts against the same limit
LANE_LOOP_ITERATIONS = 4
# counts stop here: far past any limit, and still a number a message can print
MAX_COUNTED = 1 << 62

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_FOR = re.compile(r"\bfor\s*\(")
_CONST = re.compile(r"\bconst\s+(?:int|uint|float)\s+([A-Za-z_]\w*)\s*=\s*([^;]+);")
_VAR = r"([A-Za-z_]\w*)"
_INIT = re.compile(rf"^\s*(?:(?:int|uint|float)\s+)?{_VAR}\s*=\s*(.+?)\s*$", re.S)
_COND = re.compile(r"^\s*(.+?)\s*(<=|>=|<|>)\s*(.+?)\s*$", re.S)
_SWIZZLE = {"x": 0, "y": 1, "z": 2, "w": 3, "r": 0, "g": 1, "b": 2, "a": 3}


# -- evaluating bounds -------------------------------------------------------------------
def _glsl_div(a, b):
    if isinstance(a, int) and isinstance(b, int):
        return int(a / b)           # GLSL int division truncates toward zero
    return a / b


_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: _glsl_div, ast.Mod: operator.mod}


def evaluate(text: str, constants: dict):
    """The value of a GLSL constant expression, or None if it reads anything unknown."""
    text = re.sub(r"(\d)[uU]\b", r"\1", text.strip())       # 10u -> 10
    text = re.sub(r"(\d\.?\d*(?:[eE][-+]?\d+)?)[fF]\b", r"\1", text)   # 1.0f -> 1.0
    try:
        tree = ast.parse(text, mode="eval")
        return _eval(tree.body, constants)
    except (SyntaxError, ValueError, TypeError, KeyError, IndexError, ZeroDivisionError,
            RecursionError, _Unknown):
        return None


class _Unknown(Exception):
    pass


def _eval(node, constants):
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.Name):
        value = constants.get(node.id)
        if value is None:
            raise _Unknown(node.id)
        return value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left, constants), _eval(node.right, constants)
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _eval(node.operand, constants)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Attribute) and node.attr in _SWIZZLE:
        return _component(_eval(node.value, constants), _SWIZZLE[node.attr])
    if isinstance(node, ast.Subscript):
        return _component(_eval(node.value, constants), _eval(node.slice, constants))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        args = [_eval(a, constants) for a in node.args]
        if node.func.id in ("min", "max") and len(args) == 2:
            return (min if node.func.id == "min" else max)(*args)
        if node.func.id == "int" and len(args) == 1:
            return int(args[0])
        if node.func.id == "float" and len(args) == 1:
            return float(args[0])
    raise _Unknown(ast.dump(node))


def _component(vector, index):
    if not isinstance(vector, tuple) or not isinstance(index, int):
        raise _Unknown("component")
    return vector[index]


# -- reading loops ---------------------------------------------------------------------
def _brackets(text: str) -> dict:
    """{index of an opening bracket: index of its closing one} for (), [] and {}, in
    one pass (an unclosed one is missing)."""
    pairs, stacks = {}, {"(": [], "[": [], "{": []}
    closing = {")": "(", "]": "[", "}": "{"}
    for k, ch in enumerate(text):
        if ch in stacks:
            stacks[ch].append(k)
        elif ch in closing and stacks[closing[ch]]:
            pairs[stacks[closing[ch]].pop()] = k
    return pairs


def _statement_end(text: str, start: int, pairs: dict, loop_ends: dict) -> int:
    """Index just past the statement starting at or after text[start]: a block, a for
    loop (loop_ends: its end, by where it starts, for loops already read), an if /
    else with blocks, or anything up to its ';'."""
    k = start
    while k < len(text) and text[k].isspace():
        k += 1
    if k < len(text) and text[k] == "{":
        return pairs.get(k, len(text) - 1) + 1
    if k in loop_ends:                  # for (...) for (...) s;
        return loop_ends[k]
    while k < len(text):
        if text[k] == "{":              # if (c) { ... } ends here, unless an else follows
            k = pairs.get(k, len(text) - 1) + 1
            rest = text[k:k + 16].lstrip()
            if not re.match(r"else\b", rest):
                return k
            continue
        if text[k] in "([":
            k = pairs.get(k, len(text) - 1) + 1               # skip the bracketed part
            continue
        if text[k] == ";":
            return k + 1
        k += 1
    return len(text)


def _trips(header: str, constants: dict):
    """Iterations of a for loop with this header, or None if not known."""
    parts = header.split(";")
    if len(parts) != 3:
        return None
    init, cond, step = parts
    init_match, cond_match = _INIT.match(init), _COND.match(cond)
    if not init_match or not cond_match:
        return None
    var, start = init_match.group(1), evaluate(init_match.group(2), constants)
    left, op, right = cond_match.groups()
    if left.strip() == var:
        bound = evaluate(right, constants)
    elif right.strip() == var:           # B > k is k < B
        bound = evaluate(left, constants)
        op = {"<": ">", ">": "<", "<=": ">=", ">=": "<="}[op]
    else:
        return None
    increment = _increment(step.strip(), var, constants)
    if start is None or bound is None or not increment:
        return None
    if op in ("<", "<="):
        if increment < 0:
            return None                 # never ends, or ends by overflow: not a bound
        span = bound - start
    else:
        if increment > 0:
            return None
        span, increment = start - bound, -increment
    trips = math.floor(span / increment) + 1 if op in ("<=", ">=") else \
        math.ceil(span / increment)
    return max(0, int(trips))


def _increment(step: str, var: str, constants: dict):
    compact = step.replace(" ", "")
    if compact in (f"++{var}", f"{var}++"):
        return 1
    if compact in (f"--{var}", f"{var}--"):
        return -1
    for sign, pattern in ((1, rf"^{var}\+=(.+)$"), (-1, rf"^{var}-=(.+)$"),
                          (1, rf"^{var}={var}\+(.+)$"), (-1, rf"^{var}={var}-(.+)$")):
        match = re.match(pattern, compact, re.S)
        if match:
            value = evaluate(match.group(1), constants)
            return None if value is None else sign * value
    return None


def _loops(text: str, constants: dict) -> list:
    """[(start, body start, body end, trips or None)] of every for loop, in order."""
    pairs = _brackets(text)
    headers = [(m.start(), m.end(), pairs[m.end() - 1]) for m in _FOR.finditer(text)
               if m.end() - 1 in pairs]
    loops, loop_ends = [], {}
    for start, header_start, header_end in reversed(headers):   # inner loops first
        body_end = _statement_end(text, header_end + 1, pairs, loop_ends)
        loop_ends[start] = body_end
        loops.append((start, header_end + 1, body_end,
                      _trips(text[header_start:header_end], constants)))
    return loops[::-1]


def loop_iterations(glsl: str, constants: dict) -> int:
    """A lower bound of the loop iterations one element's run of glsl makes (0 when no
    bound is known): each loop's trips times (1 + what one run of its body makes),
    summed. constants: name -> number, or tuple for vector shapes. Linear in the
    text's length, however deep the loops nest (no recursion)."""
    text = _COMMENTS.sub(" ", glsl)
    known = dict(constants)
    for name, expression in _CONST.findall(text):
        value = evaluate(expression, known)
        if value is not None:
            known[name] = value
    loops = _loops(text, known)
    parent, open_loops = {}, []          # loop index -> the loop whose body holds it
    for index, (start, _, _, _) in enumerate(loops):
        while open_loops and loops[open_loops[-1]][2] <= start:
            open_loops.pop()
        parent[index] = open_loops[-1] if open_loops else None
        open_loops.append(index)
    inner = [0] * len(loops)             # iterations of one run of each loop's body
    total = 0
    for index in reversed(range(len(loops))):     # bodies before the loops around them
        trips = loops[index][3] or 0
        made = min(trips * (1 + inner[index]), MAX_COUNTED)
        if parent[index] is None:
            total += made
        else:
            inner[parent[index]] += made
    return total


# -- the program's constants and the warning ----------------------------------------
def _shape_constant(shape):
    if any(d is None for d in shape):
        return None
    return shape[0] if len(shape) == 1 else 1 if not shape else tuple(shape)


def program_constants(input_names, input_shapes, output_shape, uniform_values) -> dict:
    """The names a program's GLSL sees as constants (what the template declares), with
    values where they are known: None for dimensions unknown until feed time."""
    constants = {}
    for name, value in uniform_values:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            constants[name] = value
    for name, shape in [*zip(input_names, input_shapes), ("out", output_shape)]:
        constants[f"{name}Shape"] = _shape_constant(shape)
        constants[f"{name}Size"] = None if any(d is None for d in shape) else \
            math.prod(shape)
    return constants


def check_program_loops(attrs, input_shapes, output_shape, source: str) -> int:
    """Warn (LoopLimitWarning, at the user's line) when the program's known loop bounds
    run past llvmpipe's limit; returns the iterations per invocation it found."""
    constants = program_constants(attrs["inputs"], input_shapes, output_shape,
                                  attrs["uniform_values"])
    per_element = loop_iterations(attrs["glsl"], constants)
    if not per_element:
        return 0
    size = constants["outSize"]
    lanes = ELEMENTS_PER_INVOCATION if size is None else \
        max(1, min(ELEMENTS_PER_INVOCATION, size))
    per_invocation = per_element * lanes + LANE_LOOP_ITERATIONS
    if per_invocation > LLVMPIPE_LOOP_LIMIT:
        where = f" ({source})" if source else ""
        warn_loop_limit(
            f"program '{attrs['name']}'{where}: its loops run at least {per_element:,} "
            f"iterations per element, {per_invocation:,} per shader invocation "
            f"({lanes} element{'s' if lanes > 1 else ''} each); llvmpipe (Mesa's CPU "
            f"driver) silently ends a shader invocation's loops after "
            f"{LLVMPIPE_LOOP_LIMIT:,} iterations in all, so results would be wrong "
            f"there. Keep a program's loops under "
            f"{(LLVMPIPE_LOOP_LIMIT - LANE_LOOP_ITERATIONS) // lanes:,} iterations per "
            f"element (split the work over more output elements or several programs)",
            source)
    return per_invocation


_WARNED: dict = {}       # warnings' registry: one warning per message and user line


def warn_loop_limit(message: str, source: str) -> None:
    filename, _, line = (source or "").rpartition(":")
    lineno = int(line) if line.isdigit() else 0
    warnings.warn_explicit(message, LoopLimitWarning, filename or "<fragflow program>",
                           lineno, module="fragflow", registry=_WARNED)
