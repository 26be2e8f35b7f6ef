"""The Keras-style models: Sequential and the functional Model (sequential.py), with
the losses, metrics and progress reporting that their compile / fit use, and the
batch loops of fit / evaluate / predict (training.py) that Keras files' models share."""
from .losses import (
    LOSSES,
    BinaryCrossentropy,
    CategoricalCrossentropy,
    MeanAbsoluteError,
    MeanSquaredError,
    SparseCategoricalCrossentropy,
    binary_crossentropy,
    categorical_crossentropy,
    mean_absolute_error,
    mean_squared_error,
    sparse_categorical_crossentropy,
)
from .metrics import METRICS
from .progress import History
from .sequential import Input, Model, Sequential

__all__ = ["Sequential", "Model", "Input", "History", "LOSSES", "METRICS",
           "BinaryCrossentropy", "CategoricalCrossentropy", "MeanAbsoluteError",
           "MeanSquaredError", "SparseCategoricalCrossentropy", "binary_crossentropy",
           "categorical_crossentropy", "mean_absolute_error", "mean_squared_error",
           "sparse_categorical_crossentropy"]
