"""What an inference actor runs: a saved graph with its checkpoint, or an ONNX model.

Both are small picklable records holding the bytes themselves (graph JSON, checkpoint,
ONNX file), not paths: the actors of a cluster need not share a file system. Each
actor calls open(device) once and gets a Session and a compiled function."""
from __future__ import annotations

import io
import os
import tempfile

import numpy as np

import fragflow as ff


def _name(tensor_or_name) -> str:
    return tensor_or_name if isinstance(tensor_or_name, str) else tensor_or_name.name


class GraphModel:
    """A graph saved with ff.save_graph (or its JSON text) plus a checkpoint written by
    Session.save (optional), run as fn(*inputs) -> outputs.

    inputs, outputs: tensors or tensor names ("x", "dense/add") of that graph."""

    def __init__(self, graph_json: str, inputs, outputs, checkpoint: bytes | None = None):
        self.graph_json = graph_json
        self.input_names = [_name(t) for t in inputs]
        self.output_names = [_name(t) for t in outputs]
        self.checkpoint = checkpoint

    @classmethod
    def from_files(cls, graph_path, inputs, outputs, checkpoint_path=None) -> GraphModel:
        """From a save_graph file and a Session.save checkpoint (.npz)."""
        with open(graph_path, encoding="utf-8") as f:
            text = f.read()
        data = None
        if checkpoint_path is not None:
            if not os.path.exists(checkpoint_path) and os.path.exists(f"{checkpoint_path}.npz"):
                checkpoint_path = f"{checkpoint_path}.npz"
            with open(checkpoint_path, "rb") as f:
                data = f.read()
        return cls(text, inputs, outputs, data)

    @classmethod
    def from_session(cls, session, inputs, outputs) -> GraphModel:
        """The session's graph with its variables' current values."""
        names = [n.name for n in session.graph.nodes if n.op == "variable"]
        buffer = io.BytesIO()
        np.savez(buffer, **{n: session.get(session.graph.value(n)) for n in names})
        return cls(ff.dump(session.graph, format="json"), inputs, outputs,
                   buffer.getvalue() if names else None)

    def open(self, device=None):
        """(session, fn) on this process's GL device; fn(*input arrays) -> [outputs]."""
        graph = ff.load_graph(self.graph_json)
        session = ff.Session(graph, device=device)
        if self.checkpoint is not None:
            with tempfile.TemporaryDirectory() as folder:
                path = os.path.join(folder, "checkpoint.npz")
                with open(path, "wb") as f:
                    f.write(self.checkpoint)
                session.restore(path)
        return session, session.compile(self.output_names, feeds=self.input_names)


class OnnxModel:
    """An ONNX model (path or bytes) imported by ff.onnx.load in each actor.

    inputs / outputs: ONNX input and output names (default: the model's, in order)."""

    def __init__(self, model, inputs=None, outputs=None, input_shapes=None):
        if not isinstance(model, (bytes, bytearray)):
            with open(model, "rb") as f:
                model = f.read()
        self.onnx_bytes = bytes(model)
        self.input_shapes = input_shapes
        self._inputs, self._outputs = inputs, outputs
        if inputs is None or outputs is None:
            import onnx  # optional: fragflow[onnx]
            proto = onnx.load_from_string(self.onnx_bytes)
            initializers = {i.name for i in proto.graph.initializer}
            self._inputs = inputs or [i.name for i in proto.graph.input
                                      if i.name not in initializers]
            self._outputs = outputs or [o.name for o in proto.graph.output]
        self.input_names, self.output_names = list(self._inputs), list(self._outputs)

    def open(self, device=None):
        model = ff.onnx.load(self.onnx_bytes, trainable=False, input_shapes=self.input_shapes)
        session = ff.Session(model.graph, device=device)
        feeds = [model.inputs_by_onnx_name[n] for n in self.input_names]
        fetches = [model.outputs_by_onnx_name[n] for n in self.output_names]
        return session, session.compile(fetches, feeds=feeds)
