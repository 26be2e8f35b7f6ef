"""The reference executor: runs a compiled graph with the ops' numpy references.

It is the oracle of the tests and Session(backend="numpy") for machines without GL.
Its semantics match the GL plan's: reads of a variable see its value from the start of
the run; assigns take effect when the run ends."""
from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import numpy as np

from ..codegen.kernel import records_of
from ..ir.errors import FragflowError
from ..ir.ops.registry import all_ops, get_op

# nodes whose values come from outside a run's computation: observers hear of no kernel
SOURCES = frozenset(name for name, opdef in all_ops().items() if opdef.kind == "source")


def _node_kernel(node):
    """A node as the one-node 'kernel' an observer hears of (the fields of a GL Kernel
    that observers read)."""
    return SimpleNamespace(name=node.name, op=node.op, nodes=(node.name,),
                           scope=node.scope, location=node.source,
                           node_records=records_of([node]))


class NumpyVariables:
    """A numpy session's variables: arrays, with the variable-store API of every backend
    (runtime/backend.py); plans take a variable's array with value()."""

    def __init__(self):
        self._values: dict = {}
        # a plan's run reads the variables and writes the assigned ones at its end:
        # runs of plans sharing this store, from any threads, take turns whole
        self.lock = threading.RLock()

    def value(self, name: str, initial_value) -> np.ndarray:
        """The variable's array, made from initial_value on first use."""
        if name not in self._values:     # a float16 initial value: float32 from here
            self._values[name] = np.array(initial_value, copy=True,
                                          dtype=np.float32 if initial_value.dtype == np.float16
                                          else None)
        return self._values[name]

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def read(self, name: str) -> np.ndarray:
        return self._values[name].copy()

    def write(self, name: str, value: np.ndarray) -> None:
        self._values[name] = np.array(value, copy=True)

    def textures(self) -> list:
        return []

    def release(self) -> None:
        self._values.clear()


class NumpyPlan:
    """float64=True computes float32 tensors in float64: the oracle for finite-difference
    gradient checks, where float32's rounding would swamp the differences."""
    kernels: list = []

    def __init__(self, graph, variables: NumpyVariables, float64: bool = False):
        self.graph = graph
        self.variables = variables
        self._float = np.float64 if float64 else np.float32

    def run(self, feeds: dict) -> list:
        return self.run_observed(feeds, None)

    def run_observed(self, feeds: dict, observer) -> list:
        """run() telling observer (None: nobody) about every feed and every computed
        node, as a one-node 'kernel': the numpy backend's debug mode and profile."""
        with self.variables.lock:
            return self._run_locked(feeds, observer)

    def _run_locked(self, feeds: dict, observer) -> list:
        env, assigns = {}, []
        with np.errstate(all="ignore"):
            for node in self.graph.nodes:
                start = time.perf_counter()
                results = self._results(node, feeds, env)
                if observer is not None and node.op == "placeholder":
                    observer.input(node.name, lambda r=results[0]: r)
                if node.op == "assign":
                    assigns.append((node.inputs[0].node.name, results[0]))
                for v, r in zip(node.outputs, results):
                    dtype = self._float if v.dtype == "float32" else np.dtype(v.dtype)
                    r = np.asarray(r, dtype=dtype)
                    # a loop variable under a shape invariant knows its shape only now
                    env[v] = r.reshape(v.shape) if v.type.is_static else r
                if observer is not None and node.op not in SOURCES:
                    observer.kernel(_node_kernel(node), time.perf_counter() - start,
                                    lambda v=node.outputs[0]: env[v])
        outputs = [env[v].copy() for v in self.graph.outputs]
        for name, value in assigns:
            self.variables.write(name, value.astype(np.dtype(self._dtype_of(name))))
        return outputs

    def _results(self, node, feeds: dict, env: dict) -> list:
        if node.op in ("placeholder", "run_counter"):
            return [np.asarray(feeds[node.outputs[0].name])]
        if node.op == "variable":
            return [self.variables.value(node.name, node.attrs["initial_value"])]
        if node.op == "constant":
            return [node.attrs["value"]]
        try:
            return get_op(node.op).run_reference([env[v] for v in node.inputs], node.attrs)
        except FragflowError:
            raise
        except Exception as err:   # a reference that cannot run these inputs
            raise FragflowError(f"{node.where()}: {type(err).__name__}: {err}") from err

    def _dtype_of(self, variable_name: str) -> str:
        return self.graph.node(variable_name).outputs[0].dtype

    def release(self) -> None:
        pass

    def textures(self) -> list:
        return []
