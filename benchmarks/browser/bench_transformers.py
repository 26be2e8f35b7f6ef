"""make bench-transformers: Hugging Face transformers models (random weights from small
configs, no downloads) exported to ONNX, then fragflow's WebGL export of each
(ff.onnx.load -> ff.webgl.export) beside onnxruntime-web 1.30 on the same .onnx file,
in one page and one Chromium session per rasteriser, and in Python fragflow on GL
beside onnxruntime's CPU session (issue 34).

    python benchmarks/browser/bench_transformers.py [--only bert,vit,whisper,gpt2]
        [--rounds 10] [--budget-ms 3000] [--configs swiftshader,mesa] [--webgpu swiftshader]
        [--whisper-frames 1000] [--gpt2-full] [--tiny] [--no-python] [--timeout 3600]
        [--cache build/bench-transformers] [--weights float16] [--json out.json]

Models: BERT-mini-sized (4 layers, 256 wide, 4 heads, 128 tokens), ViT-tiny-sized (12
layers, 192 wide, 3 heads, 224x224, patch 16), a Whisper-tiny-sized encoder (4 layers,
384 wide, 6 heads, 80 mel bins x --whisper-frames; Whisper's own 3000 frames take ~16 s
a run on llvmpipe, so 1000 by default), and GPT-2 greedy decoding: 32 tokens after a
prompt of 8, 4 layers, 256 wide, 4 heads, GPT-2's vocabulary of 50,257 by default
(--gpt2-full: GPT-2-small, 12 layers, 768 wide, 12 heads; one ort WebGPU generation
of it on SwiftShader took 617 s); --tiny: 2-layer, 32-wide versions of each (the smoke
test).

GPT-2: fragflow exports ff.gpt2_decoder(state_dict, config).generate(ids, 32), one
`run` generating every token; ort-web runs transformers' GPT2LMHeadModel exported
with its key/value cache (gpt2_onnx) in a greedy loop written in the page (argmax of
the last logits, the token and the present key/values fed back; outputs on the CPU,
ort's default). Both sides' tokens are compared with transformers' generate (printed,
"tokens equal" in the table), and the times are of the whole generation (and per
token).

Per model and rasteriser: steady-state medians (runs interleaved fragflow / ort wasm /
ort WebGPU, each synced by reading every output back), the first run (fragflow:
import + load + run; ort: InferenceSession.create + run), fragflow's kernels (all, and
those of the first layer), its per-kernel profile, agreement (max |difference| / max
|ort wasm|) and bytes: model.js + model.bin against the .onnx file + ort-web's module
and wasm for that backend, raw and gzipped. ort wasm runs with one thread; WebGPU runs
where the session has an adapter (--webgpu names the sessions given WEBGPU_FLAGS:
SwiftShader's Vulkan). The .onnx files are cached under build/bench-transformers/
(keyed by their config), so a rerun only re-exports fragflow's side. Each model's result
is printed as the page posts it; a browser session that fails or outlives --timeout
gives its models an error row and the other sessions still run."""
from __future__ import annotations

import argparse
import copy
import hashlib
import inspect
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_models import agreement, file_sizes, top_ops  # noqa: E402  (same folder)

import fragflow as ff  # noqa: E402
from fragflow.tools.webgl.chromium import CONFIGS, WEBGPU_FLAGS, chromium, serve_and_open  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
CACHE = os.path.join(ROOT, "build", "bench-transformers")
ORT_DIST = os.path.join(HERE, "node_modules", "onnxruntime-web", "dist")
# what a page fetches to run a model on each ort-web backend (the module it imports,
# the Emscripten glue that module imports, and its wasm)
ORT_RUNTIME = {
    "wasm": ["ort.wasm.min.mjs", "ort-wasm-simd-threaded.mjs", "ort-wasm-simd-threaded.wasm"],
    "webgpu": ["ort.webgpu.min.mjs", "ort-wasm-simd-threaded.asyncify.mjs",
               "ort-wasm-simd-threaded.asyncify.wasm"],
}
SIDES = ("fragflow", "wasm", "webgpu")
SKIPPED: dict = {}                  # {model: why it is not measured}: none now
NEW_TOKENS = 32                     # GPT-2: greedy tokens generated after the prompt
PROMPT = 8                          # GPT-2: prompt tokens


def gpt2_config(size: str) -> tuple:
    """GPT-2's config kwargs and description: "tiny" (2 x 32, vocabulary 100), "small"
    (the default: 4 layers, 256 wide, 4 heads, GPT-2's 50,257 tokens) or "full"
    (GPT-2-small: 12 x 768, 12 heads; --gpt2-full). initializer_range 0.4 as in
    examples/generate.py: GPT-2's 0.02 makes random weights repeat one token, 0.4
    keeps the top two logits of each step apart."""
    layers, width, heads, vocab, positions = {"tiny": (2, 32, 2, 100, 64),
                                              "small": (4, 256, 4, 50257, 64),
                                              "full": (12, 768, 12, 50257, 1024)}[size]
    kwargs = dict(n_layer=layers, n_embd=width, n_head=heads, vocab_size=vocab,
                  n_positions=positions, initializer_range=0.4, bos_token_id=0,
                  eos_token_id=None, pad_token_id=0, attn_implementation="eager")
    what = {"tiny": "GPT-2 2x32, vocabulary 100", "full": "GPT-2-small: 12 layers, 768 wide, "
            "12 heads, vocabulary 50257", "small": "GPT-2 4 layers, 256 wide, 4 heads, "
            "vocabulary 50257 (GPT-2-small: --gpt2-full)"}[size]
    return kwargs, layers, f"{what}; {NEW_TOKENS} greedy tokens after {PROMPT}"


def model_configs(tiny: bool, whisper_frames: int, gpt2_full: bool = False) -> dict:
    """{name: (transformers class name, config kwargs, inputs {name: (shape, dtype)},
    layers, description)}: the sizes the issue names, or --tiny ones."""
    eager = {"attn_implementation": "eager"}     # attention as torch writes it by hand
    gpt2, gpt2_layers, gpt2_what = gpt2_config("tiny" if tiny else
                                               "full" if gpt2_full else "small")
    gpt2_spec = ("GPT2LMHeadModel", gpt2, {"input_ids": ((1, PROMPT), "int64")}, gpt2_layers,
                 gpt2_what)
    if tiny:
        return {
            "bert": ("BertModel", dict(hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=64,
                                       vocab_size=100, max_position_embeddings=32, **eager),
                     {"input_ids": ((1, 16), "int64"), "attention_mask": ((1, 16), "int64")},
                     2, "BERT 2x32, 16 tokens"),
            "vit": ("ViTModel", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, image_size=32, patch_size=8, **eager),
                    {"pixel_values": ((1, 3, 32, 32), "float32")}, 2, "ViT 2x32, 32x32/8"),
            "whisper": ("WhisperEncoder", dict(d_model=32, encoder_layers=2,
                                               encoder_attention_heads=2, encoder_ffn_dim=64,
                                               num_mel_bins=8, max_source_positions=20,
                                               **eager),
                        {"input_features": ((1, 8, 40), "float32")}, 2,
                        "Whisper encoder 2x32, 8 mel x 40"),
            "gpt2": gpt2_spec,
        }
    return {
        "bert": ("BertModel", dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                   intermediate_size=1024, **eager),
                 {"input_ids": ((1, 128), "int64"), "attention_mask": ((1, 128), "int64")},
                 4, "BERT-mini: 4 layers, 256 wide, 4 heads, 128 tokens"),
        "vit": ("ViTModel", dict(hidden_size=192, num_hidden_layers=12, num_attention_heads=3,
                                 intermediate_size=768, image_size=224, patch_size=16, **eager),
                {"pixel_values": ((1, 3, 224, 224), "float32")}, 12,
                "ViT-tiny: 12 layers, 192 wide, 3 heads, 224x224 patch 16"),
        "whisper": ("WhisperEncoder", dict(d_model=384, encoder_layers=4,
                                           encoder_attention_heads=6, encoder_ffn_dim=1536,
                                           num_mel_bins=80,
                                           max_source_positions=whisper_frames // 2, **eager),
                    {"input_features": ((1, 80, whisper_frames), "float32")}, 4,
                    f"Whisper-tiny encoder: 4 layers, 384 wide, 6 heads, 80 mel x "
                    f"{whisper_frames} frames"),
        "gpt2": gpt2_spec,
    }


def seeded_feeds(inputs: dict, vocab: int, seed: int = 0) -> dict:
    """{ONNX input name: array}: token ids in [0, vocab), masks of ones, floats N(0, 1)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name, (shape, dtype) in inputs.items():
        if name == "attention_mask":
            feeds[name] = np.ones(shape, np.int64)
        elif dtype == "int64":
            feeds[name] = rng.integers(0, vocab, shape).astype(np.int64)
        else:
            feeds[name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def onnx_file(name: str, spec: tuple, cache: str = CACHE, log=print) -> str:
    """The model as ONNX (torch.onnx.export, dynamo=False, opset 17; random weights,
    torch seed 0), written once per config under cache/."""
    cls, kwargs, inputs, _, _ = spec
    kwargs = {**kwargs, **({"past": "v1"} if cls == "GPT2LMHeadModel" else {})}
    key = hashlib.sha256(json.dumps([cls, kwargs, {k: list(v[0]) for k, v in inputs.items()}],
                                    sort_keys=True).encode()).hexdigest()[:12]
    path = os.path.join(cache, f"{name}-{key}.onnx")
    if os.path.isfile(path):
        return path
    import torch  # noqa: PLC0415  (optional: only to write the .onnx files once)
    import transformers  # noqa: PLC0415

    os.makedirs(cache, exist_ok=True)
    start = time.monotonic()
    partial = path + ".part"
    if cls == "GPT2LMHeadModel":
        gpt2_onnx(gpt2_model(spec[1]), partial)
        os.replace(partial, path)
        log(f"  {name}: wrote {os.path.relpath(path, ROOT)} in {time.monotonic() - start:.0f} s")
        return path
    torch.manual_seed(0)
    if cls == "WhisperEncoder":
        from transformers.models.whisper.modeling_whisper import WhisperEncoder  # noqa: PLC0415  (optional, as above)

        module = WhisperEncoder(transformers.WhisperConfig(**kwargs))
    elif cls == "ViTModel":
        module = transformers.ViTModel(transformers.ViTConfig(**kwargs), add_pooling_layer=False)
    else:
        module = transformers.BertModel(transformers.BertConfig(**kwargs), add_pooling_layer=False)

    class LastHiddenState(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, *args):
            return self.inner(*args).last_hidden_state

    feeds = seeded_feeds(inputs, kwargs.get("vocab_size", 30522))
    args = tuple(torch.from_numpy(a) for a in feeds.values())
    torch.onnx.export(LastHiddenState(module.eval()), args, partial, dynamo=False,
                      opset_version=17, input_names=list(feeds),
                      output_names=["last_hidden_state"])
    os.replace(partial, path)
    log(f"  {name}: wrote {os.path.relpath(path, ROOT)} in {time.monotonic() - start:.0f} s")
    return path


def gpt2_model(kwargs: dict):
    """transformers' GPT2LMHeadModel from kwargs, random weights (torch seed 0), eval."""
    import torch  # noqa: PLC0415  (optional, as in onnx_file)
    import transformers  # noqa: PLC0415

    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(transformers.GPT2Config(**kwargs)).eval()


def gpt2_names(layers: int) -> tuple:
    """The key/value cache's ONNX names: (past inputs, present outputs), key then value
    per layer."""
    kv = [f"{i}.{what}" for i in range(layers) for what in ("key", "value")]
    return [f"past.{n}" for n in kv], [f"present.{n}" for n in kv]


def gpt2_onnx(model, path: str) -> None:
    """GPT-2 with a key/value cache as one ONNX graph: input_ids [1, steps] and past.<i>.
    key/value [1, heads, past, head size] -> logits of the last position [1, vocab] and
    present.<i>.key/value [1, heads, past + steps, ...]. The prefill feeds a past of
    length 0, each step one token and the last presents. Exported from a copy: tracing
    a DynamicCache leaves the traced module computing other logits afterwards."""
    import torch  # noqa: PLC0415  (optional, as in onnx_file)
    from transformers.cache_utils import DynamicCache  # noqa: PLC0415

    model = copy.deepcopy(model)
    config = model.config
    past_names, present_names = gpt2_names(config.n_layer)

    class WithCache(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, *past):
            cache = DynamicCache(config=config)
            for i in range(config.n_layer):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.inner(input_ids=input_ids, past_key_values=cache, use_cache=True)
            present = [t for layer in out.past_key_values.layers[:config.n_layer]
                       for t in (layer.keys, layer.values)]
            return (out.logits[:, -1, :], *present)

    # traced with 2 tokens after 3 cached ones: both lengths stay dynamic
    ids = torch.zeros((1, 2), dtype=torch.int64)
    past = [torch.zeros((1, config.n_head, 3, config.n_embd // config.n_head))
            for _ in past_names]
    axes = {"input_ids": {1: "steps"}, **{n: {2: "past"} for n in past_names},
            **{n: {2: "total"} for n in present_names}}
    with torch.no_grad():
        torch.onnx.export(WithCache(model), (ids, *past), path, dynamo=False,
                          opset_version=17, input_names=["input_ids", *past_names],
                          output_names=["logits", *present_names], dynamic_axes=axes)


def layer_kernels(kernels) -> int:
    """Kernels of the first layer (scopes .../layer.0/..., .../layers.0/... or GPT-2's
    .../h0[/...]: its prefill's; the loop's step kernels have no scope)."""
    return sum(1 for k in kernels
               if re.search(r"(^|/)(layers?\.0/|h0(/|$))", k.scope or ""))


def python_bench(model, path: str, feeds: dict, rounds: int) -> dict:
    """fragflow on GL (a compiled Session function) beside onnxruntime's CPU session with
    one thread: median ms of interleaved runs after one warm-up each, agreement."""
    import onnxruntime  # noqa: PLC0415  (optional: the test extra)

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    ort = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    args = [feeds[name].astype(p.dtype) for name, p in model.inputs_by_name.items()]
    ff_times, ort_times = [], []
    with ff.Session(model.graph) as session:        # its textures go with it
        fn = session.compile(model.outputs, feeds=model.inputs)
        out = fn(*args)
        want = ort.run(None, feeds)
        for _ in range(rounds):
            t = time.perf_counter()
            fn(*args)
            ff_times.append(1e3 * (time.perf_counter() - t))
            t = time.perf_counter()
            ort.run(None, feeds)
            ort_times.append(1e3 * (time.perf_counter() - t))
        kernels = len(fn.kernels)
    agree = agreement({"fragflow": [np.asarray(a, np.float64).ravel() for a in out],
                       "tfjs": [np.asarray(a, np.float64).ravel() for a in want]})
    return {"fragflow": float(np.median(ff_times)), "ort": float(np.median(ort_times)),
            "agreement": agree, "kernels": kernels}


def ort_generate(session, prompt: np.ndarray, config, new_tokens: int) -> np.ndarray:
    """onnxruntime's greedy loop on gpt2_onnx's graph (the page's, in Python): int64
    [new_tokens]."""
    past_names, present_names = gpt2_names(config.n_layer)
    empty = np.zeros((1, config.n_head, 0, config.n_embd // config.n_head), np.float32)
    feeds = {"input_ids": prompt.astype(np.int64), **{n: empty for n in past_names}}
    tokens = []
    for _ in range(new_tokens):
        logits, *present = session.run(["logits", *present_names], feeds)
        tokens.append(int(np.argmax(logits[0])))
        feeds = {"input_ids": np.array([[tokens[-1]]], np.int64),
                 **dict(zip(past_names, present))}
    return np.array(tokens, np.int64)


def python_generate_bench(graph, ids, tokens, path: str, prompt: np.ndarray, config,
                          rounds: int) -> dict:
    """python_bench for GPT-2: fragflow's generation (one compiled Session function)
    beside onnxruntime's CPU session (one thread) running ort_generate."""
    import onnxruntime  # noqa: PLC0415  (optional: the test extra)

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    ort = onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    ff_times, ort_times = [], []
    with ff.Session(graph) as session:
        fn = session.compile([tokens], feeds=[ids])
        got = np.asarray(fn(prompt.astype(np.int32))[0]).ravel()
        want = ort_generate(ort, prompt, config, NEW_TOKENS)
        for _ in range(rounds):
            t = time.perf_counter()
            fn(prompt.astype(np.int32))
            ff_times.append(1e3 * (time.perf_counter() - t))
            t = time.perf_counter()
            ort_generate(ort, prompt, config, NEW_TOKENS)
            ort_times.append(1e3 * (time.perf_counter() - t))
        kernels = len(fn.kernels)
    return {"fragflow": float(np.median(ff_times)), "ort": float(np.median(ort_times)),
            "tokens_equal": bool(np.array_equal(got, want)), "kernels": kernels,
            "agreement": float(np.mean(got != want))}


def prepare_gpt2(root: str, name: str, spec: tuple, rounds: int, python: bool, cache: str,
                 weights: str | None, log) -> tuple:
    """prepare's GPT-2: the .onnx file with its cache (gpt2_onnx), fragflow's
    ff.gpt2_decoder(state_dict, config).generate(ids, NEW_TOKENS) exported (one `run`
    generates every token), the prompt, and transformers' own greedy tokens."""
    import torch  # noqa: PLC0415  (optional, as in onnx_file)

    _, kwargs, inputs, layers, description = spec
    path = onnx_file(name, spec, cache, log=log)
    folder = os.path.join(root, name)
    os.makedirs(folder)
    shutil.copy(path, os.path.join(folder, "model.onnx"))
    model = gpt2_model(kwargs)
    prompt = seeded_feeds(inputs, kwargs["vocab_size"])["input_ids"]
    with torch.no_grad():
        expected = model.generate(torch.from_numpy(prompt), max_new_tokens=NEW_TOKENS,
                                  do_sample=False)[0, PROMPT:].numpy()
    start = time.monotonic()
    graph = ff.Graph()
    with graph.as_default():
        ids = ff.placeholder(prompt.shape, "int32", name="input_ids")
        tokens = ff.gpt2_decoder(model.state_dict(), model.config).generate(ids, NEW_TOKENS)
    export = ff.webgl.export({"tokens": tokens}, [ids], os.path.join(folder, "ff"),
                             page=False, name=name, **({"weights": weights} if weights else {}))
    seconds = time.monotonic() - start
    prompt.astype("<i4").tofile(os.path.join(folder, "feed0.bin"))
    past_names, present_names = gpt2_names(model.config.n_layer)
    listed = {"name": name, "generate": {
        "newTokens": NEW_TOKENS, "past": past_names, "present": present_names,
        "pastShape": [1, model.config.n_head, 0, model.config.n_embd // model.config.n_head]},
        "feeds": [{"onnx": "input_ids", "ff": "input_ids", "file": "feed0.bin",
                   "shape": list(prompt.shape), "dtype": "int32", "onnxDtype": "int64"}],
        "outputs": [o["name"] for o in export.schedule["outputs"]], "onnxOutputs": ["logits"]}
    import onnx  # noqa: PLC0415  (optional, as onnxruntime)

    onnx_bytes = file_sizes([path])
    runtime = {ep: file_sizes([os.path.join(ORT_DIST, f) for f in files])
               for ep, files in ORT_RUNTIME.items()}
    facts = {
        "description": description, "layers": layers, "export_s": seconds,
        "kernels": len(export.kernels), "layer_kernels": layer_kernels(export.kernels),
        "sizes": {"fragflow": file_sizes([export.files["model.js"], export.files["model.bin"]]),
                  **{ep: (onnx_bytes[0] + r[0], onnx_bytes[1] + r[1])
                     for ep, r in runtime.items()}},
        "onnx_nodes": len(onnx.load(path, load_external_data=False).graph.node),
        "new_tokens": NEW_TOKENS, "transformers_tokens": expected.tolist(),
    }
    log(f"  {name}: exported in {seconds:.1f} s, {len(export.kernels)} kernels "
        f"({facts['layer_kernels']} in layer 0), model.bin {export.bin_bytes} bytes")
    if python:
        p = facts["python"] = python_generate_bench(graph, ids, tokens, path, prompt,
                                                    model.config, rounds)
        log(f"  {name}: python GL {p['fragflow']:.1f} ms, onnxruntime CPU {p['ort']:.1f} ms "
            f"({NEW_TOKENS} tokens), tokens {'equal' if p['tokens_equal'] else 'differ'}")
    return listed, facts


def prepare(root: str, specs: dict, rounds: int, python: bool = True, cache: str = CACHE,
            weights: str | None = None, log=print) -> tuple:
    """Export each model under root/<name>/ (model.onnx, ff/, feeds): (listed models for the
    page, {name: facts: sizes, kernels, python timings}). weights: ff.webgl.export's
    weights= ("float16" halves model.bin), passed only where given."""
    listed, facts = [], {}
    runtime = {ep: file_sizes([os.path.join(ORT_DIST, f) for f in files])
               for ep, files in ORT_RUNTIME.items()}
    for name, spec in specs.items():
        if spec[0] == "GPT2LMHeadModel":
            listed_one, facts[name] = prepare_gpt2(root, name, spec, rounds, python, cache,
                                                   weights, log)
            listed.append(listed_one)
            continue
        _, kwargs, inputs, layers, description = spec
        path = onnx_file(name, spec, cache, log=log)
        folder = os.path.join(root, name)
        os.makedirs(folder)
        shutil.copy(path, os.path.join(folder, "model.onnx"))
        start = time.monotonic()
        model = ff.onnx.load(path, trainable=False)
        export = ff.webgl.export(dict(model.outputs_by_name), list(model.inputs),
                                 os.path.join(folder, "ff"), page=False, name=name,
                                 **({"weights": weights} if weights else {}))
        seconds = time.monotonic() - start
        feeds = seeded_feeds(inputs, kwargs.get("vocab_size", 30522))
        page_feeds = []
        for k, (onnx_name, p) in enumerate(model.inputs_by_name.items()):
            dtype = "int32" if p.dtype == "int32" else "float32"
            feeds[onnx_name].astype("<i4" if dtype == "int32" else "<f4").tofile(
                os.path.join(folder, f"feed{k}.bin"))
            page_feeds.append({"onnx": onnx_name, "ff": p.value.node.name,
                               "file": f"feed{k}.bin", "shape": list(p.shape), "dtype": dtype,
                               "onnxDtype": inputs[onnx_name][1]})
        outputs = [o["name"] for o in export.schedule["outputs"]]
        listed.append({"name": name, "feeds": page_feeds, "outputs": outputs,
                       "onnxOutputs": list(model.outputs_by_name)})
        onnx_bytes = file_sizes([path])
        facts[name] = {
            "description": description, "layers": layers, "export_s": seconds,
            "kernels": len(export.kernels), "layer_kernels": layer_kernels(export.kernels),
            "sizes": {"fragflow": file_sizes([export.files["model.js"],
                                              export.files["model.bin"]]),
                      **{ep: (onnx_bytes[0] + r[0], onnx_bytes[1] + r[1])
                         for ep, r in runtime.items()}},
            "onnx_nodes": len(model.onnx_model.graph.node),
        }
        log(f"  {name}: exported in {seconds:.1f} s, {len(export.kernels)} kernels "
            f"({facts[name]['layer_kernels']} in layer 0), model.bin {export.bin_bytes} bytes")
        if python:
            facts[name]["python"] = python_bench(model, path, feeds, rounds)
            p = facts[name]["python"]
            log(f"  {name}: python GL {p['fragflow']:.1f} ms, onnxruntime CPU "
                f"{p['ort']:.1f} ms, agreement {p['agreement']:.1e}")
    return listed, facts


def run(root: str, listed: list, config: str, rounds: int, budget_ms: float,
        webgpu: bool, profile: bool = True, timeout: float = 3600.0, log=None) -> dict:
    """One Chromium session running every listed model: {"info", name: {"result",
    "outputs": {side: [arrays]}, "error"}}. A session that fails (the browser exits,
    or the page outlives timeout) gives every model its error. log(line): each model's
    result as the page posts it."""
    with open(os.path.join(root, "onnx_models.json"), "w") as f:
        json.dump({"models": listed, "rounds": rounds, "budgetMs": budget_ms,
                   "profile": profile, "webgpu": webgpu}, f)
    for page_file in ("onnx_models.js", "onnx_models.html", "pagelib.js"):
        shutil.copy(os.path.join(HERE, page_file), root)
    if not os.path.exists(os.path.join(root, "ort")):
        os.symlink(ORT_DIST, os.path.join(root, "ort"))
    start = time.monotonic()

    def progress(query, _body):
        if log is not None and query.get("kind") in ("result", "error"):
            log(f"  {config}: {query['name']} {query['kind']} "
                f"({time.monotonic() - start:.0f} s)")

    out = {"info": {}}
    for c in listed:
        out[c["name"]] = {"result": None, "error": None,
                          "outputs": {s: [None] * len(c["outputs"]) for s in SIDES}}
    try:
        messages = serve_and_open(root, "onnx_models.html", config, timeout,
                                  flags=WEBGPU_FLAGS if webgpu else (), on_message=progress)
    except RuntimeError as err:      # the browser exited or the page timed out
        for c in listed:
            out[c["name"]]["error"] = str(err)
        return out
    for query, body in messages:
        kind = query.get("kind")
        if kind == "info":
            out["info"] = json.loads(body)
        elif kind == "fatal":
            raise RuntimeError(f"the ONNX models page failed ({config}): {body.decode()}")
        elif kind == "error":
            out[query["name"]]["error"] = body.decode(errors="replace")
        elif kind == "result":
            out[query["name"]]["result"] = json.loads(body)
        elif kind == "out":
            array = np.frombuffer(body, np.float32).astype(np.float64)
            out[query["name"]]["outputs"][query["side"]][int(query["index"])] = array
    return out


def agreement_with(entry: dict, side: str, reference: str = "wasm") -> float:
    """max |side - reference| / max |reference| (nan where either side did not run)."""
    outs = entry["outputs"]
    if any(a is None for a in outs[side] + outs[reference]):
        return math.nan
    return agreement({"fragflow": outs[side], "tfjs": outs[reference]})


def tokens_equal(entry: dict, side: str, want) -> bool | None:
    """GPT-2: whether side's tokens equal want (transformers' generate); None where the
    side did not run."""
    out = entry["outputs"][side][0]
    return None if out is None else bool(np.array_equal(out, np.asarray(want, np.float64)))


def _ms(r: dict | None, key: str = "steady") -> str:
    return f"{r[key]:.0f}" if r and key in r else "-"


def tables(results: dict, facts: dict, configs) -> str:
    """Markdown: times (steady and first, per rasteriser), then kernels, bytes, agreement."""
    kb = lambda b: f"{b / 1024:,.0f}"  # noqa: E731
    head = ["model"] + [f"{c} ff / wasm / WebGPU ms" for c in configs] + \
        [f"{c} first ff / wasm / WebGPU ms" for c in configs] + ["Python GL / ort CPU ms"]
    lines = ["| " + " | ".join(head) + " |", "|---" * len(head) + "|"]
    for name, fact in facts.items():
        steady, first = [], []
        for c in configs:
            entry = results[c].get(name) or {}
            r = entry.get("result")
            if not r:
                steady.append(f"error: {(entry.get('error') or '?')[:50]}")
                first.append("-")
                continue
            steady.append(" / ".join(_ms(r.get(s)) for s in SIDES))
            if "new_tokens" in fact:                   # GPT-2: and ms a token
                steady[-1] += " (" + " / ".join(
                    f"{r[s]['steady'] / fact['new_tokens']:.1f}" if "steady" in r.get(s, {})
                    else "-" for s in SIDES) + " a token)"
            first.append(" / ".join(_ms(r.get(s), "first") for s in SIDES))
        p = fact.get("python")
        lines.append(f"| {name} | " + " | ".join(steady + first) + " | " +
                     (f"{p['fragflow']:.0f} / {p['ort']:.0f}" if p else "-") + " |")
    lines += ["", "| model | kernels (layer 0) / ONNX nodes | ff model.js+bin KB (gz) "
              "| ort wasm .onnx+js+wasm KB (gz) | ort WebGPU KB (gz) | agreement ff vs ort "
              "wasm (Chromium; Python) | WebGPU vs wasm |", "|---|---|---|---|---|---|---|"]
    for name, fact in facts.items():
        s = fact["sizes"]
        agree = [agreement_with(results[c][name], "fragflow") for c in configs
                 if results[c].get(name, {}).get("result")]
        gpu = [agreement_with(results[c][name], "webgpu") for c in configs
               if results[c].get(name, {}).get("result")]
        gpu = [a for a in gpu if not math.isnan(a)]
        p = fact.get("python")
        if "transformers_tokens" in fact:             # GPT-2: tokens, not values
            same = [tokens_equal(results[c][name], side, fact["transformers_tokens"])
                    for c in configs if results[c].get(name, {}).get("result")
                    for side in ("fragflow", "wasm")]
            gpu = [tokens_equal(results[c][name], "webgpu", fact["transformers_tokens"])
                   for c in configs if results[c].get(name, {}).get("result")]
            gpu = [g for g in gpu if g is not None]
            word = lambda ok: "tokens equal" if ok else "tokens differ"  # noqa: E731
            lines.append(
                f"| {name} | {fact['kernels']} ({fact['layer_kernels']}) / {fact['onnx_nodes']}"
                " | " + " | ".join(f"{kb(s[k][0])} ({kb(s[k][1])})" for k in SIDES) + " | "
                + (word(all(same)) if same and None not in same else "-")
                + (f"; {word(p['tokens_equal'])}" if p else "") + " | "
                + (word(all(gpu)) if gpu else "-") + " |")
            continue
        lines.append(
            f"| {name} | {fact['kernels']} ({fact['layer_kernels']}) / {fact['onnx_nodes']} | "
            + " | ".join(f"{kb(s[k][0])} ({kb(s[k][1])})" for k in SIDES) + " | "
            + (f"{max(agree):.1e}" if agree else "-")
            + (f"; {p['agreement']:.1e}" if p else "") + " | "
            + (f"{max(gpu):.1e}" if gpu else "-") + " |")
    return "\n".join(lines)


def conclusion(results: dict, facts: dict) -> list:
    """Issue 34's targets, one line each: the export >= 2x ort WebGPU on SwiftShader, and
    on Mesa at least as fast as ort wasm (one thread)."""
    lines = []
    for name in facts:
        parts = []
        for config, side, target in (("swiftshader", "webgpu", 2.0), ("mesa", "wasm", 1.0)):
            r = (results.get(config, {}).get(name) or {}).get("result") or {}
            if "steady" not in r.get("fragflow", {}) or "steady" not in r.get(side, {}):
                continue
            ratio = r[side]["steady"] / r["fragflow"]["steady"]
            parts.append(f"{config}: {ratio:.2f}x ort {side} (target {target:g}x: "
                         f"{'met' if ratio >= target else 'missed'})")
        if parts:
            lines.append(f"{name}: " + "; ".join(parts))
    return lines


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated models (bert,vit,whisper,gpt2)")
    parser.add_argument("--configs", default=",".join(CONFIGS))
    parser.add_argument("--webgpu", default="swiftshader",
                        help="sessions that run ort's WebGPU backend ('' for none)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--budget-ms", type=float, default=3000.0)
    parser.add_argument("--whisper-frames", type=int, default=1000)
    parser.add_argument("--tiny", action="store_true", help="2-layer 32-wide models")
    parser.add_argument("--gpt2-full", action="store_true",
                        help="GPT-2-small's size (12 x 768) rather than 4 x 256")
    parser.add_argument("--no-python", action="store_true", help="browser only")
    parser.add_argument("--weights", choices=("float32", "float16"),
                        help="the export's weights= (default: as the model has them)")
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="seconds a browser session may take")
    parser.add_argument("--cache", default=CACHE, help="where the .onnx files are kept")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    if not os.path.isfile(os.path.join(ORT_DIST, ORT_RUNTIME["wasm"][0])):
        sys.exit(f"onnxruntime-web is not in {ORT_DIST}: run `make bench-transformers` "
                 f"(npm ci --prefix benchmarks/browser)")
    if chromium() is None:
        sys.exit("chromium is not installed (Debian: apt-get install chromium)")
    specs = model_configs(args.tiny, args.whisper_frames, args.gpt2_full)
    if args.only:
        unknown = set(args.only.split(",")) - set(specs) - set(SKIPPED)
        if unknown:
            sys.exit(f"unknown models {sorted(unknown)}: use {','.join(specs)}")
        specs = {k: v for k, v in specs.items() if k in args.only.split(",")}
    if not specs:
        sys.exit("nothing to run: " + "; ".join(SKIPPED.values()))
    if args.weights and "weights" not in inspect.signature(ff.webgl.export).parameters:
        sys.exit("--weights: this fragflow's ff.webgl.export has no weights= (half-size "
                 "weights, issue 34, are not on this branch)")
    configs = args.configs.split(",")
    started = time.monotonic()
    root = tempfile.mkdtemp(prefix="fragflow-bench-transformers-")
    try:
        print(f"exporting {len(specs)} models, weights {args.weights or 'as they are'} (load: "
              f"{', '.join(f'{x:.1f}' for x in os.getloadavg())})", flush=True)
        listed, facts = prepare(root, specs, max(args.rounds, 1), not args.no_python,
                                args.cache, args.weights, log=lambda s: print(s, flush=True))
        results = {}
        for config in configs:
            start = time.monotonic()
            results[config] = run(root, listed, config, args.rounds, args.budget_ms,
                                  webgpu=config in args.webgpu.split(","),
                                  timeout=args.timeout, log=lambda s: print(s, flush=True))
            info = results[config]["info"]
            print(f"{config}: WebGL {info.get('renderer')}, WebGPU {info.get('webgpu')} "
                  f"({time.monotonic() - start:.0f} s)", flush=True)
            for c in listed:
                entry = results[config][c["name"]]
                r = entry["result"]
                if entry["error"] or not r:
                    print(f"  {c['name']}: {(entry['error'] or 'no result')[:300]}", flush=True)
                    continue
                for side, why in r.get("errors", {}).items():
                    print(f"  {c['name']}: {'ort ' if side in SIDES else ''}{side} failed: "
                          f"{why[:300]}", flush=True)
                print(f"  {c['name']}: " + ", ".join(f"{s} {_ms(r.get(s))} ms" for s in SIDES)
                      + f"; profile ff [{top_ops(r['fragflow'].get('profile'))}]", flush=True)
                if "generate" in c:                         # GPT-2: the tokens themselves
                    want = facts[c["name"]]["transformers_tokens"]
                    print(f"  {c['name']}: transformers {want}", flush=True)
                    for side in SIDES:
                        got = entry["outputs"][side][0]
                        if got is not None:
                            print(f"  {c['name']}: {side} {got.astype(int).tolist()} tokens "
                                  f"{'equal' if tokens_equal(entry, side, want) else 'DIFFER'}",
                                  flush=True)
        text = tables(results, facts, configs)
        print(text)
        for line in conclusion(results, facts):
            print(line)
        for why in SKIPPED.values():
            print(why)
        print(f"took {time.monotonic() - started:.0f} s; load "
              f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
        summary = {"configs": configs, "facts": facts, "skipped": SKIPPED, "table": text,
                   "weights": args.weights,
                   "results": {c: {k: ({"result": v["result"], "error": v["error"],
                                        "agreement": {s: agreement_with(v, s)
                                                      for s in ("fragflow", "webgpu")},
                                        **({"tokens_equal": {
                                            s: tokens_equal(v, s, facts[k][
                                                "transformers_tokens"]) for s in SIDES}}
                                           if "transformers_tokens" in facts.get(k, {})
                                           else {})}
                                       if k != "info" else v) for k, v in r.items()}
                               for c, r in results.items()}}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=1, default=str)
        return summary
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
