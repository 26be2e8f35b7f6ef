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

import types as _types

from .. import initializers, layers, models as _models, optim as _optim
from ._missing import install as _install

Input, Model, Sequential = _models.Input, _models.Model, _models.Sequential


def _sgd(learning_rate=0.01, momentum=0.0, nesterov=False, name="SGD"):
    """keras.optimizers.SGD: plain or momentum gradient descent."""
    if momentum:
        return _optim.Momentum(learning_rate, momentum, use_nesterov=nesterov, name=name)
    return _optim.SGD(learning_rate, name=name)


def _adam(learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, name="Adam"):
    """keras.optimizers.Adam (TF1's update; Keras's argument names and defaults)."""
    return _optim.Adam(learning_rate, beta_1, beta_2, epsilon, name=name)


def _adamax(learning_rate=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-7, name="Adamax"):
    return _optim.Adamax(learning_rate, beta_1, beta_2, epsilon, name=name)


def _rmsprop(learning_rate=0.001, rho=0.9, momentum=0.0, epsilon=1e-7, centered=False,
             name="RMSprop"):
    return _optim.RMSProp(learning_rate, rho, momentum, epsilon, centered=centered, name=name)


def _adagrad(learning_rate=0.001, initial_accumulator_value=0.1, name="Adagrad"):
    return _optim.Adagrad(learning_rate, initial_accumulator_value, name=name)


def _adadelta(learning_rate=0.001, rho=0.95, epsilon=1e-7, name="Adadelta"):
    return _optim.Adadelta(learning_rate, rho, epsilon, name=name)


optimizers = _types.SimpleNamespace(SGD=_sgd, Adam=_adam, Adamax=_adamax, RMSprop=_rmsprop,
                                    Adagrad=_adagrad, Adadelta=_adadelta)
losses = _types.SimpleNamespace(
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

models = _types.SimpleNamespace(Sequential=Sequential, Model=Model)


def _to_categorical(y, num_classes=None, dtype="float32"):
    """keras.utils.to_categorical: class indices to one-hot rows (numpy)."""
    import numpy as np
    y = np.asarray(y, dtype=np.int64).ravel()
    n = int(num_classes) if num_classes is not None else int(y.max()) + 1
    return np.eye(n, dtype=dtype)[y]


def _callbacks():
    from ..models import callbacks as _cb
    return _types.SimpleNamespace(Callback=_cb.Callback, TensorBoard=_cb.TensorBoard,
                                  LambdaCallback=_cb.LambdaCallback,
                                  EarlyStopping=_cb.EarlyStopping)


callbacks = _callbacks()
utils = _types.SimpleNamespace(to_categorical=_to_categorical)

__all__ = ["Input", "Model", "Sequential", "layers", "models", "optimizers", "initializers",
           "losses", "callbacks", "utils"]
_install(globals(), "fragflow.keras")
