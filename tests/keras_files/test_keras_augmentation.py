"""Keras 3's augmentation layers against Keras itself (its torch backend, in a
subprocess: keras_augment_models.py): the image classification tutorial's model
(augmentation, Rescaling, a convnet) saved by Keras as .keras predicts in fragflow (GL
and numpy) as in Keras; fragflow's .keras and .h5 of it predict the same in Keras; fit
runs on it; each layer's training output where its draw is fixed (a factor pair of one
value, a probability of 1: every fill mode and interpolation of the affine layers)
and each one's inference output equal Keras's; each Keras config reads and writes
back as Keras wrote it; a TF.js layers model holding them loads through the same layer
registry."""
import json
import os

import numpy as np
import pytest

import fragflow as ff
from tests.keras_files.conftest import assert_close, require_keras, run_keras_script

SCRIPT = os.path.join(os.path.dirname(__file__), "keras_augment_models.py")


def _run(args):
    run_keras_script(args, SCRIPT)


@pytest.fixture(scope="module")
def keras_dir(tmp_path_factory):
    require_keras()
    out = tmp_path_factory.mktemp("keras_augment")
    _run(["make", str(out)])
    return out


def _tutorial(keras_dir):
    data = np.load(keras_dir / "tutorial.inputs.npz"), np.load(keras_dir / "tutorial.keras.npz")
    return data[0]["x0"], data[1]["y0"]


@pytest.mark.parametrize("backend", ["gl", "numpy"])
def test_tutorial_model_predicts_as_keras_does(keras_dir, request, backend):
    if backend == "gl":
        request.getfixturevalue("gl")
    x, want = _tutorial(keras_dir)
    model = ff.keras.models.load_model(keras_dir / "tutorial.keras", backend=backend)
    names = [type(layer).__name__ for layer in model.layers[0].layers]
    assert names == ["RandomFlip", "RandomRotation", "RandomZoom", "RandomTranslation",
                     "RandomContrast", "RandomBrightness"]
    assert_close(model.predict(x), [want])


def test_keras_cannot_write_the_tutorial_model_as_h5(keras_dir):
    """Keras 3.15's model.save("m.h5") fails on these layers (TypeError: cannot pickle
    'module'); the .h5 below is fragflow's, which Keras reads."""
    assert not (keras_dir / "tutorial.h5").exists()


def test_files_fragflow_saves_predict_the_same_in_keras(keras_dir):
    x, want = _tutorial(keras_dir)
    model = ff.keras.models.load_model(keras_dir / "tutorial.keras", backend="numpy")
    paths = [keras_dir / f"tutorial-ff.{ext}" for ext in ("keras", "h5")]
    for path in paths:
        model.save(path)
        again = ff.keras.models.load_model(path, backend="numpy")
        assert_close(again.predict(x), [want])
    _run(["predict", *map(str, paths)])
    for path in paths:
        assert_close([np.load(f"{path}.pred.npz")["y0"]], [want])


def test_fit_augments_batches_of_any_size(keras_dir):
    """fit builds the training graph (the augmentation drawing per example for a batch
    of unknown size: 3, then the remainder 1) and changes the weights; predict after
    it is still augmentation-free (two calls agree)."""
    x, _ = _tutorial(keras_dir)
    model = ff.keras.models.load_model(keras_dir / "tutorial.keras", backend="numpy")
    before = [np.array(w) for w in model.get_weights()]
    history = model.fit(x, np.array([0, 1, 2, 0]), batch_size=3, epochs=2, verbose=0)
    assert all(np.isfinite(history.history["loss"]))
    built = {n.name.rsplit("/", 1)[0] for n in model.graph.nodes if n.op == "gather"}
    assert {"data_augmentation/random_rotation", "data_augmentation/random_zoom",
            "data_augmentation/random_translation"} <= built      # the training graph's
    assert any(not np.array_equal(a, b) for a, b in zip(before, model.get_weights()))
    np.testing.assert_array_equal(model.predict(x), model.predict(x))


def _layer_cases(keras_dir):
    with open(keras_dir / "layers.json") as f:
        return json.load(f)


@pytest.mark.parametrize("backend", ["gl", "numpy"])
def test_layers_with_fixed_draws_and_at_inference_give_what_keras_does(keras_dir, request,
                                                                        backend):
    if backend == "gl":
        request.getfixturevalue("gl")
    data = np.load(keras_dir / "layers.npz")
    images = data["images"]
    cases = {n: c for n, c in _layer_cases(keras_dir).items() if n in data.files}
    assert len(cases) == 31
    g = ff.Graph()
    fetches = {}
    with g.as_default():
        x = ff.placeholder((None,) + images.shape[1:], name="x")
        for name, (cls, _, config, training) in cases.items():
            layer = getattr(ff.keras.layers, cls).from_config(config)
            fetches[name] = layer(x, training=training)
    got = ff.Session(g, backend=backend).run(fetches, {x: images})
    for name in cases:
        assert got[name].shape == data[name].shape, name
        err = float(np.abs(got[name] - data[name]).max())
        assert err <= 1e-6 * max(float(np.abs(data[name]).max()), 1.0), (name, err)


def _json(value):
    return json.loads(json.dumps(value))


def test_keras_configs_read_and_write_back_as_keras_wrote_them(keras_dir):
    cases = _layer_cases(keras_dir)
    assert len(cases) == 38
    for name, (cls, kwargs, config, _) in cases.items():
        layer = getattr(ff.keras.layers, cls).from_config(config)
        assert _json(layer.get_config()) == _json(config), name
        # the constructor, too (fragflow writes a dtype it was not given as "float32";
        # Keras's RandomCrop draws a seed where none is given, fragflow's is None: 0)
        made = getattr(ff.keras.layers, cls)(**kwargs).get_config()
        assert made.pop("dtype") == "float32"
        skip = {"dtype"} | ({"seed"} if cls == "RandomCrop" and "seed" not in kwargs else set())
        assert _json({**{k: v for k, v in made.items() if k not in skip},
                      "name": config["name"]}) == \
            _json({k: v for k, v in config.items() if k not in skip}), name


def test_a_tfjs_layers_model_with_augmentation_loads(tmp_path):
    """A TF.js layers model.json (Keras topology, weights manifest; tensorflowjs's
    converter writes these layers so) predicts its dense layer on the unaugmented
    input, through ff.tfjs.load and ff.keras.models.load_model."""
    kernel = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    bias = np.array([0.5, -0.25, 2.0], np.float32)
    layers = [
        {"class_name": "RandomFlip", "config": {"name": "flip", "mode": "horizontal",
                                                 "seed": None, "trainable": True,
                                                 "batch_input_shape": [None, 1, 1, 4]}},
        {"class_name": "RandomRotation", "config": {"name": "rot", "factor": 0.2}},
        {"class_name": "Flatten", "config": {"name": "flat"}},
        {"class_name": "Dense", "config": {"name": "dense", "units": 3}},
    ]
    (tmp_path / "weights.bin").write_bytes(kernel.tobytes() + bias.tobytes())
    (tmp_path / "model.json").write_text(json.dumps({
        "format": "layers-model", "generatedBy": "test",
        "modelTopology": {"class_name": "Sequential",
                          "config": {"name": "augmented", "layers": layers}},
        "weightsManifest": [{"paths": ["weights.bin"], "weights": [
            {"name": "dense/kernel", "shape": [4, 3], "dtype": "float32"},
            {"name": "dense/bias", "shape": [3], "dtype": "float32"}]}]}))
    x = np.array([[[[1.0, -2.0, 0.0, 3.5]]], [[[0.25, 0.0, -1.0, 2.0]]]], np.float32)
    want = x.reshape(2, 4).astype(np.float64) @ kernel + bias
    model = ff.tfjs.load(tmp_path / "model.json")
    got = ff.Session(model.graph, backend="numpy").run(
        model.outputs[0], model.feed_dict({model.inputs[0]: x}))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    km = ff.keras.models.load_model(tmp_path / "model.json", backend="numpy")
    np.testing.assert_allclose(km.predict(x), want, rtol=1e-6)
