"""Reading a TF.js model from disk: model.json and its weight shards, as untrusted input.

- read_model_json: a model.json (or a folder holding one) read within max_bytes and
  parsed; malformed JSON, a nesting too deep for the parser or a top level that is not an
  object is a TfjsImportError.
- read_weights: the weightsManifest checked entry by entry (names unique, shapes of
  non-negative ints within max_elements, dtypes float32/int32/bool, quantizations
  uint8/uint16 with min and scale or float16 on float32), the shards' paths held inside
  the model's folder (interop.limits.weight_path) and their sizes checked against what
  the manifest declares before a byte is read; then each weight decoded as TF.js's
  io.decodeWeights decodes it (dequantize below).
- dequantize: uint8/uint16 to float32 as v * scale + min computed in float64 and
  rounded once to float32 (TF.js: a JS number stored into a Float32Array); to int32 as
  Math.round (floor(x + 0.5)); float16 through TF.js's own table decoder (the
  fox-toolkit half-to-float tables), bit for bit: it agrees with IEEE's conversion on
  all 65,536 patterns, subnormals, infinities and NaNs included (tests/tfjs check it).
"""
from __future__ import annotations

import json
import math
import os

import numpy as np

from ..interop.errors import short
from ..interop.limits import MAX_RANK, read_bounded, weight_path
from .errors import TfjsImportError

DTYPE_BYTES = {"float32": 4, "int32": 4, "bool": 1}
QUANT_BYTES = {"uint8": 1, "uint16": 2, "float16": 2}


def model_json_path(path) -> str:
    """The model.json a path names: the file, or model.json inside a folder."""
    if not isinstance(path, (str, os.PathLike)):
        raise TfjsImportError(f"ff.tfjs.load takes the path of a model.json or of a folder "
                              f"holding one, not {type(path).__name__}")
    path = os.fspath(path)
    if os.path.isdir(path):
        candidate = os.path.join(path, "model.json")
        if not os.path.isfile(candidate):
            jsons = sorted(f for f in os.listdir(path) if f.endswith(".json"))
            hint = f" (it holds {', '.join(jsons[:5])}: give one's path)" if jsons else ""
            raise TfjsImportError(f"folder {short(path)!r} holds no model.json{hint}")
        return candidate
    return path


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


def _weight_specs(manifest, max_elements: int) -> tuple:
    """[(group index, spec)] and the shard paths per group, every field checked."""
    if not isinstance(manifest, list):
        raise TfjsImportError("weightsManifest is not a list of groups")
    specs, groups, names = [], [], set()
    for g, group in enumerate(manifest):
        if not isinstance(group, dict) or not isinstance(group.get("paths"), list) \
                or not isinstance(group.get("weights"), list):
            raise TfjsImportError(f"weightsManifest group {g} needs 'paths' and 'weights' "
                                  f"lists")
        groups.append(group["paths"])
        for w in group["weights"]:
            spec = _check_spec(w, g, max_elements)
            if spec["name"] in names:
                raise TfjsImportError(f"weight '{short(spec['name'])}' is listed twice in "
                                      f"the weightsManifest")
            names.add(spec["name"])
            specs.append(spec)
    return specs, groups


def _check_spec(w, g: int, max_elements: int) -> dict:
    if not isinstance(w, dict) or not isinstance(w.get("name"), str) or not w["name"]:
        raise TfjsImportError(f"weightsManifest group {g}: an entry has no name")
    name = w["name"]
    what = f"weight '{short(name)}'"
    shape = w.get("shape")
    if not isinstance(shape, list) or len(shape) > MAX_RANK or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise TfjsImportError(f"{what}: shape {short(shape)} is not a list of at most "
                              f"{MAX_RANK} non-negative integers")
    count = math.prod(shape)
    if count > max_elements:
        raise TfjsImportError(f"{what}: shape {shape} = {count} elements, more than "
                              f"max_elements={max_elements} (pass a larger max_elements if "
                              f"you trust the model)")
    dtype = w.get("dtype")
    if dtype not in DTYPE_BYTES:
        raise TfjsImportError(f"{what}: dtype {short(dtype)!r} is not supported (float32, "
                              f"int32, bool; strings and complex64 are not)")
    q = w.get("quantization")
    nbytes = count * DTYPE_BYTES[dtype]
    if q is not None:
        if not isinstance(q, dict) or q.get("dtype") not in QUANT_BYTES:
            shown = q.get("dtype") if isinstance(q, dict) else q
            raise TfjsImportError(f"{what}: quantization {short(shown)!r} is not supported "
                                  f"(uint8, uint16 with min and scale, or float16)")
        if q["dtype"] == "float16" and dtype != "float32":
            raise TfjsImportError(f"{what}: float16 quantization of a {dtype} weight (TF.js "
                                  f"has it for float32 only)")
        if q["dtype"] != "float16":
            if dtype not in ("float32", "int32"):
                raise TfjsImportError(f"{what}: {q['dtype']} quantization of a {dtype} "
                                      f"weight")
            if not all(isinstance(q.get(k), (int, float)) and not isinstance(q.get(k), bool)
                       and math.isfinite(q[k]) for k in ("min", "scale")):
                raise TfjsImportError(f"{what}: {q['dtype']} quantization needs finite "
                                      f"numbers 'min' and 'scale'")
        nbytes = count * QUANT_BYTES[q["dtype"]]
    return {"name": name, "shape": tuple(shape), "dtype": dtype, "quantization": q,
            "nbytes": nbytes}


def read_weights(model: dict, base: str, max_bytes: int, max_elements: int) -> dict:
    """{weight name: numpy array} as TF.js decodes them (see the module's docstring)."""
    manifest = model.get("weightsManifest", [])
    specs, groups = _weight_specs(manifest, max_elements)
    files = []
    for g, paths in enumerate(groups):
        for p in paths:
            files.append(weight_path(base, p, f"weightsManifest group {g}", TfjsImportError))
    declared = sum(s["nbytes"] for s in specs)
    found = sum(os.path.getsize(f) for f in files)
    if declared != found:
        raise TfjsImportError(f"the weightsManifest declares {declared} bytes of weights but "
                              f"its shards hold {found} bytes: a shard is missing, truncated "
                              f"or does not belong to this model.json")
    if declared > max_bytes:
        raise TfjsImportError(f"the weights are {declared} bytes, more than max_bytes="
                              f"{max_bytes} (pass a larger max_bytes if you trust the model)")
    data = bytearray()
    for f in files:
        data += read_bounded(f, max_bytes, "weight shard", TfjsImportError)
    if len(data) != declared:       # a shard changed while read
        raise TfjsImportError("the weight shards changed size while being read")
    out, offset = {}, 0
    buffer = memoryview(bytes(data))
    for spec in specs:
        chunk = buffer[offset:offset + spec["nbytes"]]
        offset += spec["nbytes"]
        out[spec["name"]] = decode(spec, chunk)
    return out


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


def decode(spec: dict, chunk) -> np.ndarray:
    """One weight's bytes as TF.js's decodeWeight makes them."""
    q, dtype, shape = spec["quantization"], spec["dtype"], spec["shape"]
    if q is None:
        raw = np.frombuffer(chunk, {"float32": "<f4", "int32": "<i4", "bool": "u1"}[dtype])
        array = raw.astype(bool) if dtype == "bool" else raw.astype(dtype)
        return array.reshape(shape)
    if q["dtype"] == "float16":
        return float16_as_tfjs(np.frombuffer(chunk, "<u2")).reshape(shape)
    return dequantize(np.frombuffer(chunk, "u1" if q["dtype"] == "uint8" else "<u2"),
                      q["scale"], q["min"], dtype).reshape(shape)


def dequantize(values: np.ndarray, scale: float, minimum: float, dtype: str) -> np.ndarray:
    """uint8/uint16 values as TF.js dequantizes them: v * scale + min in float64 (a JS
    number), then float32 (Float32Array's store rounds to nearest even) or, for int32,
    Math.round (halves toward +infinity)."""
    exact = values.astype(np.float64) * float(scale) + float(minimum)
    if dtype == "int32":
        return np.floor(exact + 0.5).astype(np.int32)
    return exact.astype(np.float32)


def _float16_tables():
    """TF.js's getFloat16Decoder tables (the fox-toolkit half-to-float conversion)."""
    mantissa = np.zeros(2048, np.uint32)
    for i in range(1, 1024):
        m, e = i << 13, 0
        while not m & 0x00800000:
            e -= 0x00800000
            m <<= 1
        mantissa[i] = ((m & ~0x00800000) | (e + 0x38800000)) & 0xFFFFFFFF
    mantissa[1024:] = 0x38000000 + (np.arange(1024, dtype=np.uint32) << 13)
    exponent = np.zeros(64, np.uint32)
    exponent[1:31] = np.arange(1, 31, dtype=np.uint32) << 23
    exponent[31] = 0x47800000
    exponent[32] = 0x80000000
    exponent[33:63] = 0x80000000 + (np.arange(1, 31, dtype=np.uint32) << 23)
    exponent[63] = 0xC7800000
    offset = np.full(64, 1024, np.uint32)
    offset[0] = offset[32] = 0
    return mantissa, exponent, offset


_TABLES = None


def float16_as_tfjs(bits: np.ndarray) -> np.ndarray:
    """float16 bit patterns as TF.js's table decoder turns them into float32."""
    global _TABLES
    if _TABLES is None:
        _TABLES = _float16_tables()
    mantissa, exponent, offset = _TABLES
    bits = bits.astype(np.uint32)
    high = bits >> 10
    out = (mantissa[offset[high] + (bits & 0x3FF)] + exponent[high]).astype(np.uint32)
    return out.view(np.float32)
