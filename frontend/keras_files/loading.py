"""ff.keras.models.load_model and model_from_json: a Keras model file as a KerasModel.

The file's kind is found from its bytes (a zip: .keras; HDF5's signature: .h5; JSON
with modelTopology: a TF.js layers model), not trusted from its name. Weights are
assigned as Keras itself assigns them:
- .keras (model.weights.h5): by path, layers/<name>/vars/<i>, where <name> is the
  snake_case class name made unique in the model's layer list (dense, dense_1, ...)
  and the variables of sublayers (an LSTM's cell, Bidirectional's forward_layer and
  backward_layer) lie in groups below;
- .h5 (Keras 2 and 3): model_weights/<layer name>, in the order of the group's
  weight_names (a layer's trainable weights then the others; a nested model's of all
  its layers);
- TF.js: by name (<layer>/<weight>) where the names match, else in manifest order.
Every weight's shape is checked against the layer's before it is set.
"""
from __future__ import annotations

import contextlib
import inspect
import os
import re
import warnings

import numpy as np

from ...ir.errors import FragflowError
from ..interop import tfjs_weights
from ..interop.errors import short
from ..interop.limits import MAX_BYTES, MAX_ELEMENTS, read_bounded
from .config import OpLayer, Reader
from .errors import KerasImportError
from .model import KerasModel, NestedModel
from .storage import H5Reader, parse_json, read_keras_zip

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


def load_model(filepath, compile=True, custom_objects=None, safe_mode=True, *,  # noqa: A002
               backend="gl", max_bytes=MAX_BYTES, max_elements=MAX_ELEMENTS):
    """A Keras model file as an ff.keras Model (docs/KERAS.md, "Model files").

    filepath: a Keras 3 .keras file, a Keras 2 or 3 .h5 file, or a TF.js layers model's
    model.json (its weight shards beside it) or the folder holding it. compile: restore
    the optimizer, loss and metrics the file was compiled with (so fit carries on).
    custom_objects: {class name: ff.keras layer class, function name or Lambda layer
    name: fragflow function}. safe_mode: as Keras's; fragflow never runs code from a
    file, so a Lambda layer or a function from outside Keras fails either way unless
    custom_objects supplies it. backend: "gl" or "numpy", the Session the model runs
    on. Errors are ff.keras.KerasImportError (a ff.FragflowError)."""
    path = tfjs_weights.model_json_path(filepath, KerasImportError, "load_model")
    data = read_bounded(path, max_bytes, "Keras model file", KerasImportError)
    reader = Reader(custom_objects, safe_mode, max_elements=max_elements,
                    max_bytes=max_bytes)
    with _guard(path):
        if data.startswith(b"PK"):
            return _load_keras(data, path, reader, compile, backend, max_bytes,
                               max_elements)
        if data.startswith(HDF5_SIGNATURE):
            return _load_h5(data, path, reader, compile, backend, max_elements, max_bytes)
        if data.lstrip()[:1] == b"{":
            return _load_tfjs(data, path, reader, compile, backend, max_bytes,
                              max_elements)
    raise KerasImportError(f"{short(path)!r} is neither a .keras zip, an HDF5 .h5 file nor "
                           f"a TF.js model.json")


def model_from_json(json_string, custom_objects=None, *, backend="gl"):
    """A model from its Keras config as JSON (model.to_json(), Keras's or fragflow's),
    with weights initialised as its layers' initializers say."""
    config = parse_json(json_string, "the model JSON")
    reader = Reader(custom_objects, safe_mode=True, weights_follow=False)
    with _guard("the model JSON"):
        return KerasModel(reader.model(_model_config(config)), reader, backend)


@contextlib.contextmanager
def _guard(what):
    """The last net under a load: a malformed config the checks did not foresee ends in
    a KerasImportError, never in a raw TypeError or KeyError (the layer-level guards
    name the layer where they can)."""
    try:
        yield
    except FragflowError as err:
        if isinstance(err, KerasImportError):
            raise
        raise KerasImportError(f"{short(what)!r}: {err}") from None
    except MemoryError:
        raise KerasImportError(f"{short(what)!r}: the load ran out of memory") from None
    except RecursionError:
        raise KerasImportError(f"{short(what)!r}: the config nests too deep") from None
    except Exception as err:     # noqa: BLE001 -- untrusted input: a clear error
        raise KerasImportError(f"{short(what)!r} is not a model fragflow reads (a malformed "
                               f"config: {type(err).__name__}: {short(err, 200)})") from err


def _model_config(config):
    if isinstance(config, dict) and "model_config" in config:     # TF.js's converter
        config = config["model_config"]
    if not isinstance(config, dict):
        raise KerasImportError("model: the config is not a JSON object")
    return config


# -- the formats -----------------------------------------------------------------------
def _load_keras(data, path, reader, compile, backend, max_bytes, max_elements):
    members = read_keras_zip(data, max_bytes, path)
    config = parse_json(members["config.json"], "config.json")
    if "metadata.json" in members:
        parse_json(members["metadata.json"], "metadata.json")
    model = KerasModel(reader.model(_model_config(config)), reader, backend)
    if "model.weights.h5" in members:
        h5 = H5Reader(members["model.weights.h5"], "model.weights.h5", max_elements,
                      max_bytes)
        try:
            _assign_keras3(model, h5)
            state = _optimizer_arrays(h5, h5.child(h5.file, "optimizer/vars", "optimizer"))
        finally:
            h5.close()
        model.optimizer_state = state if compile else None
    elif "model.weights.npz" in members:
        raise KerasImportError(f"{short(path)!r}: weights in model.weights.npz are not read "
                               f"(save the model with Keras's default, .h5 weights)")
    if compile and isinstance(config, dict) and config.get("compile_config"):
        _compile(model, config["compile_config"], path)
    return model


def _load_h5(data, path, reader, compile, backend, max_elements, max_bytes):
    h5 = H5Reader(data, f"{short(path)!r}", max_elements, max_bytes)
    try:
        text = h5.attr(h5.file, "model_config")
        if text is None:
            raise KerasImportError(f"{short(path)!r} holds weights only (no model_config): "
                                   f"build the model in code and call load_weights")
        config = parse_json(text, "the .h5 file's model_config")
        model = KerasModel(reader.model(_model_config(config)), reader, backend)
        weights = h5.child(h5.file, "model_weights", "model_weights")
        _assign_legacy(model, h5, weights if weights is not None else h5.file)
        training = h5.attr(h5.file, "training_config")
        group = h5.child(h5.file, "optimizer_weights", "optimizer_weights")
        state = None
        if group is not None and compile:
            names = h5.attr(group, "weight_names", [])
            if isinstance(names, list) and all(isinstance(n, str) for n in names):
                state = [h5.array(h5.child(group, n, f"optimizer_weights/{n}"),
                                  f"optimizer_weights/{n}") for n in names]
        model.optimizer_state = state
    finally:
        h5.close()
    if compile and training:
        training = parse_json(training, "the .h5 file's training_config")
        if isinstance(training, dict):
            training = dict(training, optimizer=training.get("optimizer_config"))
            _compile(model, training, path)
    return model


def _load_tfjs(data, path, reader, compile, backend, max_bytes, max_elements):
    doc = parse_json(data, "model.json")
    if not isinstance(doc, dict):
        raise KerasImportError(f"{short(path)!r}: model.json is not a JSON object")
    _tfjs_topology(doc, path)
    weights = tfjs_weights.read_weights(doc.get("weightsManifest", []),
                                        os.path.dirname(path) or ".", max_bytes,
                                        max_elements, KerasImportError)
    return tfjs_layers_model(doc, weights, reader, compile, backend, path)


# layer class -> {TF.js / Keras 2 weight name: fragflow's (Keras 3's) name}
WEIGHT_ALIASES = {"DepthwiseConv2D": {"depthwise_kernel": "kernel"}}


def keras3_weight_names(topology, weights: dict) -> dict:
    """weights {manifest name: array} with the names WEIGHT_ALIASES lists renamed to
    fragflow's, for the layers of those classes anywhere in the topology (nested models
    included); a name the manifest already holds is never overwritten."""
    classes = {}

    def walk(value):
        if isinstance(value, dict):
            if isinstance(value.get("name"), str) and value.get("class_name") in \
                    WEIGHT_ALIASES:
                classes[value["name"]] = value["class_name"]
            config = value.get("config")
            if isinstance(config, dict) and isinstance(config.get("name"), str) and \
                    value.get("class_name") in WEIGHT_ALIASES:
                classes[config["name"]] = value["class_name"]
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(topology)
    if not classes:
        return weights
    out = {}
    for name, array in weights.items():
        layer, _, weight = name.rpartition("/")
        alias = WEIGHT_ALIASES.get(classes.get(layer.rpartition("/")[-1]), {}).get(weight)
        renamed = f"{layer}/{alias}" if alias else name
        out[renamed if renamed not in weights else name] = array
    return out


def tfjs_layers_model(doc, weights, reader, compile=True, backend="gl", path="model.json",
                      input_shapes=None):
    """A TF.js layers model (its model.json as a dict, its weights as read by
    interop/tfjs_weights.py) as a KerasModel; ff.tfjs.load builds layers models here too.
    input_shapes: {input layer name: shape} fixing the inputs' free dims."""
    topology = _tfjs_topology(doc, path)
    weights = keras3_weight_names(doc.get("modelTopology"), weights)
    reader.tfjs = True
    with _guard(path):
        model = KerasModel(reader.model(_model_config(topology)), reader, backend,
                           input_shapes)
        _assign_by_name(model, list(weights.items()))
    training = topology.get("training_config") or doc.get("trainingConfig")
    if compile and isinstance(training, dict):
        _compile(model, dict(training, optimizer=training.get("optimizer_config")), path)
    return model


def _tfjs_topology(doc, path):
    topology = doc.get("modelTopology")
    if not isinstance(topology, dict):
        raise KerasImportError(f"{short(path)!r}: no modelTopology (a TF.js layers model's "
                               f"model.json holds one)")
    if doc.get("format") == "graph-model" or "node" in topology:
        raise KerasImportError(f"{short(path)!r} is a TF.js graph model: ff.tfjs.load reads "
                               f"it")
    return topology


# -- weights ---------------------------------------------------------------------------
def keras_snake(name: str) -> str:
    """Keras's to_snake_case (the names of a .keras file's weight groups)."""
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def unique_paths(class_names) -> list:
    """The group names Keras gives a list of objects: snake_case class name, then _1,
    _2 ... for repeats."""
    used, out = {}, []
    for class_name in class_names:
        name = keras_snake(class_name)
        if name in used:
            used[name] += 1
            name = f"{name}_{used[name]}"
        else:
            used[name] = 0
        out.append(name)
    return out


# Sublayers whose variables a .keras file keeps in groups of their own, in the order of
# the fragflow layer's weights. A layer not here may have one such group (an RNN's cell,
# TimeDistributed's layer); with several, their order is not guessed.
SUBGROUPS = {"Bidirectional": ["forward_layer", "backward_layer"],
             "MultiHeadAttention": ["query_dense", "key_dense", "value_dense",
                                    "output_dense"]}


def _keras3_arrays(h5, group, class_name, where) -> list:
    """The arrays under a layer's group, in its weights' order."""
    out = []
    vars_group = h5.child(group, "vars", where)
    if vars_group is not None:
        keys = sorted((k for k in h5.names(vars_group) if k.isdigit()), key=int)
        out += [h5.array(h5.child(vars_group, k, where), f"{where}/vars/{k}") for k in keys]
    subs = SUBGROUPS.get(class_name)
    if subs is None:
        subs = [k for k in h5.names(group) if k != "vars" and _holds_vars(h5, group, k)]
        if len(subs) > 1:
            raise KerasImportError(f"{where}: the weights of {class_name} lie in groups "
                                   f"{', '.join(subs)}, whose order fragflow does not "
                                   f"know (loading.SUBGROUPS)")
    for sub in subs:
        child = h5.child(group, sub, where)
        if child is not None:
            out += _keras3_arrays(h5, child, "", f"{where}/{sub}")
    return out


def _holds_vars(h5, group, name, depth=0) -> bool:
    """Whether a subgroup holds any variable (a dataset below it; links refused as
    everywhere)."""
    child = h5.child(group, name, name)
    if isinstance(child, h5.h5py.Dataset):
        return True
    if child is None or depth > 8:
        return False
    return any(_holds_vars(h5, child, k, depth + 1) for k in h5.names(child))


def _assign_keras3(model, h5):
    layers = h5.child(h5.file, "layers", "model.weights.h5")
    _assign_keras3_layers(model, model._objects, model.spec, h5, layers, "layers")


def _assign_keras3_layers(model, objects, spec, h5, group, where):
    specs = [ls for ls in spec.layers if not isinstance(objects[ls.name], OpLayer)]
    classes = [ls.class_name if ls.model is None else ls.model.kind for ls in specs]
    classes = [("Functional" if c == "Model" else c) for c in classes]
    for ls, sub in zip(specs, unique_paths(classes)):
        layer = objects[ls.name]
        here = f"{where}/{sub}"
        child = h5.child(group, sub, here) if group is not None else None
        if isinstance(layer, NestedModel):
            _assign_keras3_layers(model, layer._objects, layer.spec, h5,
                                  h5.child(child, "layers", here) if child is not None
                                  else None, f"{here}/layers")
            continue
        if not layer.weights:
            continue
        if child is None:
            raise KerasImportError(f"model.weights.h5: no weights for layer {ls.name!r} "
                                   f"({ls.class_name}) at {here}")
        _set(model, layer.weights, _keras3_arrays(h5, child, ls.class_name, here),
             ls.name, ls.class_name)


def legacy_weights(layer) -> list:
    """A layer's weights in the order Keras's .h5 files keep them: trainable, then the
    others (for a nested model, across all its layers)."""
    if not isinstance(layer, NestedModel):
        return list(layer.weights)
    if not layer.trainable:
        return list(layer.weights)
    return _trainable(layer) + _non_trainable(layer)


def _trainable(layer) -> list:
    if not layer.trainable:
        return []
    if isinstance(layer, NestedModel):
        return [w for sub in layer.layers for w in _trainable(sub)]
    return list(layer._trainable_weights)


def _non_trainable(layer) -> list:
    if not layer.trainable:
        return list(layer.weights)
    if isinstance(layer, NestedModel):
        return [w for sub in layer.layers for w in _non_trainable(sub)]
    return list(layer._non_trainable_weights)


def _assign_legacy(model, h5, group):
    for layer in model.layers:
        weights = legacy_weights(layer)
        if not weights:
            continue
        here = f"model_weights/{layer.name}"
        g = h5.child(group, layer.name, here)
        if g is None:
            raise KerasImportError(f".h5 file: no weights for layer {layer.name!r} at {here}")
        names = h5.attr(g, "weight_names", [])
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise KerasImportError(f".h5 file: {here}: weight_names is not a list of names")
        arrays = []
        for n in names:
            ds = h5.child(g, n, f"{here}/{n}")
            if ds is None:
                raise KerasImportError(f".h5 file: weight {short(n)!r} of layer "
                                       f"{layer.name!r} is missing")
            arrays.append(h5.array(ds, f"{here}/{n}"))
        _set(model, weights, arrays, layer.name, getattr(layer, "class_name",
                                                          type(layer).__name__))


def _assign_by_name(model, named):
    weights = model.weights
    by_name = {}
    for layer in model.layers:
        prefix = layer.name
        for w in legacy_weights(layer):
            by_name[f"{prefix}/{w.op.name.rsplit('/', 1)[-1]}"] = w
    if len(named) != len(weights):
        raise KerasImportError(f"model.json: the manifest holds {len(named)} weights, the "
                               f"model {len(weights)}")
    if all(name in by_name for name, _ in named) and len({n for n, _ in named}) == len(named):
        for name, array in named:
            _set(model, [by_name[name]], [array], name.split("/")[0], "weight")
        return
    _set(model, weights, [a for _, a in named], model.name, "model")


def _set(model, variables, arrays, name, class_name):
    if len(variables) != len(arrays):
        raise KerasImportError(f"layer {name!r} ({class_name}): the file holds "
                               f"{len(arrays)} weights, fragflow's layer has "
                               f"{len(variables)} ({', '.join(v.op.name for v in variables)})")
    for var, array in zip(variables, arrays):
        if tuple(array.shape) != tuple(var.shape):
            raise KerasImportError(f"layer {name!r} ({class_name}): weight {var.op.name!r} "
                                   f"has shape {list(var.shape)}, the file's "
                                   f"{list(array.shape)}")
        if not np.all(np.isfinite(array)) and array.dtype.kind == "f":
            warnings.warn(f"layer {name!r}: weight {var.op.name!r} holds NaN or inf",
                          stacklevel=4)
        model.session.set(var, np.asarray(array, np.float32))


def _optimizer_arrays(h5, group):
    """The arrays of a .keras file's optimizer/vars, in order (None if none)."""
    if group is None:
        return None
    keys = sorted((k for k in h5.names(group) if k.isdigit()), key=int)
    return [h5.array(h5.child(group, k, "optimizer"), f"optimizer/vars/{k}") for k in keys]


# -- compile ---------------------------------------------------------------------------
_OPTIMIZER_KEYS_OFF = {"weight_decay": (None, 0, 0.0), "clipnorm": (None,),
                       "global_clipnorm": (None,), "clipvalue": (None,),
                       "use_ema": (False,), "loss_scale_factor": (None,),
                       "gradient_accumulation_steps": (None, 1), "amsgrad": (False,),
                       "decay": (0, 0.0, None)}


def _optimizer(config):
    from ..namespaces import keras as _keras  # a cycle: ff.keras's namespace imports keras_files
    if isinstance(config, str):
        return config.lower()
    if not isinstance(config, dict):
        raise KerasImportError(f"optimizer {short(config)!r} is not an optimizer config")
    name, options = config.get("class_name"), dict(config.get("config") or {})
    factory = getattr(_keras.optimizers, str(name), None) if isinstance(name, str) and \
        not name.startswith("_") else None
    if factory is None:
        raise KerasImportError(f"optimizer {short(name)!r}: fragflow has "
                               f"{', '.join(dir(_keras.optimizers))}")
    kwargs = {}
    accepted = inspect.signature(factory).parameters
    for key, value in options.items():
        if key in accepted:
            kwargs[key] = value
        elif key in _OPTIMIZER_KEYS_OFF and value not in _OPTIMIZER_KEYS_OFF[key]:
            raise KerasImportError(f"optimizer {name}: {key}={short(value)!r} is not "
                                   f"supported by fragflow")
    if isinstance(kwargs.get("learning_rate"), dict):
        raise KerasImportError(f"optimizer {name}: a learning-rate schedule is not "
                               f"supported by fragflow")
    return factory(**kwargs)


def _loss(config):
    from ..namespaces import keras as _keras  # a cycle: ff.keras's namespace imports keras_files
    if config is None or isinstance(config, str):
        return config
    if isinstance(config, list):
        return [_loss(c) for c in config]
    if isinstance(config, dict) and "class_name" in config:
        name = config.get("class_name")
        cls = getattr(_keras.losses, str(name), None)
        if cls is None or str(name).startswith("_"):
            raise KerasImportError(f"loss {short(name)!r} is not one fragflow has")
        opts = config.get("config") or {}
        return cls(from_logits=bool(opts.get("from_logits", False))) \
            if isinstance(cls, type) else cls
    if isinstance(config, dict):
        return {k: _loss(v) for k, v in config.items()}
    raise KerasImportError(f"loss {short(config)!r} is not a loss config")


def _metrics(config):
    if config is None:
        return None
    if isinstance(config, str):
        return config
    if isinstance(config, list):
        return [m for m in (_metrics(c) for c in config) if m is not None]
    if isinstance(config, dict) and "class_name" in config:
        opts = config.get("config") or {}
        name = opts.get("name") if isinstance(opts, dict) else None
        return name if isinstance(name, str) else keras_snake(str(config["class_name"]))
    if isinstance(config, dict):
        return {k: _metrics(v) for k, v in config.items()}
    return None


def _compile(model, config, path):
    """model.compile as the file's compile config says; a config fragflow cannot follow
    leaves the model uncompiled with a warning (as Keras does), predict still works."""
    try:
        loss = _loss(config.get("loss"))
        if loss is None:
            return
        state = model.optimizer_state
        metrics = _metrics(config.get("metrics"))
        if len(model.outputs) == 1 and isinstance(metrics, list) and \
                any(isinstance(m, list) for m in metrics):      # Keras 2: [[metric, ...]]
            metrics = [m for row in metrics for m in (row if isinstance(row, list) else [row])]
        model.compile(_optimizer(config.get("optimizer") or "rmsprop"), loss,
                      metrics=metrics,
                      loss_weights=config.get("loss_weights"))
        model.optimizer_state = state     # the file's, restored at the first fit
        model.compiled_config = config
    except Exception as err:     # noqa: BLE001 -- any failure: uncompiled, said why
        warnings.warn(f"{short(path)!r}: the model is not compiled (compile it yourself): "
                      f"{short(err, 300)}", stacklevel=3)
