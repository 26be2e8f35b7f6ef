"""TF.js layers models (model.json with a Keras topology and a weightsManifest) made
by TF.js 4.22 in node (tfjs_layers.js) load through ff.keras.models.load_model and
predict within 1e-5 of TF.js. TF.js comes from the npm cache the TF.js tests use
(FRAGFLOW_TFJS_CACHE, default ~/.cache/fragflow/tfjs); without node or that cache
these tests skip, saying why."""
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import fragflow as ff
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
