"""Where values come from: placeholders, constants, variables; and assign.

These have no kernels: the runtime uploads placeholders and constants and keeps
variables in textures it owns. assign writes a variable at the end of a run.
"""
from __future__ import annotations

import numpy as np

from ..errors import DTypeError, GraphError, ShapeError
from ..graph import Graph, Value
from ..types import TensorType, format_shape
from .common import apply, as_value, to_array
from .registry import REQUIRED, OpDef, register


def _placeholder_type(types, attrs):
    return TensorType(attrs["shape"], attrs["dtype"])


def _no_reference(arrays, attrs):
    raise GraphError("placeholders and variables get their values from the executor")


register(OpDef("placeholder", "state", _placeholder_type, _no_reference,
               attrs={"shape": REQUIRED, "dtype": REQUIRED}, num_inputs=0,
               no_gradient="a source: fed at run time", stateful=True,
               doc="A value fed at run time; None dimensions are fixed by the feed.",
               tf="tf.compat.v1.placeholder", kind="source",
               printer=lambda node, fmt: f'placeholder "{node.name}"'))

register(OpDef("constant", "state",
               lambda types, attrs: TensorType(attrs["value"].shape, attrs["value"].dtype.name),
               lambda arrays, attrs: attrs["value"],
               attrs={"value": REQUIRED}, num_inputs=0,
               no_gradient="a source: a value in the graph",
               doc="A value baked into the graph.", tf="tf.constant", kind="source",
               printer=lambda node, fmt: f"constant {fmt(node.attrs['value'])}"))

def _variable_type(types, attrs):
    value = attrs["initial_value"]
    return TensorType(value.shape, "float32" if value.dtype == np.float16 else value.dtype.name)


def initial_array(node) -> np.ndarray:
    """A variable node's initial value in its dtype: a float16 one (stored half: an
    imported model's float16 weights) as float32, where it is used."""
    value = node.attrs["initial_value"]
    return value.astype(np.float32) if value.dtype == np.float16 else value


register(OpDef("variable", "state", _variable_type,
               _no_reference, attrs={"initial_value": REQUIRED}, num_inputs=0,
               no_gradient="a source: gradients are taken with respect to it", stateful=True,
               doc="State kept by the Session (on the GPU) across runs; a float16 initial "
                   "value stays float16 in the graph (half the memory) and is float32 "
                   "where it is used.", tf="tf.Variable",
               kind="source", printer=lambda node, fmt: f'variable "{node.name}"'))


def _assign_type(types, attrs):
    var, new = types
    if var.dtype != new.dtype:
        raise DTypeError(f"cannot assign a {new.dtype} value to a {var.dtype} variable")
    if new.is_static and var.shape != new.shape:
        raise ShapeError(f"cannot assign a value of shape {format_shape(new.shape)} "
                         f"to a variable of shape {format_shape(var.shape)}")
    return var


register(OpDef("assign", "state", _assign_type, lambda arrays, attrs: arrays[1],
               num_inputs=2,
               no_gradient="it updates a variable", stateful=True,
               doc="Sets a variable to a new value when the run ends; returns the value.",
               tf="tf.compat.v1.assign"))


register(OpDef("run_counter", "state", lambda types, attrs: TensorType((), "int32"),
               _no_reference, num_inputs=0,
               no_gradient="a source: an integer the session feeds", stateful=True,
               doc="How many runs its session made before this one (int32): what makes "
                   "random ops draw fresh values every run, reproducibly.", tf="—",
                   kind="source"))

RUN_COUNTER = "run_counter"


def run_counter(graph: Graph) -> Value:
    """The graph's run counter (one per graph, made on first use)."""
    if RUN_COUNTER in graph:
        return graph.node(RUN_COUNTER).outputs[0]
    return graph.add_node("run_counter", [], {}, exact_name=RUN_COUNTER, scope="",
                          source="").outputs[0]


def placeholder(graph: Graph, shape, dtype, name=None) -> Value:
    if shape is None:
        raise ShapeError("placeholder needs a shape (use None for unknown dimensions)")
    if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__"):
        raise ShapeError(f"placeholder shape must be a sequence of ints or None, got "
                         f"{shape!r} (a scalar has shape ())")
    return apply("placeholder", [], {"shape": tuple(shape), "dtype": dtype}, name, graph)


def constant(graph: Graph, value, dtype=None, name=None) -> Value:
    return apply("constant", [], {"value": to_array(value, dtype)}, name, graph)


def variable(graph: Graph, initial_value, dtype=None, name=None) -> Value:
    """A variable; a float16 array (dtype None or float32) is kept float16 in the node,
    its type float32 (initial_array)."""
    if isinstance(initial_value, np.ndarray) and initial_value.dtype == np.float16 \
            and dtype in (None, "float32", np.float32):
        value = np.array(initial_value, dtype="=f2", order="C")
    else:
        value = to_array(initial_value, dtype)
    return apply("variable", [], {"initial_value": value}, name or "variable", graph)


def assign(var: Value, new_value, name=None) -> Value:
    if var.node.op != "variable":
        raise GraphError(f"assign needs a variable, got '{var.name}' ({var.node.op})")
    new_value = as_value(var.graph, new_value,
                         None if isinstance(new_value, Value) else var.dtype)
    return apply("assign", [var, new_value], None, name)
