"""fragflow.ir: the graph, its types, op definitions, the text and JSON forms."""
from . import ops
from .errors import *  # noqa: F401,F403
from .graph import Graph, Node, Value
from .printer import format_graph
from .serialize import graph_from_json, graph_to_json
from .types import DTYPES, TensorType, as_dtype

__all__ = ["ops", "Graph", "Node", "Value", "TensorType", "DTYPES", "as_dtype",
           "format_graph", "graph_to_json", "graph_from_json"]
