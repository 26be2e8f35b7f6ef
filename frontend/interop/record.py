"""What every importer returns: the graph and its inputs and outputs by the format's
names."""
from __future__ import annotations

from ..session import Session


class ImportedModel:
    """A foreign model as a fragflow graph.

    graph: the ff.Graph. inputs / outputs: placeholders and result tensors, in the
    model's order. inputs_by_name / outputs_by_name: the same keyed by the format's names
    (ONNX's value names, TF.js's input and output names). variables: weight name ->
    ff.Variable (the trainable weights; none when imported with trainable=False).
    feed_dict({name: array}) maps those names (or placeholders) to placeholders.
    """

    format = "model"

    def __init__(self, graph, inputs: dict, outputs: dict, variables: dict, aliases=None):
        self.graph = graph
        self.inputs_by_name = dict(inputs)
        self.outputs_by_name = dict(outputs)
        self.inputs = list(self.inputs_by_name.values())
        self.outputs = list(self.outputs_by_name.values())
        self.variables = variables
        # other names a feed may use for an input (TF.js: the node's name beside its
        # signature key)
        self.input_aliases = dict(aliases or {})

    def feed_dict(self, feeds: dict) -> dict:
        """{input name or placeholder: array} -> {placeholder: array}."""
        out = {}
        for key, value in feeds.items():
            if isinstance(key, str):
                key = self.inputs_by_name.get(key, self.input_aliases.get(key, key))
            out[key] = value
        return out

    def session(self, **kwargs):
        """An ff.Session of the model's graph (kwargs as ff.Session's)."""
        return Session(self.graph, **kwargs)

    def run(self, feeds: dict, session=None) -> dict:
        """{output name: array} for {input name: array}, on session (a new GL Session
        when None)."""
        session = session if session is not None else self.session()
        values = session.run(self.outputs, self.feed_dict(feeds))
        return dict(zip(self.outputs_by_name, values))

    def __repr__(self):
        return (f"{type(self).__name__}(graph={self.graph.name!r}, "
                f"inputs={list(self.inputs_by_name)}, outputs={list(self.outputs_by_name)}, "
                f"variables={len(self.variables)})")
