"""TF.js models that npm packages ship beyond the corpus, against TF.js 4.22 in node on the
same seeded images, on GL and on the numpy executor (docs/TFJS.md, Models from other npm
packages):

- UpscalerJS's super-resolution layers models (@upscalerjs/default-model, esrgan-slim,
  esrgan-medium, esrgan-legacy; tf.loadLayersModel, predict), through ff.tfjs.load and
  ff.keras.models.load_model;
- handtrackjs's six hand detectors (graph models: SSD MobileNetV2 FPN-lite at 320 and
  640, each with float32, float16 and uint8 weights; tf.loadGraphModel, executeAsync),
  staged (NonMaxSuppression, TensorLists: docs/TFJS.md, Staged models), run through
  StagedTfjsModel.run;
- a Keras 2 layers model as nsfwjs's MobileNetV2 is written (a DepthwiseConv2D's
  depthwise_kernel, the manifest sorted by name), built here.

The upscalers take an image of any size ([null, null, null, 3]): loaded with the height and
width free, each fed size runs (sizes not multiples of 4, 1-pixel images). esrgan-legacy's
"gans" model names two custom layer classes (MultiplyBeta, PixelShuffle4x) that the
package registers in JavaScript: fragflow refuses it, naming them, until custom_objects
supplies them; TF.js runs it with the package's own registration (its setup(tf)).

`make test` runs a few, each a different case; `make test-tfjs-models`
(FRAGFLOW_TFJS_ALL=1) runs all 14 upscalers and all 6 hand detectors. Float outputs within
1e-3 of the output's largest magnitude, as the corpus. Files an npm package ships that are
not a model.json (a weights manifest, a TF.js 0.x frozen graph, a JavaScript module) are
refused naming what they are."""
from __future__ import annotations

import json
import os

import numpy as np
import pytest
import tfjs_corpus as corpus

import fragflow as ff

ALL = os.environ.get("FRAGFLOW_TFJS_ALL") == "1"
TOLERANCE = 1e-3

# name -> model.json under node_modules (every model.json the four packages ship)
MODELS = {
    "default-model": "@upscalerjs/default-model/models/model.json",
    **{f"esrgan-slim-{x}": f"@upscalerjs/esrgan-slim/models/{x}/model.json"
       for x in ("x2", "x3", "x4", "x8")},
    **{f"esrgan-medium-{x}": f"@upscalerjs/esrgan-medium/models/{x}/model.json"
       for x in ("x2", "x3", "x4", "x8")},
    **{f"esrgan-legacy-div2k-{x}": f"@upscalerjs/esrgan-legacy/models/div2k/{x}/model.json"
       for x in ("x2", "x3", "x4")},
    "esrgan-legacy-psnr-small": "@upscalerjs/esrgan-legacy/models/psnr-small/model.json",
}
GANS = "@upscalerjs/esrgan-legacy/models/gans/model.json"
GANS_SETUP = "@upscalerjs/esrgan-legacy/gans"     # the package's custom-layer registration
# two cases, for make test's time: the default model (x2) and a x3 upsampling; all 14
# (uint8-quantized weights in esrgan-legacy's) under FRAGFLOW_TFJS_ALL
FEW = ["default-model", "esrgan-slim-x3"]
NAMES = list(MODELS) if ALL else FEW
# [1, height, width, 3] images fed to every model: sides not multiples of 4
SIZES = [(1, 13, 7, 3), (2, 6, 9, 3)] if ALL else [(1, 13, 7, 3)]


def _image(shape, seed, top=255.0):
    """A seeded image in [0, top): UpscalerJS feeds these models 0-255 (gans 0-1)."""
    return np.random.default_rng(seed).random(shape, dtype=np.float32) * np.float32(top)


def _check(what, got, want, tolerance=TOLERANCE):
    assert len(got) == len(want), f"{what}: {len(got)} outputs, TF.js {len(want)}"
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{what} output {k}: {g.shape} vs {w.shape}"
        error = corpus.max_error(g, w)
        assert error <= tolerance, f"{what} output {k}: error {error:.2e}"


@pytest.mark.parametrize("name", NAMES)
def test_an_upscaler_model_of_any_size_matches_tfjs_on_numpy_and_gl(name, gl):
    path = corpus.npm_model(MODELS[name])
    model = ff.tfjs.load(path)                    # height and width free
    (input_name,) = model.inputs_by_name
    assert model.inputs[0].shape == (None, None, None, 3)
    feeds = [{input_name: _image(shape, seed)} for seed, shape in enumerate(SIZES)]
    wants = corpus.tfjs_run_many([(path, f) for f in feeds])
    with ff.Session(model.graph, backend="numpy", passes=[]) as ref, \
            ff.Session(model.graph) as sess:
        for f, want in zip(feeds, wants):
            assert not isinstance(want, str), f"TF.js failed: {want}"
            for backend, s in (("numpy", ref), ("gl", sess)):
                _check(f"{name} {backend} {f[input_name].shape}",
                       s.run(model.outputs, model.feed_dict(f)), want)


def test_keras_load_model_reads_an_upscaler_model_json_and_predicts_any_size():
    """ff.keras.models.load_model on the same model.json: predict on images of several
    sizes (1-pixel included), as TF.js's predict."""
    path = corpus.npm_model(MODELS["default-model"])
    model = ff.keras.models.load_model(path, backend="numpy")
    images = [_image(shape, 10 + k) for k, shape in enumerate([(1, 1, 1, 3), (1, 5, 11, 3)])]
    wants = corpus.tfjs_run_many([(path, {"LR": x}) for x in images])
    for x, want in zip(images, wants):
        _check(f"load_model {x.shape}", [model.predict(x)], want)


def test_input_shapes_fix_an_upscaler_models_size():
    path = corpus.npm_model(MODELS["esrgan-slim-x3"])
    model = ff.tfjs.load(path, input_shapes={"LR": (1, 10, 6, 3)})
    assert model.outputs_by_name["SR/SR"].shape == (1, 30, 18, 3)
    with pytest.raises(ff.tfjs.TfjsImportError, match=r"input_shapes names input; the "
                                                      r"model's inputs are LR"):
        ff.tfjs.load(path, input_shapes={"input": (1, 10, 6, 3)})


def test_an_export_keeps_a_layers_models_uint8_weights_as_they_came(tmp_path):
    """esrgan-legacy's weights are uint8-quantized: model.bin holds them so (its 2.6 MB
    shard, not 10.5 MB of float32), dequantized when the model loads."""
    path = corpus.npm_model(MODELS["esrgan-legacy-div2k-x2"])
    model = ff.tfjs.load(path, input_shapes={"LR": (1, 16, 16, 3)})
    export = ff.webgl.export(model.outputs, model.inputs, tmp_path / "web", page=False)
    shard = os.path.getsize(os.path.join(os.path.dirname(path), "group1-shard1of1.bin"))
    assert export.bin_bytes <= shard + 64          # the uint8 bytes, aligned to 16


# -- custom layer classes: esrgan-legacy's gans ---------------------------------------------
class MultiplyBeta(ff.keras.layers.Layer):
    """UpscalerJS's MultiplyBeta: inputs * beta (the residual scaling of ESRGAN's RRDB)."""

    def __init__(self, beta=0.2, **kwargs):
        super().__init__(**kwargs)
        self.beta = beta

    def call(self, inputs):
        return inputs * self.beta


class PixelShuffle4x(ff.keras.layers.Layer):
    """UpscalerJS's PixelShuffle4x: depth_to_space by its scale."""

    def __init__(self, scale=4, **kwargs):
        super().__init__(**kwargs)
        self.scale = scale

    def call(self, inputs):
        return ff.nn.depth_to_space(inputs, self.scale)


CUSTOM = {"MultiplyBeta": MultiplyBeta, "PixelShuffle4x": PixelShuffle4x}


def test_a_custom_layer_class_is_refused_naming_it_and_how_to_supply_it():
    path = corpus.npm_model(GANS)
    message = (r"layer 'multiply_beta_401' \(MultiplyBeta\): 'MultiplyBeta' is not a Keras "
               r"layer fragflow has: a custom layer class, which TF.js runs from JavaScript "
               r".*registerClass.*never runs code from a file\. Supply it: custom_objects="
               r"\{'MultiplyBeta': an ff\.keras\.layers\.Layer subclass .*ff\.tfjs\.load or "
               r"ff\.keras\.models\.load_model")
    with pytest.raises(ff.tfjs.TfjsImportError, match=message):
        ff.tfjs.load(path)
    with pytest.raises(ff.FragflowError, match=message):
        ff.keras.models.load_model(path)
    # one of the two supplied: the other is named
    with pytest.raises(ff.tfjs.TfjsImportError, match=r"layer 'pixel_shuffle_10' "
                                                      r"\(PixelShuffle4x\): 'PixelShuffle4x'"):
        ff.tfjs.load(path, custom_objects={"MultiplyBeta": MultiplyBeta})


def test_custom_objects_on_a_graph_model_is_an_error():
    path = os.path.join(corpus.corpus(), "emotion.json")
    with pytest.raises(ff.tfjs.TfjsImportError, match="custom_objects applies to layers "
                                                      "models"):
        ff.tfjs.load(path, custom_objects=CUSTOM)


@pytest.mark.parametrize("backend", ["numpy", "gl"] if ALL else ["numpy"])
def test_the_gans_model_with_its_custom_layers_supplied_matches_tfjs(backend, request):
    """custom_objects supplies the classes (as Keras's load_model takes them); TF.js runs
    the model with the package's own JavaScript classes. GL only under
    FRAGFLOW_TFJS_ALL: 400 layers, ~10 s of shader compiles on llvmpipe."""
    if backend == "gl":
        request.getfixturevalue("gl")
    path = corpus.npm_model(GANS)
    shape = (1, 7, 5, 3)
    model = ff.tfjs.load(path, input_shapes={"LR_input": shape}, custom_objects=CUSTOM)
    assert model.outputs[0].shape == (1, 28, 20, 3)
    x = _image(shape, 3, top=1.0)
    want = corpus.tfjs_run(path, {"LR_input": x}, setup=GANS_SETUP)
    sess = ff.Session(model.graph, backend=backend, **({"passes": []} if backend == "numpy"
                                                       else {}))
    _check(f"gans {backend}", sess.run(model.outputs, model.feed_dict({"LR_input": x})), want)


# -- handtrackjs: staged graph models ------------------------------------------------------
# name -> model.json (every model.json handtrackjs 0.1.5 ships: models/webmodel/...)
HANDTRACK = {f"handtrack-{size}-{weights}":
             f"handtrackjs/models/webmodel/ssd{size}fpnlite/{weights}/model.json"
             for size in (320, 640) for weights in ("base", "fp16", "int8")}
# make test: the 320 detector with float16 weights, on numpy (~10 s with TF.js); its int8
# twin is the corpus's handtrack (the same weights), which test_tfjs_models.py runs
HANDTRACK_NAMES = list(HANDTRACK) if ALL else ["handtrack-320-fp16"]


def _hand_image(shape, seed):
    """A seeded uint8 image as int32 (the models' input is DT_UINT8 [1, -1, -1, 3])."""
    return np.random.default_rng(seed).integers(0, 256, shape).astype(np.int32)


@pytest.mark.parametrize("backend", ["numpy", "gl"] if ALL else ["numpy"])
@pytest.mark.parametrize("name", HANDTRACK_NAMES)
def test_a_handtrackjs_detector_matches_tfjs_on_an_image_of_any_size(name, backend, request):
    """Staged (NMS and TensorLists run on the host): 1x150x203x3, sides not multiples of 4,
    resized inside the model to 320x320 or 640x640; 100 boxes, scores, classes, the
    count, and the raw anchors' boxes and scores (12,804 or 51,150)."""
    if backend == "gl":
        request.getfixturevalue("gl")
    path = corpus.npm_model(HANDTRACK[name])
    model = ff.tfjs.load(path)
    assert isinstance(model, ff.tfjs.StagedTfjsModel)
    assert model.inputs_by_name["input_tensor"].shape == (1, None, None, 3)
    feeds = {"input_tensor": _hand_image((1, 150, 203, 3), 0)}
    want = corpus.tfjs_run(path, feeds)
    kwargs = {"backend": "numpy", "passes": []} if backend == "numpy" else {}
    got = list(model.run(feeds, **kwargs).values())
    anchors = 12804 if "-320-" in name else 51150
    assert sorted(w.shape for w in want) == sorted(
        [(1, 100), (1, 100), (1, 100), (1,), (1, 100, 4), (1, 100, 8), (1, anchors, 4),
         (1, anchors, 8)])
    _check(f"{name} {backend}", _in_tfjs_order(got, want), want)
    with pytest.raises(ff.tfjs.TfjsImportError, match="no single graph"):
        model.graph                                 # staged: no export either


def _in_tfjs_order(got, want, detections=100):
    """got with its detection rows (the outputs [1, 100, ...]) put in TF.js's order where
    two neighbours swap: on noise, many anchors score alike (0.0253166 and 0.0253165 at
    detections 10 and 11 of handtrack-640-fp16), and float32 rounding in the convolutions
    orders such a pair either way. A row is its values across those outputs; each of
    TF.js's rows must be found at its place or one beside it, else got is returned as it
    is and _check reports the difference."""
    rows = [k for k, w in enumerate(want) if w.ndim >= 2 and w.shape[:2] == (1, detections)]

    def row(arrays, i):
        return np.concatenate([arrays[k][0, i].ravel() / max(np.abs(want[k]).max(), 1e-6)
                               for k in rows])
    order = list(range(detections))
    for i in range(detections):
        if np.abs(row(got, order[i]) - row(want, i)).max() <= TOLERANCE:
            continue
        j = i + 1
        if j < detections and np.abs(row(got, order[j]) - row(want, i)).max() <= TOLERANCE:
            order[i], order[j] = order[j], order[i]
        else:
            return got
    return [g[:, order] if k in rows else g for k, g in enumerate(got)]


# -- what npm packages ship that is not a model.json ---------------------------------------
MANIFEST = [{"paths": ["tiny_face_detector_model.bin"],
             "weights": [{"name": "conv0/filters", "shape": [3, 3, 3, 16], "dtype": "float32",
                          "quantization": {"dtype": "uint8", "scale": 0.009, "min": -1.2}}]}]


def test_a_weights_manifest_without_a_topology_is_refused_saying_so(tmp_path):
    """face-api.js's and @vladmandic/face-api's model/*-weights_manifest.json: weights
    only, the network is the package's JavaScript."""
    path = tmp_path / "tiny_face_detector_model-weights_manifest.json"
    path.write_text(json.dumps(MANIFEST))
    with pytest.raises(ff.tfjs.TfjsImportError, match=r"is a TF\.js weights manifest, not a "
                                                      r"model\.json: weight shards without a "
                                                      r"topology .*face-api\.js"):
        ff.tfjs.load(path)


def test_tfjs_0x_frozen_files_are_refused_naming_the_format(tmp_path):
    """handtrackjs's models/web/ssdlitemobilenetv2: tensorflowjs_model.pb (a binary
    GraphDef) beside weights_manifest.json, a format TF.js 1.0 dropped."""
    (tmp_path / "weights_manifest.json").write_text(json.dumps(MANIFEST))
    (tmp_path / "tensorflowjs_model.pb").write_bytes(b"\n\x0f\n\x05input\x12\x0bPlaceholder\xff")
    for name in ("weights_manifest.json", "tensorflowjs_model.pb"):
        with pytest.raises(ff.tfjs.TfjsImportError, match=r"TF\.js 0\.x's frozen format, "
                                                          r"which TF\.js 1\.0 and later no "
                                                          r"longer load.*tensorflowjs_converter"):
            ff.tfjs.load(tmp_path / name)


@pytest.mark.parametrize("text", [
    '!function(e){"object"==typeof exports&&(module.exports=e())}(function(){return {}});',
    'export default {format: "graph-model"};', '\n  "use strict";\nvar modelJson = 1;'])
def test_a_javascript_module_is_refused_never_run(tmp_path, text):
    """nsfwjs 4 ships its models as browserify bundles (model.min.js, shards as base64
    strings): JavaScript, which fragflow never runs; named by its text, whatever the file
    is called."""
    path = tmp_path / "model.json"
    path.write_text(text)
    with pytest.raises(ff.tfjs.TfjsImportError, match=r"malformed JSON .*it is JavaScript "
                                                      r".*never runs code from a file"):
        ff.tfjs.load(path)


def test_the_npm_packages_non_model_files_are_refused_as_they_ship():
    """The real files, where the packages are installed: handtrackjs's TF.js 0.x model."""
    folder = os.path.dirname(corpus.npm_model(
        "handtrackjs/models/web/ssdlitemobilenetv2/weights_manifest.json"))
    for name in ("weights_manifest.json", "tensorflowjs_model.pb"):
        with pytest.raises(ff.tfjs.TfjsImportError, match="TF.js 0.x's frozen format"):
            ff.tfjs.load(os.path.join(folder, name))


# -- Keras 2 layers models as nsfwjs's: weights named as Keras 2, listed sorted by name ----
def _keras2_depthwise_model(folder):
    """A Keras 2.2.4 functional model.json as nsfwjs's MobileNetV2 is written: no
    "format", modelTopology.model_config, a DepthwiseConv2D whose weight TF.js (and Keras
    2) call depthwise_kernel, and the manifest sorted by name, not in the layers' order."""
    def layer(name, class_name, inbound, **config):
        return {"name": name, "class_name": class_name, "inbound_nodes":
                [[[inbound, 0, 0, {}]]] if inbound else [],
                "config": {"name": name, "trainable": False, **config}}
    conv = {"strides": [1, 1], "padding": "same", "data_format": "channels_last",
            "dilation_rate": [1, 1], "use_bias": True}
    layers = [layer("input_1", "InputLayer", None, batch_input_shape=[None, 7, 6, 3],
                    dtype="float32", sparse=False),
              layer("block_1_depthwise", "DepthwiseConv2D", "input_1", kernel_size=[3, 3],
                    depth_multiplier=2, activation="relu", **conv),
              layer("block_1_project", "Conv2D", "block_1_depthwise", filters=4,
                    kernel_size=[1, 1], activation="linear", **conv)]
    topology = {"keras_version": "2.2.4", "backend": "tensorflow", "model_config": {
        "class_name": "Model", "config": {"name": "model_1", "layers": layers,
                                          "input_layers": [["input_1", 0, 0]],
                                          "output_layers": [["block_1_project", 0, 0]]}}}
    rng = np.random.default_rng(7)
    weights = {"block_1_depthwise/bias": (6,), "block_1_depthwise/depthwise_kernel":
               (3, 3, 3, 2), "block_1_project/bias": (4,), "block_1_project/kernel":
               (1, 1, 6, 4)}
    arrays = {n: rng.normal(size=s).astype(np.float32) for n, s in sorted(weights.items())}
    with open(os.path.join(folder, "group1-shard1of1"), "wb") as f:
        f.write(b"".join(a.tobytes() for a in arrays.values()))
    manifest = [{"paths": ["group1-shard1of1"], "weights": [
        {"name": n, "shape": list(a.shape), "dtype": "float32"} for n, a in arrays.items()]}]
    path = os.path.join(folder, "model.json")
    with open(path, "w") as f:
        json.dump({"modelTopology": topology, "weightsManifest": manifest}, f)
    # the reference runner picks tf.loadLayersModel by "format" (nsfwjs names the kind
    # in JavaScript): a copy saying so, beside the same shard
    with open(os.path.join(folder, "reference.json"), "w") as f:
        json.dump({"format": "layers-model", "modelTopology": topology,
                   "weightsManifest": manifest}, f)
    return path


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_a_keras2_depthwise_weight_is_matched_by_name_in_a_sorted_manifest(
        tmp_path, backend, request):
    if backend == "gl":
        request.getfixturevalue("gl")
    path = _keras2_depthwise_model(str(tmp_path))
    model = ff.tfjs.load(path)
    x = np.random.default_rng(8).normal(size=(2, 7, 6, 3)).astype(np.float32)
    x[0, 0, :3] = [0.0, -0.0, -5.0]
    want = corpus.tfjs_run(str(tmp_path / "reference.json"), {"input_1": x})
    kwargs = {"passes": []} if backend == "numpy" else {}
    sess = ff.Session(model.graph, backend=backend, **kwargs)
    _check(f"depthwise {backend}", sess.run(model.outputs, model.feed_dict({"input_1": x})),
           want)


def test_load_model_matches_a_keras2_depthwise_weight_by_name_too(tmp_path):
    """ff.keras.models.load_model reads the same model.json through the same renaming
    (frontend/keras_files/loading.py WEIGHT_ALIASES)."""
    path = _keras2_depthwise_model(str(tmp_path))
    x = np.random.default_rng(9).normal(size=(2, 7, 6, 3)).astype(np.float32)
    want = corpus.tfjs_run(str(tmp_path / "reference.json"), {"input_1": x})
    km = ff.keras.models.load_model(path, backend="numpy")
    _check("load_model depthwise", [km.predict(x)], want)
