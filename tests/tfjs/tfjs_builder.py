"""Small TF.js graph models written by the tests: model.json and one weight shard."""
from __future__ import annotations

import base64
import json
import os

import numpy as np

TF_TYPES = {"float32": "DT_FLOAT", "int32": "DT_INT32", "bool": "DT_BOOL"}


def attr(value):
    """A Python attr value as model.json writes it."""
    if isinstance(value, bool):
        return {"b": value}
    if isinstance(value, int):
        return {"i": str(value)}
    if isinstance(value, float):
        return {"f": value}
    if isinstance(value, str):
        if value.startswith("DT_"):
            return {"type": value}
        return {"s": base64.b64encode(value.encode()).decode()}
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, str) for v in value) and value:
            return {"list": {"s": [base64.b64encode(v.encode()).decode() for v in value]}}
        if any(isinstance(v, float) for v in value):
            return {"list": {"f": list(value)}}
        return {"list": {"i": [str(int(v)) for v in value]}}
    raise TypeError(value)


class ModelBuilder:
    def __init__(self):
        self.nodes, self.specs, self.chunks = [], [], []

    def placeholder(self, name, shape, dtype="float32"):
        self.nodes.append({"name": name, "op": "Placeholder", "attr": {
            "dtype": {"type": TF_TYPES[dtype]},
            "shape": {"shape": {"dim": [{"size": str(-1 if d is None else d)}
                                        for d in shape]}}}})
        return name

    def const(self, name, array, quantization=None, raw=None):
        """A Const node and its manifest entry (raw: the bytes to store, for quantized
        weights; else array's float32/int32/bool bytes)."""
        array = np.asarray(array)
        dtype = {np.dtype(np.float32): "float32", np.dtype(np.int32): "int32",
                 np.dtype(np.bool_): "bool"}[array.dtype]
        spec = {"name": name, "shape": list(array.shape), "dtype": dtype}
        if quantization is not None:
            spec["quantization"] = quantization
        self.specs.append(spec)
        self.chunks.append(raw if raw is not None else array.astype(
            "<f4" if dtype == "float32" else "<i4" if dtype == "int32" else "u1").tobytes())
        self.nodes.append({"name": name, "op": "Const", "attr": {
            "value": {"tensor": {"dtype": TF_TYPES[dtype]}},
            "dtype": {"type": TF_TYPES[dtype]}}})
        return name

    def op(self, op, name, inputs, **attrs):
        self.nodes.append({"name": name, "op": op, "input": list(inputs),
                           "attr": {k: attr(v) for k, v in attrs.items()}})
        return name

    def model_json(self, shard="weights.bin", signature=None) -> dict:
        model = {"format": "graph-model", "generatedBy": "fragflow tests",
                 "convertedBy": None,
                 "modelTopology": {"node": self.nodes, "library": {},
                                   "versions": {"producer": 1, "minConsumer": 0}},
                 "weightsManifest": [{"paths": [shard], "weights": self.specs}]}
        if signature is not None:
            model["signature"] = signature
        return model

    def write(self, folder, model=None, shard="weights.bin") -> str:
        os.makedirs(folder, exist_ok=True)
        model = model if model is not None else self.model_json(shard)
        path = os.path.join(folder, "model.json")
        with open(path, "w") as f:
            json.dump(model, f)
        with open(os.path.join(folder, shard), "wb") as f:
            f.write(b"".join(self.chunks))
        return path
