"""The reference executor: runs a compiled graph with the ops' numpy references.

It is the oracle of the tests and Session(backend="numpy") for machines without GL.
Its semantics match the GL plan's: reads of a variable see its value from the start of
the run; assigns take effect when the run ends."""
from __future__ import annotations

import numpy as np

from ..ir.errors import FragflowError
from ..ir.ops.registry import get_op


class NumpyVariables:
    def __init__(self):
        self.values: dict = {}

    def value(self, name: str, initial_value) -> np.ndarray:
        if name not in self.values:
            self.values[name] = np.array(initial_value, copy=True)
        return self.values[name]

    def read(self, name: str) -> np.ndarray:
        return self.values[name].copy()

    def write(self, name: str, value: np.ndarray) -> None:
        self.values[name] = np.array(value, copy=True)

    def release(self) -> None:
        self.values.clear()


class NumpyPlan:
    kernels: list = []

    def __init__(self, graph, variables: NumpyVariables):
        self.graph = graph
        self.variables = variables

    def run(self, feeds: dict) -> list:
        env = {}
        assigns = []
        with np.errstate(all="ignore"):
            for node in self.graph.nodes:
                if node.op == "placeholder":
                    results = [np.asarray(feeds[node.outputs[0].name])]
                elif node.op == "variable":
                    results = [self.variables.value(node.name, node.attrs["initial_value"])]
                else:
                    arrays = [env[v] for v in node.inputs]
                    try:
                        results = get_op(node.op).run_reference(arrays, node.attrs)
                    except FragflowError:
                        raise
                    except Exception as err:   # a reference that cannot run these inputs
                        raise FragflowError(f"{node.where()}: {type(err).__name__}: {err}") \
                            from err
                    if node.op == "assign":
                        assigns.append((node.inputs[0].node.name, results[0]))
                for v, r in zip(node.outputs, results):
                    env[v] = np.asarray(r, dtype=np.dtype(v.dtype)).reshape(v.shape)
        outputs = [env[v].copy() for v in self.graph.outputs]
        for name, value in assigns:
            self.variables.write(name, value)
        return outputs

    def release(self) -> None:
        pass

    def textures(self) -> list:
        return []
