"""The import core every foreign-format reader stands on (ONNX in frontend/onnx/, TF.js
in frontend/tfjs/, Keras files in frontend/keras_files/): what a reader needs besides
its own parser and rule table, written once.

- errors.py: ModelImportError, the base of OnnxImportError and TfjsImportError.
- limits.py: the limits a model file is held to (MAX_BYTES, MAX_ELEMENTS, MAX_RANK),
  too_large, bounded file reads and weight paths that stay inside the model's folder.
- dtypes.py: foreign dtypes as fragflow's (float32, int32, bool), int64 checked to fit.
- importer.py: ImporterBase, one import's value table (name -> numpy array known at
  import | Init, a weight not yet in the graph | Partial, an int vector partly known |
  ff Tensor), the helpers rules call
  (tensor, static, ints, weight, error, check_elements), the per-node guard turning any
  failure into the format's error naming the node, source locations, attributes that
  remember which were read.
- static.py: static evaluation through the op records' numpy references (a rule run
  on constants in a scratch graph), for formats without an evaluator of their own.
- tfjs_weights.py: a TF.js weightsManifest and its shards read within the limits and
  decoded as TF.js does (float16, uint8/uint16 dequantization), for TF.js graph models
  (frontend/tfjs/) and layers models (frontend/keras_files/) alike.
- record.py: ImportedModel, what every load returns (.graph .inputs .outputs
  .inputs_by_name .outputs_by_name .feed_dict .variables).

See docs/ARCHITECTURE.md, "Importers".
"""
from .errors import ModelImportError
from .importer import (
    HARMLESS_ATTRS,
    ImporterBase,
    Init,
    Partial,
    ReadAttrs,
    clean_name,
    source_location,
)
from .limits import MAX_BYTES, MAX_ELEMENTS, MAX_RANK, read_bounded, too_large, weight_path
from .record import ImportedModel

__all__ = ["ModelImportError", "ImporterBase", "Init", "Partial", "ReadAttrs", "HARMLESS_ATTRS",
           "clean_name", "source_location", "MAX_BYTES", "MAX_ELEMENTS", "MAX_RANK",
           "read_bounded", "too_large", "weight_path", "ImportedModel"]
