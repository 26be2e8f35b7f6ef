"""What the `fragflow` commands look at: a TARGET and the data to run it with.

A TARGET is either
- a graph saved with ff.save_graph (JSON): the fetches are its outputs or, when it has
  none, its sink nodes (values nothing consumes); or
- an ONNX model (`model.onnx`, read by ff.onnx.load): the fetches are its outputs; or
- a TF.js graph model (a `model.json`, or any `.json` whose format is "graph-model",
  read by ff.tfjs.load; --feed-shape fixes its free dims at import, where its shape
  arithmetic needs them): the fetches are its outputs; or
- `path/model.py:func`: func() builds a graph and returns its fetches (a tensor, or a
  list/tuple/dict of them), or a (fetches, feed_dict) pair so that shapes are concrete.

Placeholders the fetches need and no feed_dict fills get seeded random data (float32:
standard normal; int32 and bool: zeros, safe as indices) of their declared shape, or of
the shape given with --feed-shape NAME=2,3 where a dimension is None.
"""
from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from dataclasses import dataclass, field

import numpy as np

import fragflow as ff
from fragflow.ir.graph import Graph, Value
from fragflow.ir.ops.registry import all_ops
from fragflow.passes.prune import needed_nodes

_SOURCE_OPS = frozenset(name for name, opdef in all_ops().items() if opdef.kind == "source")
_module_ids = itertools.count()


class TargetError(ff.FragflowError):
    """A TARGET that cannot be loaded or run (missing shapes, bad path, ...)."""


@dataclass
class Target:
    graph: Graph
    fetches: list                     # flat list of Values
    labels: list                      # a name per fetch (the dict key, or the value's)
    feed_dict: dict = field(default_factory=dict)   # Value -> array given by func()
    description: str = ""

    def placeholders(self, fed: bool = False) -> list:
        """The placeholders the fetches need and the feed_dict does not feed, in graph
        order; fed=True: the fed ones too (every input of an export)."""
        needed = needed_nodes(self.graph, self.fetches, set(self.feed_dict))
        return [n for n in self.graph.nodes if n.op == "placeholder" and
                (n in needed or (fed and n.outputs[0] in self.feed_dict))]

    def feeds(self, feed_shapes: dict | None = None, seed: int = 0) -> dict:
        """{Value: array} for every placeholder the fetches need: func()'s feed_dict,
        else random data of the declared shape (or the --feed-shape given)."""
        feed_shapes = dict(feed_shapes or {})
        needed = self.placeholders()
        unknown = sorted(set(feed_shapes) - {n.name for n in needed})
        if unknown:
            raise TargetError(f"--feed-shape for {unknown}: no placeholder the fetches "
                              f"need has that name (they need: "
                              f"{', '.join(n.name for n in needed) or 'none'})")
        rng = np.random.default_rng(seed)
        feeds = dict(self.feed_dict)
        for node in needed:
            value = node.outputs[0]
            shape = feed_shapes.get(node.name)
            declared = value.shape
            if shape is None:
                if any(d is None for d in declared):
                    example = ",".join(str(d or 8) for d in declared)
                    raise TargetError(
                        f"placeholder '{node.name}' has shape {value.type}"
                        + (f" ({node.source})" if node.source else "")
                        + f": give its shape with --feed-shape {node.name}={example}"
                        + (" (or return (fetches, feed_dict) from the function)"
                           if ":" in self.description else ""))
                shape = declared
            elif len(shape) != len(declared) or any(
                    d is not None and d != s for d, s in zip(declared, shape)):
                raise TargetError(f"--feed-shape {node.name}={_dims(shape)} does not fit "
                                  f"its declared shape {value.type}")
            feeds[value] = _random(tuple(shape), value.dtype, rng)
        return feeds

    def feed_types(self, feed_shapes: dict | None = None) -> dict:
        """{Value: TensorType} for the passes: concrete where the data is known, else the
        declared types (passes work with unknown dimensions; kernels do not)."""
        try:
            return {v: ff.TensorType(np.shape(a), v.dtype)
                    for v, a in self.feeds(feed_shapes).items()}
        except TargetError:
            return {n.outputs[0]: n.outputs[0].type for n in self.placeholders()}


def _dims(shape) -> str:
    return ",".join(str(d) for d in shape)


def _random(shape, dtype, rng):
    if dtype == "float32":
        return rng.standard_normal(shape).astype(np.float32)
    return np.zeros(shape, np.dtype(dtype))


def parse_feed_shapes(items) -> dict:
    """["x=2,3", "y=4"] -> {"x": (2, 3), "y": (4,)}; "s=" is a scalar."""
    shapes = {}
    for item in items or ():
        name, sep, dims = item.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = tuple(int(d) for d in dims.split(",") if d.strip())
            if any(d < 0 for d in shapes[name]):
                raise ValueError
        except ValueError:
            raise TargetError(f"--feed-shape {item!r}: write NAME=D1,D2,... "
                              f"(e.g. x=8,4)") from None
    return shapes


def load_target(spec: str, feed_shapes: dict | None = None) -> Target:
    path, sep, func = spec.rpartition(":")
    if sep and path.endswith(".py") and func.isidentifier():
        return _load_python(path, func, spec)
    if spec.endswith(".onnx"):
        return _load_onnx(spec)
    if _is_tfjs(spec):
        return _load_tfjs(spec, feed_shapes)
    if spec.endswith(".py"):
        raise TargetError(f"{spec!r}: name the function that builds the graph, "
                          f"e.g. {spec}:build")
    return _load_saved(spec)


def _load_saved(path: str) -> Target:
    graph = ff.load_graph(path)
    fetches = list(graph.outputs)
    if not fetches:
        consumed = {v for n in graph.nodes for v in n.inputs}
        fetches = [v for n in graph.nodes if n.op not in _SOURCE_OPS
                   for v in n.outputs if v not in consumed]
    if not fetches:
        raise TargetError(f"{path}: the graph has no outputs and no node to fetch")
    return Target(graph, fetches, [v.name for v in fetches], {}, path)


def _load_onnx(path: str) -> Target:
    """An ONNX model (ff.onnx.load): its outputs are the fetches, labelled by ONNX name."""
    if not os.path.exists(path):
        raise TargetError(f"{path!r}: no such file")
    model = ff.onnx.load(path)
    return Target(model.graph, [t.value for t in model.outputs],
                  list(model.outputs_by_onnx_name), {}, path)


def _is_tfjs(path: str) -> bool:
    """A TF.js model.json (by name, or a .json whose "format" says graph-model)."""
    if os.path.basename(path) == "model.json" or (
            os.path.isdir(path) and os.path.isfile(os.path.join(path, "model.json"))):
        return True
    if not path.endswith(".json") or not os.path.isfile(path):
        return False
    with open(path, "rb") as f:
        head = f.read(4096)
    return b'"graph-model"' in head or b'"modelTopology"' in head


def _load_tfjs(path: str, feed_shapes: dict | None) -> Target:
    """A TF.js graph model (ff.tfjs.load): its outputs are the fetches, labelled by the
    names TF.js gives them; --feed-shape fixes its inputs' free dims at import."""
    model = ff.tfjs.load(path, input_shapes=feed_shapes or None)
    if isinstance(model, ff.tfjs.StagedTfjsModel):
        raise TargetError(f"{path!r} is a staged TF.js model ({model.staged_by}): its "
                          f"graph depends on the data it runs on; in Python, "
                          f"ff.tfjs.load(path).stage(feeds) gives the graph for given "
                          f"feeds, .run(feeds) runs it (docs/TFJS.md, Staged models)")
    return Target(model.graph, [t.value for t in model.outputs],
                  list(model.outputs_by_name), {}, path)


def _load_python(path: str, func: str, spec: str) -> Target:
    if not os.path.exists(path):
        raise TargetError(f"{spec!r}: no file {path!r}")
    module_name = f"_fragflow_target_{next(_module_ids)}"
    module_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(module_spec)
    directory = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, directory)        # the model's own imports beside it
    try:
        module_spec.loader.exec_module(module)
    finally:
        if sys.path and sys.path[0] == directory:
            sys.path.pop(0)
    fn = getattr(module, func, None)
    if not callable(fn):
        raise TargetError(f"{spec!r}: {path} has no function {func!r}")
    result = fn()
    fetches, feed_dict = result, {}
    if isinstance(result, tuple) and len(result) == 2 and \
            (isinstance(result[1], dict) or result[1] is None) and \
            not any(isinstance(v, (ff.Tensor, Value)) for v in (result[1] or {}).values()):
        fetches, feed_dict = result[0], result[1] or {}
    flat, labels = _flatten(fetches, spec)
    graph = flat[0].graph
    for v in flat:
        if v.graph is not graph:
            raise TargetError(f"{spec!r}: the fetches belong to different graphs")
    feeds = {}
    for key, data in feed_dict.items():
        value = graph.value(key) if isinstance(key, str) else \
            key.value if isinstance(key, ff.Tensor) else key
        if not isinstance(value, Value) or value.graph is not graph:
            raise TargetError(f"{spec!r}: feed key {key!r} is not a tensor of the graph")
        feeds[value] = np.asarray(data)
    return Target(graph, flat, labels, feeds, spec)


def _flatten(fetches, spec) -> tuple:
    if isinstance(fetches, dict):
        items = list(fetches.items())
    elif isinstance(fetches, (list, tuple)):
        items = [(None, f) for f in fetches]
    else:
        items = [(None, fetches)]
    flat, labels = [], []
    for key, f in items:
        value = f.value if isinstance(f, ff.Tensor) else f
        if not isinstance(value, Value):
            raise TargetError(f"{spec!r} returned {f!r}: the function must return the "
                              f"fetches (a tensor, or a list/tuple/dict of tensors), or a "
                              f"(fetches, feed_dict) pair")
        flat.append(value)
        labels.append(str(key) if key is not None else value.name)
    if not flat:
        raise TargetError(f"{spec!r} returned no fetches")
    return flat, labels
