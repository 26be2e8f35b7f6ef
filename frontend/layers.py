"""ff.layers: Keras-style layers that build graph ops when called on a tensor.

A layer makes its Variables the first time it is called (from the input's static
shape), in the input's graph, under a name scope of its own name ("dense/kernel"), and
builds new ops on every call, sharing those Variables. `training` selects what Dropout
and BatchNormalization build; docs/TENSORFLOW.md ("Keras layers and models") has the
two modes, BatchNormalization's updates and the ops Dense and the convolutions build.
Names, arguments and defaults are Keras's (units, filters, kernel_size, strides,
padding="valid", activation=None, use_bias=True, kernel_initializer="glorot_uniform",
...); images are NHWC and kernels HWIO.

>>> import fragflow as ff, numpy as np
>>> g = ff.Graph()
>>> with g.as_default():
...     x = ff.placeholder((None, 8, 8, 3), name="x")
...     y = ff.layers.Conv2D(4, 3, padding="same", activation="relu")(x)
...     y = ff.layers.GlobalAveragePool2D()(y)
...     y = ff.layers.Dense(2, activation="softmax")(y)
>>> y.shape
(None, 2)
"""
from __future__ import annotations

import contextlib
import inspect
import math
import os
import re
import sys
import weakref

import numpy as np

from ..ir.errors import AttrError, FragflowError, ShapeError
from ..ir.graph import Graph, get_default_graph
from ..ir.ops.state import assign as assign_value
from ..ir.source import is_internal, user_location
from . import initializers as _init, ops as _ops
from .activations import ACTIVATIONS, LAYER
from .control_flow import cond
from .namespaces._missing import DOCS, close_names
from .operands import _unexpected
from .side_effects import graph_table
from .tensor import Tensor, Variable, as_tensor_value, wrap
from .tf1 import (
    AUTO_REUSE,
    GraphKeys,
    VariableScope,
    VariableScopeError,
    add_to_collection,
    get_variable_scope,
    shape as _shape_of,
)

__all__ = ["Layer", "Dense", "BatchNormalization", "Dropout", "MaxPool2D", "AveragePool2D",
           "GlobalAveragePool2D", "GlobalMaxPool2D", "Flatten", "Activation",
           "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D",
           "GlobalMaxPooling2D", "activation_fn", "logits_of", "Softmax", "Reshape",
           "Embedding", "InputLayer",
           # TensorFlow 1's functional layers (tf.layers.dense, ...)
           "dense", "conv2d", "max_pooling2d", "average_pooling2d", "flatten", "dropout",
           "batch_normalization"]

# Layer names taken in each graph, so that the n-th unnamed Dense of a graph is always
# "dense_<n>" (a model built twice the same way gets the same variable names, which is
# what sess.restore matches).
_NAMES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# {output value: logits value} for softmax / sigmoid outputs of layers: the losses of
# ff.Sequential use the logits (a stable cross-entropy), as Keras does.
_LOGITS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# {graph: {output value: [(layer, input value), ...]}}: each layer call on a tensor, from
# which the Keras functional API (ff.Model(inputs, outputs)) finds its layers. A list:
# a layer that returns its input (Dropout at inference) adds a call to that value
CALLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# [[arrays, next index], ...]: the weights given to set_weights before a layer was
# built, handed out in order by add_weight while it is built and first called
_PENDING: list = []
# {graph: {output value: (batch, time) bool value}}: Keras's masks, made by
# Embedding(mask_zero=True) and Masking, read by the recurrent layers (layers_rnn.py)
MASKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def set_keras_mask(tensor, mask):
    MASKS.setdefault(tensor.graph, {})[tensor.value] = mask.value


def keras_mask(tensor):
    """The Keras mask that came with tensor (a (batch, time) bool Tensor), or None."""
    value = MASKS.get(tensor.graph, {}).get(tensor.value)
    return None if value is None else wrap(value)


def logits_of(tensor, activation):
    """The logits that a layer's output `tensor` was computed from by `activation`
    ("softmax" or "sigmoid"), or None if it was not."""
    value = tensor.value if isinstance(tensor, Tensor) else tensor
    entry = _LOGITS.get(value.graph, {}).get(value)
    return wrap(entry[1]) if entry is not None and entry[0] == activation else None


# -- activations ---------------------------------------------------------------------
def _activation_name(activation):
    if activation is None:
        return "linear"
    if callable(activation):
        return activation
    if activation not in LAYER:
        raise AttrError(f"unknown activation {activation!r}; use one of "
                        f"{', '.join(sorted(LAYER))}, None or a function")
    return activation


def activation_fn(activation):
    """The function a Keras activation name (or None, or a callable) stands for."""
    name = _activation_name(activation)
    return name if callable(name) else ACTIVATIONS[name].fn


def _activate(pre, activation):
    """activation(pre), remembering pre as the logits of a softmax / sigmoid output."""
    out = activation_fn(activation)(pre)
    if activation in ("softmax", "sigmoid"):
        _LOGITS.setdefault(out.graph, {})[out.value] = (activation, pre.value)
    return out


# -- argument normalisation ----------------------------------------------------------
def _pair(value, what) -> tuple:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (int(value), int(value))
    elif isinstance(value, (str, bytes)) or not hasattr(value, "__iter__") or any(
            isinstance(v, bool) or not isinstance(v, (int, np.integer)) for v in value):
        raise AttrError(f"{what} must be an int or a pair of ints, got {value!r}")
    value = tuple(int(v) for v in value)
    if len(value) != 2:
        raise AttrError(f"{what} must be an int or a pair of ints, got {list(value)}")
    if min(value) < 1:
        raise AttrError(f"{what} must be positive, got {list(value)}")
    return value


def _padding(padding) -> str:
    if not isinstance(padding, str) or padding.lower() not in ("valid", "same"):
        raise AttrError(f"padding must be 'valid' or 'same', got {padding!r}")
    return padding.upper()


def _snake(name: str) -> str:
    """A class name as Keras's default layer name (its to_snake_case): Conv2DTranspose
    -> conv2d_transpose, PReLU -> p_re_lu."""
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


# Keras 3 arguments that configs carry and fragflow takes at their defaults only: the
# first value is the one fragflow computes with
KERAS_AT_DEFAULT = {
    "data_format": ("channels_last", None),
    "quantization_config": (None,), "lora_rank": (None,), "lora_alpha": (None,),
    "synchronized": (False,), "renorm": (False,), "renorm_clipping": (None,),
    "renorm_momentum": (0.99,), "autocast": (True, False),
    "input_length": (None,),
}
# the float dtypes a layer may be configured with; fragflow computes in float32
_FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64", "mixed_float16",
                 "mixed_bfloat16")


def _float_dtype(layer, name, dtype):
    """The dtype (policy) a Keras config gives, checked to be a float one, as the
    config keeps it ("float32" when not given)."""
    if dtype is None:
        return "float32"
    policy = dtype.get("config", {}).get("name") if isinstance(dtype, dict) else dtype
    if str(policy) not in _FLOAT_DTYPES:
        raise AttrError(f"{type(layer).__name__} '{name or _snake(type(layer).__name__)}':"
                        f" dtype {dtype!r} is not supported; layers compute in float32")
    return dtype


def _config_value(key, value):
    """An attribute as Keras's config writes it: padding in lower case, activations
    by name, initializers as {"class_name", "config"}."""
    if key == "padding" and isinstance(value, str):
        return value.lower()
    if key == "activation" and callable(value):
        return getattr(value, "__name__", str(value))
    if isinstance(value, _init.Initializer):
        return _init.to_keras(value)
    if isinstance(value, Layer):
        return {"module": "keras.layers", "class_name": type(value).__name__,
                "config": value.get_config(), "registered_name": None}
    return value


def regularizer_factors(spec, where="") -> tuple:
    """(l1, l2) of a Keras weight or activity regularizer: None, "l1" / "l2" (0.01), or
    Keras's serialized L1, L2 or L1L2 ({"class_name": "L2", "config": {"l2": 0.01}})."""
    if spec is None:
        return 0.0, 0.0
    if isinstance(spec, str) and spec.lower() in ("l1", "l2"):
        return (0.01, 0.0) if spec.lower() == "l1" else (0.0, 0.01)
    if isinstance(spec, dict) and spec.get("class_name") in ("L1", "L2", "L1L2", "l1",
                                                               "l2", "l1_l2"):
        config = spec.get("config") or {}
        return float(config.get("l1", 0.0)), float(config.get("l2", 0.0))
    raise AttrError(f"{where}regularizer {spec!r} is not supported (l1, l2, L1, L2, "
                    f"L1L2)")


# Keras's regularizer keys whose weight attribute has another name
_REGULARIZED = {"depthwise": "depthwise_kernel", "pointwise": "pointwise_kernel",
                "recurrent": "recurrent_kernel"}


def _penalty(t, factors):
    l1, l2 = factors
    terms = ([l1 * _ops.reduce_sum(_ops.abs(t))] if l1 else []) + \
        ([l2 * _ops.reduce_sum(_ops.square(t))] if l2 else [])
    return None if not terms else terms[0] if len(terms) == 1 else terms[0] + terms[1]


def regularization_loss(layers):
    """The sum of the layers' regularization penalties, as Keras adds them to the loss:
    each weight regularizer's l1 * sum|w| + l2 * sum w^2 and each activity
    regularizer's penalty of the layer's last output over the batch size (inner layers
    of TimeDistributed and Bidirectional included); None if there are none."""
    total = None
    stack = list(layers)
    while stack:
        layer = stack.pop(0)
        stack.extend(v for k, v in vars(layer).items()
                     if isinstance(v, Layer) and k in ("layer", "forward_layer",
                                                       "backward_layer"))
        terms = [getattr(layer, "activity_loss", None)]
        for key, spec in getattr(layer, "regularizers", {}).items():
            name = key[:-len("_regularizer")]
            weight = getattr(layer, _REGULARIZED.get(name, name), None)
            if key.endswith("_regularizer") and isinstance(weight, Variable) and \
                    layer.trainable:
                with weight.graph.as_default():
                    terms.append(_penalty(weight, regularizer_factors(
                        spec, f"{type(layer).__name__} '{layer.name}': ")))
        for term in terms:
            if term is not None:
                total = term if total is None else total + term
    return total


def layer_from_config(entry):
    """A layer from Keras's serialized form {"class_name": ..., "config": {...}} (the
    nested layer of TimeDistributed, ...), by its Keras class name in ff.keras.layers."""
    if isinstance(entry, Layer):
        return entry
    if not isinstance(entry, dict) or "class_name" not in entry:
        raise AttrError(f"a layer config must be {{'class_name': ..., 'config': ...}}, "
                        f"got {entry!r}")
    name = entry["class_name"]
    cls = globals().get(name) if name in __all__ else None
    if not (isinstance(cls, type) and issubclass(cls, Layer)):
        raise AttrError(f"layer class {name!r} is not one fragflow has "
                        f"(ff.keras.layers; docs/KERAS.md lists them)")
    return cls.from_config(dict(entry.get("config", {})))


def export(module_all, namespace):
    """Put a layers_*.py module's layers into ff.layers (ff.keras.layers)."""
    module = sys.modules[__name__]
    for name in module_all:
        setattr(module, name, namespace[name])
        MISSING_LAYERS.pop(name, None)
    __all__.extend(n for n in module_all if n not in __all__)


# -- the base class ------------------------------------------------------------------
_TAKES_TRAINING = weakref.WeakKeyDictionary()


def _takes_training(call) -> bool:
    """Whether a layer's call takes training (Keras passes it only then: a user's
    custom layer may define call(self, inputs))."""
    known = _TAKES_TRAINING.get(call)
    if known is None:
        params = inspect.signature(call).parameters.values()
        known = any(p.name == "training" or p.kind is p.VAR_KEYWORD for p in params)
        _TAKES_TRAINING[call] = known
    return known


class Layer:
    """Base class: subclasses define build(input_shape) (making Variables with
    add_weight) and call(x, training) (building ops)."""

    # Keras's supports_masking: the output keeps the input's Keras mask (batch, time)
    supports_masking = False
    # takes data_format="channels_first": its inputs (and outputs of the same rank) are
    # transposed to and from channels_last around build and call
    channels_first_ok = False

    def __init__(self, name=None, trainable=True, input_shape=None, dtype=None, **kwargs):
        # Keras's keywords that configs carry: regularizers and constraints are kept
        # (get_config gives them back; fit does not apply them: docs/KERAS.md), the
        # others fragflow takes at their defaults only
        self.regularizers = {k: kwargs.pop(k) for k in list(kwargs)
                             if k.endswith(("_regularizer", "_constraint"))}
        if self.channels_first_ok:
            self.data_format = kwargs.pop("data_format", None) or "channels_last"
            if self.data_format not in ("channels_last", "channels_first"):
                raise AttrError(f"{type(self).__name__}: data_format must be "
                                f"'channels_last' or 'channels_first', got "
                                f"{self.data_format!r}")
        for key in [k for k in kwargs if k in KERAS_AT_DEFAULT]:
            value = kwargs.pop(key)
            if value not in KERAS_AT_DEFAULT[key]:
                raise AttrError(f"{type(self).__name__} '{name or _snake(type(self).__name__)}'"
                                f": {key}={value!r} is not supported (fragflow takes "
                                f"{KERAS_AT_DEFAULT[key][0]!r}; docs/KERAS.md)")
        shape = kwargs.pop("batch_input_shape", None) or kwargs.pop("batch_shape", None)
        if shape is not None and input_shape is None:
            input_shape = tuple(shape)[1:]
        input_dim = kwargs.pop("input_dim", None)        # Keras 2's Dense(input_dim=4)
        if input_dim is not None and input_shape is None:
            input_shape = (int(input_dim),)
        if kwargs:
            raise _unexpected_argument(type(self), sorted(kwargs)[0])
        self.dtype = _float_dtype(self, name, dtype)
        self._requested_name = name
        self._scope_name = None          # TF1's tf.layers.* in a variable_scope: 'scope/name'
        self._source = user_location()     # its ops point here when a model builds them
        self.name = name or _snake(type(self).__name__)
        self.trainable = trainable
        self.input_shape = None if input_shape is None else tuple(input_shape)
        self.built = False
        self.graph = None
        self._trainable_weights: list = []
        self._non_trainable_weights: list = []
        self.updates: list = []          # assign ops of training calls (BatchNormalization)

    # -- weights ------------------------------------------------------------------------
    @property
    def trainable_weights(self) -> list:
        return list(self._trainable_weights) if self.trainable else []

    @property
    def non_trainable_weights(self) -> list:
        return list(self._non_trainable_weights) + \
            ([] if self.trainable else list(self._trainable_weights))

    @property
    def weights(self) -> list:
        return self._trainable_weights + self._non_trainable_weights

    def count_params(self) -> int:
        return sum(math.prod(w.shape) for w in self.weights)

    def get_weights(self, session=None) -> list:
        """The weights' values (numpy arrays, in Keras's order): from session, or
        without one their initial values."""
        return [np.array(session.get(w) if session is not None else w.initial_value)
                for w in self.weights]

    def set_weights(self, weights, session=None) -> None:
        """Set the weights (in self.weights' order, Keras's): in session, or on a layer
        not built yet as the values its Variables start from (what a model read from a
        file does: from_config, set_weights, then call)."""
        weights = [np.asarray(v, np.float32) for v in weights]
        if session is None and not self.built:
            self._pending_weights = weights
            return
        if session is None:
            raise FragflowError(f"{type(self).__name__} '{self.name}' is built: its weights "
                                f"live in a session; call set_weights(weights, session)")
        if len(weights) != len(self.weights):
            raise ShapeError(f"{type(self).__name__} '{self.name}' has "
                             f"{len(self.weights)} weights, got {len(weights)} arrays")
        for var, value in zip(self.weights, weights):
            _check_weight_shape(self, var.name, tuple(var.shape), value)
            session.set(var, value)

    def get_config(self) -> dict:
        """Keras 3's config of the layer: name, trainable, dtype and its constructor's
        arguments under Keras's keys (what from_config and Keras's own from_config
        take)."""
        config = {"name": self.name, "trainable": self.trainable, "dtype": self.dtype}
        for klass in type(self).__mro__:
            init = vars(klass).get("__init__")
            if init is None or klass is Layer:
                continue
            for key in inspect.signature(init).parameters:
                if key not in ("self", "kwargs", "kw") and key not in config and \
                        hasattr(self, key):
                    config[key] = _config_value(key, getattr(self, key))
        if self.channels_first_ok:
            config.setdefault("data_format", self.data_format)
        config.update(self.regularizers)
        return config

    @classmethod
    def from_config(cls, config: dict):
        """The layer a Keras 3 (or 2) config describes: its keys as the constructor's
        keywords, initializers given as Keras's {"class_name", "config"} dicts."""
        if not isinstance(config, dict):
            raise AttrError(f"{cls.__name__}.from_config needs a dict, got {config!r}")
        kwargs = {k: (_init.from_keras(v) if k.endswith("_initializer") else v)
                  for k, v in config.items()}
        return cls(**kwargs)

    def add_weight(self, name, shape, initializer="zeros", trainable=True) -> Variable:
        """A float32 Variable named '<layer>/<name>', initialised by initializer."""
        if _PENDING:                     # set_weights before the build (__call__)
            pending = _PENDING[-1]
            if pending[1] >= len(pending[0]):
                raise ShapeError(f"{type(self).__name__} '{self.name}': set_weights gave "
                                 f"{len(pending[0])} arrays, the layer has more weights")
            value = _check_weight_shape(self, name, tuple(shape), pending[0][pending[1]])
            pending[1] += 1
        else:
            value = _init.get(initializer)(tuple(shape))
        if value.shape != tuple(shape):
            raise ShapeError(f"{self.name}: initializer {initializer!r} gave shape "
                             f"{list(value.shape)} for weight {name} of shape {list(shape)}")
        var = Variable(np.asarray(value, np.float32), name=name, trainable=trainable)
        (self._trainable_weights if trainable else self._non_trainable_weights).append(var)
        return var

    # -- calling ---------------------------------------------------------------------
    def __call__(self, inputs, training=False, **kwargs):
        """The layer on a tensor, or on a list of tensors (the merging layers,
        attention); keywords other than training go to call (a mask, ...)."""
        several = isinstance(inputs, (list, tuple))
        xs = [t if isinstance(t, Tensor) else wrap(as_tensor_value(t))
              for t in (inputs if several else [inputs])]
        if not xs:
            raise ShapeError(f"{type(self).__name__} '{self.name}' needs at least one "
                             f"input, got an empty list")
        x, graph = xs[0], xs[0].graph
        if any(t.graph is not graph for t in xs):
            raise FragflowError(f"{type(self).__name__} '{self.name}': its inputs belong "
                                f"to different graphs")
        first = self.channels_first_ok and self.data_format == "channels_first"
        originals = xs
        if first:
            with graph.as_default():
                xs = [_channels(t, last=True) for t in xs]
            x = xs[0]
        # weights set before the build: every weight made while the layer is built and
        # first called (its own, and its inner layers' in Keras's order) takes the next
        pending = None if self.built else self.__dict__.pop("_pending_weights", None)
        if pending is not None:
            _PENDING.append([pending, 0])
        try:
            if not self.built:
                self._claim_name(graph)
                self.graph = graph
                with graph.as_default(), graph.name_scope(self._scope()), \
                        _built_at(graph, self._source, sys._getframe(1)):
                    self.build([tuple(t.shape) for t in xs] if several else tuple(x.shape))
                self.built = True
            elif graph is not self.graph:
                raise FragflowError(f"layer '{self.name}' was built in graph "
                                    f"'{self.graph.name}'; it cannot be called on a tensor "
                                    f"of graph '{graph.name}'")
            with graph.as_default(), graph.name_scope(self._scope()), \
                    _built_at(graph, self._source, sys._getframe(1)):
                if _takes_training(type(self).call):
                    kwargs["training"] = bool(training)
                out = self.call(xs if several else x, **kwargs)
        finally:
            if pending is not None:
                _PENDING.pop()
        if pending is not None and len(pending) != len(self.weights):
            raise ShapeError(f"{type(self).__name__} '{self.name}' has "
                             f"{len(self.weights)} weights, set_weights gave "
                             f"{len(pending)} arrays")
        spec = self.regularizers.get("activity_regularizer")
        if spec is not None and isinstance(out, Tensor):    # Keras: over the batch size
            with graph.as_default(), graph.name_scope(self._scope()):
                penalty = _penalty(out, regularizer_factors(spec, f"{self.name}: "))
                if penalty is not None:
                    self.activity_loss = penalty / _ops.cast(_shape_of(out)[0],
                                                             "float32")
        if first:                        # back to channels_first; the calls recorded
            with graph.as_default():     # on the caller's tensors
                out = _channels(out, last=False)
            xs, x = originals, originals[0]
        if isinstance(out, Tensor):      # what ff.Model(inputs, outputs) replays
            # several inputs: a tuple, which the functional model's chain walk does
            # not follow (it replays a chain of one-input calls only)
            key = tuple(t.value for t in xs) if several else x.value
            CALLS.setdefault(graph, {}).setdefault(out.value, []).append((self, key))
            mask = keras_mask(x) if self.supports_masking and not several else None
            if mask is not None and keras_mask(out) is None and \
                    len(out.shape) >= 2 and tuple(out.shape[:2]) == tuple(x.shape[:2]):
                set_keras_mask(out, mask)
        return out

    def _scope(self) -> str:
        """The name scope of its ops: its name (under the caller's scope), or for a TF1
        layer made in a variable_scope, that scope's absolute path."""
        return self._scope_name + "/" if self._scope_name else self.name

    def _claim_name(self, graph):
        taken = _NAMES.setdefault(graph, set())
        if self._scope_name is not None:      # unique by its full path (_tf1_layer)
            taken.add(self._scope_name)
            return
        if self._requested_name is not None:
            if self.name in taken:
                raise FragflowError(f"a layer named '{self.name}' already exists in graph "
                                    f"'{graph.name}'; layer names must be unique")
        else:
            base, n = self.name, 0
            while self.name in taken:
                n += 1
                self.name = f"{base}_{n}"
        taken.add(self.name)

    def build(self, input_shape):
        pass

    def call(self, x, training=False):
        raise NotImplementedError

    def compute_output_shape(self, input_shape) -> tuple:
        """The output's shape for an input shape (by building the ops in a scratch
        graph, the one place the shape rules live)."""
        clone = type(self).__new__(type(self))
        clone.__dict__.update(self.__dict__, built=False, graph=None, _requested_name=None,
                              _trainable_weights=[], _non_trainable_weights=[], updates=[])
        scratch = Graph("shape")
        with scratch.as_default():
            if isinstance(input_shape, list):        # a layer of several inputs
                return tuple(clone([_ops.placeholder(tuple(s)) for s in input_shape]).shape)
            return tuple(clone(_ops.placeholder(tuple(input_shape))).shape)

    def __repr__(self):
        return f"<ff.layers.{type(self).__name__} '{self.name}'>"


def _channels(t, last):
    """A channels_first tensor as channels_last (last) or back; rank < 3 as it is."""
    rank = len(t.shape)
    if rank < 3:
        return t
    perm = (0, *range(2, rank), 1) if last else (0, rank - 1, *range(1, rank - 1))
    return _ops.transpose(t, perm)


def _check_weight_shape(layer, name, shape, value):
    if tuple(value.shape) != tuple(shape):
        raise ShapeError(f"{type(layer).__name__} '{layer.name}': weight '{name}' has "
                         f"shape {list(shape)}, got {list(value.shape)}")
    return value


def _unexpected_argument(cls, key):
    """'Dense() got an unexpected keyword 'unit'; did you mean 'units'?': the keywords
    of the layer's __init__ and its bases' (a FragflowError that is a TypeError)."""
    names = []
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is not None:
            names += [p for p in inspect.signature(init).parameters
                      if p not in ("self", "kwargs", "kw") and p not in names]
    return _unexpected(f"layers.{cls.__name__}", key, names)


@contextlib.contextmanager
def _built_at(graph, source, caller):
    """Ops made inside carry source (the layer's construction line) when fragflow
    itself called the layer (a model's build or fit), so errors and the graph dump point
    at the user's layer, not at model.fit. A user's own call keeps its line."""
    if not source or not is_internal(os.path.abspath(caller.f_code.co_filename)):
        yield
        return
    # Graph's override is how ir passes give derived nodes their origin's line
    saved, graph._source_override = graph._source_override, source
    try:
        yield
    finally:
        graph._source_override = saved


def _check_rank(layer, shape, rank, what):
    if len(shape) != rank:
        raise ShapeError(f"{type(layer).__name__} '{layer.name}' needs {what} (rank "
                         f"{rank}), got shape {list(shape)}")
    if shape[-1] is None:
        raise ShapeError(f"{type(layer).__name__} '{layer.name}': the input's last "
                         f"dimension must be known to make the weights, got {list(shape)}")


# -- dense and convolutions ----------------------------------------------------------
class Dense(Layer):
    """activation(x @ kernel + bias) on the last axis, in one fused matmul kernel.

    kernel: (input_dim, units); bias: (units,). Inputs of rank > 2 are flattened to
    (-1, input_dim) around the matmul (Keras applies Dense to the last axis)."""
    supports_masking = True          # Keras: the mask goes on

    def __init__(self, units, activation=None, use_bias=True,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        if int(units) <= 0:
            raise AttrError(f"Dense needs a positive number of units, got {units}")
        self.units = int(units)
        self.activation = _activation_name(activation)
        self.use_bias = use_bias
        self.kernel_initializer = kernel_initializer
        self.bias_initializer = bias_initializer

    def build(self, input_shape):
        if len(input_shape) < 2 or input_shape[-1] is None:
            raise ShapeError(f"Dense '{self.name}' needs an input of rank >= 2 with a "
                             f"known last dimension, got shape {list(input_shape)}")
        self.kernel = self.add_weight("kernel", (input_shape[-1], self.units),
                                      self.kernel_initializer)
        self.bias = self.add_weight("bias", (self.units,), self.bias_initializer) \
            if self.use_bias else None

    def call(self, x, training=False):
        shape = tuple(x.shape)
        flat = x if len(shape) == 2 else _ops.reshape(x, (-1, shape[-1]))
        # plain ops: the fusion pass puts bias and activation in the matmul's kernel,
        # and the backward pass reuses the forward values (ff.fused.matmul's gradient
        # would recompute the matmul)
        pre = _ops.matmul(flat, self.kernel)
        if self.bias is not None:
            pre = pre + self.bias
        if len(shape) != 2:
            pre = _ops.reshape(pre, tuple(-1 if d is None else d for d in shape[:-1])
                               + (self.units,))
        return _activate(pre, self.activation)


# The convolution layers (Conv1D/2D/3D, transposed, depthwise, separable) are in
# layers_conv.py.


# -- normalisation and regularisation -------------------------------------------------
class BatchNormalization(Layer):
    """Normalise over every axis but `axis` (the channels).

    training=True: with the batch's mean and (biased) variance, and one assign per
    moving statistic appended to layer.updates:
        moving = moving * momentum + batch_statistic * (1 - momentum)
    training=False: with moving_mean and moving_variance. Both modes compute
    (x - mean) * gamma / sqrt(variance + epsilon) + beta (ff.batch_normalization).
    A layer with trainable=False runs as at inference in training too (Keras 3's rule,
    a frozen base model's; TF1's tf.layers.batch_normalization keeps batch statistics:
    frozen_runs_inference=False)."""
    supports_masking = True          # Keras: the mask goes on

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones",
                 moving_mean_initializer="zeros", moving_variance_initializer="ones",
                 **kwargs):
        super().__init__(**kwargs)
        if isinstance(axis, (list, tuple)) and len(axis) == 1:     # Keras 2's [3]
            axis = axis[0]
        self.axis, self.momentum, self.epsilon = int(axis), float(momentum), float(epsilon)
        self.center, self.scale = center, scale
        self.beta_initializer, self.gamma_initializer = beta_initializer, gamma_initializer
        self.moving_mean_initializer = moving_mean_initializer
        self.moving_variance_initializer = moving_variance_initializer

    def build(self, input_shape):
        rank = len(input_shape)
        axis = self.axis + rank if self.axis < 0 else self.axis
        if not 0 <= axis < rank or input_shape[axis] is None:
            raise ShapeError(f"BatchNormalization '{self.name}': axis {self.axis} of an "
                             f"input of shape {list(input_shape)} must exist and be known")
        self._axis, self._rank = axis, rank
        n = (input_shape[axis],)
        self.gamma = self.add_weight("gamma", n, self.gamma_initializer) \
            if self.scale else None
        self.beta = self.add_weight("beta", n, self.beta_initializer) \
            if self.center else None
        self.moving_mean = self.add_weight("moving_mean", n, self.moving_mean_initializer,
                                           trainable=False)
        self.moving_variance = self.add_weight("moving_variance", n,
                                               self.moving_variance_initializer,
                                               trainable=False)

    def _broadcast(self, t):
        """A per-channel (C,) tensor shaped to broadcast against the input."""
        if t is None or self._axis == self._rank - 1:
            return t
        shape = [1] * self._rank
        shape[self._axis] = -1
        return _ops.reshape(t, shape)

    frozen_runs_inference = True

    def call(self, x, training=False):
        b = self._broadcast
        if training and (self.trainable or not self.frozen_runs_inference):
            axes = [a for a in range(self._rank) if a != self._axis]
            mean, variance = _ops.moments(x, axes=axes)
            keep = 1.0 - self.momentum
            self.updates.append(self.moving_mean.assign(
                self.moving_mean * self.momentum + mean * keep, name="update_moving_mean"))
            self.updates.append(self.moving_variance.assign(
                self.moving_variance * self.momentum + variance * keep,
                name="update_moving_variance"))
        else:
            mean, variance = self.moving_mean, self.moving_variance
        return _ops.batch_normalization(x, b(mean), b(variance), b(self.beta),
                                        b(self.gamma), self.epsilon)


class Dropout(Layer):
    """training=True: ff.dropout (zero with probability rate, scale the rest by
    1 / (1 - rate)); training=False: the input itself."""
    supports_masking = True          # Keras: the mask goes on

    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        if not 0.0 <= float(rate) < 1.0:
            raise AttrError(f"Dropout's rate must be in [0, 1), got {rate}")
        self.rate, self.noise_shape, self.seed = float(rate), noise_shape, seed

    def call(self, x, training=False):
        if not training or self.rate == 0.0:
            return x
        return _ops.dropout(x, self.rate, noise_shape=self.noise_shape, seed=self.seed)


# -- pooling, reshaping, activations ---------------------------------------------------
class _Pool2D(Layer):
    op = ""
    channels_first_ok = True

    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", **kwargs):
        super().__init__(**kwargs)
        self.pool_size = _pair(pool_size, "pool_size")
        self.strides = self.pool_size if strides is None else _pair(strides, "strides")
        self.padding = _padding(padding)

    def build(self, input_shape):
        _check_rank(self, input_shape, 4, "an NHWC image")

    def call(self, x, training=False):
        return getattr(_ops, self.op)(x, ksize=self.pool_size, strides=self.strides,
                                      padding=self.padding)


class MaxPool2D(_Pool2D):
    """Max over pool_size windows (strides default to pool_size)."""
    op = "max_pool"


class AveragePool2D(_Pool2D):
    """Mean over pool_size windows (strides default to pool_size); with padding="same"
    the border windows average their real elements only (TensorFlow's)."""
    op = "avg_pool"


class _GlobalPool2D(Layer):
    reduce = ""
    channels_first_ok = True

    def __init__(self, keepdims=False, **kwargs):
        super().__init__(**kwargs)
        self.keepdims = keepdims

    def build(self, input_shape):
        _check_rank(self, input_shape, 4, "an NHWC image")

    def call(self, x, training=False):
        return getattr(_ops, self.reduce)(x, axis=[1, 2], keepdims=self.keepdims)


class GlobalAveragePool2D(_GlobalPool2D):
    """Mean over height and width: (N, H, W, C) -> (N, C) (keepdims: (N, 1, 1, C))."""
    reduce = "mean"


class GlobalMaxPool2D(_GlobalPool2D):
    """Max over height and width: (N, H, W, C) -> (N, C)."""
    reduce = "max"


class Flatten(Layer):
    """(N, d1, d2, ...) -> (N, d1 * d2 * ...): a reshape (a view, no kernel); with
    data_format="channels_first" the channels are moved last first (Keras's)."""
    channels_first_ok = True

    def call(self, x, training=False):
        shape = tuple(x.shape)
        if any(d is None for d in shape[1:]):
            raise ShapeError(f"Flatten '{self.name}' needs known dimensions after the "
                             f"batch, got {list(shape)}")
        size = math.prod(shape[1:])
        return _ops.reshape(x, (-1 if shape[0] is None else shape[0], size))


class Activation(Layer):
    """An activation by name ("relu", "softmax", ...) or function."""
    supports_masking = True          # Keras: the mask goes on

    def __init__(self, activation, **kwargs):
        super().__init__(**kwargs)
        self.activation = _activation_name(activation)

    def call(self, x, training=False):
        return _activate(x, self.activation)


class Softmax(Layer):
    """softmax over axis (Keras's layers.Softmax), e.g. after a model that ends in
    logits."""
    supports_masking = True          # Keras: the mask goes on

    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def call(self, x, training=False):
        if self.axis in (-1, len(x.shape) - 1):
            return _activate(x, "softmax")
        return _ops.softmax(x, axis=self.axis)


class Reshape(Layer):
    """(N, ...) -> (N, *target_shape) (Keras's layers.Reshape; -1 once allowed)."""

    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        self.target_shape = tuple(int(d) for d in target_shape)

    def call(self, x, training=False):
        return _ops.reshape(x, (-1 if x.shape[0] is None else x.shape[0],
                                *self.target_shape))


class Embedding(Layer):
    """Rows of a (input_dim, output_dim) table for integer ids: (N, ...) ids ->
    (N, ..., output_dim) (Keras's layers.Embedding; the ids may arrive as floats, as
    Sequential's float32 input gives them, and are truncated to int32)."""

    def __init__(self, input_dim, output_dim, embeddings_initializer="uniform",
                 input_length=None, mask_zero=False, **kwargs):
        super().__init__(**kwargs)
        self.mask_zero = bool(mask_zero)     # id 0 masks its step for the RNNs after it
        self.input_dim, self.output_dim = int(input_dim), int(output_dim)
        self.embeddings_initializer = embeddings_initializer

    def build(self, input_shape):
        init = self.embeddings_initializer
        if init == "uniform":        # Keras's: uniform in [-0.05, 0.05]
            init = _init.RandomUniform(-0.05, 0.05)
        self.embeddings = self.add_weight("embeddings", (self.input_dim, self.output_dim),
                                          init)

    def call(self, x, training=False):
        ids = x if x.dtype == "int32" else _ops.cast(x, "int32")
        out = _ops.gather(self.embeddings, ids)
        if self.mask_zero:
            set_keras_mask(out, _ops.not_equal(ids, 0))
        return out


# Keras's longer names for the same layers.
MaxPooling2D, AveragePooling2D = MaxPool2D, AveragePool2D
GlobalAveragePooling2D, GlobalMaxPooling2D = GlobalAveragePool2D, GlobalMaxPool2D


# -- TensorFlow 1's functional layers (tf.compat.v1.layers.dense, ...) -----------------
# Each call makes a new layer (named "dense", "dense_1", ... in the input's graph) and
# applies it: the Variables are made on the spot, as TF1's. kernel_initializer=None is
# TF1's default, glorot_uniform.
#
# Inside tf.variable_scope, a layer is named by the scope ("gen/h1/kernel"), and with
# reuse=True / tf.AUTO_REUSE a layer of the same name made before in that scope is
# called again (its variables shared), as TF1's layers do through get_variable.
def _tf1_layer(make, name, reuse=None):
    """The layer a TF1 functional call uses: make(name), or under a variable_scope (or
    with reuse=) the one of that scope and name."""
    scope = get_variable_scope()
    if reuse is True or reuse is AUTO_REUSE:
        scope = VariableScope(scope.name, reuse)
    reuse = scope.reuse is True or scope.reuse is AUTO_REUSE
    table = graph_table(get_default_graph(), "tf1_layers")      # {'scope/name': layer}
    if not scope.name and not (reuse and name):
        layer = make(name)                  # named under the name scope, as before
        if name is not None:
            table.setdefault(name, layer)       # for a later reuse=True
        return layer
    if name is None:
        if scope.reuse is True:
            raise VariableScopeError(
                f"a tf.layers layer in variable_scope '{scope.name}' with reuse=True needs "
                f"name=... (fragflow reuses the layer of that name)")
        layer = make(None)
        full, base, i = f"{scope.name}/{layer.name}", f"{scope.name}/{layer.name}", 0
        while full in table:
            i += 1
            full = f"{base}_{i}"
    else:
        full = f"{scope.name}/{name}" if scope.name else name
        if full in table:
            if reuse:
                return table[full]
            raise VariableScopeError(
                f"layer {full} already exists, disallowed. Did you mean to set reuse=True "
                f"or reuse=tf.AUTO_REUSE in variable_scope?")
        if scope.reuse is True:
            raise VariableScopeError(
                f"layer {full} does not exist. Did you mean to set reuse=tf.AUTO_REUSE in "
                f"variable_scope?")
        layer = make(name)
    layer._scope_name = full
    table[full] = layer
    return layer


def dense(inputs, units, activation=None, use_bias=True, kernel_initializer=None,
          bias_initializer="zeros", trainable=True, name=None, reuse=None):
    """activation(inputs @ kernel + bias) by a new Dense layer (tf.layers.dense)."""
    return _tf1_layer(lambda n: Dense(units, activation, use_bias,
                                      kernel_initializer or "glorot_uniform",
                                      bias_initializer, trainable=trainable, name=n),
                      name, reuse)(inputs)


def conv2d(inputs, filters, kernel_size, strides=(1, 1), padding="valid",
           data_format="channels_last", dilation_rate=(1, 1), activation=None,
           use_bias=True, kernel_initializer=None, bias_initializer="zeros",
           trainable=True, name=None, reuse=None):
    """A new Conv2D layer applied to NHWC inputs (tf.layers.conv2d)."""
    _channels_last(data_format)
    from .layers_conv import Conv2D  # layers_conv.py builds on this module
    return _tf1_layer(lambda n: Conv2D(filters, kernel_size, strides, padding,
                                       dilation_rate=dilation_rate, activation=activation,
                                       use_bias=use_bias,
                                       kernel_initializer=kernel_initializer
                                       or "glorot_uniform",
                                       bias_initializer=bias_initializer,
                                       trainable=trainable, name=n),
                      name, reuse)(inputs)


def max_pooling2d(inputs, pool_size, strides, padding="valid", data_format="channels_last",
                  name=None):
    """Max pooling of NHWC inputs (tf.layers.max_pooling2d)."""
    _channels_last(data_format)
    return _tf1_layer(lambda n: MaxPool2D(pool_size, strides, padding, name=n), name)(inputs)


def average_pooling2d(inputs, pool_size, strides, padding="valid",
                      data_format="channels_last", name=None):
    """Average pooling of NHWC inputs (tf.layers.average_pooling2d)."""
    _channels_last(data_format)
    return _tf1_layer(lambda n: AveragePool2D(pool_size, strides, padding, name=n),
                      name)(inputs)


def flatten(inputs, name=None):
    """(N, d1, d2, ...) -> (N, d1 * d2 * ...) (tf.layers.flatten)."""
    return _tf1_layer(lambda n: Flatten(name=n), name)(inputs)


def dropout(inputs, rate=0.5, noise_shape=None, seed=None, training=False, name=None):
    """Dropout when training is true, else the inputs (tf.layers.dropout). training is
    a Python bool, or a bool tensor (TF1's is_training placeholder): then both are
    built and ff.where picks one per run."""
    layer = _tf1_layer(lambda n: Dropout(rate, noise_shape, seed, name=n), name)
    return _by_training(layer, inputs, training)


def _by_training(layer, inputs, training):
    """layer(inputs, training) for a Python bool; for a bool tensor, where(training,
    the training ops, the inference ops) (both run; the weights are shared)."""
    if not isinstance(training, Tensor):
        return layer(inputs, training=bool(training))
    if training.dtype != "bool" or training.ndim != 0:
        raise ShapeError(f"training must be a Python bool or a scalar bool tensor, got "
                         f"{training!r}")
    trained = layer(inputs, training=True)
    return _ops.where(training, trained, layer(inputs, training=False))


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=0.001, center=True,
                        scale=True, training=False, trainable=True, name=None, reuse=None):
    """A new BatchNormalization layer (tf.layers.batch_normalization). training (a
    Python bool, or a scalar bool tensor as dropout's) selects batch statistics. The
    moving-average assigns go to tf.GraphKeys.UPDATE_OPS, as TF1's: run them with the
    step (`with tf.control_dependencies(tf.get_collection(tf.GraphKeys.UPDATE_OPS)):`
    around minimize); under a training tensor each is a tf.cond, updating only in runs
    fed True (TF1's smart_cond)."""
    layer = _tf1_layer(lambda n: BatchNormalization(axis=axis, momentum=momentum,
                                                    epsilon=epsilon, center=center,
                                                    scale=scale, trainable=trainable, name=n),
                       name, reuse)
    layer.frozen_runs_inference = False     # TF1: training selects batch statistics
    before = len(layer.updates)
    out = _by_training(layer, inputs, training)
    if len(layer.updates) > before:        # TF1's UPDATE_OPS: run them with the step
        for update in layer.updates[before:]:
            if isinstance(training, Tensor):   # TF1: smart_cond(training, update, var)
                update = _only_when(training, update)
            add_to_collection(GraphKeys.UPDATE_OPS, update)
    return out


def _only_when(training, update):
    """The assign `update` as TF1's batch norm makes it under a training tensor: in a
    tf.cond, so that a run fed training=False leaves the moving statistic as it is."""
    variable, value = update.value.node.inputs
    return cond(training, lambda: wrap(assign_value(variable, value)),
                lambda: _ops.identity(wrap(variable)), name="update_when_training")


def _channels_last(data_format):
    if data_format not in ("channels_last", "NHWC"):
        raise AttrError(f"data_format {data_format!r} is not supported; fragflow's layers "
                        f"take channels_last (NHWC) inputs")


class InputLayer(Layer):
    """Keras's InputLayer(shape=...) (Keras 2: input_shape=, batch_input_shape=; Keras
    3's config: batch_shape=): passes its input on; Sequential reads the shape from it.
    dtype is the input's (int32 for token ids)."""

    def __init__(self, input_shape=None, batch_size=None, dtype=None, name=None, **kw):
        for key in ("sparse", "ragged", "optional"):
            if kw.pop(key, None):
                raise AttrError(f"InputLayer '{name or 'input_layer'}': {key}=True is not "
                                f"supported")
        batch_shape = kw.pop("batch_shape", None) or kw.pop("batch_input_shape", None)
        if batch_shape is not None:
            batch_size, input_shape = batch_shape[0], tuple(batch_shape)[1:]
        super().__init__(name=name, input_shape=input_shape or kw.pop("shape", None), **kw)
        self.batch_size = batch_size
        self.input_dtype = "float32" if dtype is None else \
            (dtype.get("config", {}).get("name") if isinstance(dtype, dict) else str(dtype))

    def call(self, x, training=False):
        return x

    def get_config(self) -> dict:
        return {"batch_shape": (self.batch_size,) + tuple(self.input_shape or ()),
                "dtype": self.input_dtype, "sparse": False, "ragged": False,
                "name": self.name, "optional": False}


# Keras layers fragflow knows it lacks, with what to use (docs/KERAS.md lists every
# layer it has)
MISSING_LAYERS = {
    "ConvLSTM2D": "use SimpleRNN / LSTM / GRU / RNN(cell) (and Bidirectional) over "
                  "TimeDistributed(Conv2D)",
    "Lambda": "call the function on the tensor between layers (ff.Model over "
              "ff.keras.Input)",
    **dict.fromkeys(["TextVectorization", "StringLookup", "IntegerLookup", "Hashing",
                     "Discretization", "CategoryEncoding"],
                    "preprocess with numpy before fit"),
    # the augmentation layers that frontend/layers_augment.py does not have
    **dict.fromkeys(["RandomHue", "RandomSaturation", "RandomColorJitter",
                     "RandomColorDegeneration", "RandomSharpness", "RandomPosterization",
                     "RandomShear", "RandomPerspective", "RandomElasticTransform",
                     "RandomErasing", "RandomGaussianBlur", "RandAugment", "AugMix",
                     "MixUp", "CutMix", "Equalization", "CLAHE"],
                    "augment the data with numpy before fit (docs/KERAS.md lists the "
                    "augmentation layers fragflow has)"),
}


def __getattr__(name):
    """A Keras layer fragflow lacks: an AttributeError that says what to use and where
    docs/TENSORFLOW.md lists them (not this module's internal name)."""
    if name.startswith("__"):
        raise AttributeError(name)
    text = f"module 'fragflow.keras.layers' has no attribute '{name}'"
    if name in MISSING_LAYERS:
        text += f"; not supported in fragflow: {MISSING_LAYERS[name]}"
    else:
        close = close_names(name, __all__)
        if close:
            text += "; did you mean " + " or ".join(f"layers.{c}" for c in close) + "?"
    raise AttributeError(f"{text} (see {DOCS})")


def __dir__():
    """dir() of the module: its API (__all__), not its imports."""
    return sorted(__all__)
