"""ff.keras: Keras's names over fragflow's layers and models: ff.keras.Input,
ff.keras.Model (the functional API), ff.keras.Sequential, ff.keras.layers (ff.layers),
ff.keras.optimizers (Keras's argument names: learning_rate, beta_1, ...),
ff.keras.initializers, ff.keras.models and ff.keras.losses (the functions and the
classes, e.g. SparseCategoricalCrossentropy(from_logits=True)).

>>> import fragflow as ff
>>> ff.keras.layers.Dense is ff.layers.Dense
True
"""
from __future__ import annotations

import inspect as _inspect
import types as _types

import numpy as _np

from ...ir.errors import SerializationError as _SerializationError
from .. import initializers, keras_files as _keras_files, layers, models as _models, optim as _optim
from ..models import callbacks as _cb
from ..operands import _unexpected
from ._missing import install as _install, missing as _missing

Input, Model, Sequential = _models.Input, _models.Model, _models.Sequential


class _Namespace(_types.SimpleNamespace):
    """keras.optimizers, keras.losses, ...: a missing name says what to use and points
    at docs/TENSORFLOW.md, as the modules' do."""

    def __init__(self, public_name, **names):
        super().__init__(**names)
        object.__setattr__(self, "_public_name", public_name)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        public = [k for k in vars(self) if not k.startswith("_")]
        raise _missing(object.__getattribute__(self, "_public_name"), name, public)

    def __dir__(self):
        return sorted(k for k in vars(self) if not k.startswith("_"))

    def __repr__(self):
        return f"<namespace {object.__getattribute__(self, '_public_name')}>"

    def __reduce__(self):
        """Pickled by its public name, as modules and functions are: Ray ships a
        function that reads ff.keras.losses to its workers this way, and each worker
        gets its own fragflow's namespace (SimpleNamespace's own reduce would call
        _Namespace() with no name)."""
        public_name = object.__getattribute__(self, "_public_name")
        if _named(public_name) is not self:
            raise _SerializationError(
                f"namespace {public_name} cannot be pickled: it is not found under "
                f"that name (a namespace is pickled by its public name)")
        return _namespace, (public_name,)


def _named(public_name):
    """This module's namespace that public_name ("fragflow.keras.losses") names, or None."""
    prefix = "fragflow.keras."
    if not public_name.startswith(prefix):
        return None
    found = globals().get(public_name[len(prefix):])
    return found if isinstance(found, _Namespace) else None


def _namespace(public_name):
    """The namespace of a pickle (_Namespace.__reduce__)."""
    found = _named(public_name)
    if found is None:
        raise _SerializationError(f"fragflow has no namespace {public_name} (a pickle "
                                  f"from another version of fragflow?)")
    return found


def _learning_rate(learning_rate, kwargs, default, what):
    """Keras's older lr= beside learning_rate= (other unknown keywords are errors)."""
    lr = kwargs.pop("lr", None)
    if kwargs:

        names = [p for p in _inspect.signature(globals()["_" + what.lower()]).parameters
                 if p != "kwargs"] + ["lr"]
        raise _unexpected(f"keras.optimizers.{what}", next(iter(kwargs)), names)
    if learning_rate is None:
        learning_rate = default if lr is None else lr
    return learning_rate


def _sgd(learning_rate=None, momentum=0.0, nesterov=False, name="SGD", **kwargs):
    """keras.optimizers.SGD: plain or momentum gradient descent."""
    learning_rate = _learning_rate(learning_rate, kwargs, 0.01, 'SGD')
    if momentum:
        return _optim.Momentum(learning_rate, momentum, use_nesterov=nesterov, name=name)
    return _optim.SGD(learning_rate, name=name)


def _adam(learning_rate=None, beta_1=0.9, beta_2=0.999, epsilon=1e-7, name="Adam", **kwargs):
    """keras.optimizers.Adam (TF1's update; Keras's argument names and defaults)."""
    learning_rate = _learning_rate(learning_rate, kwargs, 0.001, 'Adam')
    return _optim.Adam(learning_rate, beta_1, beta_2, epsilon, name=name)


def _adamax(learning_rate=None, beta_1=0.9, beta_2=0.999, epsilon=1e-7, name="Adamax", **kwargs):
    learning_rate = _learning_rate(learning_rate, kwargs, 0.001, 'Adamax')
    return _optim.Adamax(learning_rate, beta_1, beta_2, epsilon, name=name)


def _rmsprop(learning_rate=None, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False,
             name="RMSprop", **kwargs):
    learning_rate = _learning_rate(learning_rate, kwargs, 0.001, 'RMSprop')
    return _optim.RMSProp(learning_rate, rho, momentum, epsilon, centered=centered, name=name)


def _adagrad(learning_rate=None, initial_accumulator_value=0.1, name="Adagrad", **kwargs):
    learning_rate = _learning_rate(learning_rate, kwargs, 0.001, 'Adagrad')
    return _optim.Adagrad(learning_rate, initial_accumulator_value, name=name)


def _adadelta(learning_rate=None, rho=0.95, epsilon=1e-7, name="Adadelta", **kwargs):
    learning_rate = _learning_rate(learning_rate, kwargs, 0.001, 'Adadelta')
    return _optim.Adadelta(learning_rate, rho, epsilon, name=name)


optimizers = _Namespace("fragflow.keras.optimizers", SGD=_sgd, Adam=_adam, Adamax=_adamax,
                        RMSprop=_rmsprop, Adagrad=_adagrad, Adadelta=_adadelta)
losses = _Namespace(
    "fragflow.keras.losses",
    SparseCategoricalCrossentropy=_models.SparseCategoricalCrossentropy,
    CategoricalCrossentropy=_models.CategoricalCrossentropy,
    BinaryCrossentropy=_models.BinaryCrossentropy,
    MeanSquaredError=_models.MeanSquaredError,
    MeanAbsoluteError=_models.MeanAbsoluteError,
    sparse_categorical_crossentropy=_models.sparse_categorical_crossentropy,
    categorical_crossentropy=_models.categorical_crossentropy,
    binary_crossentropy=_models.binary_crossentropy,
    mean_squared_error=_models.mean_squared_error,
    mean_absolute_error=_models.mean_absolute_error)

models = _Namespace("fragflow.keras.models", Sequential=Sequential, Model=Model,
                    load_model=_keras_files.load_model, save_model=_keras_files.save_model,
                    model_from_json=_keras_files.model_from_json)


def _to_categorical(y, num_classes=None, dtype="float32"):
    """keras.utils.to_categorical: class indices to one-hot rows (numpy)."""
    y = _np.asarray(y, dtype=_np.int64).ravel()
    n = int(num_classes) if num_classes is not None else int(y.max()) + 1
    return _np.eye(n, dtype=dtype)[y]


def _callbacks():
    return _Namespace("fragflow.keras.callbacks", Callback=_cb.Callback,
                      TensorBoard=_cb.TensorBoard, LambdaCallback=_cb.LambdaCallback,
                      EarlyStopping=_cb.EarlyStopping)


callbacks = _callbacks()
utils = _Namespace("fragflow.keras.utils", to_categorical=_to_categorical)

KerasImportError = _keras_files.KerasImportError

__all__ = ["Input", "Model", "Sequential", "layers", "models", "optimizers", "initializers",
           "losses", "callbacks", "utils", "KerasImportError"]
_install(globals(), "fragflow.keras")
