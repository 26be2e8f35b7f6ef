"""The JSON form of a graph. It round-trips exactly (format_graph(load(dump(g))) is
format_graph(g)) and loading never executes code: arrays are base64 bytes with a dtype
and a shape, everything else is plain JSON.

A graph file is untrusted input. graph_from_json reads a bounded number of bytes,
checks the whole document against the schema below (types, names, attrs and their
types, shapes, sizes, nesting depth) before it builds anything, and refuses nodes that
carry user GLSL (gpgpu_program) unless the caller allows them: their code would run on
the GPU as written.
"""
from __future__ import annotations

import base64
import json
import math
import os

import numpy as np

from .errors import FragflowError, SerializationError
from .graph import Graph
from .ops.registry import all_ops
from .sanitize import NAME_RE, InvalidNameError, check_name, check_scope, check_source
from .types import DTYPES

FORMAT = "fragflow.graph"
VERSION = 1

MAX_FILE_BYTES = 256 * 2 ** 20   # a graph with weights of a few million parameters
MAX_NODES = 1_000_000
MAX_ATTR_DEPTH = 16              # nesting of lists inside one attr (fused steps: ~5)
MAX_ARRAY_RANK = 8
MAX_STRING = 1_000_000           # a program's GLSL is the longest string there is
MAX_INT = 2 ** 31 - 1
MAX_GRAPH_DEPTH = 8              # sub-graphs in sub-graphs (a loop in a loop in a cond...)
PROGRAM_OPS = ("gpgpu_program",)
# arrays in attrs: the tensor dtypes, and float16 for a variable's initial value kept
# half (ir/ops/state.py; type inference refuses a float16 constant)
ARRAY_DTYPES = DTYPES + ("float16",)  # nodes whose attrs hold GLSL that runs as written


def _encode(value):
    if isinstance(value, Graph):            # a loop's body, a branch (ir/ops/control.py)
        return {"graph": _graph_doc(value)}
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<"))
        return {"ndarray": {"dtype": value.dtype.name, "shape": list(value.shape),
                            "data": base64.b64encode(data.tobytes()).decode("ascii")}}
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    if isinstance(value, float) and not np.isfinite(value):
        return {"float": repr(value)}
    return value


def _decode(value):
    """An attr value from its checked JSON form (see _check_json_attr)."""
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    if isinstance(value, dict):
        if "graph" in value:
            return _build(value["graph"], value["graph"]["nodes"])
        if "ndarray" in value:
            spec = value["ndarray"]
            raw = base64.b64decode(spec["data"], validate=True)
            arr = np.frombuffer(raw, dtype=np.dtype(spec["dtype"]).newbyteorder("<"))
            return arr.astype(spec["dtype"]).reshape(spec["shape"])
        return float(value["float"])
    return value


def _graph_doc(graph: Graph) -> dict:
    nodes = []
    for node in graph.nodes:
        nodes.append({
            "name": node.name, "op": node.op,
            "inputs": [v.name for v in node.inputs],
            "attrs": {k: _encode(v) for k, v in node.attrs.items()},
            "scope": node.scope, "source": node.source,
        })
    return {"name": graph.name, "nodes": nodes, "outputs": [v.name for v in graph.outputs]}


def graph_to_json(graph: Graph, indent: int | None = 1) -> str:
    doc = {"format": FORMAT, "version": VERSION, **_graph_doc(graph)}
    return json.dumps(doc, indent=indent, allow_nan=False)


# -- reading --------------------------------------------------------------------------
def graph_from_json(text_or_path, *, allow_programs: bool = False,
                    max_bytes: int = MAX_FILE_BYTES) -> Graph:
    """A graph from graph_to_json's text, or from the path of a file holding it.

    allow_programs: build gpgpu_program nodes (their GLSL runs on the GPU as written;
    only for files you trust). max_bytes: the largest file (or text) read."""
    doc = json_document(read_text(text_or_path, max_bytes))
    nodes = check_document(doc, allow_programs)
    return _build(doc, nodes)


def _build(doc, nodes) -> Graph:
    """The graph of a checked document (or of a sub-graph's, nested in an attr)."""
    graph = Graph(doc.get("name", "graph"))
    for index, spec in enumerate(nodes):
        where = _where(index, spec)
        try:
            inputs = [graph.value(name) for name in spec["inputs"]]
            attrs = {k: _decode(v) for k, v in spec["attrs"].items()}
            graph.add_node(spec["op"], inputs, attrs, exact_name=spec["name"],
                           scope=spec.get("scope", ""), source=spec.get("source", ""))
        except FragflowError as err:
            raise SerializationError(f"cannot rebuild the saved graph at {where}: "
                                     f"{err}") from None
        except (ArithmeticError, AttributeError, LookupError, TypeError, ValueError) as err:
            # an op's checks that a well-typed but inconsistent file still gets past
            raise SerializationError(f"cannot rebuild the saved graph at {where}: "
                                     f"{type(err).__name__}: {err}") from None
    try:
        graph.outputs = [graph.value(name) for name in doc.get("outputs", [])]
    except FragflowError as err:
        raise SerializationError(f"the saved graph's outputs: {err}") from None
    return graph


def read_text(text_or_path, max_bytes: int = MAX_FILE_BYTES) -> str:
    """The JSON text itself, or at most max_bytes of the file it names (a larger or
    endless file is an error, not a MemoryError)."""
    if isinstance(text_or_path, (bytes, bytearray)):
        data = bytes(text_or_path)
    elif isinstance(text_or_path, str) and text_or_path.lstrip().startswith("{"):
        if len(text_or_path) > max_bytes:
            raise SerializationError(f"graph text of {len(text_or_path)} characters is "
                                     f"larger than max_bytes={max_bytes}")
        return text_or_path
    elif isinstance(text_or_path, (str, os.PathLike)):
        path = os.fspath(text_or_path)
        if not os.path.exists(path):
            raise SerializationError(f"{_short(path)!r} is neither JSON text nor an "
                                     f"existing file")
        if os.path.isdir(path):
            raise SerializationError(f"{_short(path)!r} is a directory, not a graph file")
        try:
            with open(path, "rb") as f:
                data = f.read(max_bytes + 1)
        except OSError as err:
            raise SerializationError(f"cannot read {_short(path)!r}: {err}") from None
    else:
        raise SerializationError(f"load_graph takes JSON text or a path, not "
                                 f"{type(text_or_path).__name__}")
    if len(data) > max_bytes:
        raise SerializationError(f"the graph file is larger than max_bytes={max_bytes} "
                                 f"bytes (pass a larger max_bytes if you trust it)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise SerializationError(f"not a graph file: not UTF-8 text ({err})") from None


def json_document(text: str):
    def constant(name):
        raise SerializationError(f"not valid JSON: {name} is not a JSON value")
    try:
        return json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as err:
        raise SerializationError(f"not valid JSON: {err}") from None
    except RecursionError:
        raise SerializationError("not a graph file: JSON nested too deeply") from None


# -- the schema ---------------------------------------------------------------------------
def check_document(doc, allow_programs: bool) -> list:
    """The node specs of a graph document, after checking all of it; nothing is built."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SerializationError("not a fragflow graph (missing \"format\": "
                                 f"\"{FORMAT}\")")
    if doc.get("version") != VERSION:
        raise SerializationError(f"graph format version {doc.get('version')!r} is not "
                                 f"supported (this fragflow reads version {VERSION})")
    _expect_keys(doc, {"format", "version", "nodes"}, {"name", "outputs"}, "the document")
    name = doc.get("name", "graph")
    if not isinstance(name, str) or len(name) > 1000 or not name.isprintable():
        raise SerializationError(f"the graph's name must be a printable string, got "
                                 f"{_shown(name)}")
    return _check_nodes(doc, all_ops(), allow_programs, [0], 0, "")


def _check_nodes(doc, ops, allow_programs, budget, depth, where_above) -> list:
    """The nodes of a graph document, or of a sub-graph nested in an attr (depth > 0:
    at most MAX_GRAPH_DEPTH deep; budget counts nodes at every depth, MAX_NODES in all)."""
    nodes = doc["nodes"]
    if not isinstance(nodes, list) or len(nodes) > MAX_NODES - budget[0]:
        raise SerializationError(f"{where_above}\"nodes\" must be a list of at most "
                                 f"{MAX_NODES} nodes (sub-graphs' included)")
    budget[0] += len(nodes)
    seen = {}
    for index, spec in enumerate(nodes):
        _check_node(index, spec, ops, seen, allow_programs, budget, depth, where_above)
    outputs = doc.get("outputs", [])
    if not isinstance(outputs, list) or not all(isinstance(o, str) for o in outputs):
        raise SerializationError(f"{where_above}\"outputs\" must be a list of tensor names")
    for output in outputs:
        _check_tensor_name(output, seen, f"{where_above}the graph's outputs")
    return nodes


def _check_subgraph(value, ops, allow_programs, budget, depth, where):
    if depth > MAX_GRAPH_DEPTH:
        raise SerializationError(f"{where}: sub-graphs nested more than "
                                 f"{MAX_GRAPH_DEPTH} deep")
    if not isinstance(value, dict):
        raise SerializationError(f"{where}: a sub-graph must be an object")
    _expect_keys(value, {"nodes"}, {"name", "outputs"}, where)
    name = value.get("name", "graph")
    if not isinstance(name, str) or len(name) > 1000 or not name.isprintable():
        raise SerializationError(f"{where}: the sub-graph's name must be a printable "
                                 f"string, got {_shown(name)}")
    _check_nodes(value, ops, allow_programs, budget, depth, f"{where}: ")


def _check_node(index, spec, ops, seen, allow_programs, budget=None, depth=0,
                where_above=""):
    if not isinstance(spec, dict):
        raise SerializationError(f"node {index} must be an object, got {_shown(spec)}")
    where = where_above + _where(index, spec)
    _expect_keys(spec, {"name", "op", "inputs", "attrs"}, {"scope", "source"}, where)
    try:
        check_name(spec["name"], "node name")
        check_scope(spec.get("scope", ""), "scope")
        check_source(spec.get("source", ""), "source")
    except InvalidNameError as err:
        raise SerializationError(f"{where}: {err}") from None
    if spec["name"] in seen:
        raise SerializationError(f"{where}: a node named '{spec['name']}' comes twice")
    op = spec["op"]
    if not isinstance(op, str) or op not in ops:
        raise SerializationError(f"{where}: unknown op {_shown(op)}")
    if op in PROGRAM_OPS and not allow_programs:
        raise SerializationError(
            f"{where}: the file holds a {op} node, whose GLSL would run on the GPU as "
            f"written; load it with load_graph(..., allow_programs=True) only if you "
            f"trust the file")
    if not isinstance(spec["inputs"], list):
        raise SerializationError(f"{where}: \"inputs\" must be a list of tensor names")
    for name in spec["inputs"]:
        _check_tensor_name(name, seen, where)
    attrs = spec["attrs"]
    if not isinstance(attrs, dict):
        raise SerializationError(f"{where}: \"attrs\" must be an object")
    allowed = ops[op].attrs
    for key, value in attrs.items():
        if key not in allowed:
            raise SerializationError(f"{where}: {op} has no attribute {_shown(key)} (it "
                                     f"takes {sorted(allowed) or 'none'})")
        if isinstance(value, dict) and set(value) == {"graph"}:
            if ops[op].family != "control":
                raise SerializationError(f"{where}: attr '{key}' of {op} cannot be a graph")
            _check_subgraph(value["graph"], ops, allow_programs,
                            budget if budget is not None else [0], depth + 1,
                            f"{where}: attr '{key}'")
            continue
        _check_json_attr(value, f"{where}: attr '{key}'", key == "glsl")
        kind = ATTR_KINDS.get(f"{op}.{key}", ATTR_KINDS.get(key))
        if kind is _ARRAY:
            if not (isinstance(value, dict) and "ndarray" in value):
                raise SerializationError(f"{where}: attr '{key}' must be an array")
        elif kind is not None and not kind[0](_decode(value)):
            raise SerializationError(f"{where}: attr '{key}' must be {kind[1]}, got "
                                     f"{_shown(_decode(value))}")
    seen[spec["name"]] = None


def _check_tensor_name(name, seen, where):
    if not isinstance(name, str):
        raise SerializationError(f"{where}: tensor name {_shown(name)} is not a string")
    node, colon, index = name.partition(":")
    if node not in seen or colon and not (index.isdigit() and index.isascii()
                                          and len(index) < 6):
        raise SerializationError(f"{where}: {_shown(name)} is not an output of an "
                                 f"earlier node")


def _check_json_attr(value, where, code=False, depth=0):
    """value is what _encode writes: JSON scalars, lists, {"ndarray": ...}, {"float": ...}."""
    if depth > MAX_ATTR_DEPTH:
        raise SerializationError(f"{where}: nested more than {MAX_ATTR_DEPTH} deep")
    if value is None or isinstance(value, bool):
        return
    if isinstance(value, int):
        if abs(value) > 2 ** 63:
            raise SerializationError(f"{where}: integer {_shown(value)} is out of range")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise SerializationError(f"{where}: non-finite float outside {{\"float\"}}")
    elif isinstance(value, str):
        if len(value) > MAX_STRING or not code and not value.isprintable():
            raise SerializationError(f"{where}: string {_shown(value)} is too long or "
                                     f"holds control characters")
    elif isinstance(value, list):
        for item in value:
            _check_json_attr(item, where, code, depth + 1)
    elif isinstance(value, dict) and set(value) == {"float"}:
        if value["float"] not in ("nan", "inf", "-inf"):
            raise SerializationError(f"{where}: {_shown(value)} is not nan, inf or -inf")
    elif isinstance(value, dict) and set(value) == {"ndarray"}:
        _check_array(value["ndarray"], where)
    else:
        raise SerializationError(f"{where}: unknown attribute encoding {_shown(value)}")


def _check_array(spec, where):
    if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "data"}:
        raise SerializationError(f"{where}: an array is {{dtype, shape, data}}")
    if spec["dtype"] not in ARRAY_DTYPES:
        raise SerializationError(f"{where}: array of unsupported dtype "
                                 f"{_shown(spec['dtype'])} (one of {', '.join(ARRAY_DTYPES)})")
    shape = spec["shape"]
    if not isinstance(shape, list) or len(shape) > MAX_ARRAY_RANK or not all(
            isinstance(d, int) and not isinstance(d, bool) and 0 <= d <= MAX_INT
            for d in shape):
        raise SerializationError(f"{where}: array shape {_shown(shape)} must be at most "
                                 f"{MAX_ARRAY_RANK} non-negative ints")
    if not isinstance(spec["data"], str):
        raise SerializationError(f"{where}: array data must be a base64 string")
    expected = math.prod(shape) * np.dtype(spec["dtype"]).itemsize
    if len(spec["data"]) != 4 * -(-expected // 3):
        raise SerializationError(f"{where}: array data holds {len(spec['data'])} base64 "
                                 f"characters; shape {shape} of {spec['dtype']} needs "
                                 f"{4 * -(-expected // 3)}")
    try:
        base64.b64decode(spec["data"], validate=True)
    except ValueError:
        raise SerializationError(f"{where}: array data is not base64") from None


def _expect_keys(obj, required, optional, where):
    missing = sorted(required - set(obj))
    unknown = sorted(set(obj) - required - optional)
    if missing or unknown:
        raise SerializationError(f"{where}: " + "; ".join(
            ([f"missing {missing}"] if missing else [])
            + ([f"unknown {unknown}"] if unknown else [])))


# -- the types of attrs that share a name across ops -----------------------------------------
# Attrs not listed here are plain JSON values; their op's checks run when it is built.
def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool) and abs(v) <= MAX_INT


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_ints(v):
    return isinstance(v, tuple) and all(_is_int(x) for x in v)


def _is_dims(v):
    return isinstance(v, tuple) and all(x is None or _is_int(x) and x >= 0 for x in v)


def _is_dtype(v):
    return isinstance(v, str) and v in DTYPES


def _is_header_nodes(v):
    """A fused node's folded-in nodes: (name, op, source) triples (shader headers)."""
    ops = all_ops()
    return isinstance(v, tuple) and all(
        isinstance(t, tuple) and len(t) == 3 and all(isinstance(e, str) for e in t)
        and NAME_RE.match(t[0]) and t[1] in ops and t[2].isascii() and t[2].isprintable()
        for t in v)


def _is_pairs(v):
    return isinstance(v, tuple) and all(
        isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in v)


_BOOL = (lambda v: isinstance(v, bool), "true or false")
_INT = (_is_int, "an int32")
_NUMBER = (_is_number, "a number")
_INT_OR_INTS = (lambda v: _is_int(v) or _is_ints(v), "an int or a list of ints")
_AXIS = (lambda v: v is None or _is_int(v) or _is_ints(v),
         "null, an int or a list of ints")
_DIMS = (_is_dims, "a list of non-negative ints (null for unknown)")
_OPTIONAL_INTS = (lambda v: v is None or _is_ints(v), "null or a list of ints")
_STRING = (lambda v: isinstance(v, str), "a string")
_DTYPE = (_is_dtype, f"one of {', '.join(DTYPES)}")
_ARRAY = (lambda v: isinstance(v, np.ndarray), "an array")

ATTR_KINDS = {
    **dict.fromkeys(["align_corners", "center", "exclusive", "half_pixel_centers",
                     "has_offset", "has_scale", "keepdims", "reverse", "transpose_a",
                     "transpose_b"], _BOOL),
    **dict.fromkeys(["alpha", "beta", "bias", "epsilon", "mean", "stddev", "off_value",
                     "on_value"], _NUMBER),
    **dict.fromkeys(["batch_dims", "depth", "depth_radius", "k", "num", "num_samples",
                     "num_segments", "seed"], _INT),
    **dict.fromkeys(["strides", "dilations", "ksize", "multiples"], _INT_OR_INTS),
    "output_shape": _DIMS,
    "shape": (lambda v: isinstance(v, tuple) and all(x is None or _is_int(x) for x in v),
              "a list of ints (null for unknown)"),
    **dict.fromkeys(["perm", "noise_shape"], _OPTIONAL_INTS),
    **dict.fromkeys(["mode", "conv_op", "name", "key", "glsl"], _STRING),
    "axis": _AXIS, "dtype": _DTYPE, "output_dtype": _DTYPE, "initial_value": _ARRAY,
    "constant.value": _ARRAY,          # "op.attr": where ops share a name, not a type
    "nodes": (_is_header_nodes, "a list of [node name, op, source] triples"),
    "conv_attrs": (_is_pairs, "a list of [name, value] pairs"),
    # control flow (ir/ops/control.py); its sub-graphs are checked as graphs
    **dict.fromkeys(["num_vars", "num_carry", "num_elems"],
                    (lambda v: _is_int(v) and v >= 0, "a non-negative int32")),
    **dict.fromkeys(["maximum_iterations", "length"],
                    (lambda v: v is None or _is_int(v) and v >= 0,
                     "null or a non-negative int32")),
    "shape_invariants": (lambda v: v is None or isinstance(v, tuple) and all(
        s is None or _is_dims(s) for s in v), "null or a list of shapes (or nulls)"),
    "names": (lambda v: isinstance(v, tuple) and all(
        isinstance(s, str) and len(s) < 1000 and s.isprintable() for s in v),
        "a list of printable strings"),
}


def _where(index, spec) -> str:
    name = spec.get("name") if isinstance(spec, dict) else None
    op = spec.get("op") if isinstance(spec, dict) else None
    if isinstance(name, str) and isinstance(op, str):
        return f"node {index} ({_shown(op)[1:-1]} {_shown(name)})"
    return f"node {index}"


def _short(path: str) -> str:
    return path if len(path) <= 200 else path[:197] + "..."


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
