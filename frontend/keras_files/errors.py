"""KerasImportError: a Keras model file fragflow cannot read (or a model it cannot
write as one)."""
from __future__ import annotations

from ..interop.errors import ModelImportError, short


class KerasImportError(ModelImportError):
    """A Keras file (.keras, .h5, a TF.js layers model.json) fragflow cannot import:
    malformed, over a limit, unsafe (code in the file), or holding a layer or argument
    fragflow does not have. The message names the layer or weight."""


def where(layer=None, cls=None) -> str:
    """"layer 'conv1' (Conv2D)" for error messages."""
    if layer is None:
        return "model"
    return f"layer {short(layer, 80)!r}" + (f" ({short(cls, 60)})" if cls else "")
