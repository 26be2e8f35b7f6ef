"""model.save / ff.keras.models.save_model and model.to_json: Keras 3 files.

A .keras file is a zip of config.json (the model config in Keras 3's dialect, with its
compile_config), metadata.json and model.weights.h5 (layers/<snake_case class name,
made unique>/vars/<i>, an RNN's under cell/vars, Bidirectional's under
forward_layer/cell/vars and backward_layer/cell/vars, a nested model's under
layers/...). An .h5 file is Keras's legacy layout: the config in the model_config
attribute, training_config, and model_weights/<layer name> with weight_names in the
order Keras's _legacy_weights gives. What is saved: a model read from a Keras file (its
layer configs kept), an ff.keras Sequential, or a functional ff.keras Model that is a
chain of layers, whose layers all have a Keras name.
"""
from __future__ import annotations

import datetime
import io
import json
import os
import zipfile

import numpy as np

from ...ir.errors import FragflowError
from .. import optim as _optim
from ..layers import InputLayer, Layer
from ..models.losses import LOSSES, _KerasLoss
from ..models.sequential import Model
from .config import ModelSpec, NodeRef, OpLayer, _accepted, layer_classes
from .errors import KerasImportError
from .loading import legacy_weights, unique_paths
from .model import KerasModel, NestedModel
from .storage import h5py_module

KERAS_VERSION = "3.5.0"     # the oldest Keras 3 whose files these are
_DTYPE_POLICY = {"module": "keras", "class_name": "DTypePolicy",
                 "config": {"name": "float32"}, "registered_name": None}
_RNN_CELL = ("SimpleRNN", "LSTM", "GRU")


class SaveError(KerasImportError):
    """A model fragflow cannot write as a Keras file (a layer without a Keras name, a
    model that is not a chain of layers, ...)."""


# -- the config ------------------------------------------------------------------------
def keras_class_name(layer) -> str:
    """Keras's class name of an ff layer: of its names in ff.keras.layers, the one
    Keras's class has (MaxPooling2D, not the alias MaxPool2D; Conv2D, not
    Convolution2D), which also names its weights' group in a .keras file."""
    if getattr(layer, "_keras_class", None):
        return layer._keras_class
    if isinstance(layer, NestedModel):
        return layer.spec.kind
    if getattr(type(layer), "keras_module", None):      # layers_applications.py
        return type(layer).__name__
    names = [n for n, cls in layer_classes().items() if cls is type(layer)]
    if not names:
        raise SaveError(f"layer {layer.name!r} ({type(layer).__name__}) has no Keras "
                        f"class name; it cannot be saved in a Keras file")
    return min(names, key=lambda n: ("Convolution" in n, "Pooling" not in n, n))


def _jsonable(value, where):
    if isinstance(value, tuple):
        return [_jsonable(v, where) for v in value]
    if isinstance(value, list):
        return [_jsonable(v, where) for v in value]
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Layer):
        return _layer_entry(value)
    if isinstance(value, dict):
        return {k: _jsonable(v, where) for k, v in value.items()}
    if callable(value):
        raise SaveError(f"{where} holds a Python function ({getattr(value, '__name__', value)}"
                        f"); Keras files hold names only")
    return _initializer(value, where)


def _initializer(value, where):
    value = getattr(value, "init", value)          # a CheckedInitializer's
    if isinstance(value, str):
        return value
    name = type(value).__name__
    config = {k.lstrip("_"): v for k, v in vars(value).items()
              if isinstance(v, (int, float, str, bool)) and not k.startswith("_rng")} \
        if hasattr(value, "__dict__") else {}
    return {"module": "keras.initializers", "class_name": name, "config": config,
            "registered_name": None}


def _generated_config(layer) -> dict:
    """Keras config of an ff layer made in code: each argument of its __init__ that it
    keeps under the same name."""
    config = {"name": layer.name, "trainable": bool(layer.trainable),
              "dtype": dict(_DTYPE_POLICY)}
    skip = {"name", "trainable", "input_shape", "weights"}
    for key in sorted(_accepted(type(layer)) - skip):
        if not hasattr(layer, key):
            continue
        value = getattr(layer, key)
        if key == "padding" and isinstance(value, str):
            value = value.lower()
        if key.endswith("activation") and value is None:
            value = "linear"
        config[key] = _jsonable(value, f"layer {layer.name!r} argument {key}")
    return config


def _layer_config(layer) -> dict:
    config = getattr(layer, "_keras_config", None)
    if config is None and callable(getattr(layer, "get_config", None)):
        config = _jsonable(layer.get_config(), f"layer {layer.name!r}")   # its own
    if config is None:
        return _generated_config(layer)
    accepted = _accepted(type(layer))
    config = {k: v for k, v in config.items()
              if k not in ("batch_input_shape", "input_shape", "input_dim") or k in accepted}
    if isinstance(config.get("dtype"), str) or config.get("dtype") is None:
        config["dtype"] = dict(_DTYPE_POLICY)
    return config


def _layer_entry(layer, name_key=False) -> dict:
    if isinstance(layer, NestedModel):
        return _model_entry(layer.spec, layer.layers, layer.tensor_info, layer.name,
                            layer.trainable, layer._objects)
    if isinstance(layer, OpLayer):
        return {"module": layer._keras_module, "class_name": layer._keras_class,
                "config": dict(layer._keras_config), "registered_name": layer._keras_class}
    internal = getattr(type(layer), "keras_module", None)    # layers_applications.py
    entry = {"module": internal or "keras.layers", "class_name": keras_class_name(layer),
             "config": _layer_config(layer),
             "registered_name": keras_class_name(layer) if internal else None}
    return entry


def _input_entry(name, shape, dtype) -> dict:
    return {"module": "keras.layers", "class_name": "InputLayer",
            "config": {"batch_shape": [None, *list(shape)[1:]], "dtype": dtype,
                       "sparse": False, "name": name},
            "registered_name": None}


def _tensor(ref, info) -> dict:
    shape, dtype = (info.get((ref[0], ref[1])) or [(None, "float32")] * (ref[2] + 1))[ref[2]]
    return {"class_name": "__keras_tensor__",
            "config": {"shape": shape, "dtype": dtype, "keras_history": list(ref)}}


def _node_json(value, info):
    if isinstance(value, NodeRef):
        return _tensor(value, info)
    if isinstance(value, list):
        return [_node_json(v, info) for v in value]
    if isinstance(value, dict):
        return {k: _node_json(v, info) for k, v in value.items()}
    return value


def _refs_json(refs) -> list:
    """[layer, node, tensor] for one tensor (Keras 3 writes a single input or output
    flat: a list of one would make its output a list), else a list of them."""
    return list(refs[0]) if len(refs) == 1 else [list(r) for r in refs]


def _model_entry(spec: ModelSpec, layers, info, name, trainable, objects=None) -> dict:
    if spec.kind == "Sequential":
        entries = [_input_entry(spec.input_name or f"{name}_input", spec.input_shape,
                                spec.input_dtype)]
        entries += [_layer_entry(layer) for layer in layers]
        return {"module": "keras", "class_name": "Sequential",
                "config": {"name": name, "trainable": bool(trainable),
                           "dtype": dict(_DTYPE_POLICY), "layers": entries},
                "registered_name": None,
                "build_config": {"input_shape": [None, *list(spec.input_shape)[1:]]}}
    entries = []
    for ls in spec.layers:
        layer = objects[ls.name]
        if isinstance(layer, InputLayer) or ls.class_name == "InputLayer":
            shape, dtype = info[(ls.name, 0)][0]
            entry = _input_entry(ls.name, shape, dtype)
        else:
            entry = _layer_entry(layer)
        entry["name"] = ls.name
        entry["inbound_nodes"] = [{"args": _node_json(args, info),
                                   "kwargs": _node_json(kwargs, info)}
                                  for args, kwargs in ls.nodes]
        entries.append(entry)
    return {"module": "keras.src.models.functional", "class_name": "Functional",
            "config": {"name": name, "trainable": bool(trainable), "layers": entries,
                       "input_layers": _refs_json(spec.inputs),
                       "output_layers": _refs_json(spec.outputs)},
            "registered_name": "Functional"}


def model_config(model) -> dict:
    """The Keras 3 config of model (with its compile_config when compiled)."""
    if isinstance(model, KerasModel):
        entry = _model_entry(model.spec, model.layers, model.tensor_info, model.name, True,
                             model._objects)
    else:
        entry = _code_model_entry(model)
    compile_config = _compile_config(model)
    if compile_config is not None:
        entry["compile_config"] = compile_config
    return entry


def _code_layers(model):
    if not hasattr(model, "layers") or getattr(model, "input", None) is None:
        raise SaveError(f"model {getattr(model, 'name', model)!r} is not built: call it, "
                        f"fit or predict once before saving it")
    if getattr(model, "_inner", None) is not None:
        raise SaveError(f"model '{model.name}' starts with a model; fragflow cannot save "
                        f"it as a Keras file")
    if isinstance(model, Model):
        if model._chain is None:
            raise SaveError(f"model '{model.name}' is not a chain of layers from its input "
                            f"to its output; fragflow saves such functional models only")
        return model._chain
    return [layer for layer in model.layers if not isinstance(layer, InputLayer)]


def _code_model_entry(model) -> dict:
    layers = _code_layers(model)
    spec = ModelSpec("Sequential", model.name, [], input_shape=tuple(model.input.shape),
                     input_dtype=model.input.dtype, input_name="input_layer")
    return _model_entry(spec, layers, {}, model.name, True)


def model_json(model, **kwargs) -> str:
    """model.to_json(): the Keras config as JSON text."""
    entry = model_config(model)
    entry.pop("compile_config", None)
    return json.dumps(entry, **kwargs)


# -- compile ---------------------------------------------------------------------------
_OPTIMIZER_NAMES = {_optim.SGD: "SGD", _optim.Momentum: "SGD", _optim.Adam: "Adam",
                    _optim.RMSProp: "RMSprop", _optim.Adagrad: "Adagrad",
                    _optim.Adadelta: "Adadelta", _optim.Adamax: "Adamax"}


def _optimizer_config(opt) -> dict:
    name = _OPTIMIZER_NAMES.get(type(opt))
    lr = opt._learning_rate
    if name is None or not isinstance(lr, (int, float, np.number)):
        raise SaveError(f"optimizer {type(opt).__name__}: fragflow cannot save it as a "
                        f"Keras optimizer")
    config = {"name": name.lower(), "learning_rate": float(lr)}
    if isinstance(opt, _optim.Momentum):
        config.update(momentum=float(opt._momentum), nesterov=opt._use_nesterov)
    elif name in ("Adam", "Adamax"):
        config.update(beta_1=float(opt._beta1), beta_2=float(opt._beta2),
                      epsilon=float(opt._epsilon))
    return {"module": "keras.optimizers", "class_name": name, "config": config,
            "registered_name": None}


def _loss_config(fn):
    if isinstance(fn, _KerasLoss):
        return {"module": "keras.losses", "class_name": type(fn).__name__,
                "config": {"from_logits": bool(getattr(fn, "from_logits", False))},
                "registered_name": None}
    name = getattr(fn, "__name__", None)
    if LOSSES.get(name) is not fn:
        raise SaveError(f"loss {fn!r} has no Keras name")
    return name


def _compile_config(model):
    if getattr(model, "optimizer", None) is None:
        return None
    try:
        if isinstance(model, KerasModel):
            losses = [_loss_config(f) for f in model._loss_fns]
            metrics = [[m for m, _ in row] for row in model._out_metrics]
            if len(losses) == 1:
                losses, metrics = losses[0], metrics[0]
            weights = model._loss_weights if any(w != 1.0 for w in model._loss_weights) \
                else None
        else:
            losses, metrics, weights = _loss_config(model.loss), list(model.metrics_names), \
                None
        return {"optimizer": _optimizer_config(model.optimizer), "loss": losses,
                "loss_weights": weights, "metrics": metrics or None,
                "weighted_metrics": None, "run_eagerly": False, "steps_per_execution": 1,
                "jit_compile": False}
    except SaveError:
        return None          # saved uncompiled, as Keras does with what it cannot name


# -- weights ---------------------------------------------------------------------------
def _keras3_groups(class_name, weights) -> list:
    """[(group path below the layer's, weights)] of a layer in a .keras file."""
    if class_name in _RNN_CELL:
        return [("vars", []), ("cell/vars", weights)]
    if class_name == "Bidirectional":
        half = len(weights) // 2
        return [("vars", []), ("forward_layer/cell/vars", weights[:half]),
                ("backward_layer/cell/vars", weights[half:]),
                ("forward_layer/vars", []), ("backward_layer/vars", [])]
    if class_name == "MultiHeadAttention":
        per = len(weights) // 4
        return [("vars", [])] + [(f"{sub}/vars", weights[k * per:(k + 1) * per])
                                 for k, sub in enumerate(("query_dense", "key_dense",
                                                          "value_dense", "output_dense"))]
    if class_name == "TimeDistributed":
        return [("vars", []), ("layer/vars", weights)]
    return [("vars", weights)]


def keras_optimizer_state(model) -> list:
    """The optimizer's variables as Keras 3 keeps them: [iteration, learning_rate, then
    per trainable weight its slots] (zeros for slots not made yet); SGD's momentum as
    Keras's m = -lr * TF1's accumulator. The inverse of KerasModel's restore."""
    opt, session = model.optimizer, model.session
    steps = session.get(opt.iterations) if opt.iterations is not None else 0
    out = [np.int64(steps), np.float32(opt._learning_rate)]
    slots = {_optim.Momentum: ["momentum"], _optim.Adam: ["m", "v"]}.get(type(opt), [])
    for var in model.trainable_weights:
        for slot in slots:
            made = opt._slots.get(slot, {}).get(var.op.name)
            value = session.get(made) if made is not None else np.zeros(var.shape, np.float32)
            out.append(-value * np.float32(opt._learning_rate) if slot == "momentum"
                       else value)
    return out


def _write_keras3(group, layers, classes, session):
    for layer, class_name, sub in zip(layers, classes, unique_paths(classes)):
        g = group.create_group(sub)
        if isinstance(layer, NestedModel):
            g.create_group("vars")
            inner = g.create_group("layers")
            _write_keras3(inner, layer.layers, [_class_of(la) for la in layer.layers],
                          session)
            continue
        for path, weights in _keras3_groups(class_name, list(layer.weights)):
            vars_group = g.require_group(path)
            for i, w in enumerate(weights):
                vars_group.create_dataset(str(i), data=session.get(w))


def _class_of(layer) -> str:
    if isinstance(layer, InputLayer):
        return "InputLayer"
    return keras_class_name(layer)


def _top_layers(model):
    if isinstance(model, KerasModel):
        return model.layers
    return _code_layers(model)


def _weights_h5(model) -> bytes:
    h5py = h5py_module()
    buffer = io.BytesIO()
    layers = _top_layers(model)
    with h5py.File(buffer, "w") as f:
        f.create_group("vars")
        group = f.create_group("layers")
        _write_keras3(group, layers, [_class_of(la) for la in layers], model.session)
        if getattr(model, "optimizer", None) is not None:
            opt = f.create_group("optimizer").create_group("vars")
            state = keras_optimizer_state(model)
            for i, value in enumerate(state):
                opt.create_dataset(str(i), data=value)
    return buffer.getvalue()


def _write_legacy(f, model, config):
    h5py = h5py_module()
    f.attrs["keras_version"] = KERAS_VERSION
    f.attrs["backend"] = "tensorflow"
    compile_config = config.pop("compile_config", None)
    config = {k: v for k, v in config.items() if k not in ("module", "registered_name")}
    f.attrs["model_config"] = json.dumps(config)
    if compile_config is not None:
        training = {k: v for k, v in compile_config.items() if k != "optimizer"}
        opt = compile_config["optimizer"]
        training["optimizer_config"] = {"class_name": opt["class_name"],
                                        "config": opt["config"]}
        f.attrs["training_config"] = json.dumps(training)
    weights = f.create_group("model_weights")
    layers = _top_layers(model)
    weights.attrs["layer_names"] = np.array([la.name.encode() for la in layers])
    weights.attrs["backend"] = "tensorflow"
    weights.attrs["keras_version"] = KERAS_VERSION
    for layer in layers:
        g = weights.create_group(layer.name)
        ws = legacy_weights(layer)
        names = [w.op.name for w in ws]
        g.attrs["weight_names"] = np.array([n.encode() for n in names],
                                           dtype=h5py.special_dtype(vlen=bytes)) \
            if names else np.array([], dtype=np.float64)
        for n, w in zip(names, ws):
            g.create_dataset(n, data=model.session.get(w))
    top = weights.create_group("top_level_model_weights")
    top.attrs["weight_names"] = np.array([], dtype=np.float64)


def save_model(model, filepath, overwrite=True, **kwargs):
    """model as a Keras 3 .keras file or an .h5 file (by filepath's suffix) that
    keras.models.load_model opens, and ff.keras.models.load_model reads back."""
    path = os.fspath(filepath)
    if kwargs.get("save_format") not in (None, "keras", "h5", "tf"):
        raise SaveError(f"save_format {kwargs['save_format']!r}: fragflow writes .keras "
                        f"and .h5 files")
    if os.path.exists(path) and not overwrite:
        raise SaveError(f"{path!r} exists and overwrite=False")
    try:
        config = model_config(model)
    except FragflowError as err:
        if isinstance(err, SaveError):
            raise
        raise SaveError(f"model {getattr(model, 'name', '')!r}: {err}") from None
    if path.endswith(".keras"):
        metadata = {"keras_version": KERAS_VERSION,
                    "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S")}
        weights = _weights_h5(model)
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("metadata.json", json.dumps(metadata))
            z.writestr("config.json", json.dumps(config))
            z.writestr("model.weights.h5", weights)
    elif path.endswith((".h5", ".hdf5")):
        h5py = h5py_module()
        with h5py.File(path, "w") as f:
            _write_legacy(f, model, config)
    else:
        raise SaveError(f"model.save({path!r}): the name must end in .keras or .h5 (the "
                        f"weights alone: save_weights)")
