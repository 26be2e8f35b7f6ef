"""Keras Applications files (keras.applications.*, weights=None, seeded, with their
BatchNormalization statistics and LayerScale gammas set far from their initial values)
saved by Keras 3 as .keras and .h5 (keras_applications.py, in a subprocess) load with
ff.keras.models.load_model and predict as Keras does, on GL and on the numpy executor;
MobileNetV2's ff.webgl.export runs in Chromium with the same outputs (and ConvNeXtTiny's
with FRAGFLOW_KERAS_APPS=1).

`make test` runs the models in DEFAULT; FRAGFLOW_KERAS_APPS=1 (`make test-keras-apps`)
runs every one (minutes on 2 cores). One file: the Keras-made files are made once."""
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import fragflow as ff
from fragflow.frontend.layers_applications import CustomScaleLayer, LayerScale, StochasticDepth
from tests.keras_files.conftest import assert_close, keras_predict, require_keras

SCRIPT = os.path.join(os.path.dirname(__file__), "keras_applications.py")
# keras_applications.MODELS, in the order of docs/KERAS.md's table (keras.applications
# of Keras 3.15 has no RegNet)
ALL = ["MobileNet", "MobileNetV2", "MobileNetV3Small", "MobileNetV3Large",
       "EfficientNetB0", "EfficientNetV2B0", "ResNet50", "ResNet50V2", "DenseNet121",
       "InceptionV3", "InceptionResNetV2", "Xception", "NASNetMobile", "ConvNeXtTiny",
       "VGG16"]
# what make test runs (its time: GL's shader compiles): the most used one, and the one
# of Keras's own LayerScale, LayerNormalization and a Conv2D(groups=C)
DEFAULT = ["MobileNetV2", "ConvNeXtTiny"]
NAMES = ALL if os.environ.get("FRAGFLOW_KERAS_APPS") == "1" else DEFAULT
# Keras's own classes an .h5 file names without their module: Keras loads those files
# only with custom_objects, and so does fragflow
H5_CUSTOM = {"ConvNeXtTiny": {"LayerScale": LayerScale},
             "InceptionResNetV2": {"CustomScaleLayer": CustomScaleLayer},
             "internal": {"LayerScale": LayerScale, "CustomScaleLayer": CustomScaleLayer,
                          "StochasticDepth": StochasticDepth}}
# keras_applications.EXTRA: Keras's own layers in a small model, a user's class named
# as one of them, and transfer learning's frozen base models (a nested Functional)
EXTRA = ["internal", "user_class", "transfer", "transfer_sequential"]
TOLERANCE = 1e-4       # of the output's largest magnitude (the brief's measure)


@pytest.fixture(scope="session")
def apps_dir(tmp_path_factory):
    """NAME.keras, NAME.h5, NAME.inputs.npz (x0) and NAME.keras.npz (Keras's predict,
    y0) for the models run and those of EXTRA; transfer.fit.npz (x, y) and
    transfer.fit.json (Keras's losses of a fit from the saved state)."""
    require_keras()
    out = tmp_path_factory.mktemp("keras_applications")
    done = subprocess.run([sys.executable, SCRIPT, "make", str(out), *NAMES, *EXTRA],
                          capture_output=True, text=True, timeout=1200,
                          env=dict(os.environ, KERAS_BACKEND="torch"))
    if done.returncode != 0:
        pytest.fail(f"Keras failed to make the application files:\n{done.stderr[-3000:]}")
    yield out
    shutil.rmtree(out, ignore_errors=True)       # all fifteen: about 1 GB


def _data(folder, name):
    return (np.load(os.path.join(folder, f"{name}.inputs.npz"))["x0"],
            np.load(os.path.join(folder, f"{name}.keras.npz"))["y0"])


def _load(folder, name, ext, backend):
    custom = H5_CUSTOM.get(name) if ext == "h5" else None
    return ff.keras.models.load_model(folder / f"{name}.{ext}", backend=backend,
                                      custom_objects=custom)


@pytest.mark.parametrize("backend", ["gl", "numpy"])
@pytest.mark.parametrize("ext", ["keras", "h5"])
@pytest.mark.parametrize("name", NAMES)
def test_application_predicts_as_keras_does(apps_dir, request, name, ext, backend):
    if backend == "gl":
        request.getfixturevalue("gl")
    x, want = _data(apps_dir, name)
    model = _load(apps_dir, name, ext, backend)
    assert_close(model.predict(x), [want], TOLERANCE)


@pytest.mark.parametrize("backend", ["gl", "numpy"] if NAMES == ALL else ["numpy"])
@pytest.mark.parametrize("ext", ["keras", "h5"])
@pytest.mark.parametrize("name", ["transfer", "transfer_sequential"])
def test_a_frozen_application_inside_a_model_predicts_as_keras_does(apps_dir, request,
                                                                   name, ext, backend):
    if backend == "gl":
        request.getfixturevalue("gl")
    x, want = _data(apps_dir, name)
    model = _load(apps_dir, name, ext, backend)
    base = model.layers[2] if name == "transfer" else model.layers[0]
    assert base.class_name == "Functional" and not base.trainable
    assert model.trainable_weights == model.layers[-1].trainable_weights
    assert_close(model.predict(x), [want], TOLERANCE)


@pytest.mark.parametrize("ext", ["keras", "h5"])
def test_fit_of_a_frozen_application_carries_on_as_keras_does(apps_dir, ext):
    """Its BatchNormalization layers, frozen, run as at inference in fit (Keras 3's
    rule) and only the head trains, from the file's Adam state: Keras's losses."""
    data = np.load(apps_dir / "transfer.fit.npz")
    model = ff.keras.models.load_model(apps_dir / f"transfer.{ext}", backend="numpy")
    history = model.fit(data["x"], data["y"], batch_size=4, epochs=3, shuffle=False,
                        verbose=0)
    with open(apps_dir / "transfer.fit.json") as f:
        want = json.load(f)["loss"]
    np.testing.assert_allclose(history.history["loss"], want, rtol=2e-6)


@pytest.mark.parametrize("backend", ["gl", "numpy"])
@pytest.mark.parametrize("ext", ["keras", "h5"])
def test_keras_own_application_layers_predict_as_keras_does(apps_dir, request, ext,
                                                             backend):
    """LayerScale, CustomScaleLayer and StochasticDepth (the identity in predict) from
    Keras's own classes; the .keras file names their module, the .h5 file does not."""
    if backend == "gl":
        request.getfixturevalue("gl")
    x, want = _data(apps_dir, "internal")
    model = _load(apps_dir, "internal", ext, backend)
    kinds = {type(layer).__name__ for layer in model.layers}
    assert {"LayerScale", "CustomScaleLayer", "StochasticDepth"} <= kinds
    assert_close(model.predict(x), [want], 1e-6)


def test_an_h5_file_of_keras_own_classes_needs_custom_objects_as_keras_does(apps_dir):
    with pytest.raises(ff.keras.KerasImportError,
                       match=r"\(LayerScale\): the file names no module for class "
                             r"'LayerScale' \(an \.h5 file\); Keras itself loads it only "
                             r"with custom_objects.*custom_objects=\{'LayerScale': "
                             r"fragflow\.frontend\.layers_applications\.LayerScale\}"):
        ff.keras.models.load_model(apps_dir / "internal.h5", backend="numpy")


def test_a_users_class_named_as_keras_own_is_refused_naming_it(apps_dir):
    with pytest.raises(ff.keras.KerasImportError,
                       match=r"\(LayerScale\): class 'LayerScale' is a custom class "
                             r"\(registered as 'my_pkg>LayerScale'\), not Keras's; refused "
                             r"with safe_mode=True .*custom_objects=\{'LayerScale': \.\.\.\}"):
        ff.keras.models.load_model(apps_dir / "user_class.keras", backend="numpy")
    with pytest.raises(ff.keras.KerasImportError,
                       match=r"fragflow has no Keras layer 'my_pkg>LayerScale' .*"
                             r"custom_objects may map the class name"):
        ff.keras.models.load_model(apps_dir / "user_class.h5", backend="numpy")
    # the user's mapping is taken (here to Keras's LayerScale's fragflow class, which
    # wants the arguments the user's class lacks)
    with pytest.raises(ff.keras.KerasImportError, match=r"LayerScale.*init_values"):
        ff.keras.models.load_model(apps_dir / "user_class.keras", backend="numpy",
                                   custom_objects={"LayerScale": LayerScale})


def test_files_fragflow_saves_predict_the_same_in_keras(apps_dir):
    """Keras's own application layers (their module written as Keras writes it), an
    application and a frozen one inside a model, saved by fragflow as .keras and .h5
    (Keras reads an .h5 of Keras's own classes only with custom_objects: not here):
    Keras 3 loads them and predicts as before (one Keras run for all)."""
    saved = [("internal", "keras"), ("MobileNetV2", "h5"), ("transfer", "keras")]
    paths = []
    for name, ext in saved:
        model = ff.keras.models.load_model(apps_dir / f"{name}.keras", backend="numpy")
        paths.append(apps_dir / f"{name}-again.{ext}")
        model.save(paths[-1])
    x = _data(apps_dir, "internal")[0]
    back = ff.keras.models.load_model(paths[0], backend="numpy")
    np.testing.assert_array_equal(back.predict(x), model_predict(apps_dir, "internal", x))
    for (name, _), got in zip(saved, keras_predict(paths)):
        assert_close(got, [_data(apps_dir, name)[1]], 1e-6)


def model_predict(folder, name, x):
    return ff.keras.models.load_model(folder / f"{name}.keras", backend="numpy").predict(x)


@pytest.mark.parametrize("backend", ["gl", "numpy"])
def test_stochastic_depth_drops_whole_examples_in_training(request, backend):
    if backend == "gl":
        request.getfixturevalue("gl")
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((400, 3, 5))
        layer = StochasticDepth(0.25)
        train, infer = layer(x, training=True), layer(x, training=False)
    ones = np.ones((400, 3, 5), np.float32)
    with ff.Session(g, backend=backend) as sess:
        t, i = sess.run([train, infer], {x: ones})
    np.testing.assert_array_equal(i, ones)
    per_example = t.reshape(400, -1)
    assert (per_example.min(axis=1) == per_example.max(axis=1)).all()
    assert set(np.unique(t)) <= {0.0, np.float32(1 / 0.75)}
    assert 0.15 < float((per_example[:, 0] == 0).mean()) < 0.35


@pytest.mark.parametrize("name", ["MobileNetV2", "ConvNeXtTiny"] if NAMES == ALL
                         else ["MobileNetV2"])
def test_application_exported_for_webgl_runs_in_chromium(apps_dir, tmp_path, name):
    """ff.webgl.export of the loaded model, run in headless Chromium (SwiftShader):
    Keras's outputs."""
    from tests.webgl.browser import chromium, run_cases
    if chromium() is None:
        pytest.skip("chromium is not installed: the WebGL export cannot be run")
    x, want = _data(apps_dir, name)
    model = ff.keras.models.load_model(apps_dir / f"{name}.keras", backend="numpy")
    export = ff.webgl.export({"y": model.output}, {model.input: x.shape},
                             tmp_path / "model", session=model.session, page=False)
    feed = export.schedule["inputs"][0]["name"]
    spec = {"id": name, "dir": "model", "runs": 1, "feeds": {feed: (x, "float32")},
            "outputs": {o["name"]: (tuple(o["shape"]), o["dtype"])
                        for o in export.schedule["outputs"]}}
    result = run_cases(str(tmp_path), [spec], "swiftshader")[name]
    assert result["error"] is None, result["error"]
    assert_close(result["outputs"][0]["y"], [want], TOLERANCE)
