"""The JSON form of a graph. It round-trips exactly (format_graph(load(dump(g))) is
format_graph(g)) and loading never executes code: arrays are base64 bytes with a dtype
and a shape, everything else is plain JSON."""
from __future__ import annotations

import base64
import json
import os

import numpy as np

from .errors import FragflowError, SerializationError
from .graph import Graph
from .types import DTYPES

FORMAT = "fragflow.graph"
VERSION = 1


def _encode(value):
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
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    if isinstance(value, dict):
        if "ndarray" in value:
            spec = value["ndarray"]
            if spec.get("dtype") not in DTYPES:
                raise SerializationError(f"array of unsupported dtype {spec.get('dtype')!r}")
            raw = base64.b64decode(spec["data"], validate=True)
            arr = np.frombuffer(raw, dtype=np.dtype(spec["dtype"]).newbyteorder("<"))
            return arr.astype(spec["dtype"]).reshape(spec["shape"])
        if "float" in value and value["float"] in ("nan", "inf", "-inf"):
            return float(value["float"])
        raise SerializationError(f"unknown attribute encoding {sorted(value)}")
    return value


def graph_to_json(graph: Graph, indent: int | None = 1) -> str:
    nodes = []
    for node in graph.nodes:
        nodes.append({
            "name": node.name, "op": node.op,
            "inputs": [v.name for v in node.inputs],
            "attrs": {k: _encode(v) for k, v in node.attrs.items()},
            "scope": node.scope, "source": node.source,
        })
    doc = {"format": FORMAT, "version": VERSION, "name": graph.name, "nodes": nodes,
           "outputs": [v.name for v in graph.outputs]}
    return json.dumps(doc, indent=indent, allow_nan=False)


def graph_from_json(text_or_path) -> Graph:
    """A graph from graph_to_json's text, or from the path of a file holding it."""
    text = str(text_or_path)
    if not text.lstrip().startswith("{"):
        if not os.path.exists(text):
            raise SerializationError(f"{text!r} is neither JSON text nor an existing file")
        with open(text, encoding="utf-8") as f:
            text = f.read()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as err:
        raise SerializationError(f"not valid JSON: {err}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SerializationError("not a fragflow graph (missing \"format\": "
                                 f"\"{FORMAT}\")")
    if doc.get("version") != VERSION:
        raise SerializationError(f"graph format version {doc.get('version')} is not "
                                 f"supported (this fragflow reads version {VERSION})")
    graph = Graph(doc.get("name", "graph"))
    try:
        for spec in doc["nodes"]:
            inputs = [graph.value(name) for name in spec["inputs"]]
            attrs = {k: _decode(v) for k, v in spec["attrs"].items()}
            graph.add_node(spec["op"], inputs, attrs, exact_name=spec["name"],
                           scope=spec.get("scope", ""), source=spec.get("source", ""))
        graph.outputs = [graph.value(name) for name in doc.get("outputs", [])]
    except FragflowError as err:
        raise SerializationError(f"cannot rebuild the saved graph: {err}") from None
    except (KeyError, TypeError, ValueError) as err:
        raise SerializationError(f"malformed graph document: {err!r}") from None
    return graph
