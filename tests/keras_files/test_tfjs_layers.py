"""TF.js layers models (model.json with a Keras topology and a weightsManifest) made
by TF.js 4.22 in node (tfjs_layers.js) load through ff.keras.models.load_model and
through ff.tfjs.load (an imported model, named as TF.js names it) and predict within
1e-5 of TF.js. TF.js comes from the npm cache the TF.js tests use
(FRAGFLOW_TFJS_CACHE, default ~/.cache/fragflow/tfjs); without node or that cache
these tests skip, saying why."""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import fragflow as ff
from fragflow.frontend.optim import trainable_variables
from tests.keras_files.conftest import assert_close

CACHE = os.environ.get("FRAGFLOW_TFJS_CACHE", os.path.expanduser("~/.cache/fragflow/tfjs"))
NODE_MODULES = os.path.join(CACHE, "node_modules")
SCRIPT = os.path.join(os.path.dirname(__file__), "tfjs_layers.js")


@pytest.fixture(scope="module")
def tfjs_dir(tmp_path_factory):
    if shutil.which("node") is None:
        pytest.skip("node is not installed: no TF.js layers models to read")
    if not os.path.isdir(os.path.join(NODE_MODULES, "@tensorflow", "tfjs")):
        pytest.skip(f"@tensorflow/tfjs is not in {NODE_MODULES} (the TF.js tests' npm "
                    f"cache; FRAGFLOW_TFJS_CACHE)")
    out = tmp_path_factory.mktemp("tfjs_layers")
    done = subprocess.run(["node", SCRIPT, str(out)], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, NODE_PATH=NODE_MODULES))
    if done.returncode != 0:
        pytest.fail(f"TF.js failed:\n{done.stderr[-3000:]}")
    return out


def _tfjs_names(folder) -> dict:
    """The input and output names TF.js's LayersModel reports for the model, loaded in a
    process of its own (TF.js makes tensor names unique across a process)."""
    done = subprocess.run(["node", SCRIPT, "names", str(folder)], capture_output=True,
                          text=True, timeout=120, env=dict(os.environ, NODE_PATH=NODE_MODULES))
    if done.returncode != 0:
        pytest.fail(f"TF.js failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def _io(folder):
    with open(folder / "io.json") as f:
        io = json.load(f)
    return ([np.array(i["data"], np.float32).reshape(i["shape"]) for i in io["inputs"]],
            [np.array(o["data"], np.float32).reshape(o["shape"]) for o in io["outputs"]])


@pytest.mark.parametrize("backend", ["gl", "numpy"])
@pytest.mark.parametrize("name", ["cnn", "two_io"])
def test_tfjs_layers_models_predict_as_tfjs_does(tfjs_dir, request, name, backend):
    if backend == "gl":
        request.getfixturevalue("gl")
    xs, ys = _io(tfjs_dir / name)
    model = ff.keras.models.load_model(tfjs_dir / name, backend=backend)   # the folder
    assert_close(model.predict(xs if len(xs) > 1 else xs[0]), ys)


def test_a_tfjs_layers_model_saves_as_a_keras_file(tfjs_dir, tmp_path):
    pytest.importorskip("h5py", reason="h5py is not installed (pip install 'fragflow[test]')")
    xs, ys = _io(tfjs_dir / "two_io")
    model = ff.keras.models.load_model(tfjs_dir / "two_io" / "model.json", backend="numpy")
    model.save(tmp_path / "two_io.keras")
    again = ff.keras.models.load_model(tmp_path / "two_io.keras", backend="numpy")
    assert_close(again.predict(xs), ys)


@pytest.mark.parametrize("backend", ["gl", "numpy"])
@pytest.mark.parametrize("name", ["cnn", "two_io"])
def test_ff_tfjs_load_reads_a_layers_model_as_tfjs_runs_it(tfjs_dir, request, name,
                                                           backend):
    if backend == "gl":
        request.getfixturevalue("gl")
    xs, ys = _io(tfjs_dir / name)
    model = ff.tfjs.load(tfjs_dir / name / "model.json")
    sess = ff.Session(model.graph, backend=backend)
    got = sess.run(model.outputs, model.feed_dict(dict(zip(model.inputs_by_name, xs))))
    assert_close(got, ys)


@pytest.mark.parametrize("name", ["cnn", "two_io"])
def test_ff_tfjs_load_names_a_layers_models_inputs_and_outputs_as_tfjs(tfjs_dir, name):
    names = _tfjs_names(tfjs_dir / name)
    model = ff.tfjs.load(tfjs_dir / name)
    assert list(model.inputs_by_name) == names["inputs"]
    assert list(model.outputs_by_name) == names["outputs"]
    assert model.inputs == list(model.inputs_by_name.values())


def test_ff_tfjs_load_fixes_a_layers_models_input_shapes(tfjs_dir):
    xs, ys = _io(tfjs_dir / "two_io")
    model = ff.tfjs.load(tfjs_dir / "two_io", input_shapes={"a": (6, 4), "b": (6, None)})
    assert [t.shape for t in model.inputs] == [(6, 4), (6, 4)]
    got = ff.Session(model.graph, backend="numpy").run(model.outputs,
                                                       model.feed_dict({"a": xs[0],
                                                                        "b": xs[1]}))
    assert_close(got, ys)
    with pytest.raises(ff.tfjs.TfjsImportError, match=r"input 'a': input_shapes gives "
                                                      r"\[6, 5\]; the model's input has "
                                                      r"shape \[None, 4\]"):
        ff.tfjs.load(tfjs_dir / "two_io", input_shapes={"a": (6, 5)})
    with pytest.raises(ff.tfjs.TfjsImportError, match=r"input_shapes names c; the model's "
                                                      r"inputs are a, b"):
        ff.tfjs.load(tfjs_dir / "two_io", input_shapes={"c": (6, 4)})


def test_ff_tfjs_load_makes_a_layers_models_weights_variables_when_trainable(tfjs_dir):
    xs, ys = _io(tfjs_dir / "cnn")
    frozen = ff.tfjs.load(tfjs_dir / "cnn")
    assert frozen.variables == {}
    model = ff.tfjs.load(tfjs_dir / "cnn", trainable=True)
    assert sorted(model.variables) == sorted(
        w["name"] for w in json.loads((tfjs_dir / "cnn" / "model.json").read_text())[
            "weightsManifest"][0]["weights"])
    trained = {v.op.name for v in trainable_variables(model.outputs[0])}
    assert not any("moving" in n for n in trained) and any("kernel" in n for n in trained)
    got = ff.Session(model.graph, backend="numpy").run(model.outputs[0],
                                                       model.feed_dict({model.inputs[0]: xs[0]}))
    assert_close(got, ys)
