"""ff.tfjs.load on a TF.js layers model (model.json whose modelTopology is a Keras
config): the same imported-model form as a graph model, built through the Keras file
reader (frontend/keras_files/), which makes the layers, and the import core's one TF.js
weight reader (interop/tfjs_weights.py), which reads the shards.

The KerasModel's forward graph is copied with the file's weights in it: Variables whose
initial values are the weights (trainable=True; Keras's non-trainable ones, such as
batch norm's moving statistics, stay out of training) or constants the passes fold
(trainable=False), so any ff.Session of model.graph runs the model as loaded. Inputs
and outputs are named as TF.js's LayersModel names them in a fresh process: an input by
its InputLayer's name (a Sequential without one: "<first layer>_input"), an output
"<layer>/<layer>", with "_1", "_2", ... for a layer's later tensors.

The manifest names weights "<layer>/<weight>" as Keras 2 and TF.js's layers do; where
fragflow's layer spells a weight as Keras 3 does (keras_files/loading.py WEIGHT_ALIASES,
for ff.keras.models.load_model too), the manifest's name is
read as fragflow's, so the weights are matched by name whatever the manifest's order
(the converters of Keras 2 models list them sorted by name: nsfwjs's MobileNetV2).
"""
from __future__ import annotations

import os

from ...ir.graph import Graph
from ..interop.errors import short
from ..keras_files.config import Reader
from ..keras_files.errors import KerasImportError
from ..keras_files.loading import tfjs_layers_model
from ..tensor import Tensor, Variable
from ..variables import is_trainable, mark_not_trainable
from . import reader
from .errors import TfjsImportError


def is_layers_model(model: dict) -> bool:
    """Whether a model.json holds a TF.js layers model (a Keras topology)."""
    topology = model.get("modelTopology")
    return model.get("format") == "layers-model" or (
        isinstance(topology, dict) and ("model_config" in topology
                                        or "class_name" in topology))


def load_layers_model(model: dict, file: str, input_shapes, trainable: bool,
                      max_elements: int, max_bytes: int, custom_objects=None):
    """ff.tfjs.load's result for a layers model (its model.json already read as model);
    every failure a TfjsImportError. custom_objects: as ff.keras.models.load_model's
    (class name -> ff.keras layer class: the custom layers TF.js users register in JS)."""
    from .importer import TfjsModel  # importer.py calls this module
    weights = reader.read_weights(model, os.path.dirname(os.path.abspath(file)), max_bytes,
                                  max_elements)
    keras_reader = Reader(custom_objects, max_elements=max_elements, max_bytes=max_bytes)
    try:
        km = tfjs_layers_model(model, weights, keras_reader, compile=False, backend="numpy",
                               path=file, input_shapes=dict(input_shapes or {}))
        check_input_shapes(input_shapes, km.input_layer_names)
        graph, variables, mapping = _with_weights(km, trainable)
        # float16 / uint8 / uint16 weights as they came: exporters store them so again
        graph.weight_encodings.extend(reader.weight_encodings(model))
        ins = dict(zip(km.input_layer_names, (mapping[t.value] for t in km.inputs)))
        outs = dict(zip(output_names(km), (mapping[t.value] for t in km.outputs)))
    except TfjsImportError:
        raise
    except KerasImportError as err:      # the Keras reader's message, as ff.tfjs's error
        raise TfjsImportError(str(err)) from err
    except Exception as err:     # noqa: BLE001 -- a malformed model, never a traceback
        raise TfjsImportError(f"cannot import the layers model: {type(err).__name__}: "
                              f"{short(err, 300)}") from err
    meta = {k: model.get(k) for k in ("format", "generatedBy", "convertedBy")}
    return TfjsModel(graph, ins, outs, variables, {}, {}, meta)


def output_names(km) -> list:
    """The names TF.js gives the model's outputs: "<layer>/<layer>", made unique with
    "_<k>" over the layer's tensors in call order."""
    if km.spec.kind == "Sequential":
        last = km.spec.layers[-1].name
        return [f"{last}/{last}"] + [f"{last}/{last}_{k}" for k in range(1, len(km.outputs))]
    names = []
    for ref in km.spec.outputs:
        earlier = sum(len(km.tensor_info.get((ref.layer, j), [None]))
                      for j in range(ref.node))
        k = earlier + ref.tensor
        names.append(f"{ref.layer}/{ref.layer}" + (f"_{k}" if k else ""))
    return names


def _with_weights(km, trainable: bool):
    """km's graph copied, its variables holding the weights km's session holds:
    (graph, {weight name: Variable}, {old value: new Tensor})."""
    session = km.session
    graph = Graph(km.graph.name)
    mapping, variables = {}, {}
    for node in km.graph.nodes:
        inputs = [mapping[v].value for v in node.inputs]
        if node.op == "variable":
            old = Variable(node.outputs[0])
            array = session.get(old)
            kind, attrs = ("variable", {"initial_value": array}) if trainable else \
                ("constant", {"value": array})
            made = graph.add_node(kind, [], attrs, exact_name=node.name, scope=node.scope,
                                  source=node.source)
            if trainable:
                var = Variable(made.outputs[0])
                variables[node.name] = var
                if not is_trainable(old):
                    mark_not_trainable(var)
        else:
            made = graph.add_copy(node, inputs)
        for old, new in zip(node.outputs, made.outputs):
            mapping[old] = Variable(new) if new.node.op == "variable" else Tensor(new)
    return graph, variables, mapping


def check_input_shapes(input_shapes, names):
    unknown = sorted(set(input_shapes or {}) - set(names))
    if unknown:
        raise TfjsImportError(f"input_shapes names {', '.join(map(short, unknown))}; the "
                              f"model's inputs are {', '.join(names)}")
