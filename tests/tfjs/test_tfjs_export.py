"""ff.webgl.export of imported TF.js models: weights kept in model.bin as they came
(float16, uint8/uint16 with min and scale: ir Graph.weight_encodings), expanded at load
by the runtime to the numbers the float32 path stores, bit for bit. The oracle is
frontend/tfjs/reader's TF.js decoders (its table-driven float16, its float64
dequantization), which tests/tfjs/test_tfjs_rules.py holds to TF.js itself."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
import tfjs_corpus as corpus
from tfjs_builder import ModelBuilder

import fragflow as ff
from fragflow.frontend.tfjs import reader
from fragflow.tools.webgl.export import runtime_text

RNG = np.random.default_rng(11)
Q8 = {"dtype": "uint8", "min": -1.0366, "scale": 0.0081377}
Q16 = {"dtype": "uint16", "min": -3.3, "scale": 1.1e-4}


def _quantized_model(folder) -> str:
    """x[1, 8] @ w (uint8) + b (uint16), * s (float16), + c (float32)."""
    b = ModelBuilder()
    b.placeholder("x", [1, 8])
    w8 = RNG.integers(0, 256, (8, 16)).astype(np.uint8)
    b16 = RNG.integers(0, 65536, 16).astype(np.uint16)
    s16 = RNG.uniform(-2, 2, 16).astype(np.float16)
    b.const("w", np.zeros((8, 16), np.float32), Q8, raw=w8.tobytes())
    b.const("b", np.zeros(16, np.float32), Q16, raw=b16.astype("<u2").tobytes())
    b.const("s", np.zeros(16, np.float32), {"dtype": "float16"},
            raw=s16.astype("<f2").tobytes())
    b.const("c", RNG.uniform(-1, 1, 16).astype(np.float32))
    b.op("MatMul", "mm", ["x", "w"], transpose_a=False, transpose_b=False)
    b.op("BiasAdd", "ba", ["mm", "b"])
    b.op("Mul", "ms", ["ba", "s"])
    b.op("AddV2", "y", ["ms", "c"])
    return b.write(folder)


def _exports(path, root, input_shapes=None):
    """(export with the weights as they came, export of the float32 path)."""
    kept = ff.tfjs.load(path, input_shapes=input_shapes)
    plain = ff.tfjs.load(path, input_shapes=input_shapes)
    plain.graph.weight_encodings.clear()
    return (ff.webgl.export(kept.outputs, kept.inputs, os.path.join(root, "kept"),
                            page=False),
            ff.webgl.export(plain.outputs, plain.inputs, os.path.join(root, "plain"),
                            page=False))


def _slot_values(export) -> list:
    """Each slot's stored values as float32/int32 (encoded ones through reader's
    TF.js decoders), None for slots without data."""
    with open(export.files["model.bin"], "rb") as f:
        blob = f.read()
    out = []
    for s in export.schedule["slots"]:
        if not s.get("data"):
            out.append(None)
            continue
        offset, count = s["data"]
        e = s.get("encoding")
        if e is None:
            out.append(np.frombuffer(blob, "<i4" if s["format"] == "i" else "<f4", count,
                                     offset))
        elif e[0] == "float16":
            out.append(reader.float16_as_tfjs(np.frombuffer(blob, "<u2", count, offset)))
        else:
            q = np.frombuffer(blob, "u1" if e[0] == "uint8" else "<u2", count, offset)
            out.append(reader.dequantize(q, e[2], e[1], "float32"))
    return out


def _same_numbers(kept, plain):
    assert len(kept.schedule["slots"]) == len(plain.schedule["slots"])
    for a, b in zip(_slot_values(kept), _slot_values(plain)):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.dtype.kind == b.dtype.kind and a.shape == b.shape
            assert np.array_equal(a.view(np.uint32 if a.dtype.kind == "f" else a.dtype),
                                  b.view(np.uint32 if b.dtype.kind == "f" else b.dtype))


def test_quantized_weights_stay_small_and_decode_to_the_float32_numbers(tmp_path):
    kept, plain = _exports(_quantized_model(str(tmp_path / "m")), str(tmp_path))
    kinds = sorted(s["encoding"][0] for s in kept.schedule["slots"] if s.get("encoding"))
    assert kinds == ["float16", "uint16", "uint8"]
    assert not any(s.get("encoding") for s in plain.schedule["slots"])
    _same_numbers(kept, plain)
    # 128 + 32 + 32 bytes (each 16-aligned) and c's 64, against 4 bytes a weight
    assert kept.bin_bytes == 128 + 32 + 32 + 64
    assert plain.bin_bytes == 4 * (128 + 16 + 16 + 16)


def test_a_constant_no_stored_form_decodes_to_is_float32():
    """encode() keeps a stored form only where it decodes bit for bit (a constant the
    passes made from a weight, e.g. a folded one, is float32)."""
    from fragflow.tools.webgl.export import encode
    x = np.array([0.1, 0.2, 0.3], np.float32)
    assert encode(x, [{"dtype": "float16"}]) == (None, None)
    assert encode(x, [dict(Q8, size=3)]) == (None, None)
    assert encode(x, [dict(Q8, size=4)]) == (None, None)
    half = np.array([0.5, -0.0, 65504.0, 2.0 ** -24], np.float32)
    data, encoding = encode(half, [{"dtype": "float16"}])
    assert encoding == ["float16"] and len(data) == 8
    q = np.array([0, 7, 255], np.uint8)
    exact = reader.dequantize(q, Q8["scale"], Q8["min"], "float32")
    data, encoding = encode(exact, [dict(Q8, size=3)])
    assert encoding == ["uint8", Q8["min"], Q8["scale"]] and data == q.tobytes()


def _runtime_decoder() -> str:
    """runtime.js's dataOf and staging, as a node script's functions."""
    text = runtime_text()
    parts = [re.search(rf"\nfunction {name}\(.*?\n}}\n", text, re.S).group(0)
             for name in ("dataOf", "staging")]
    return "".join(parts)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_runtime_expands_weights_as_tfjs_decodes_them(tmp_path):
    """The runtime's load-time expansion (JavaScript) against reader's decoders: every
    float16 pattern, and uint8/uint16 values with a scale and min."""
    half = np.arange(65536, dtype=np.uint16)
    q8 = np.arange(256, dtype=np.uint8)
    q16 = RNG.integers(0, 65536, 4096).astype(np.uint16)
    blob = half.astype("<u2").tobytes() + q8.tobytes() + q16.astype("<u2").tobytes()
    (tmp_path / "bin").write_bytes(blob)
    slots = [
        {"data": [0, 65536], "format": "f", "width": 16384, "height": 1,
         "encoding": ["float16"]},
        {"data": [131072, 256], "format": "f", "width": 64, "height": 1,
         "encoding": ["uint8", Q8["min"], Q8["scale"]]},
        {"data": [131328, 4096], "format": "f", "width": 1024, "height": 1,
         "encoding": ["uint16", Q16["min"], Q16["scale"]]},
    ]
    script = _runtime_decoder() + f"""
const fs = require('fs');
const file = fs.readFileSync({json.dumps(str(tmp_path / "bin"))});
const bin = file.buffer.slice(file.byteOffset, file.byteOffset + file.byteLength);
const slots = {json.dumps(slots)};
const parts = slots.map((s) => Buffer.from(dataOf(bin, s).buffer));
fs.writeFileSync({json.dumps(str(tmp_path / "out"))}, Buffer.concat(parts));
"""
    (tmp_path / "decode.js").write_text(script)
    subprocess.run(["node", str(tmp_path / "decode.js")], check=True, timeout=60)
    out = np.fromfile(tmp_path / "out", "<f4")
    want = [reader.float16_as_tfjs(half),
            reader.dequantize(q8, Q8["scale"], Q8["min"], "float32"),
            reader.dequantize(q16, Q16["scale"], Q16["min"], "float32")]
    start = 0
    for got_size, expected in zip((65536, 256, 4096), want):
        got = out[start:start + got_size]
        start += got_size
        nan = np.isnan(expected)
        assert np.array_equal(np.isnan(got), nan)
        assert np.array_equal(got[~nan].view(np.uint32), expected[~nan].view(np.uint32))


@pytest.mark.parametrize("name", ["facemesh-detection-short", "selfie", "handdetect"])
def test_corpus_exports_are_no_bigger_than_the_tfjs_weights(tmp_path, name):
    """float16 models of the corpus: model.bin within the TF.js shard's size, every
    weight decoding to the float32 path's numbers (handdetect: its stride-2 transposed
    convolutions' scales stay out of their phase filters, passes/conv_lowering.py)."""
    path = os.path.join(corpus.corpus(), name + ".json")
    kept, plain = _exports(path, str(tmp_path), corpus.fixed_input_shapes(path))
    tfjs_bytes = os.path.getsize(os.path.join(corpus.corpus(), name + ".bin"))
    assert kept.bin_bytes <= tfjs_bytes < plain.bin_bytes
    _same_numbers(kept, plain)
