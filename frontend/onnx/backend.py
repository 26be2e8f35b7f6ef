"""fragflow as an ONNX backend (onnx.backend.base.Backend), so that ONNX's own test
cases can run on it:

    from fragflow.frontend.onnx.backend import FragflowBackend
    rep = FragflowBackend.prepare(model)          # imports it (ff.onnx.load)
    outputs = rep.run([x])                        # positional, or {name: array}

prepare(model, device="CPU", backend="gl"|"numpy", trainable=False) -- ONNX's device
names mean nothing to fragflow (it runs on whatever GL context it has), so every device
is accepted.
"""
from __future__ import annotations

import numpy as np

from ..session import Session
from .errors import OnnxImportError, require_onnx
from .importer import load

require_onnx()
import onnx  # noqa: E402
from onnx import numpy_helper  # noqa: E402
from onnx.backend.base import Backend, BackendRep  # noqa: E402


def feed_array(array, placeholder):
    """An ONNX test input as the placeholder takes it (int64 -> int32, checked)."""
    array = np.asarray(array)
    if placeholder.dtype == "int32" and array.dtype != np.int32:
        if array.size and (array.min() < np.iinfo(np.int32).min or
                           array.max() > np.iinfo(np.int32).max):
            raise OnnxImportError(f"input '{placeholder.name}' holds values outside int32")
        return array.astype(np.int32)
    if placeholder.dtype == "float32" and array.dtype != np.float32:
        return array.astype(np.float32)
    return array


class FragflowBackendRep(BackendRep):
    """An imported model and a Session of it.

    A model whose graph inputs fragflow needs at import time (a Reshape's shape or a
    Resize's sizes fed as inputs, as ONNX's node tests do) is imported at the first
    run instead, with those inputs bound as initializers -- the import error says
    which input it needs, and only those are bound."""

    def __init__(self, onnx_model, backend: str = "gl", trainable: bool = False):
        self.onnx_model, self.backend, self.trainable = onnx_model, backend, trainable
        initializers = {t.name for t in onnx_model.graph.initializer}
        self.input_names = [vi.name for vi in onnx_model.graph.input
                            if vi.name not in initializers]
        self._specialised: dict = {}
        try:
            self._set(load(onnx_model, trainable=trainable), {})
        except OnnxImportError as err:
            if getattr(err, "graph_input", None) is None:
                raise
            self.model = None                    # imported at run time

    def _set(self, model, bound):
        self.model, self.bound = model, bound
        self.session = Session(model.graph, backend=self.backend)
        self._fn = self.session.compile(model.outputs, feeds=model.inputs)

    def _bind(self, arrays: dict):
        bound = {}
        while True:
            try:
                return load(_with_initializers(self.onnx_model, bound),
                            trainable=self.trainable), bound
            except OnnxImportError as err:
                name = getattr(err, "graph_input", None)
                if name is None or name in bound or name not in arrays:
                    raise
                bound[name] = np.asarray(arrays[name])

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            arrays = dict(inputs)
        else:
            inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
            arrays = dict(zip(self.input_names, inputs))
        if self.model is None or any(not np.array_equal(arrays[k], v)
                                     for k, v in self.bound.items()):
            self._set(*self._bind(arrays))
        feeds = [feed_array(arrays[name], p) for name, p in
                 self.model.inputs_by_onnx_name.items()]
        return tuple(self._fn(*feeds))


def _with_initializers(model, arrays: dict):
    """A copy of model with the graph inputs named in arrays made initializers."""
    if not arrays:
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    kept = [vi for vi in copy.graph.input if vi.name not in arrays]
    del copy.graph.input[:]
    copy.graph.input.extend(kept)
    copy.graph.initializer.extend(numpy_helper.from_array(np.asarray(a), name)
                                  for name, a in arrays.items())
    return copy


class FragflowBackend(Backend):
    """onnx.backend.base.Backend running models with fragflow."""

    @classmethod
    def prepare(cls, model, device: str = "CPU", backend: str = "gl",
                trainable: bool = False, **kwargs):
        super().prepare(model, device, **kwargs)
        return FragflowBackendRep(model, backend, trainable)

    @classmethod
    def run_model(cls, model, inputs, device: str = "CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return True


prepare = FragflowBackend.prepare
run_model = FragflowBackend.run_model
supports_device = FragflowBackend.supports_device
