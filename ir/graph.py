"""Graph, Node and Value: the IR every layer shares.

A Graph holds Nodes in creation order (which is always a topological order: a node's
inputs exist before it). Names are unique in a graph and carry the name scope
("dense/matmul_1"); every node records the user's file:line that created it.
"""
from __future__ import annotations

import contextlib
import threading
from collections import defaultdict
from types import MappingProxyType

import numpy as np

from .dot import dot_available, graph_to_svg
from .errors import FragflowError, GraphError
from .ops.registry import get_op
from .sanitize import check_name, check_scope, clean_source
from .source import user_location
from .types import TensorType


def mixed_graphs(value: Value, graph: Graph) -> str:
    """Why value cannot be used in graph (two graphs may well share a name)."""
    other = value.graph.name
    same = " (another graph of the same name)" if other == graph.name else ""
    return (f"'{value.name}' belongs to graph '{other}'{same}, not to '{graph.name}' "
            f"where this op is built: tensors of different graphs do not mix")


class Value:
    """One output of a node."""

    __slots__ = ("node", "index", "type")

    def __init__(self, node: Node, index: int, type: TensorType):
        self.node, self.index, self.type = node, index, type

    @property
    def graph(self) -> Graph:
        return self.node.graph

    @property
    def shape(self) -> tuple:
        return self.type.shape

    @property
    def dtype(self) -> str:
        return self.type.dtype

    @property
    def name(self) -> str:
        node = self.node
        return node.name if len(node.outputs) == 1 else f"{node.name}:{self.index}"

    def __repr__(self):
        return f"<Value {self.name}: {self.type}>"


def freeze_attr(value):
    """Attrs are immutable: lists become tuples, arrays become read-only copies."""
    if isinstance(value, np.ndarray):
        if not value.flags.writeable:       # already frozen: share, don't copy weights
            return value
        frozen = np.array(value, copy=True)
        frozen.setflags(write=False)
        return frozen
    if isinstance(value, (list, tuple)):
        return tuple(freeze_attr(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


class Node:
    __slots__ = ("graph", "op", "inputs", "attrs", "outputs", "name", "scope", "source")

    def __init__(self, graph, op, inputs, attrs, name, scope, source):
        self.graph = graph
        self.op = op
        self.inputs = tuple(inputs)
        self.attrs = MappingProxyType({k: freeze_attr(v) for k, v in attrs.items()})
        self.outputs: tuple = ()
        self.name = name
        self.scope = scope
        self.source = source

    @property
    def output(self) -> Value:
        if len(self.outputs) != 1:
            raise GraphError(f"node '{self.name}' has {len(self.outputs)} outputs")
        return self.outputs[0]

    def where(self) -> str:
        """'add 'dense/add_1' (model.py:12)' — how errors point at a node."""
        return f"{self.op} '{self.name}'" + (f" ({self.source})" if self.source else "")

    def __repr__(self):
        return f"<Node {self.name} = {self.op}>"


class Graph:
    """A tensor computation, built lazily: nodes in creation order (a topological order)."""

    def __init__(self, name: str = "graph"):
        self.name = name
        self.nodes: list[Node] = []
        self._by_name: dict[str, Node] = {}
        self._counts: dict[str, int] = defaultdict(int)
        self._scopes: list[str] = []
        self._source_override: str | None = None
        self.outputs: list[Value] = []   # set on compiled graphs (the fetches)
        # custom_gradient functions by key (Python callables: not serialised)
        self.custom_gradients: dict = {}
        # a sub-graph (a loop's body, a cond's branch: ir/ops/control.py) while it is
        # traced: the graph it is built inside, and the outer values it reads, each
        # seen inside through a placeholder of its own (captured, in order)
        self.parent: Graph | None = None
        self.captured: list[Value] = []
        self._captures: dict = {}
        # how an imported model's weights were stored where it came from (frontends
        # fill it: frontend/tfjs, frontend/onnx), for exporters to store a constant equal to one's
        # decoding in that smaller form: [{"dtype": "float16"} | {"dtype": "uint8" or
        # "uint16", "min": float, "scale": float, "size": elements}]
        self.weight_encodings: list = []

    # -- scopes and names -------------------------------------------------------
    @property
    def scope(self) -> str:
        return "/".join(self._scopes)

    @contextlib.contextmanager
    def name_scope(self, name: str):
        """Nodes made inside get names 'outer/name/op'. A trailing '/' means absolute."""
        if not isinstance(name, str):
            check_name(name, "name scope")            # says what it got instead
        if name.endswith("/"):
            parts = [p for p in name.strip("/").split("/") if p]
            check_scope("/".join(parts))           # names reach shader comments
            saved, self._scopes = self._scopes, parts
        else:
            check_name(name, "name scope")
            saved, self._scopes = self._scopes, self._scopes + name.split("/")
        try:
            yield self.scope
        finally:
            self._scopes = saved

    @contextlib.contextmanager
    def derived_from(self, node: Node, prefix: str):
        """Nodes made inside are named under 'prefix/<node's scope>' and carry node's
        source line: how gradient nodes point back at the forward op they came from."""
        scope = f"{prefix}/{node.scope}/" if node.scope else f"{prefix}/"
        saved = self._source_override
        self._source_override = node.source
        try:
            with self.name_scope(scope):
                yield
        finally:
            self._source_override = saved

    def _unique_name(self, base: str) -> str:
        full = f"{self.scope}/{base}" if self.scope else base
        if full not in self._by_name:
            return full
        while True:
            self._counts[full] += 1
            candidate = f"{full}_{self._counts[full]}"
            if candidate not in self._by_name:
                return candidate

    # -- building ---------------------------------------------------------------
    def add_node(self, op: str, inputs=(), attrs=None, name: str | None = None, *,
                 exact_name: str | None = None, scope: str | None = None,
                 source: str | None = None, _here: bool = False) -> Node:
        """Add a node: validates attrs and infers output types through the op's OpDef.

        exact_name/scope/source are for passes that copy nodes and keep their identity.
        """

        opdef = get_op(op)
        tracing = None if _here else _tracing_graph()
        if tracing is not None and tracing is not self and tracing.encloses(self):
            # an op on outer tensors inside a loop's body or a branch belongs to the
            # body (as TensorFlow's while context); variables stay in the outermost graph
            if op != "variable":
                return tracing.add_node(op, inputs, attrs, name, exact_name=exact_name,
                                        scope=scope, source=source)
        elif op == "variable" and self.parent is not None and exact_name is None:
            return self.root.add_node(op, inputs, attrs, name, scope=scope, source=source)
        inputs = list(inputs)
        for k, v in enumerate(inputs):
            if not isinstance(v, Value):
                raise GraphError(f"{op}: input {v!r} is not a graph value")
            if v.graph is not self:
                if self.parent is not None and self.parent_of(v.graph):
                    inputs[k] = self.capture(v)
                    continue
                raise GraphError(f"{op} ({user_location()}): {mixed_graphs(v, self)}")
        if name is not None:
            check_name(name)
        if exact_name is not None:
            check_name(exact_name)
        if scope is not None:
            check_scope(scope)
        node_name = exact_name or self._unique_name(name or op)
        if node_name in self._by_name:
            raise GraphError(f"a node named '{node_name}' already exists in '{self.name}'")
        node = Node(self, op, inputs, {}, node_name,
                    self.scope if scope is None else scope,
                    clean_source(source if source is not None else self._source_override
                                 if self._source_override is not None else user_location()))
        try:
            full_attrs = opdef.check_attrs(attrs or {})
            node.attrs = MappingProxyType({k: freeze_attr(v) for k, v in full_attrs.items()})
            types = opdef.infer_types([v.type for v in inputs], node.attrs)
        except FragflowError as err:
            raise type(err)(f"{node.where()}: {err}") from None
        node.outputs = tuple(Value(node, i, t) for i, t in enumerate(types))
        self.nodes.append(node)
        self._by_name[node_name] = node
        return node

    def drop_last(self, node: Node) -> None:
        """Remove node, the last one added and read by nothing yet (the frontend
        replaces a control-flow node so: frontend/control_effects.py)."""
        if not self.nodes or self.nodes[-1] is not node:
            raise GraphError(f"drop_last: '{node.name}' is not the last node of "
                             f"'{self.name}'")
        self.nodes.pop()
        del self._by_name[node.name]

    def add_copy(self, node: Node, inputs) -> Node:
        """A copy of node (of any graph) reading inputs (values of this graph), with
        node's op, attrs, name, scope and source: how passes copy what they keep.

        Where every input has the type node's own input had, node's attrs and output
        types are taken as they are: add_node checked and inferred them from exactly
        these (type inference is a function of input types and attrs), and a pass
        rebuilding a graph copies most nodes so (MobileNet: type inference was ~40% of
        the passes' time). Otherwise (a feed of another shape, a rewritten input)
        add_node checks and infers everything again."""
        old = node.inputs
        if (len(inputs) != len(old) or node.name in self._by_name
                or not all(type(v) is Value and v.graph is self and v.type == o.type
                           for v, o in zip(inputs, old))):
            return self.add_node(node.op, inputs, dict(node.attrs), exact_name=node.name,
                                 scope=node.scope, source=node.source)
        copy = Node(self, node.op, inputs, {}, node.name, node.scope, node.source)
        copy.attrs = node.attrs                 # a read-only mapping of frozen values
        copy.outputs = tuple(Value(copy, v.index, v.type) for v in node.outputs)
        self.nodes.append(copy)
        self._by_name[node.name] = copy
        return copy

    # -- sub-graphs ---------------------------------------------------------------
    @property
    def root(self) -> Graph:
        graph = self
        while graph.parent is not None:
            graph = graph.parent
        return graph

    def encloses(self, other: Graph) -> bool:
        """Whether other is a graph this one is (transitively) traced inside."""
        return self.parent_of(other)

    def parent_of(self, other: Graph) -> bool:
        graph = self.parent
        while graph is not None:
            if graph is other:
                return True
            graph = graph.parent
        return False

    def capture(self, value: Value) -> Value:
        """value (of a graph this sub-graph is traced inside) as seen in here: a
        placeholder standing for it, made once; the op owning the sub-graph takes the
        outer value as an explicit input (ir/ops/control.py)."""
        if value.graph is self:
            return value
        if not self.parent_of(value.graph):
            raise GraphError(f"{user_location()}: {mixed_graphs(value, self)}")
        outer = value if value.graph is self.parent else self.parent.capture(value)
        inner = self._captures.get(outer)
        if inner is None:
            base = outer.node.name.rsplit("/", 1)[-1]
            node = self.add_node("placeholder", [], {"shape": outer.shape,
                                                     "dtype": outer.dtype},
                                 exact_name=self._unique_name_at_root(f"captured_{base}"),
                                 scope="", source=outer.node.source, _here=True)
            inner = node.outputs[0]
            self._captures[outer] = inner
            self.captured.append(outer)
        return inner

    def _unique_name_at_root(self, base: str) -> str:
        saved, self._scopes = self._scopes, []
        try:
            return self._unique_name(base)
        finally:
            self._scopes = saved

    # -- queries ------------------------------------------------------------------
    def node(self, name: str) -> Node:
        try:
            return self._by_name[name]
        except KeyError:
            raise GraphError(f"no node named '{name}' in graph '{self.name}'") from None

    def __contains__(self, name: str) -> bool:
        return name in self._by_name

    def value(self, name: str) -> Value:
        """'dense/add' or 'split:1' → that Value."""
        if not isinstance(name, str):
            raise GraphError(f"a tensor name must be a string, not {type(name).__name__}")
        node_name, colon, index = name.partition(":")
        node = self.node(node_name)
        if not colon:
            return node.outputs[0] if node.outputs else self._no_output(node, name)
        if not index.isdigit() or not index.isascii():
            raise GraphError(f"invalid tensor name {name!r} in graph '{self.name}': the "
                             f"part after ':' must be an output index (0 to "
                             f"{len(node.outputs) - 1})")
        if int(index) >= len(node.outputs):
            return self._no_output(node, name)
        return node.outputs[int(index)]

    def _no_output(self, node, name):
        count = len(node.outputs)
        raise GraphError(f"no tensor {name!r} in graph '{self.name}': {node.where()} has "
                         f"{count} output{'s' if count != 1 else ''}"
                         + (f" ('{node.name}:0' to '{node.name}:{count - 1}')"
                            if count > 1 else ""))

    def to_networkx(self):
        import networkx as nx  # optional: only to_networkx needs it
        g = nx.MultiDiGraph(name=self.name)
        for node in self.nodes:
            g.add_node(node.name, op=node.op, scope=node.scope)
            for v in node.inputs:
                g.add_edge(v.node.name, node.name, value=v.name, type=str(v.type))
        return g

    @contextlib.contextmanager
    def as_default(self):
        """Make this the graph that ff.placeholder, ff.constant, ... build into, in this
        thread (as in TensorFlow, each thread has its own stack of default graphs)."""
        stack = _DEFAULTS.stack
        stack.append(self)
        try:
            yield self
        finally:
            stack.pop()

    def __repr__(self):
        return f"<Graph {self.name}: {len(self.nodes)} nodes>"

    # Jupyter/IPython: a drawing where Graphviz is installed, the text dump otherwise
    def _repr_svg_(self):
        if not dot_available() or not self.nodes:
            return None            # IPython then shows _repr_pretty_'s text
        try:
            return graph_to_svg(self)
        except FragflowError:
            return None

    def _repr_pretty_(self, printer, cycle):
        from .printer import format_graph  # printer.py imports this module
        printer.text(repr(self) if cycle else format_graph(self))


class _ThreadDefaults(threading.local):
    """Each thread's stack of as_default() graphs: two threads building two graphs at
    once never put nodes in each other's. Outside any as_default(), every thread builds
    into the one global default graph (as TensorFlow does)."""

    def __init__(self):
        self.stack: list[Graph] = []


_DEFAULTS = _ThreadDefaults()
_GLOBAL_DEFAULT = [Graph("default")]


def _tracing_graph():
    """The innermost default graph of this thread when it is a sub-graph being traced
    (ir/ops/control.py), else None."""
    stack = _DEFAULTS.stack
    return stack[-1] if stack and stack[-1].parent is not None else None


def get_default_graph() -> Graph:
    """The graph ops build into: the innermost as_default() of this thread, else the
    global default graph."""
    stack = _DEFAULTS.stack
    return stack[-1] if stack else _GLOBAL_DEFAULT[0]


def reset_default_graph() -> Graph:
    """Replace the global default graph with an empty one (not inside as_default)."""
    if _DEFAULTS.stack:
        raise GraphError("reset_default_graph() inside a 'with graph.as_default()' block")
    _GLOBAL_DEFAULT[0] = Graph("default")
    return _GLOBAL_DEFAULT[0]
