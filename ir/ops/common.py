"""Helpers the op modules share: turning operands into graph values."""
from __future__ import annotations

import numpy as np

from ..errors import AttrError, DTypeError, GraphError
from ..graph import Graph, Value, mixed_graphs
from ..source import user_location
from ..types import TensorType, as_dtype, promote

_INT32 = np.iinfo(np.int32)


def int_attr(value, what: str) -> int:
    """value as an int attr; "0", 1.5 or True is a mistake, not 0, 1 or 1."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise AttrError(f"{what} must be an int, got {value!r}")
    return int(value)


def ints_attr(values, what: str) -> tuple:
    """values as a tuple of ints (a string is not a sequence of axes)."""
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise AttrError(f"{what} must be a sequence of ints, got {values!r}")
    return tuple(int_attr(v, what) for v in values)


def to_array(value, dtype=None) -> np.ndarray:
    """A numpy array of a fragflow dtype (float64 → float32, int64 → int32 if it fits)."""
    try:
        arr = np.asarray(value)
    except ValueError as err:                 # ragged nested lists
        raise DTypeError(f"cannot make a tensor from {type(value).__name__} data: "
                         f"{err}") from None
    if dtype is None:
        if arr.dtype.kind == "f":
            dtype = "float32"
        elif arr.dtype.kind in "iu":
            dtype = "int32"
        elif arr.dtype.kind == "b":
            dtype = "bool"
        else:
            raise DTypeError(f"cannot make a tensor from {arr.dtype} data "
                             f"(fragflow supports float32, int32 and bool)")
    dtype = as_dtype(dtype)
    if dtype == "int32" and arr.dtype.kind in "iu" and arr.size:
        if arr.min() < _INT32.min or arr.max() > _INT32.max:
            raise DTypeError(f"integer values outside int32's range ({arr.min()}..{arr.max()})")
    return np.array(arr, dtype=np.dtype(dtype), order="C")   # keeps 0-d arrays 0-d


def graph_of(*args) -> Graph:
    for a in args:
        if isinstance(a, Value):
            return a.graph
    raise GraphError("no graph value among the operands")


def weak_dtype(scalar, other: str) -> str:
    """The dtype a Python scalar takes beside a tensor of dtype `other`."""
    if isinstance(scalar, (bool, np.bool_)):
        return other
    if isinstance(scalar, (int, np.integer)):
        return "int32" if other == "bool" else other
    return "float32"


def as_value(graph: Graph, x, dtype: str | None = None) -> Value:
    if isinstance(x, Value):
        # inside a loop's body or a branch, outer and inner values meet: add_node
        # captures the outer ones (ir/graph.py Graph.capture)
        if x.graph is not graph and not (x.graph.parent_of(graph)
                                         or graph.parent_of(x.graph)):
            raise GraphError(f"{user_location()}: {mixed_graphs(x, graph)}")
        return x
    from .state import constant  # cycle: state imports this module's apply at its top
    return constant(graph, x, dtype)


def as_values(*args) -> list:
    """Operands of an elementwise op: values stay, scalars and arrays become constants.

    Python scalars are weakly typed (see ir/types.py)."""
    graph = graph_of(*args)
    tensor_dtypes = [a.dtype for a in args if isinstance(a, Value)]
    strong = promote(*tensor_dtypes)
    out = []
    for a in args:
        if isinstance(a, Value) or not np.isscalar(a):
            out.append(as_value(graph, a))
        else:
            out.append(as_value(graph, a, weak_dtype(a, strong)))
    return out


def apply(op: str, inputs, attrs=None, name=None, graph: Graph | None = None):
    """Add one node and return its single output (or all outputs for multi-output ops)."""
    graph = graph if graph is not None else graph_of(*inputs)
    node = graph.add_node(op, inputs, attrs, name)
    return node.outputs[0] if len(node.outputs) == 1 else node.outputs


def same_type(t: TensorType) -> TensorType:
    return TensorType(t.shape, t.dtype)
