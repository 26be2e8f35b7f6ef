"""A disk cache of lowered graphs, so that a new process compiling a graph it compiled
before skips the passes and the lowering (opt-in: FRAGFLOW_PLAN_CACHE=1).

The key hashes everything the lowering depends on: the graph as built (each node's op,
name, scope, source line, inputs and attrs, arrays by their bytes), the fetches, the
feeds' types, the device's Limits, the Tuning, the FRAGFLOW_* environment, numpy's and
Python's versions and the code a compile runs (each file of ir, passes, codegen and
runtime: path, size, mtime). A graph with an attr the key cannot describe is not cached;
custom gradients are not in the key (the graph holds what they built). Settings and
functions replaced at run time are not in it either: hence opt-in.

Entries are JSON (the lowered graph; kernels and layouts as tagged records) and a .bin
of its constants: loading runs no code and makes only codegen's records; a graph with
control flow keeps its compiled graph (store_graph: serialize's JSON, read as an
untrusted file, its digest keyed by the directory's own secret; check_graph). An entry
that cannot be read or used is ignored with a warning and compiled again; loaded
shaders pass the sanitiser's check, which skips only the lines of this graph's own
gpgpu_program GLSL (check_user_code). The directory is used only when it is this
user's alone. docs/ARCHITECTURE.md ("The plan cache"), docs/RUNTIME.md: timings.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import hmac
import importlib
import json
import os
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

from ..codegen.kernel import Kernel, LoweredGraph
from ..codegen.program import user_glsl
from ..ir import sanitize
from ..ir.graph import Graph
from ..ir.ops.control import subgraphs
from ..ir.serialize import graph_from_json, graph_to_json
from .shader_cache import cache_dir

FORMAT = 2
_DTYPES = ("<f4", "<i4", "|b1")     # what constants hold (float32, int32, bool)
MAX_ENTRIES = 64          # entries kept (~1.3 MB each for MobileNet, most of it weights)
MAX_BYTES = 512 << 20     # ... and their bytes at most, least recently written out first
MAX_ENTRY_BYTES = 64 << 20   # a graph whose lowered constants hold more is not cached
# records an entry may hold: codegen's dataclasses (Kernel, Binding, Layout and its
# kinds, NodeRecord, Blocking ...), named "module:class"; nothing else is made on load
_RECORD_MODULES = "fragflow.codegen."
_COMPILE_LAYERS = ("ir", "passes", "codegen", "runtime")    # what a compile runs
_SUFFIXES = (".py", ".j2", ".glsl")
_code_fingerprint: str | None = None


class Uncacheable(Exception):
    """Something the key or an entry cannot describe: compile as usual."""


def enabled() -> bool:
    return os.environ.get("FRAGFLOW_PLAN_CACHE", "").strip().lower() in ("1", "true", "yes")


def plan_dir() -> Path:
    return cache_dir() / "plans"


# -- the key ----------------------------------------------------------------------------
def _layer_dirs() -> list:
    return [Path(importlib.import_module(f"fragflow.{layer}").__file__).parent
            for layer in _COMPILE_LAYERS]


def code_fingerprint() -> str:
    """The code a compile runs (fragflow's ir, passes, codegen with its templates, and
    runtime packages): each file's path, size and mtime, hashed once a process."""
    global _code_fingerprint
    if _code_fingerprint is None:
        h = hashlib.blake2b(digest_size=16)
        for top in _layer_dirs():
            for root, subdirs, files in os.walk(top):
                subdirs[:] = sorted(d for d in subdirs if d != "__pycache__")
                for name in sorted(files):
                    if name.endswith(_SUFFIXES):
                        info = os.stat(os.path.join(root, name))
                        h.update(f"{root}/{name}:{info.st_size}:{info.st_mtime_ns}\n"
                                 .encode())
        _code_fingerprint = h.hexdigest()
    return _code_fingerprint


def _attr_text(value, h) -> str:
    if isinstance(value, Graph):          # a loop's body, a branch: all of its nodes
        lines, index = _node_lines(value, h)
        try:
            outputs = [index[v] for v in value.outputs]
        except KeyError:
            raise Uncacheable("a sub-graph returning a value of another graph") from None
        return f"graph({value.name!r};{';'.join(lines)};{outputs!r})"
    if isinstance(value, np.ndarray):
        h.update(np.ascontiguousarray(value).tobytes())
        return f"array({value.dtype.str},{value.shape})"
    if value is None or isinstance(value, (bool, int, str)):
        return repr(value)
    if isinstance(value, float):
        return value.hex()                 # exact, NaN and inf included
    if isinstance(value, tuple):
        return "(" + ",".join(_attr_text(v, h) for v in value) + ")"
    raise Uncacheable(f"an attr of type {type(value).__name__}")


def _node_lines(graph, h) -> tuple:
    """A line per node of graph (op, name, scope, source line, inputs, attrs: sub-graphs
    in full) and {value: (node index, output index)}."""
    index, lines = {}, []
    for i, node in enumerate(graph.nodes):
        for v in node.outputs:
            index[v] = (i, v.index)
        attrs = [(k, _attr_text(v, h)) for k, v in sorted(node.attrs.items())]
        try:
            inputs = [index[v] for v in node.inputs]
        except KeyError:
            raise Uncacheable("a node reading a value of another graph") from None
        lines.append(repr((node.op, node.name, node.scope, node.source,   # unambiguous
                           inputs, attrs)))
    return lines, index


def plan_key(graph, fetches, feed_types: dict, limits, tuning=None) -> str:
    """The hash naming the entry of (graph, fetches, feed types) on a device with
    these limits (codegen/limits.py's Limits: the dialect and every limit lowering
    reads, by its repr) lowered with this tuning (codegen/tuning: every knob);
    Uncacheable when the graph has what the key cannot describe."""
    h = hashlib.blake2b(digest_size=20)
    # numpy's and Python's versions: constant folding runs the numpy references
    lines = [f"fragflow plan {FORMAT} {code_fingerprint()} {limits!r} "
             f"{tuning.key() if tuning is not None else None} numpy "
             f"{np.__version__} {sys.version}",
             repr(sorted((k, v) for k, v in os.environ.items() if k.startswith("FRAGFLOW_")
                         and k != "FRAGFLOW_PLAN_CACHE"))]
    nodes, index = _node_lines(graph, h)
    lines += nodes
    try:
        lines.append(repr([index[v] for v in fetches]))
        lines.append(repr(sorted((index[v], t.shape, t.dtype)
                                 for v, t in feed_types.items())))
    except KeyError:        # prune says what is wrong with it (a FetchError, ...)
        raise Uncacheable("a fetch or feed of another graph") from None
    h.update("\n".join(lines).encode())
    return h.hexdigest()


# -- entries ------------------------------------------------------------------------------
def _record_name(value) -> str:
    return f"{type(value).__module__}:{type(value).__qualname__}"


@functools.cache
def _field_names(cls) -> frozenset:
    return frozenset(f.name for f in dataclasses.fields(cls))


def _record_class(name: str):
    """The codegen dataclass a record names, or None (only modules already imported
    are looked in: loading an entry imports nothing)."""
    module, _, qualname = str(name).partition(":")
    if not module.startswith(_RECORD_MODULES) or "." in qualname:
        return None
    cls = getattr(sys.modules.get(module), qualname, None)
    return cls if isinstance(cls, type) and dataclasses.is_dataclass(cls) else None


def _encode(value, arrays: list):
    """value as JSON, arrays appended to `arrays` (their bytes go to the .bin file)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return _encode(value.item(), arrays)
    if isinstance(value, np.ndarray):
        if value.dtype.str not in _DTYPES:
            raise Uncacheable(f"an array of {value.dtype}")
        arrays.append(np.ascontiguousarray(value))
        return {"array": len(arrays) - 1}
    if isinstance(value, list):
        return [_encode(v, arrays) for v in value]
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, arrays) for v in value]}
    if isinstance(value, dict):
        return {"dict": [[_encode(k, arrays), _encode(v, arrays)] for k, v in value.items()]}
    if dataclasses.is_dataclass(value) and _record_class(_record_name(value)) is type(value):
        return {"record": _record_name(value),
                "fields": {f.name: _encode(getattr(value, f.name), arrays)
                           for f in dataclasses.fields(value)}}
    raise Uncacheable(f"a lowered graph holding a {type(value).__name__}")


def _decoder(arrays: list):
    """json's object_hook turning the tagged objects _encode wrote back into tuples,
    dicts, arrays and records (inner objects first, as the parser meets them)."""
    def hook(obj: dict):
        keys = obj.keys()
        if len(obj) == 1:
            if "tuple" in keys:
                return tuple(obj["tuple"])
            if "dict" in keys:
                return {k: v for k, v in obj["dict"]}
            if "array" in keys:
                return arrays[obj["array"]]
        elif len(obj) == 2 and "record" in keys and "fields" in keys:
            cls = _record_class(obj["record"])
            if cls is None:
                raise ValueError(f"no record type {obj['record']!r}")
            fields = obj["fields"]
            if fields.keys() != _field_names(cls):
                raise ValueError(f"a {cls.__name__} of other fields")
            # the record as it was made: its source holds the header rendered from it
            record = object.__new__(cls)
            for name, item in fields.items():
                object.__setattr__(record, name, item)
            return record
        return obj
    return hook


def _arrays_from(blob: bytes, table) -> list:
    """The arrays the entry's table describes ([offset, dtype, shape] each) in blob;
    only plain numbers and bools: nothing here can hold a Python object."""
    arrays = []
    for offset, dtype, shape in table:
        if dtype not in _DTYPES:
            raise ValueError(f"an array of dtype {dtype!r}")
        shape = tuple(int(d) for d in shape)
        count = int(np.prod(shape, dtype=np.int64))
        arrays.append(np.frombuffer(blob, np.dtype(dtype), count, int(offset))
                      .reshape(shape))
    return arrays


def _private_dir(directory: Path) -> bool:
    try:
        directory.mkdir(parents=True, mode=0o700, exist_ok=True)
        info = directory.stat()
    except OSError:
        return False
    return not (hasattr(os, "getuid") and (info.st_uid != os.getuid()
                                           or info.st_mode & 0o022))


def store(key: str, lowered: LoweredGraph, feed_names: list, fusion_report: list) -> None:
    """Write the entry (feed_names: [(node index, output index, name)]); a graph the
    entry cannot hold, or a directory that cannot be written, is skipped quietly."""
    directory = plan_dir()
    if not _private_dir(directory):
        return
    arrays: list = []
    try:
        doc = {"format": FORMAT, "key": key,
               "lowered": {f.name: _encode(getattr(lowered, f.name), arrays)
                           for f in dataclasses.fields(lowered)},
               "feed_names": [list(entry) for entry in feed_names],
               "fusion_report": list(fusion_report)}
    except Uncacheable:
        return
    table, offset = [], 0
    for a in arrays:
        table.append([offset, a.dtype.str, list(a.shape)])
        offset += a.nbytes
    if offset > MAX_ENTRY_BYTES:
        return                  # big weights: reading them back would cost like folding
    # the .bin: its table ([offset, dtype, shape] per array) as a JSON line, then the
    # arrays' bytes
    _write(directory, key, json.dumps(table).encode() + b"\n"
           + b"".join(a.tobytes() for a in arrays), doc)


def store_graph(key: str, graph: Graph, feed_names: list, fusion_report: list) -> None:
    """Write the entry of a compiled graph holding control flow (the GL runtime makes
    its ControlFlowPlan from the graph): the graph in ir/serialize.py's JSON form, with
    its sub-graphs, and the digest of that text. Skipped quietly where it cannot be."""
    directory = plan_dir()
    if not _private_dir(directory):
        return
    try:
        text = graph_to_json(graph, indent=None)
    except Exception:       # noqa: BLE001 - a graph the JSON form cannot hold: not kept
        return
    if len(text) > MAX_ENTRY_BYTES:
        return
    secret = _secret(directory)
    if secret is None:
        return
    doc = {"format": FORMAT, "key": key, "kind": "graph", "graph": text,
           "digest": _digest(secret, key, text),
           "feed_names": [list(entry) for entry in feed_names],
           "fusion_report": list(fusion_report)}
    _write(directory, key, b"[]\n", doc)


def _write(directory: Path, key: str, blob: bytes, doc: dict) -> None:
    temporary = None
    try:
        for suffix, data in ((".bin", blob),
                             (".json", json.dumps(doc).encode())):   # the JSON last
            with tempfile.NamedTemporaryFile(dir=directory, delete=False,
                                             prefix=".tmp-") as f:
                temporary = f.name
                f.write(data)
            os.replace(temporary, directory / (key + suffix))
            temporary = None
    except OSError:
        if temporary is not None:          # nothing else would ever delete it
            with contextlib.suppress(OSError):
                os.unlink(temporary)
        return
    _bound(directory)


def _bound(directory: Path) -> None:
    """Delete the least recently written entries beyond MAX_ENTRIES or MAX_BYTES."""
    try:
        entries = []
        for path in directory.glob("*.json"):
            info = path.stat()
            data = path.with_suffix(".bin")
            size = info.st_size + (data.stat().st_size if data.exists() else 0)
            entries.append((info.st_mtime_ns, size, path))
        entries.sort(reverse=True)                      # newest first
        total = 0
        for count, (_, size, path) in enumerate(entries):
            total += size
            if count >= MAX_ENTRIES or total > MAX_BYTES:
                path.unlink(missing_ok=True)
                path.with_suffix(".bin").unlink(missing_ok=True)
    except OSError:
        pass


def _user_lines(kernel) -> range:
    """The lines of kernel.source that its record says are the user's GLSL, which the
    sanitiser's check skips: only where they hold exactly the record's text (and
    check_user_code makes sure that text is one of the graph's gpgpu_programs')."""
    if kernel.user_code is None:
        return range(0)
    _, first, text = kernel.user_code
    if type(first) is not int or first < 1 or not isinstance(text, str):
        raise ValueError("a kernel's user code is not (program, first line, text)")
    lines = text.split("\n")
    if kernel.source.split("\n")[first - 1:first - 1 + len(lines)] != lines:
        raise ValueError("a kernel's user code is not on the lines its record says")
    return range(first, first + len(lines))


def check_user_code(lowered: LoweredGraph, graph) -> None:
    """ValueError unless the user GLSL of every kernel of a loaded entry is that of one
    of graph's gpgpu_program nodes (the graph being compiled, which the key names):
    the sanitiser's check skips those lines, so they must be the user's own."""
    claimed = [k.user_code[2] for k in lowered.kernels if k.user_code is not None]
    if claimed:
        own = {user_glsl(n.attrs) for n in graph.nodes if n.op == "gpgpu_program"}
        if not own.issuperset(claimed):
            raise ValueError("a kernel's user code is no gpgpu_program's of this graph")


def load(key: str):
    """(LoweredGraph, feed_names, fusion_report) of the entry, or None: no entry, or
    one that cannot be used (ignored with a warning; the caller compiles again)."""
    directory = plan_dir()
    path = directory / (key + ".json")
    if not path.exists() or not _private_dir(directory):
        return None
    try:
        table, _, blob = (directory / (key + ".bin")).read_bytes().partition(b"\n")
        arrays = _arrays_from(blob, json.loads(table))
        doc = json.loads(path.read_text(encoding="utf-8"), object_hook=_decoder(arrays))
        if doc.get("format") != FORMAT or doc.get("key") != key:
            raise ValueError("an entry of another key or format")
        if doc.get("kind") == "graph":
            loaded = _graph_of(doc)
        else:
            loaded = _lowered_of(doc)
        feed_names = [(int(i), int(j), str(name)) for i, j, name in doc["feed_names"]]
        report = [str(line) for line in doc["fusion_report"]]
    except Exception as exc:       # noqa: BLE001 - any broken entry is only a miss
        warnings.warn(f"fragflow: ignoring the plan cache entry {path} "
                      f"({type(exc).__name__}: {exc}); compiling again", stacklevel=3)
        return None
    return loaded, feed_names, report


def _graph_of(doc) -> Graph:
    """The compiled graph of a graph entry: read as ff.load_graph reads an untrusted
    file (bounded, checked before anything is built); user GLSL is let through here
    and checked against the graph being compiled by check_graph."""
    text, digest = doc["graph"], doc.get("digest")
    secret = _secret(plan_dir())
    if not isinstance(text, str) or not isinstance(digest, str) or secret is None or \
            not hmac.compare_digest(digest, _digest(secret, doc["key"], text)):
        raise ValueError("a graph this cache did not write (its digest differs)")
    return graph_from_json(text, allow_programs=True, max_bytes=MAX_ENTRY_BYTES)


def _secret(directory: Path) -> bytes | None:
    """The cache directory's own random key (made once, readable by this user only):
    a graph entry's digest is keyed by it, so an entry written anywhere else, or
    edited, is refused (a compiled graph runs as it says)."""
    path = directory / "secret"
    with contextlib.suppress(FileExistsError, OSError):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32))
    try:
        info = path.stat()
        if hasattr(os, "getuid") and (info.st_uid != os.getuid() or info.st_mode & 0o077):
            return None
        secret = path.read_bytes()
    except OSError:
        return None
    return secret if len(secret) == 32 else None


def _digest(secret: bytes, key: str, text: str) -> str:
    return hmac.new(secret, f"{key}\n{text}".encode(), hashlib.blake2b).hexdigest()


def _lowered_of(doc) -> LoweredGraph:
    fields = doc["lowered"]
    if sorted(fields) != sorted(f.name for f in dataclasses.fields(LoweredGraph)):
        raise ValueError("a lowered graph of other fields")
    lowered = LoweredGraph(**fields)
    for kernel in lowered.kernels:
        if not isinstance(kernel, Kernel) or not isinstance(kernel.source, str):
            raise ValueError("a step that is not a kernel")
        sanitize.check_shader(kernel.source, _user_lines(kernel))
    return lowered


def _all_nodes(graph: Graph):
    """graph's nodes and those of its sub-graphs, at any depth."""
    stack = [graph]
    while stack:
        g = stack.pop()
        for node in g.nodes:
            yield node
            stack.extend(sub for _, sub in subgraphs(node))


def _fits(got, want) -> bool:
    return got.dtype == want.dtype and len(got.shape) == len(want.shape) and all(
        a is None or b is None or a == b for a, b in zip(got.shape, want.shape))


def check_graph(loaded: Graph, graph, fetches, feed_types: dict, feed_names: list,
                initial: dict) -> None:
    """ValueError unless a graph entry fits the compile asking for it: its user GLSL
    is that of graph's own gpgpu_programs (at any depth), it returns a value of each
    fetch's type, each feed name is a placeholder of the feed's type, and its variables
    are graph's (same names, initial values)."""
    own = {user_glsl(n.attrs) for n in _all_nodes(graph) if n.op == "gpgpu_program"}
    if not own.issuperset(user_glsl(n.attrs) for n in _all_nodes(loaded)
                          if n.op == "gpgpu_program"):
        raise ValueError("a gpgpu_program that is not one of this graph's")
    if len(loaded.outputs) != len(fetches) or not all(
            _fits(got.type, want.type) for got, want in zip(loaded.outputs, fetches)):
        raise ValueError("outputs that are not the fetches' types")
    nodes = {n.name: n for n in loaded.nodes}
    for i, j, name in feed_names:
        node = nodes.get(name)
        want = feed_types.get(graph.nodes[i].outputs[j])
        if node is None or node.op != "placeholder" or want is None or \
                node.outputs[0].type != want:
            raise ValueError(f"feed {name!r} is not a placeholder of the feed's type")
    for node in loaded.nodes:
        if node.op == "variable":
            value = initial.get(node.name)
            mine = node.attrs["initial_value"]
            if value is None or value.dtype != mine.dtype or not np.array_equal(
                    value, mine, equal_nan=value.dtype.kind == "f"):
                raise ValueError(f"variable {node.name!r} is not one of this graph's")
