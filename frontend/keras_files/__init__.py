"""Keras model files: ff.keras.models.load_model, save_model and model_from_json, and
model.save / model.to_json, for Keras 3 .keras files, Keras 2 and 3 .h5 files and TF.js
layers models (docs/KERAS.md, "Model files").

- config.py: a model config (either dialect) read into a ModelSpec; each layer made
  from the ff.keras.layers class of its Keras class name; code in a file refused.
- model.py: KerasModel, the ff.keras Model a file becomes (several inputs and outputs,
  shared layers, nested models).
- storage.py: the containers read within limits (zip, HDF5, TF.js shards).
- loading.py: load_model, model_from_json, weights by Keras's naming, compile config.
- saving.py: save_model and to_json: files Keras 3 opens.
Built on the import core, frontend/interop/.
"""
from .errors import KerasImportError
from .loading import load_model, model_from_json
from .model import KerasModel
from .saving import model_json, save_model

__all__ = ["load_model", "model_from_json", "save_model", "model_json", "KerasModel",
           "KerasImportError"]
