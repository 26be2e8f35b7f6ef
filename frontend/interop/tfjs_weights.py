"""TF.js weights: a weightsManifest and its binary shards, read as untrusted input and
decoded as TF.js's io.decodeWeights decodes them. One reader for both TF.js model
kinds: graph models (frontend/tfjs/) and layers models (frontend/keras_files/).

- read_weights: the manifest checked entry by entry (names unique, shapes of
  non-negative ints within max_elements, dtypes float32/int32/bool, quantizations
  uint8/uint16 with min and scale or float16 on float32), the shards' paths held inside
  the model's folder (limits.weight_path) and each group's shards' sizes checked
  against what the manifest declares for it before a byte is read; then each weight
  decoded (decode). Errors are the caller's class (TfjsImportError, KerasImportError),
  naming the weight or group.
- dequantize: uint8/uint16 to float32 as v * scale + min computed in float64 and
  rounded once to float32 (TF.js: a JS number stored into a Float32Array); to int32 as
  Math.round (floor(x + 0.5)).
- float16_as_tfjs: TF.js's own table decoder (the fox-toolkit half-to-float tables),
  bit for bit: it agrees with IEEE's conversion on all 65,536 patterns, subnormals,
  infinities and NaNs included (tests/tfjs check it).
"""
from __future__ import annotations

import math
import os

import numpy as np

from .errors import ModelImportError, short
from .limits import MAX_RANK, read_bounded, weight_path

DTYPE_BYTES = {"float32": 4, "int32": 4, "bool": 1}
QUANT_BYTES = {"uint8": 1, "uint16": 2, "float16": 2}


def model_json_path(path, error, caller: str) -> str:
    """The model.json a path names: the file, or model.json inside a folder (the TF.js
    graph and layers readers both take either). error: the importer's error class;
    caller: the function named in the message for a path that is not one."""
    if not isinstance(path, (str, os.PathLike)):
        raise error(f"{caller} takes the path of a model.json or of a folder holding "
                    f"one, not {type(path).__name__}")
    path = os.fspath(path)
    if os.path.isdir(path):
        candidate = os.path.join(path, "model.json")
        if not os.path.isfile(candidate):
            jsons = sorted(f for f in os.listdir(path) if f.endswith(".json"))
            hint = f" (it holds {', '.join(jsons[:5])}: give one's path)" if jsons else ""
            raise error(f"folder {short(path)!r} holds no model.json{hint}")
        return candidate
    return path


def _weight_specs(manifest, max_elements: int, error) -> list:
    """[(shard paths, [spec, ...])] per group, every field checked."""
    if not isinstance(manifest, list):
        raise error("weightsManifest is not a list of groups")
    groups, names = [], set()
    for g, group in enumerate(manifest):
        if not isinstance(group, dict) or not isinstance(group.get("paths"), list) \
                or not isinstance(group.get("weights"), list):
            raise error(f"weightsManifest group {g} needs 'paths' and 'weights' lists")
        specs = []
        for w in group["weights"]:
            spec = _check_spec(w, g, max_elements, error)
            if spec["name"] in names:
                raise error(f"weight '{short(spec['name'])}' is listed twice in the "
                            f"weightsManifest")
            names.add(spec["name"])
            specs.append(spec)
        groups.append((group["paths"], specs))
    return groups


def _check_spec(w, g: int, max_elements: int, error) -> dict:
    if not isinstance(w, dict) or not isinstance(w.get("name"), str) or not w["name"]:
        raise error(f"weightsManifest group {g}: an entry has no name")
    name = w["name"]
    what = f"weight '{short(name)}'"
    shape = w.get("shape")
    if not isinstance(shape, list) or len(shape) > MAX_RANK or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise error(f"{what}: shape {short(shape)} is not a list of at most {MAX_RANK} "
                    f"non-negative integers")
    count = math.prod(shape)
    if count > max_elements:
        raise error(f"{what}: shape {shape} = {count} elements, more than max_elements="
                    f"{max_elements} (pass a larger max_elements if you trust the model)")
    dtype = w.get("dtype")
    if dtype not in DTYPE_BYTES:
        raise error(f"{what}: dtype {short(dtype)!r} is not supported (float32, int32, "
                    f"bool; strings and complex64 are not)")
    q = w.get("quantization")
    nbytes = count * DTYPE_BYTES[dtype]
    if q is not None:
        if not isinstance(q, dict) or q.get("dtype") not in QUANT_BYTES:
            shown = q.get("dtype") if isinstance(q, dict) else q
            raise error(f"{what}: quantization {short(shown)!r} is not supported (uint8, "
                        f"uint16 with min and scale, or float16)")
        if q["dtype"] == "float16" and dtype != "float32":
            raise error(f"{what}: float16 quantization of a {dtype} weight (TF.js has it "
                        f"for float32 only)")
        if q["dtype"] != "float16":
            if dtype not in ("float32", "int32"):
                raise error(f"{what}: {q['dtype']} quantization of a {dtype} weight")
            if not all(isinstance(q.get(k), (int, float)) and not isinstance(q.get(k), bool)
                       and math.isfinite(q[k]) for k in ("min", "scale")):
                raise error(f"{what}: {q['dtype']} quantization needs finite numbers "
                            f"'min' and 'scale'")
        nbytes = count * QUANT_BYTES[q["dtype"]]
    return {"name": name, "shape": tuple(shape), "dtype": dtype, "quantization": q,
            "nbytes": nbytes}


def read_weights(manifest, base: str, max_bytes: int, max_elements: int,
                 error=ModelImportError) -> dict:
    """{weight name: numpy array}, in manifest order, as TF.js decodes them, from the
    shards the weightsManifest names inside folder base (see the module's docstring)."""
    groups = _weight_specs(manifest, max_elements, error)
    files, declared = [], 0
    for g, (paths, specs) in enumerate(groups):
        here = f"weightsManifest group {g}"
        shards = [weight_path(base, p, here, error) for p in paths]
        want = sum(s["nbytes"] for s in specs)
        found = sum(os.path.getsize(f) for f in shards)
        if want != found:
            raise error(f"{here} declares {want} bytes of weights but its shards hold "
                        f"{found} bytes: a shard is missing, truncated or does not belong "
                        f"to this model.json")
        declared += want
        files.append((shards, specs))
    if declared > max_bytes:
        raise error(f"the weights are {declared} bytes, more than max_bytes={max_bytes} "
                    f"(pass a larger max_bytes if you trust the model)")
    out = {}
    for shards, specs in files:
        data = b"".join(read_bounded(f, max_bytes, "weight shard", error) for f in shards)
        if len(data) != sum(s["nbytes"] for s in specs):     # a shard changed while read
            raise error("the weight shards changed size while being read")
        buffer, offset = memoryview(data), 0
        for spec in specs:
            out[spec["name"]] = decode(spec, buffer[offset:offset + spec["nbytes"]])
            offset += spec["nbytes"]
    return out


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
