"""Reading a TF.js model from disk: model.json and its weight shards, as untrusted input.

- read_model_json: a model.json (or a folder holding one) read within max_bytes and
  parsed; malformed JSON, a nesting too deep for the parser or a top level that is not an
  object is a TfjsImportError.
- read_weights: the weightsManifest and its shards through the import core's one TF.js
  weight reader (interop/tfjs_weights.py, which ff.keras.models.load_model uses too):
  paths inside the model's folder, sizes checked before reading, float16 and
  uint8/uint16 dequantized as TF.js does.
"""
from __future__ import annotations

import json
import math

from ..interop import tfjs_weights
from ..interop.errors import short
from ..interop.limits import read_bounded
from ..interop.tfjs_weights import decode, dequantize, float16_as_tfjs  # noqa: F401 -- API
from .errors import TfjsImportError


def model_json_path(path) -> str:
    """The model.json a path names: the file, or model.json inside a folder."""
    return tfjs_weights.model_json_path(path, TfjsImportError, "ff.tfjs.load")


def read_model_json(path: str, max_bytes: int) -> dict:
    data = read_bounded(path, max_bytes, "TF.js model", TfjsImportError)
    try:
        model = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise TfjsImportError(f"{short(path)!r} is not a TF.js model.json: not UTF-8 "
                              f"text") from None
    except RecursionError:
        raise TfjsImportError(f"{short(path)!r}: its JSON nests too deep") from None
    except ValueError as err:
        raise TfjsImportError(f"{short(path)!r} is not a TF.js model.json: malformed JSON "
                              f"({short(err)})") from None
    if not isinstance(model, dict):
        raise TfjsImportError(f"{short(path)!r} is not a TF.js model.json: its top level "
                              f"is a {type(model).__name__}, not an object")
    return model


def read_weights(model: dict, base: str, max_bytes: int, max_elements: int) -> dict:
    """{weight name: numpy array} as TF.js decodes them (interop/tfjs_weights.py)."""
    return tfjs_weights.read_weights(model.get("weightsManifest", []), base, max_bytes,
                                     max_elements, TfjsImportError)


def weight_encodings(model: dict) -> list:
    """The stored forms of the float32 weights the manifest quantizes (read_weights has
    checked it): {"dtype": "float16"} once, and per uint8/uint16 weight its dtype, min,
    scale and element count (ir Graph.weight_encodings: exporters keep these forms)."""
    out, half = [], False
    for group in model.get("weightsManifest", []):
        for w in group["weights"]:
            q = w.get("quantization")
            if q is None or w.get("dtype") != "float32":
                continue
            if q["dtype"] == "float16":
                half = True
            else:
                out.append({"dtype": q["dtype"], "min": float(q["min"]),
                            "scale": float(q["scale"]), "size": math.prod(w["shape"])})
    return ([{"dtype": "float16"}] if half else []) + out
