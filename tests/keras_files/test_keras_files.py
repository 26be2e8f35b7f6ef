"""ff.keras.models.load_model and model.save against Keras 3 itself: files Keras saves
(.keras and .h5) predict in fragflow (GL and the numpy executor) within 1e-5 of
Keras's own predictions; fit carries on with Keras's per-epoch losses; files fragflow
saves open in Keras 3 and predict the same; the README's Keras section runs as written.
(One file: the Keras-made files are made once per test worker.)"""
import json
import os
import re
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest

import fragflow as ff
from tests.keras_files.conftest import (
    assert_close,
    inputs_of,
    keras_outputs,
    keras_predict,
    require_h5py,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = ["cnn", "two_io", "nested", "text"]
# models of layers the reader finds in ff.keras.layers once they are there (merging,
# transposed convolution, upsampling, attention, normalization, TimeDistributed)
LAYER_MODELS = {"unet": ["Concatenate", "Add", "Conv2DTranspose", "UpSampling2D",
                         "LeakyReLU"],
                "transformer": ["MultiHeadAttention", "LayerNormalization", "Add",
                                "TimeDistributed"]}


def _feed(xs):
    return xs if len(xs) > 1 else xs[0]


@pytest.mark.parametrize("backend", ["gl", "numpy"])
@pytest.mark.parametrize("ext", ["keras", "h5"])
@pytest.mark.parametrize("name", MODELS)
def test_keras_files_predict_as_keras_does(keras_dir, request, name, ext, backend):
    if backend == "gl":
        request.getfixturevalue("gl")
    model = ff.keras.models.load_model(keras_dir / f"{name}.{ext}", backend=backend)
    assert_close(model.predict(_feed(inputs_of(keras_dir, name))),
                 keras_outputs(keras_dir, name))


def test_models_of_more_layers_predict_and_save_as_keras_does(keras_dir):
    """A U-Net and a transformer block, .keras and .h5: predict as Keras does, and the
    files fragflow saves predict the same in Keras (one Keras run for all)."""
    names = [n for n, need in LAYER_MODELS.items()
             if all(hasattr(ff.keras.layers, layer) for layer in need)]
    if not names:
        pytest.skip("ff.keras.layers lacks the merging and attention layers these need")
    saved = []
    for name in names:
        for ext in ("keras", "h5"):
            model = ff.keras.models.load_model(keras_dir / f"{name}.{ext}", backend="numpy")
            assert_close(model.predict(_feed(inputs_of(keras_dir, name))),
                         keras_outputs(keras_dir, name))
            saved.append((name, keras_dir / f"{name}-again.{ext}"))
            model.save(saved[-1][1])
    for (name, _), got in zip(saved, keras_predict([path for _, path in saved])):
        assert_close(got, keras_outputs(keras_dir, name))


def test_loaded_model_keeps_keras_structure_and_names(keras_dir):
    model = ff.keras.models.load_model(keras_dir / "two_io.keras", backend="numpy")
    assert [la.name for la in model.layers] == ["a", "b", "shared", "out1", "inner"]
    assert model.get_layer("shared") is model.layers[2]
    assert len(model.inputs) == 2 and isinstance(model.output, list)
    inner = model.get_layer("inner")
    assert [type(la) for la in inner.layers] == [ff.keras.layers.Dense] * 2
    assert [w.shape for w in model.get_weights()] == [
        (4, 5), (5,), (5, 2), (2,), (5, 6), (6,), (6, 3), (3,)]
    lines = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "shared (Dense)" in text and "inner (Sequential)" in text
    assert "Total params: 94" in text


def test_calling_a_loaded_model_on_arrays_predicts(keras_dir):
    model = ff.keras.models.load_model(keras_dir / "two_io.keras", backend="numpy")
    out = model(inputs_of(keras_dir, "two_io"))           # TF2's eager model(x)
    assert_close([o.numpy() for o in out], keras_outputs(keras_dir, "two_io"))


def test_set_weights_changes_what_predict_gives(keras_dir):
    model = ff.keras.models.load_model(keras_dir / "nested.keras", backend="numpy")
    x = inputs_of(keras_dir, "nested")[0]
    weights = model.get_weights()
    model.set_weights([np.zeros_like(w) for w in weights])
    np.testing.assert_allclose(model.predict(x), 0.5, atol=1e-7)   # softmax of zeros
    model.set_weights(weights)
    assert_close(model.predict(x), keras_outputs(keras_dir, "nested"))


def test_fit_carries_on_with_keras_losses(keras_dir):
    model = ff.keras.models.load_model(keras_dir / "cnn.keras", backend="numpy")
    assert isinstance(model.optimizer, ff.optim.SGD)
    x = inputs_of(keras_dir, "cnn")[0]
    history = model.fit(x, np.arange(16) % 3, batch_size=4, epochs=3, shuffle=False,
                        verbose=0).history
    with open(keras_dir / "cnn.fit.json") as f:
        expected = json.load(f)
    np.testing.assert_allclose(history["loss"], expected["loss"], atol=1e-4)
    np.testing.assert_allclose(history["accuracy"], expected["accuracy"], atol=1e-6)


@pytest.mark.parametrize("ext", ["keras", "h5"])
@pytest.mark.parametrize("name, optimizer", [("adam", ff.optim.Adam),
                                             ("momentum", ff.optim.Momentum),
                                             ("regularized", ff.optim.SGD)])
def test_fit_carries_on_from_the_saved_optimizer_state(keras_dir, name, optimizer, ext):
    model = ff.keras.models.load_model(keras_dir / f"{name}.{ext}", backend="numpy")
    assert type(model.optimizer) is optimizer
    x = inputs_of(keras_dir, name)[0]
    y = np.random.default_rng(5).random((16, 3, 2), np.float32)[:, 1]
    history = model.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0).history
    with open(keras_dir / f"{name}.fit.json") as f:
        expected = json.load(f)
    np.testing.assert_allclose(history["loss"], expected["loss"], atol=1e-5)


def test_compile_config_of_several_outputs_is_restored(keras_dir):
    model = ff.keras.models.load_model(keras_dir / "two_io.h5", backend="numpy")
    assert model.output_names == ["out1", "inner"]
    xs = inputs_of(keras_dir, "two_io")
    logs = model.evaluate(xs, [np.array([0, 1, 0, 1, 0, 1]), np.zeros((6, 3))],
                          return_dict=True)
    assert set(logs) == {"loss", "out1_loss", "inner_loss"}
    assert logs["loss"] == pytest.approx(logs["out1_loss"] + logs["inner_loss"], rel=1e-6)


def test_compile_false_leaves_the_model_uncompiled(keras_dir):
    model = ff.keras.models.load_model(keras_dir / "cnn.h5", compile=False,
                                       backend="numpy")
    assert model.optimizer is None
    with pytest.raises(ff.FragflowError, match="not compiled"):
        model.fit(inputs_of(keras_dir, "cnn")[0], np.zeros(16), verbose=0)


def _code_cnn(x):
    """A CNN built and trained in fragflow."""
    ff.initializers.set_seed(0)
    layers = ff.keras.layers
    model = ff.keras.Sequential([
        layers.Conv2D(4, 3, activation="relu", padding="same"), layers.BatchNormalization(),
        layers.MaxPooling2D(), layers.Flatten(), layers.Dense(3, activation="softmax")],
        name="cnn", backend="numpy")
    model.compile(ff.keras.optimizers.SGD(0.1), "sparse_categorical_crossentropy",
                  ["accuracy"])
    model.fit(x, np.arange(16) % 3, batch_size=8, verbose=0)
    return model


@pytest.fixture(scope="module")
def saved_by_fragflow(keras_dir):
    """{path: (fragflow's outputs, Keras's outputs)} of files fragflow saved: each model
    Keras made, loaded and saved again, and a CNN built in code, as .keras and .h5
    (one Keras run predicts them all)."""
    paths, expected = [], []
    models = [(name, ff.keras.models.load_model(keras_dir / f"{name}.keras",
                                                backend="numpy")) for name in MODELS]
    models.append(("cnn", _code_cnn(inputs_of(keras_dir, "cnn")[0])))
    for k, (name, model) in enumerate(models):
        want = model.predict(_feed(inputs_of(keras_dir, name)))
        for ext in ("keras", "h5"):
            path = keras_dir / f"{name}-ff{k}.{ext}"
            model.save(path)
            paths.append(path)
            expected.append(want if isinstance(want, list) else [want])
    return dict(zip(paths, zip(expected, keras_predict(paths))))


def test_files_fragflow_saves_read_back_the_same(keras_dir, saved_by_fragflow):
    for path, (want, _) in saved_by_fragflow.items():
        name = path.name.split("-")[0]
        again = ff.keras.models.load_model(path, backend="numpy")
        assert_close(again.predict(_feed(inputs_of(keras_dir, name))), want, tol=0)
        if "ff4" in path.name:
            assert isinstance(again.optimizer, ff.optim.SGD)


def test_files_fragflow_saves_open_in_keras_and_predict_the_same(saved_by_fragflow):
    assert len(saved_by_fragflow) == 10
    for want, keras_got in saved_by_fragflow.values():
        assert_close(keras_got, want)


def test_model_from_json_reads_to_json(keras_dir):
    model = ff.keras.models.load_model(keras_dir / "two_io.keras", backend="numpy")
    text = model.to_json()
    assert json.loads(text)["class_name"] == "Functional"
    again = ff.keras.models.model_from_json(text, backend="numpy")
    assert [la.name for la in again.layers] == [la.name for la in model.layers]
    again.set_weights(model.get_weights())
    assert_close(again.predict(inputs_of(keras_dir, "two_io")),
                 keras_outputs(keras_dir, "two_io"))


# -- Keras 2's dialect ------------------------------------------------------------------
def _keras2_layer(entry):
    """A Keras 3 layer entry as Keras 2 wrote it: no module, dtype strings, the input's
    batch_input_shape, inbound nodes as [[[name, node, tensor, {}]]]."""
    config = dict(entry["config"])
    if entry["class_name"] == "BatchNormalization":
        config["axis"] = [3]                        # Keras 2's, after build
    if isinstance(config.get("dtype"), dict):
        config["dtype"] = config["dtype"]["config"]["name"]
    if "batch_shape" in config:
        config["batch_input_shape"] = config.pop("batch_shape")
    for key, value in list(config.items()):
        if isinstance(value, dict) and "class_name" in value:
            config[key] = {"class_name": value["class_name"],
                           "config": _keras2_config(value)}
    out = {"class_name": entry["class_name"], "config": config}
    if "inbound_nodes" in entry:
        out["name"] = entry["name"]
        out["inbound_nodes"] = [
            [list(t["config"]["keras_history"]) + [{}] for t in node["args"]]
            for node in entry["inbound_nodes"]]
    return out


def _keras2_config(value):
    if value["class_name"] in ("Sequential", "Functional"):
        return _keras2_model(value)["config"]
    return value["config"]


def _keras2_model(config):
    inner = dict(config["config"])
    inner["layers"] = [_keras2_model(e) if e["class_name"] in ("Sequential", "Functional")
                       and "layers" in e["config"] else _keras2_layer(e)
                       for e in inner["layers"]]
    for key in ("input_layers", "output_layers"):
        if key in inner and isinstance(inner[key][0], str):
            inner[key] = [inner[key]]
    out = {"class_name": "Model" if config["class_name"] == "Functional"
           else config["class_name"], "config": inner}
    for key in ("name", "inbound_nodes"):
        if key in config:
            out[key] = config[key] if key == "name" else \
                [[list(t["config"]["keras_history"]) + [{}] for t in node["args"]]
                 for node in config[key]]
    return out


@pytest.mark.parametrize("name", ["cnn", "two_io"])
def test_keras2_h5_files_load(keras_dir, tmp_path, name):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / f"{name}-keras2.h5"
    with open(keras_dir / f"{name}.h5", "rb") as src, open(path, "wb") as dst:
        dst.write(src.read())
    with h5py.File(path, "r+") as f:
        config = json.loads(f.attrs["model_config"])
        f.attrs["model_config"] = json.dumps(_keras2_model(config))
        training = json.loads(f.attrs["training_config"])
        if training.get("metrics"):                 # Keras 2: a list per output
            training["metrics"] = [[{"class_name": "MeanMetricWrapper", "config": {
                "name": m, "dtype": "float32", "fn": m}} for m in training["metrics"]]]
        f.attrs["training_config"] = json.dumps(training)
        f.attrs["keras_version"] = "2.15.0"
        f.attrs["backend"] = "tensorflow"
    with warnings.catch_warnings():
        warnings.simplefilter("error")              # the compile config is followed too
        model = ff.keras.models.load_model(path, backend="numpy")
    assert_close(model.predict(_feed(inputs_of(keras_dir, name))),
                 keras_outputs(keras_dir, name))
    assert model.optimizer is not None
    if name == "cnn":
        assert model.metrics_names == ["accuracy"]


def test_h5py_is_needed_and_said(monkeypatch, tmp_path):
    require_h5py()
    import builtins
    real = builtins.__import__

    def no_h5py(name, *args, **kwargs):
        if name == "h5py":
            raise ImportError("no h5py")
        return real(name, *args, **kwargs)

    path = tmp_path / "m.h5"
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(100))
    monkeypatch.setattr(builtins, "__import__", no_h5py)
    with pytest.raises(ff.keras.KerasImportError, match=r"needs h5py: pip install "
                                                        r"'fragflow\[keras\]'"):
        ff.keras.models.load_model(path)


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(ff.keras.KerasImportError, match="no such file"):
        ff.keras.models.load_model(os.path.join(tmp_path, "nope.keras"))


@pytest.mark.parametrize("name", ["cnn", "two_io"])
def test_a_loaded_model_exports_to_onnx_like_any_graph(keras_dir, tmp_path, name):
    ort = pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not "
                                                    "installed")
    pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
    model = ff.keras.models.load_model(keras_dir / f"{name}.keras", backend="numpy")
    ff.onnx.export(model.outputs, model.inputs, str(tmp_path / "m.onnx"),
                   session=model.session)
    runner = ort.InferenceSession(str(tmp_path / "m.onnx"))
    xs = inputs_of(keras_dir, name)
    got = runner.run(None, {i.name: x for i, x in zip(runner.get_inputs(), xs)})
    assert_close(got, keras_outputs(keras_dir, name))


# -- the README ------------------------------------------------------------------------
def readme_keras() -> str:
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        section = f.read().split("## Keras model files", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_readme_keras_section_runs_as_written(gl, keras_dir, tmp_path):
    shutil.copy(keras_dir / "cnn.keras", tmp_path / "model.keras")
    (tmp_path / "snippet.py").write_text(readme_keras())
    done = subprocess.run([sys.executable, "snippet.py"], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert 'Model: "cnn"' in done.stdout and "Total params:" in done.stdout
    for name in ("model.js", "model.bin", "index.html"):
        assert (tmp_path / "web" / name).is_file()
    tuned = ff.keras.models.load_model(tmp_path / "tuned.keras", backend="numpy")
    assert [la.name for la in tuned.layers] == [
        la.name for la in ff.keras.models.load_model(keras_dir / "cnn.keras").layers]
