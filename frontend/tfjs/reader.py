"""Reading a TF.js model from disk: model.json and its weight shards, as untrusted input.

- read_model_json: a model.json (or a folder holding one) read within max_bytes and
  parsed; malformed JSON, a nesting too deep for the parser or a top level that is not an
  object is a TfjsImportError, which names the files npm packages ship beside or instead
  of a model.json: a weights manifest (face-api.js), TF.js 0.x's frozen graph
  (tensorflowjs_model.pb) and JavaScript modules (nsfwjs 4's model.min.js).
- read_weights: the weightsManifest and its shards through the import core's one TF.js
  weight reader (interop/tfjs_weights.py, which ff.keras.models.load_model uses too):
  paths inside the model's folder, sizes checked before reading, float16 and
  uint8/uint16 dequantized as TF.js does.
"""
from __future__ import annotations

import json
import math
import os

from ..interop import tfjs_weights
from ..interop.errors import short
from ..interop.limits import read_bounded
from ..interop.tfjs_weights import decode, dequantize, float16_as_tfjs  # noqa: F401 -- API
from .errors import TfjsImportError


def model_json_path(path) -> str:
    """The model.json a path names: the file, or model.json inside a folder."""
    return tfjs_weights.model_json_path(path, TfjsImportError, "ff.tfjs.load")


FROZEN = "tensorflowjs_model.pb"      # TF.js 0.x: a frozen GraphDef + weights_manifest.json
_FROZEN_HINT = ("TF.js 0.x's frozen format, which TF.js 1.0 and later no longer load "
                "either: convert the original model with tensorflowjs_converter 1.0 or "
                "later to a model.json")
# how a JavaScript file begins (after a comment or whitespace): a bundle, a module
_JS_STARTS = ("!function", "(function", "(()", "module.exports", "exports.", "export ",
              "import ", '"use strict"', "'use strict'", "var ", "let ", "const ",
              "define(")


def _not_json_hint(path: str, data: bytes) -> str:
    """What a file that is not JSON text is, where it is one npm packages ship."""
    name = os.path.basename(path)
    if name == FROZEN or name.endswith(".pb"):
        return f"; a protobuf file ({FROZEN} with weights_manifest.json is {_FROZEN_HINT})"
    head = data[:200].decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    if name.endswith((".js", ".mjs", ".cjs")) or head.startswith(_JS_STARTS):
        return ("; it is JavaScript (as nsfwjs 4 ships its models, in model.min.js "
                "modules), and fragflow never runs code from a file: load the model.json "
                "it was made from")
    return ""


def _is_weights_manifest(value) -> bool:
    return bool(value) and all(isinstance(g, dict) and "weights" in g and "paths" in g
                               for g in value)


def read_model_json(path: str, max_bytes: int) -> dict:
    data = read_bounded(path, max_bytes, "TF.js model", TfjsImportError)
    try:
        model = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise TfjsImportError(f"{short(path)!r} is not a TF.js model.json: not UTF-8 "
                              f"text{_not_json_hint(path, data)}") from None
    except RecursionError:
        raise TfjsImportError(f"{short(path)!r}: its JSON nests too deep") from None
    except ValueError as err:
        raise TfjsImportError(f"{short(path)!r} is not a TF.js model.json: malformed JSON "
                              f"({short(err)}){_not_json_hint(path, data)}") from None
    if isinstance(model, list) and _is_weights_manifest(model):
        frozen = os.path.isfile(os.path.join(os.path.dirname(path), FROZEN))
        raise TfjsImportError(
            f"{short(path)!r} is a TF.js weights manifest, not a model.json: " + (
                f"with the {FROZEN} beside it, it is in {_FROZEN_HINT}" if frozen else
                "weight shards without a topology (the network is the JavaScript code of "
                "the package that ships it, as face-api.js's), which no model.json "
                "loader, TF.js's included, can run"))
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
