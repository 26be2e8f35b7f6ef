"""A Keras model file is untrusted input: code in it is refused (safe_mode or not:
fragflow never runs code from a file), the zip, HDF5 and JSON are read within limits,
and whatever is wrong ends in a KerasImportError (a ff.FragflowError) naming the layer
or weight, never in a raw KeyError, MemoryError or h5py's own exception. The files are
written here by hand (no Keras needed; h5py for the weights)."""
import io
import json
import random
import zipfile

import numpy as np
import pytest

import fragflow as ff

KerasImportError = ff.keras.KerasImportError
load_model = ff.keras.models.load_model


def _input(shape=(None, 4), name="inp", dtype="float32"):
    return {"module": "keras.layers", "class_name": "InputLayer",
            "config": {"batch_shape": list(shape), "dtype": dtype, "name": name}}


def _layer(class_name, name, **config):
    return {"module": "keras.layers", "class_name": class_name,
            "config": {"name": name, **config}, "registered_name": None}


def _sequential(*layers, shape=(None, 4)):
    return {"module": "keras", "class_name": "Sequential",
            "config": {"name": "m", "layers": [_input(shape), *layers]}}


def _weights_h5(arrays=None, build=None) -> bytes:
    """model.weights.h5 with {path: array} (and build(file) for odd objects)."""
    h5py = pytest.importorskip("h5py")
    buffer = io.BytesIO()
    with h5py.File(buffer, "w") as f:
        f.create_group("layers")
        for path, array in (arrays or {}).items():
            f.create_dataset(path, data=array)
        if build is not None:
            build(f)
    return buffer.getvalue()


def _keras_file(path, config, weights=None, extra=(), compression=zipfile.ZIP_STORED):
    with zipfile.ZipFile(path, "w", compression) as z:
        z.writestr("config.json", config if isinstance(config, str) else json.dumps(config))
        z.writestr("metadata.json", json.dumps({"keras_version": "3.5.0"}))
        if weights is not None:
            z.writestr("model.weights.h5", weights)
        for name, data in extra:
            z.writestr(name, data)
    return path


def _dense_weights(units=2, inputs=4, name="dense"):
    return {f"layers/{name}/vars/0": np.ones((inputs, units), np.float32),
            f"layers/{name}/vars/1": np.zeros(units, np.float32)}


def test_a_good_hand_written_file_loads(tmp_path):
    path = _keras_file(tmp_path / "m.keras", _sequential(_layer("Dense", "d", units=2)),
                       _weights_h5(_dense_weights()))
    model = load_model(path, backend="numpy")
    np.testing.assert_allclose(model.predict(np.ones((1, 4), np.float32)), [[4, 4]])


# -- code in the file ------------------------------------------------------------------
LAMBDA = _layer("Lambda", "scale", function={
    "class_name": "__lambda__", "config": {"code": "4wEAAAAAAAAA", "defaults": None}})


def test_a_lambda_layer_is_refused_in_safe_mode_naming_the_layer(tmp_path):
    path = _keras_file(tmp_path / "m.keras", _sequential(LAMBDA))
    with pytest.raises(KerasImportError, match=r"layer 'scale' \(Lambda\): a Lambda layer "
                                               r"holds Python code; refused with "
                                               r"safe_mode=True"):
        load_model(path)


def test_without_safe_mode_a_lambda_is_still_refused_and_custom_objects_explained(tmp_path):
    path = _keras_file(tmp_path / "m.keras", _sequential(LAMBDA))
    with pytest.raises(KerasImportError, match=r"never runs code from a file, even with "
                                               r"safe_mode=False: pass "
                                               r"custom_objects=\{'scale': \.\.\.\}"):
        load_model(path, safe_mode=False)


def test_custom_objects_supply_a_lambda_layers_function(tmp_path):
    path = _keras_file(tmp_path / "m.keras", _sequential(LAMBDA))
    model = load_model(path, custom_objects={"scale": lambda x: x * 3.0}, backend="numpy")
    np.testing.assert_allclose(model.predict(np.ones((2, 4), np.float32)), 3.0)


def test_a_function_from_outside_keras_is_refused(tmp_path):
    evil = {"module": "os", "class_name": "function", "config": "system",
            "registered_name": "function"}
    path = _keras_file(tmp_path / "m.keras",
                       _sequential(_layer("Dense", "d", units=2, activation=evil)))
    with pytest.raises(KerasImportError, match=r"layer 'd' \(Dense\): argument activation "
                                               r"names function 'system' of module 'os'"):
        load_model(path)


def test_a_layer_class_from_outside_keras_is_refused(tmp_path):
    layer = {"module": "subprocess", "class_name": "Popen", "config": {"name": "p"},
             "registered_name": "Popen"}
    path = _keras_file(tmp_path / "m.keras", _sequential(layer))
    with pytest.raises(KerasImportError, match=r"layer 'p' \(Popen\): class 'Popen' comes "
                                               r"from module 'subprocess', outside Keras"):
        load_model(path)


def test_a_layer_fragflow_lacks_is_named_with_its_class(tmp_path):
    path = _keras_file(tmp_path / "m.keras",
                       _sequential(_layer("FancyAttention", "fancy", heads=2)))
    with pytest.raises(KerasImportError, match=r"layer 'fancy' \(FancyAttention\): "
                                               r"fragflow has no Keras layer "
                                               r"'FancyAttention' \(its layers: .*Dense"):
        load_model(path)


def test_an_argument_fragflow_lacks_is_named(tmp_path):
    path = _keras_file(tmp_path / "m.keras",
                       _sequential(_layer("Dense", "d", units=2, lora_rank=4)))
    with pytest.raises(KerasImportError, match=r"layer 'd' \(Dense\): .*lora_rank=4 is not "
                                               r"supported"):
        load_model(path)


def test_custom_objects_map_a_class_name_to_an_ff_layer(tmp_path):
    path = _keras_file(tmp_path / "m.keras",
                       _sequential(_layer("MyDense", "d", units=2)),
                       _weights_h5(_dense_weights(name="my_dense")))
    model = load_model(path, custom_objects={"MyDense": ff.keras.layers.Dense},
                       backend="numpy")
    np.testing.assert_allclose(model.predict(np.ones((1, 4), np.float32)), [[4, 4]])


# -- the zip ---------------------------------------------------------------------------
def test_a_zip_member_escaping_the_archive_is_refused(tmp_path):
    path = _keras_file(tmp_path / "m.keras", _sequential(), extra=[("../../evil", b"x")])
    with pytest.raises(KerasImportError, match=r"zip member '\.\./\.\./evil' is not a "
                                               r"plain name"):
        load_model(path)


def test_a_zip_bomb_is_refused_before_it_inflates(tmp_path):
    path = tmp_path / "bomb.keras"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_BZIP2) as z:
        z.writestr("config.json", b" " * (64 * 2 ** 20))
    assert path.stat().st_size < 2 ** 16
    with pytest.raises(KerasImportError, match=r"'config.json' declares 67108864 bytes .*"
                                               r"1000:1 ratio"):
        load_model(path)


def test_members_over_max_bytes_are_refused(tmp_path):
    config = json.dumps(_sequential(_layer("Dense", "d", units=2))) + " " * 5000
    path = _keras_file(tmp_path / "m.keras", config, compression=zipfile.ZIP_DEFLATED)
    assert path.stat().st_size < 4000
    with pytest.raises(KerasImportError, match="over max_bytes=4000"):
        load_model(path, max_bytes=4000)


@pytest.mark.parametrize("data", [b"PK\x03\x04 not really a zip", b"plain text",
                                  b"\x89HDF\r\n\x1a\n broken"])
def test_a_broken_container_is_a_clear_error(tmp_path, data):
    if data.startswith(b"\x89HDF"):
        pytest.importorskip("h5py")
    path = tmp_path / "m.keras"
    path.write_bytes(data)
    with pytest.raises(KerasImportError):
        load_model(path)


def test_a_folder_without_model_json_names_the_files_it_holds(tmp_path):
    (tmp_path / "weights.json").write_text("{}")
    with pytest.raises(KerasImportError, match="holds no model.json .*weights.json"):
        load_model(tmp_path)
    with pytest.raises(KerasImportError, match="takes the path of a model.json"):
        load_model(42)


# -- JSON ------------------------------------------------------------------------------
@pytest.mark.parametrize("config, message", [
    ("{not json", r"config.json is not valid JSON"),
    ("[" * 100_000 + "]" * 100_000, r"config.json(: its JSON nests too deep| is not valid)"),
    (json.dumps([1, 2]), r"not a JSON object"),
    (json.dumps({"class_name": "Sequential", "config": {"layers": 5}}),
     r"'layers' is missing or not a list"),
    (json.dumps({"class_name": "Functional", "config": {"layers": [], "input_layers": [],
                                                         "output_layers": []}}),
     r"input_layers: missing or empty"),
    (json.dumps({"class_name": "os.system", "config": {}}), r"not a model fragflow reads"),
    (json.dumps(_sequential(_layer("Dense", "d", units="many"))),
     r"layer 'd' \(Dense\): cannot make the layer"),
    (json.dumps(_sequential(_layer("Dense", "d", units=2), shape=(None, "x"))),
     r"layer 'inp' \(InputLayer\): batch_shape: .* is not a shape"),
])
def test_malformed_configs_are_clear_errors(tmp_path, config, message):
    path = _keras_file(tmp_path / "m.keras", config)
    with pytest.raises(KerasImportError, match=message):
        load_model(path)


def test_a_functional_config_with_a_dangling_tensor_is_refused(tmp_path):
    tensor = {"class_name": "__keras_tensor__",
              "config": {"shape": [None, 4], "keras_history": ["ghost", 0, 0]}}
    config = {"class_name": "Functional", "config": {
        "name": "f", "layers": [
            dict(_input(), name="inp", inbound_nodes=[]),
            dict(_layer("Dense", "d", units=2), name="d",
                 inbound_nodes=[{"args": [tensor], "kwargs": {}}])],
        "input_layers": [["inp", 0, 0]], "output_layers": [["d", 0, 0]]}}
    path = _keras_file(tmp_path / "m.keras", config)
    with pytest.raises(KerasImportError, match=r"layer 'd' \(Dense\): its call 0 waits for "
                                               r"a tensor no layer makes"):
        load_model(path)


def test_a_huge_layer_is_refused_before_its_weights_are_made(tmp_path):
    path = _keras_file(tmp_path / "m.keras",
                       _sequential(_layer("Dense", "d", units=2 ** 40)))
    with pytest.raises(KerasImportError, match=r"layer 'd' \(Dense\): a weight of shape "
                                               r"\[4, 1099511627776\].*over max_elements"):
        load_model(path)


# -- HDF5 ------------------------------------------------------------------------------
def test_a_huge_compressed_dataset_is_refused_before_it_is_read(tmp_path):
    h5py = pytest.importorskip("h5py")

    def huge(f):
        f.create_dataset("layers/dense/vars/0", shape=(2 ** 30,), dtype="f4",
                         chunks=(2 ** 16,), compression="gzip")
        f.create_dataset("layers/dense/vars/1", data=np.zeros(2, np.float32))
    weights = _weights_h5(build=huge)
    assert len(weights) < 2 ** 20 and h5py
    path = _keras_file(tmp_path / "m.keras", _sequential(_layer("Dense", "d", units=2)),
                       weights)
    with pytest.raises(KerasImportError, match=r"layers/dense/vars/0: shape \[1073741824\] "
                                               r"= 1073741824 elements, more than "
                                               r"max_elements"):
        load_model(path)


def test_links_out_of_the_file_are_refused(tmp_path):
    h5py = pytest.importorskip("h5py")
    (tmp_path / "secret.h5").write_bytes(_weights_h5({"x": np.ones((4, 2), np.float32)}))

    def linked(f):
        f["layers/dense/vars/0"] = h5py.ExternalLink(str(tmp_path / "secret.h5"), "x")
        f.create_dataset("layers/dense/vars/1", data=np.zeros(2, np.float32))
    path = _keras_file(tmp_path / "m.keras", _sequential(_layer("Dense", "d", units=2)),
                       _weights_h5(build=linked))
    with pytest.raises(KerasImportError, match=r"is a ExternalLink; only plain objects"):
        load_model(path)


def test_a_weight_of_the_wrong_shape_names_layer_and_weight(tmp_path):
    weights = _dense_weights(units=3)
    path = _keras_file(tmp_path / "m.keras", _sequential(_layer("Dense", "d", units=2)),
                       _weights_h5(weights))
    with pytest.raises(KerasImportError, match=r"layer 'd' \(Dense\): weight 'd/kernel' has "
                                               r"shape \[4, 2\], the file's \[4, 3\]"):
        load_model(path)


def test_missing_weights_name_the_layer(tmp_path):
    path = _keras_file(tmp_path / "m.keras", _sequential(_layer("Dense", "d", units=2)),
                       _weights_h5({}))
    with pytest.raises(KerasImportError, match=r"no weights for layer 'd' \(Dense\) at "
                                               r"layers/dense"):
        load_model(path)


def test_a_string_dataset_is_not_a_weight(tmp_path):
    h5py = pytest.importorskip("h5py")

    def strings(f):
        f.create_dataset("layers/dense/vars/0", data=np.array([b"a", b"b"]),
                         dtype=h5py.string_dtype())
        f.create_dataset("layers/dense/vars/1", data=np.zeros(2, np.float32))
    path = _keras_file(tmp_path / "m.keras", _sequential(_layer("Dense", "d", units=2)),
                       _weights_h5(build=strings))
    with pytest.raises(KerasImportError, match=r"dtype object is not a number type"):
        load_model(path)


def test_an_h5_file_without_a_config_says_to_load_weights(tmp_path):
    path = tmp_path / "w.h5"
    path.write_bytes(_weights_h5({"x": np.ones(2, np.float32)}))
    with pytest.raises(KerasImportError, match=r"holds weights only .*load_weights"):
        load_model(path)


# -- mutated configs -------------------------------------------------------------------
_ODD = [None, -1, 0, 2 ** 40, 1.5, "", "same", [], [0], [None, -3], {}, {"class_name": 1},
        True, "x" * 300]


def _mutate(value, rng):
    """value with one entry somewhere replaced by an odd one."""
    go_on = rng.random() < 0.85
    if isinstance(value, dict) and value and go_on:
        key = rng.choice(sorted(value))
        return {**value, key: _mutate(value[key], rng)}
    if isinstance(value, list) and value and go_on:
        i = rng.randrange(len(value))
        return value[:i] + [_mutate(value[i], rng)] + value[i + 1:]
    return rng.choice(_ODD)


def test_mutated_configs_load_or_fail_with_a_keras_import_error(tmp_path):
    base = {"class_name": "Functional", "config": {
        "name": "f", "layers": [
            dict(_input((None, 6, 6, 2)), name="inp", inbound_nodes=[]),
            dict(_layer("Conv2D", "c", filters=2, kernel_size=[3, 3], padding="same",
                        activation="relu"), name="c",
                 inbound_nodes=[[["inp", 0, 0, {}]]]),
            dict(_layer("BatchNormalization", "bn", axis=-1), name="bn",
                 inbound_nodes=[[["c", 0, 0, {}]]]),
            dict(_layer("Flatten", "fl"), name="fl", inbound_nodes=[[["bn", 0, 0, {}]]]),
            dict(_layer("Dense", "d", units=3, activation="softmax"), name="d",
                 inbound_nodes=[[["fl", 0, 0, {}]]])],
        "input_layers": [["inp", 0, 0]], "output_layers": [["d", 0, 0]]}}
    rng = random.Random(0)
    loaded = refused = 0
    for k in range(80):
        layers = list(base["config"]["layers"])
        i = rng.randrange(len(layers))
        part = rng.choice(["config", "config", "config", "inbound_nodes", "class_name",
                           "name"])
        layers[i] = {**layers[i], part: _mutate(layers[i][part], rng)}
        config = {**base, "config": {**base["config"], "layers": layers}}
        if k % 8 == 0:
            config = _mutate(base, rng)        # anywhere, the structure around included
        path = _keras_file(tmp_path / f"m{k}.keras", config)
        try:
            model = load_model(path, backend="numpy", max_elements=2 ** 20)
        except KerasImportError:
            refused += 1
            continue
        try:
            model.predict(np.ones((2, 6, 6, 2), np.float32))
        except ff.FragflowError:
            pass
        loaded += 1
    assert refused > 10 and loaded >= 2, (refused, loaded)     # both paths are taken


# -- TF.js layers models ---------------------------------------------------------------
def _tfjs(tmp_path, manifest_paths, data=b"", quantization=None, weights=None):
    topology = {"class_name": "Sequential", "config": {"name": "m", "layers": [
        {"class_name": "Dense", "config": {"name": "dense", "units": 2,
                                           "batch_input_shape": [None, 4]}}]},
        "keras_version": "tfjs-layers 4.22.0", "backend": "tensor_flow.js"}
    spec = weights or [{"name": "dense/kernel", "shape": [4, 2], "dtype": "float32"},
                       {"name": "dense/bias", "shape": [2], "dtype": "float32"}]
    if quantization:
        spec[0]["quantization"] = quantization
    doc = {"format": "layers-model", "modelTopology": topology,
           "weightsManifest": [{"paths": manifest_paths, "weights": spec}]}
    (tmp_path / "model.json").write_text(json.dumps(doc))
    if data:
        (tmp_path / "group1-shard1of1.bin").write_bytes(data)
    return tmp_path / "model.json"


# both entry points read a layers model's shards through one reader
# (interop/tfjs_weights.py), each raising its own error class
LOADERS = {
    "keras": (lambda path: load_model(path, backend="numpy"), KerasImportError),
    "tfjs": (lambda path: ff.tfjs.load(path), ff.tfjs.TfjsImportError),
}


def _predict(loader, model, x):
    if loader == "keras":
        return model.predict(x)
    return ff.Session(model.graph, backend="numpy").run(model.outputs[0],
                                                        {model.inputs[0]: x})


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("quantization,stored,want", [
    ({"dtype": "uint8", "scale": 0.5, "min": -1.0}, np.arange(8, dtype=np.uint8),
     np.arange(8).reshape(4, 2) * 0.5 - 1.0),
    ({"dtype": "uint16", "scale": 0.25, "min": 2.0}, np.arange(8, dtype=np.uint16),
     np.arange(8).reshape(4, 2) * 0.25 + 2.0),
    ({"dtype": "float16"}, np.float16([0.5, -2, 3, 1e-3, 65504, -0.0, 7, 1]),
     np.float16([0.5, -2, 3, 1e-3, 65504, -0.0, 7, 1]).astype(np.float32).reshape(4, 2)),
])
def test_a_tfjs_layers_model_loads_with_quantized_weights(tmp_path, loader, quantization,
                                                          stored, want):
    data = stored.tobytes() + np.float32([1, 2]).tobytes()
    _tfjs(tmp_path, ["group1-shard1of1.bin"], data, quantization)
    load, _ = LOADERS[loader]
    got = _predict(loader, load(tmp_path), np.ones((1, 4), np.float32))
    np.testing.assert_allclose(got, np.ones((1, 4)) @ want + [1, 2], rtol=1e-6)


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("path,why", [
    ("../outside.bin", "lies outside the model's folder"),
    ("/etc/passwd", "must be a relative path inside"),
    ("https://example.com/w.bin", "must be a relative path inside"),
    ("missing.bin", "does not exist"),
])
def test_a_tfjs_shard_outside_the_model_folder_is_refused(tmp_path, loader, path, why):
    (tmp_path / "outside.bin").write_bytes(bytes(40))
    folder = tmp_path / "model"
    folder.mkdir()
    load, error = LOADERS[loader]
    with pytest.raises(error, match=why):
        load(_tfjs(folder, [path]))


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("size", [12, 44])
def test_tfjs_shard_sizes_are_checked_before_reading(tmp_path, loader, size):
    path = _tfjs(tmp_path, ["group1-shard1of1.bin"], bytes(size))
    load, error = LOADERS[loader]
    with pytest.raises(error, match=rf"weightsManifest group 0 declares 40 bytes of weights "
                                    rf"but its shards hold {size} bytes"):
        load(path)


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("entry,why", [
    ({"shape": [1 << 20, 1 << 20]}, "weight 'dense/kernel': .* more than max_elements"),
    ({"dtype": "string"}, "dtype 'string' is not supported"),
    ({"quantization": {"dtype": "int4"}}, "quantization 'int4' is not supported"),
    ({"quantization": {"dtype": "uint8"}}, "needs finite numbers 'min' and 'scale'"),
    ({"shape": "4x2"}, "non-negative integers"),
])
def test_tfjs_weight_entries_are_checked_before_allocation(tmp_path, loader, entry, why):
    spec = [{"name": "dense/kernel", "shape": [4, 2], "dtype": "float32", **entry},
            {"name": "dense/bias", "shape": [2], "dtype": "float32"}]
    path = _tfjs(tmp_path, ["group1-shard1of1.bin"], bytes(40), weights=spec)
    load, error = LOADERS[loader]
    with pytest.raises(error, match=why):
        load(path)


def test_a_tfjs_graph_model_points_at_ff_tfjs_load(tmp_path):
    (tmp_path / "model.json").write_text(json.dumps(
        {"format": "graph-model", "modelTopology": {"node": []}}))
    with pytest.raises(KerasImportError, match=r"TF.js graph model: ff.tfjs.load"):
        load_model(tmp_path / "model.json")


def test_regularizers_are_kept_and_constraints_left_out_with_a_warning(tmp_path):
    l2 = {"module": "keras.regularizers", "class_name": "L2", "config": {"l2": 0.01}}
    nonneg = {"module": "keras.constraints", "class_name": "NonNeg", "config": {}}
    path = _keras_file(tmp_path / "m.keras",
                       _sequential(_layer("Dense", "d", units=2, kernel_regularizer=l2,
                                          kernel_constraint=nonneg)),
                       _weights_h5(_dense_weights()))
    with pytest.warns(UserWarning, match=r"layer 'd' \(Dense\): kernel_constraint is left "
                                         r"out: fragflow applies no constraint"):
        model = load_model(path, backend="numpy")
    np.testing.assert_allclose(model.predict(np.ones((1, 4), np.float32)), [[4, 4]])
    assert model.get_layer("d").regularizers == {"kernel_regularizer": l2}   # fit adds it


def test_weight_groups_in_an_unknown_order_are_refused(tmp_path):
    weights = {f"layers/twin/{sub}/vars/{i}": np.ones(shape, np.float32)
               for sub in ("a_dense", "b_dense") for i, shape in enumerate([(4, 2), (2,)])}
    path = _keras_file(tmp_path / "m.keras", _sequential(_layer("Twin", "t", units=2)),
                       _weights_h5(weights))
    with pytest.raises(KerasImportError, match=r"layers/twin: the weights of Twin lie in "
                                               r"groups a_dense, b_dense, whose order"):
        load_model(path, custom_objects={"Twin": ff.keras.layers.Dense})
