"""A Keras model config (config.json of a .keras file, model_config of an .h5 file, the
modelTopology of a TF.js layers model) read into a ModelSpec, and each layer's config
made into an ff.keras layer.

Both dialects are read: Keras 3's (layers with "module", "registered_name",
"build_config", inbound nodes as {"args": [{"class_name": "__keras_tensor__", ...}],
"kwargs": {}}, InputLayer's "batch_shape", DTypePolicy dicts) and Keras 2's (inbound
nodes as [[["dense", 0, 0, {}]]], "batch_input_shape", dtype strings, a Sequential's
config that is a bare list of layers).

A layer class is found by its Keras class name in the table of ff.keras.layers'
classes (layer_classes(): every Layer subclass that namespace holds, so a layer added
there is read with no change here), then in custom_objects. A config is data only:
nothing in it is imported or run. A Lambda layer, or a function or class from a module
outside Keras, is refused with an error naming the layer (custom_objects may supply a
fragflow function or layer class for it).
"""
from __future__ import annotations

import inspect
import math
import warnings

from ...ir.errors import FragflowError
from .. import initializers as _init, ops as _ops
from ..activations import LAYER as _ACTIVATION_NAMES
from ..interop.errors import short
from ..interop.limits import MAX_BYTES, MAX_ELEMENTS, MAX_RANK, too_large
from ..layers import Layer
from ..layers_applications import APPLICATION_LAYERS
from ..layers_rnn import _Recurrent
from .errors import KerasImportError, where

MAX_LAYERS = 100_000        # layers of one model file, nested ones included

# Arguments fragflow's layers do not take, but whose value here changes nothing they
# compute (the value is the default, or a feature that only matters elsewhere).
HARMLESS = {
    "data_format": ("channels_last",),
    "groups": (1,),
    "implementation": (0, 1, 2),          # Keras 2 LSTM/GRU: the same math in other ops
    "renorm_momentum": None,              # any value: only read with renorm=True
    "lora_alpha": None,
    "use_cudnn": None,                    # "auto": which kernel, not what it computes
    "input_dim": None,                    # Keras 2 Dense(input_dim=): the input's shape
    "input_length": None,
    "batch_size": None,
    "seed": None,
    "autocast": None,                     # mixed precision's casts: none in float32
    "dtype": None,                        # checked by _check_dtype
}
# keys of a layer's config that give its input's shape (the model's input)
SHAPE_KEYS = ("batch_shape", "batch_input_shape", "input_shape")


def layer_classes() -> dict:
    """Keras class name -> ff layer class, from ff.keras.layers (its Layer subclasses
    under every name it gives them: MaxPool2D and MaxPooling2D)."""
    from ..namespaces import keras as _keras  # a cycle: ff.keras's namespace imports keras_files
    table = {}
    for name in dir(_keras.layers):
        obj = getattr(_keras.layers, name, None)
        if isinstance(obj, type) and issubclass(obj, Layer) and obj is not Layer:
            table[name] = obj
    return table


class NodeRef(tuple):
    """(layer name, node index, tensor index): a tensor of the model, as Keras names it."""

    def __new__(cls, layer, node, tensor):
        return super().__new__(cls, (layer, node, tensor))

    layer = property(lambda self: self[0])
    node = property(lambda self: self[1])
    tensor = property(lambda self: self[2])


class LayerSpec:
    """One layer of a model config: its class, name and config, the nodes it is called
    at (args and kwargs with NodeRefs for tensors) and, for a nested model, its spec."""

    def __init__(self, class_name, name, config, nodes, raw, model=None):
        self.class_name, self.name, self.config = class_name, name, config
        self.nodes, self.raw, self.model = nodes, raw, model


class ModelSpec:
    """A Sequential or Functional model config: layers in order, the input and output
    tensors (Functional), and for a Sequential the shape and dtype of its input."""

    def __init__(self, kind, name, layers, inputs=(), outputs=(), trainable=True,
                 input_shape=None, input_dtype="float32", input_name=None):
        self.kind, self.name, self.layers = kind, name, layers
        self.inputs, self.outputs = list(inputs), list(outputs)
        self.trainable = trainable
        self.input_shape, self.input_dtype, self.input_name = \
            input_shape, input_dtype, input_name


class Reader:
    """Reads one model config: the custom objects and safe mode of the load, and a
    count of the layers read (a config cannot be larger than MAX_LAYERS)."""

    def __init__(self, custom_objects=None, safe_mode=True, weights_follow=True,
                 max_elements=MAX_ELEMENTS, max_bytes=MAX_BYTES):
        self.custom = dict(custom_objects or {})
        self.max_elements = max_elements
        self.weight_budget = [max_bytes]      # bytes the layers' weights may still take
        self.safe_mode = bool(safe_mode)
        self.weights_follow = weights_follow
        self.count = 0
        self.tfjs = False             # a TF.js layers model's config (its errors say so)
        self.classes = layer_classes()
        self.ops = _keras_ops()

    # -- the model ----------------------------------------------------------------------
    def model(self, obj, depth=0) -> ModelSpec:
        """The ModelSpec of {"class_name": "Sequential" | "Functional" | "Model",
        "config": {...}}."""
        if depth > 32:
            raise KerasImportError("model: models nested more than 32 deep")
        if not isinstance(obj, dict) or "class_name" not in obj:
            raise KerasImportError("model: the config is not a Keras model config (a JSON "
                                   "object with 'class_name' and 'config')")
        kind, config = obj.get("class_name"), obj.get("config")
        if kind == "Sequential":
            return self._sequential(config, depth)
        if kind in ("Functional", "Model"):
            return self._functional(config, depth)
        raise KerasImportError(f"model: class {short(kind)!r} is not a model fragflow "
                               f"reads (Sequential or Functional)")

    def _sequential(self, config, depth) -> ModelSpec:
        if isinstance(config, list):                     # Keras 2.2: the layers alone
            config = {"layers": config}
        layers_raw = _get(config, "layers", list, "model")
        name = _name(config.get("name", "sequential"), "model")
        layers, shape, dtype, input_name = [], None, "float32", None
        for raw in layers_raw:
            cfg = _get(raw, "config", dict, "model")
            if raw.get("class_name") == "InputLayer":
                shape, input_name = _input_shape(cfg, where(cfg.get("name"), "InputLayer")), \
                    _name(cfg.get("name", "input_layer"), "InputLayer")
                dtype = _input_dtype(cfg)
                continue
            if shape is None and not layers:
                for key in SHAPE_KEYS:
                    if cfg.get(key) is not None:
                        shape = _input_shape(cfg, where(cfg.get("name"), raw.get("class_name")))
                        dtype = _input_dtype(cfg)
            layers.append(self._layer(raw, [], depth))
        if shape is None:
            build = config.get("build_input_shape")
            if isinstance(build, list):
                shape = _shape(build, "model: build_input_shape")
        return ModelSpec("Sequential", name, layers, trainable=bool(config.get("trainable",
                                                                                True)),
                         input_shape=shape, input_dtype=dtype, input_name=input_name)

    def _functional(self, config, depth) -> ModelSpec:
        layers_raw = _get(config, "layers", list, "model")
        name = _name(config.get("name", "model"), "model")
        layers = []
        for raw in layers_raw:
            if not isinstance(raw, dict):
                raise KerasImportError(f"model {name!r}: a layer's entry is not a JSON "
                                       f"object ({short(raw)})")
            nodes = [_node(n, where(raw.get("name"), raw.get("class_name")))
                     for n in (_get(raw, "inbound_nodes", list, "model")
                               if raw.get("inbound_nodes") is not None else [])]
            layers.append(self._layer(raw, nodes, depth))
        names = [spec.name for spec in layers]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise KerasImportError(f"model {name!r}: two layers are named {dup!r}")
        refs = {"input_layers": [], "output_layers": []}
        for key in refs:
            refs[key] = _refs(config.get(key), f"model {name!r}: {key}")
            for ref in refs[key]:
                if ref.layer not in names:
                    raise KerasImportError(f"model {name!r}: {key} names layer "
                                           f"{short(ref.layer)!r}, which the model lacks")
        return ModelSpec("Functional", name, layers, refs["input_layers"],
                         refs["output_layers"], bool(config.get("trainable", True)))

    # -- one layer ----------------------------------------------------------------------
    def _layer(self, raw, nodes, depth) -> LayerSpec:
        self.count += 1
        if self.count > MAX_LAYERS:
            raise KerasImportError(f"model: more than {MAX_LAYERS} layers")
        if not isinstance(raw, dict):
            raise KerasImportError("model: a layer's config is not a JSON object")
        class_name = raw.get("class_name")
        config = raw.get("config")
        if not isinstance(class_name, str) or not isinstance(config, dict):
            raise KerasImportError(f"model: a layer lacks 'class_name' or 'config' "
                                   f"(got {short(raw)})")
        name = _name(config.get("name", raw.get("name")), where(None))
        if raw.get("name") is not None and raw.get("name") != name:
            raise KerasImportError(f"{where(name, class_name)}: its config names it "
                                   f"{short(raw.get('name'))!r}")
        model = None
        module = raw.get("module")
        if self.is_op(class_name, module, config):
            if class_name not in self.ops:
                raise KerasImportError(f"{where(name, class_name)}: fragflow has no Keras "
                                       f"op {short(class_name)!r} (of {short(module)}); "
                                       f"it has {', '.join(sorted(self.ops))}")
        elif class_name in ("Sequential", "Functional", "Model") and \
                class_name not in self.custom:
            model = self.model(raw, depth + 1)
        else:
            self.check_safe(raw, name, class_name)
        return LayerSpec(class_name, name, config, nodes, raw, model)

    def is_op(self, class_name, module, config) -> bool:
        """Whether a node is a Keras op (keras.src.ops.*). An .h5 file names no modules:
        there, an op's class name whose config is not a layer's (a layer's always holds
        'trainable'; Add the op beside Add the merging layer)."""
        if class_name in self.custom:
            return False
        if isinstance(module, str):
            return module.startswith(OP_MODULES)
        return class_name in self.ops and (class_name not in self.classes or
                                           "trainable" not in config)

    def check_safe(self, raw, name, class_name):
        """Refuse a Lambda layer, and a function or class named from a module outside
        Keras, unless custom_objects supplies it."""
        here = where(name, class_name)
        if class_name == "Lambda":
            if name not in self.custom:
                raise self.code_error(here, "a Lambda layer holds Python code", name)
            return                    # the user's function stands in for the code
        module = raw.get("module")
        registered = raw.get("registered_name")
        if class_name not in self.classes and class_name not in self.custom and (
                (isinstance(module, str) and not module.startswith("keras"))
                or (isinstance(registered, str) and registered != class_name)):
            origin = f"comes from module {short(module)!r}, outside Keras" \
                if isinstance(module, str) and not module.startswith("keras") else \
                f"is a custom class (registered as {short(registered)!r}), not Keras's"
            raise self.code_error(here, f"class {short(class_name)!r} {origin}", class_name)
        for key, value in _walk(raw.get("config", {})):
            if isinstance(value, dict) and value.get("class_name") == "__lambda__":
                raise self.code_error(here, f"argument {key} holds Python code (a "
                                            f"lambda)", name)
            if isinstance(value, dict) and value.get("class_name") == "function":
                fn = value.get("config")
                mod = value.get("module", "")
                if not (isinstance(mod, str) and mod.startswith("keras")) \
                        and not (isinstance(fn, str) and fn in self.custom):
                    raise self.code_error(here, f"argument {key} names function "
                                                f"{short(fn)!r} of module {short(mod)!r}",
                                          fn)

    def code_error(self, here, what, key):
        if self.safe_mode:
            return KerasImportError(
                f"{here}: {what}; refused with safe_mode=True (a model file is untrusted, "
                f"and fragflow never runs code from a file): custom_objects="
                f"{{{short(key)!r}: ...}} may give the fragflow function (tensor -> "
                f"tensor) or ff.keras layer class to use instead")
        return KerasImportError(
            f"{here}: {what}; fragflow never runs code from a file, even with "
            f"safe_mode=False: pass custom_objects={{{short(key)!r}: ...}} with the "
            f"fragflow function (tensor -> tensor) or ff.keras layer class to use instead")

    def make_layer(self, spec: LayerSpec, scope=None):
        """The ff layer for a layer spec (its config's arguments checked and mapped)."""
        here = where(spec.name, spec.class_name)
        module = spec.raw.get("module")
        if self.is_op(spec.class_name, module, spec.config):
            options = {k: v for k, v in spec.config.items() if k != "name"}
            layer = OpLayer(self.ops[spec.class_name], spec.class_name,
                            module or "keras.src.ops.numpy", options, name=spec.name)
            layer._keras_config = spec.config
            return layer
        if spec.class_name == "Lambda" or (spec.class_name not in self.classes
                                           and spec.name in self.custom
                                           and spec.class_name not in self.custom):
            fn = self.custom.get(spec.name)
            if not callable(fn):
                raise self.code_error(here, "a Lambda layer holds Python code", spec.name)
            return FunctionLayer(fn, name=spec.name)
        cls = self.custom.get(spec.class_name) or \
            APPLICATION_LAYERS.get((module, spec.class_name)) or \
            self.classes.get(spec.class_name)
        if cls is None and module is None and spec.class_name in _APPLICATION_NAMES:
            cls = _APPLICATION_NAMES[spec.class_name]
            raise KerasImportError(
                f"{here}: the file names no module for class {spec.class_name!r} (an .h5 "
                f"file); Keras itself loads it only with custom_objects. If it is Keras "
                f"Applications' {spec.class_name} ({cls.keras_module}), pass "
                f"custom_objects={{{spec.class_name!r}: "
                f"fragflow.frontend.layers_applications.{cls.__name__}}}")
        if cls is None and self.tfjs:
            name = short(spec.class_name)
            raise KerasImportError(
                f"{here}: {name!r} is not a Keras layer fragflow has: a custom layer "
                f"class, which TF.js runs from JavaScript that the model's package "
                f"registers (tf.serialization.registerClass), not from model.json, and "
                f"fragflow never runs code from a file. Supply it: custom_objects="
                f"{{{name!r}: an ff.keras.layers.Layer subclass whose call() computes "
                f"it (the layer's config keys are its keyword arguments)}} to "
                f"ff.tfjs.load or ff.keras.models.load_model (docs/TFJS.md, Custom layers)")
        if cls is None:
            raise KerasImportError(
                f"{here}: fragflow has no Keras layer {short(spec.class_name)!r} (its "
                f"layers: {', '.join(sorted(self.classes))}; custom_objects may map the "
                f"class name to an ff.keras layer class)")
        kwargs = self.arguments(cls, spec.config, here)
        try:
            layer = cls(**kwargs)
        except KerasImportError:
            raise
        except FragflowError as err:
            raise KerasImportError(f"{here}: {err}") from None
        except Exception as err:     # noqa: BLE001 -- a hostile config: a clear error
            raise KerasImportError(f"{here}: cannot make the layer from its config: "
                                   f"{type(err).__name__}: {short(err, 300)}") from None
        if scope:
            layer._scope_name = f"{scope}/{layer.name}"
        layer._keras_config, layer._keras_class = spec.config, spec.class_name
        return layer

    def arguments(self, cls, config, here) -> dict:
        """cls's keyword arguments for a Keras layer config."""
        accepted = _accepted(cls)
        kwargs = {}
        _check_dtype(config, here, cls.__name__ == "InputLayer")
        for key, value in config.items():
            if key == "dtype" or key in SHAPE_KEYS:
                continue           # checked above; the model's input has the shape
            if key.endswith("_regularizer") and value is not None and \
                    not issubclass(cls, _Recurrent):
                kwargs[key] = value      # l1 / l2 / L1L2: fit adds their penalties
                continue
            if key.endswith(("_regularizer", "_constraint")):
                if value is not None:
                    warnings.warn(f"{here}: {key} is left out: fragflow applies no "
                                  f"{key.rsplit('_', 1)[1]} here (predict is unchanged; "
                                  f"fit is not)", stacklevel=5)
                continue
            if key in accepted:
                if key == "axis" and isinstance(value, list) and len(value) == 1 and \
                        cls.__name__ == "BatchNormalization":
                    value = value[0]        # Keras 2 writes BatchNormalization's as [3]
                kwargs[key] = self.value(key, value, here)
                if key.endswith("_initializer"):
                    kwargs[key] = CheckedInitializer(kwargs[key], self, here, key)
            elif key in SHAPE_KEYS or value is None or value is False:
                continue           # the input's shape; features that are off
            elif key in HARMLESS and (HARMLESS[key] is None or value in HARMLESS[key]):
                continue
            else:
                raise KerasImportError(f"{here}: argument {key}={short(repr(value), 80)} is not "
                                       f"supported by fragflow's {cls.__name__}")
        for key, default in _initializer_defaults(cls).items():
            if key not in kwargs:       # every weight's size is checked before it is made
                kwargs[key] = CheckedInitializer(default, self, here, key)
        return kwargs

    def value(self, key, value, here):
        """An argument's value as fragflow's layer takes it."""
        if isinstance(value, dict) and value.get("class_name") == "__tuple__":
            value = value.get("config", {}).get("value")
        if key.endswith("_initializer"):
            return self.initializer(value, here, key)
        if key in ("activation", "recurrent_activation"):
            return self.activation(value, here, key)
        if key in ("layer", "backward_layer", "cell") and isinstance(value, dict):
            inner = self._layer(value, [], 0)
            return self.make_layer(inner)
        if key == "cell" and isinstance(value, list):
            return [self.make_layer(self._layer(v, [], 0)) for v in value]
        if isinstance(value, dict):
            raise KerasImportError(f"{here}: argument {key}={short(repr(value), 80)} is not a "
                                   f"value fragflow reads")
        return value

    def activation(self, value, here, key):
        if isinstance(value, dict):
            name = value.get("config")
            if isinstance(name, str) and name in self.custom:
                return self.custom[name]
            if value.get("class_name") == "function" and isinstance(name, str):
                value = name
            else:
                value = value.get("class_name")
                value = _snake(value) if isinstance(value, str) else value
        if isinstance(value, str) and value in self.custom:
            return self.custom[value]
        if value is None or (isinstance(value, str) and value in _ACTIVATION_NAMES):
            return value
        raise KerasImportError(f"{here}: {key} {short(value)!r} is not an activation "
                               f"fragflow has ({', '.join(_ACTIVATION_NAMES)})")

    def initializer(self, value, here, key):
        """An ff initializer for a Keras initializer (a name or a config); when the
        weights are read from the file, one fragflow lacks is left at zeros."""
        if value is None:
            return "zeros"
        if isinstance(value, str):
            name, config = value, {}
        elif isinstance(value, dict):
            name, config = value.get("class_name"), value.get("config") or {}
        else:
            name, config = None, {}
        try:
            init = _init.get(name)
            kwargs = {k: v for k, v in config.items() if v is not None}
            return type(init)(**kwargs) if kwargs else init
        except (FragflowError, TypeError, ValueError):
            if self.weights_follow:
                return "zeros"
            raise KerasImportError(f"{here}: {key} {short(repr(value), 80)} is not an "
                                   f"initializer fragflow has") from None


def _keras_ops() -> dict:
    """Keras 3 ops a functional config may hold as nodes of their own (module
    keras.src.ops.*: the mask Embedding(mask_zero=True) passes on, x + y between
    layers), as fragflow functions of the node's arguments and the op's config."""
    o = _ops

    def unary(fn):
        return lambda x, **kw: fn(x)

    def cast(x, dtype="float32", **kw):
        return o.cast(x, {"int64": "int32", "float64": "float32"}.get(dtype, dtype))

    def reduce(fn):
        return lambda x, axis=None, keepdims=False, **kw: fn(x, axis=axis, keepdims=keepdims)

    return {
        "NotEqual": o.not_equal, "Equal": o.equal, "Greater": o.greater, "Less": o.less,
        "Add": o.add, "Subtract": o.subtract, "Multiply": o.multiply,
        "Divide": o.divide, "TrueDivide": o.truediv, "Maximum": o.maximum,
        "Minimum": o.minimum, "Matmul": o.matmul, "Power": o.pow,
        "LogicalAnd": o.logical_and,
        "Negative": unary(o.negative), "Abs": unary(o.abs), "Exp": unary(o.exp),
        "Log": unary(o.log), "Sqrt": unary(o.sqrt), "Square": unary(o.square),
        "Relu": unary(o.relu), "Sigmoid": unary(o.sigmoid), "Tanh": unary(o.tanh),
        "Cast": cast, "Mean": reduce(o.reduce_mean), "Sum": reduce(o.reduce_sum),
    }


OP_MODULES = ("keras.src.ops", "keras.ops")
_APPLICATION_NAMES = {name: cls for (_, name), cls in APPLICATION_LAYERS.items()}


class OpLayer(Layer):
    """A Keras op node of a functional config (not a layer: Keras's model.layers and
    weight files leave it out), applied to its arguments with its config."""

    def __init__(self, fn, class_name, module, options, name=None):
        super().__init__(name=name)
        self.fn, self.options = fn, options
        self._keras_class, self._keras_module = class_name, module

    def __call__(self, *args, training=False, **kwargs):
        return self.fn(*args, **self.options, **kwargs)


class CheckedInitializer:
    """An initializer that checks a weight's shape against the load's limits (one
    tensor's max_elements, all weights' max_bytes) before it makes the array: a config
    asking for Dense(10**9) fails before anything is allocated."""

    def __init__(self, init, reader, here, key):
        self.init, self.reader, self.here, self.key = init, reader, here, key

    def __call__(self, shape, *args, **kwargs):
        count = too_large(shape, self.reader.max_elements)
        if count is not None:
            raise KerasImportError(f"{self.here}: a weight of shape {list(shape)} = {count} "
                                   f"elements is over max_elements="
                                   f"{self.reader.max_elements}")
        self.reader.weight_budget[0] -= 4 * math.prod(shape)
        if self.reader.weight_budget[0] < 0:
            raise KerasImportError(f"{self.here}: the layers' weights take more than "
                                   f"max_bytes together")
        return _init.get(self.init)(shape, *args, **kwargs)

    def __getattr__(self, name):        # what layers read of their initializer
        return getattr(_init.get(object.__getattribute__(self, "init")), name)


def _initializer_defaults(cls) -> dict:
    out = {}
    for klass in reversed(cls.__mro__):
        init = vars(klass).get("__init__")
        if init is not None:
            for p in inspect.signature(init).parameters.values():
                if p.name.endswith("_initializer") and isinstance(p.default, str):
                    out[p.name] = p.default
    return out


class FunctionLayer(Layer):
    """A Lambda layer's stand-in: a function the user passed in custom_objects, applied
    to the layer's input (never code from the file)."""

    def __init__(self, fn, name=None):
        super().__init__(name=name)
        self.fn = fn

    def call(self, x, training=False):
        return self.fn(x)


def _accepted(cls) -> set:
    names = set()
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is not None:
            names |= {p for p in inspect.signature(init).parameters
                      if p not in ("self", "kwargs", "kw")}
    return names


def _check_dtype(config, here, is_input):
    dtype = config.get("dtype")
    if isinstance(dtype, dict):
        dtype = (dtype.get("config") or {}).get("name")
    if dtype is None or dtype == "float32" or (is_input and dtype in _INPUT_DTYPES):
        return
    raise KerasImportError(f"{here}: dtype policy {short(dtype)!r}: fragflow computes in "
                           f"float32")


_INPUT_DTYPES = {"float32": "float32", "float64": "float32", "float16": "float32",
                 "int32": "int32", "int64": "int32", "int16": "int32", "int8": "int32",
                 "uint8": "int32", "bool": "bool"}


def _input_dtype(config) -> str:
    dtype = config.get("dtype") or "float32"
    if isinstance(dtype, dict):
        dtype = (dtype.get("config") or {}).get("name", "float32")
    if dtype not in _INPUT_DTYPES:
        raise KerasImportError(f"{where(config.get('name'), 'InputLayer')}: input dtype "
                               f"{short(dtype)!r} is not one fragflow has")
    return _INPUT_DTYPES[dtype]


def _input_shape(config, here) -> tuple:
    """(batch, ...) of an InputLayer's (or first layer's) config."""
    for key in ("batch_shape", "batch_input_shape"):
        if config.get(key) is not None:
            return _shape(config[key], f"{here}: {key}")
    if config.get("input_shape") is not None:
        return (None,) + _shape(config["input_shape"], f"{here}: input_shape")
    raise KerasImportError(f"{here}: the input's shape is not in the config")


def _shape(value, what) -> tuple:
    if isinstance(value, dict) and value.get("class_name") == "__tuple__":
        value = value.get("config", {}).get("value")
    if not isinstance(value, (list, tuple)) or len(value) > MAX_RANK or any(
            d is not None and (isinstance(d, bool) or not isinstance(d, int) or d < 0)
            for d in value):
        raise KerasImportError(f"{what}: {short(value)!r} is not a shape (a list of "
                               f"non-negative ints and nulls, rank <= {MAX_RANK})")
    return tuple(value)


def _name(value, here) -> str:
    if not isinstance(value, str) or not value or len(value) > 256:
        raise KerasImportError(f"{here}: a layer or model name must be a string of 1 to "
                               f"256 characters, got {short(value)!r}")
    return value


def _get(obj, key, kind, here):
    value = obj.get(key) if isinstance(obj, dict) else None
    if not isinstance(value, kind):
        raise KerasImportError(f"{here}: the config's {key!r} is missing or not a "
                               f"{'list' if kind is list else 'JSON object'}")
    return value


def _ref(value, what) -> NodeRef:
    if isinstance(value, (list, tuple)) and len(value) >= 3 and isinstance(value[0], str) \
            and all(isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 1_000_000
                    for v in value[1:3]):
        return NodeRef(value[0], value[1], value[2])
    raise KerasImportError(f"{what}: {short(value)!r} is not a tensor reference "
                           f"[layer, node, tensor]")


def _refs(value, what) -> list:
    """input_layers / output_layers: [name, node, tensor], a list of them, or a dict."""
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list) and len(value) >= 3 and isinstance(value[0], str):
        return [_ref(value, what)]
    if not isinstance(value, list) or not value:
        raise KerasImportError(f"{what}: missing or empty")
    return [_ref(v, what) for v in value]


def _node(node, here):
    """(args, kwargs) of one call of a layer, tensors as NodeRefs, from either dialect."""
    if isinstance(node, dict):                               # Keras 3
        args, kwargs = node.get("args", []), node.get("kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise KerasImportError(f"{here}: an inbound node is malformed")
        return _tensors(args, here), _tensors(kwargs, here)
    if isinstance(node, list):                               # Keras 2: [[name, n, t, kw]]
        refs = [_ref(entry, f"{here}: inbound node") for entry in node]
        kwargs = {}
        if node and len(node[0]) > 3 and isinstance(node[0][3], dict):
            kwargs = _keras2_kwargs(node[0][3], here)
        if not refs:
            raise KerasImportError(f"{here}: an inbound node has no inputs")
        return ([refs[0]] if len(refs) == 1 else [refs]), kwargs
    raise KerasImportError(f"{here}: an inbound node is malformed ({short(node)})")


def _keras2_kwargs(kwargs, here):
    out = {}
    for key, value in kwargs.items():
        if isinstance(value, list) and len(value) == 3 and isinstance(value[0], str):
            out[key] = _ref(value, here)
        else:
            out[key] = value
    return out


def _tensors(value, here, depth=0):
    """value with each {"class_name": "__keras_tensor__"} as a NodeRef."""
    if depth > 16:
        raise KerasImportError(f"{here}: an inbound node nests too deep")
    if isinstance(value, dict):
        kind = value.get("class_name")
        if kind == "__keras_tensor__":
            history = (value.get("config") or {}).get("keras_history")
            return _ref(history, f"{here}: keras_history")
        if kind == "__tuple__":
            return _tensors((value.get("config") or {}).get("value", []), here, depth + 1)
        return {k: _tensors(v, here, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_tensors(v, here, depth + 1) for v in value]
    return value


def _walk(value, key="config", depth=0):
    """(key, value) of every value nested in a config."""
    if depth > 64:
        raise KerasImportError("model: a layer config nests more than 64 deep")
    yield key, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _walk(v, k, depth + 1)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, key, depth + 1)


def _snake(name: str) -> str:
    out = "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")
    return out
