"""Keras file tests: files made by Keras 3 on its torch backend (keras_models.py, in a
subprocess), read by fragflow; fragflow's files read back by Keras. keras and h5py
come with the `test` extra; without them these tests skip, saying why."""
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "keras_models.py")


def require_h5py():
    pytest.importorskip("h5py", reason="h5py is not installed (pip install 'fragflow[test]')")


def require_keras():
    """Skip, saying why, where Keras's files cannot be made here (h5py, keras, torch)."""
    require_h5py()
    for module in ("keras", "torch"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (pip install 'fragflow[test]'): no "
                        f"Keras files to read")


def run_keras_script(args, script=SCRIPT):
    """Run one of this folder's Keras scripts (keras_models.py by default) with Keras
    on its torch backend; its failure fails the test with Keras's stderr."""
    done = subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                          timeout=300, env=dict(os.environ, KERAS_BACKEND="torch"))
    if done.returncode != 0:
        pytest.fail(f"Keras ({' '.join(args[:1])}) failed:\n{done.stderr[-3000:]}")


_run = run_keras_script


@pytest.fixture(scope="session")
def keras_dir(tmp_path_factory):
    """A folder of models saved by Keras 3 (keras_models.py make): NAME.keras, NAME.h5,
    NAME.inputs.npz, NAME.keras.npz, cnn.fit.json."""
    require_keras()
    out = tmp_path_factory.mktemp("keras_models")
    _run(["make", str(out)])
    return out


def keras_predict(paths) -> list:
    """Keras's outputs for each file (its model's inputs), as lists of arrays."""
    _run(["predict", *map(str, paths)])
    out = []
    for path in paths:
        data = np.load(f"{path}.pred.npz")
        out.append([data[f"y{i}"] for i in range(len(data.files))])
    return out


def inputs_of(folder, name) -> list:
    data = np.load(os.path.join(folder, f"{name}.inputs.npz"))
    return [data[f"x{i}"] for i in range(len(data.files))]


def keras_outputs(folder, name) -> list:
    data = np.load(os.path.join(folder, f"{name}.keras.npz"))
    return [data[f"y{i}"] for i in range(len(data.files))]


def assert_close(got, want, tol=1e-5):
    """Within tol of want, relative to its largest magnitude (the issue's measure)."""
    got = got if isinstance(got, list) else [got]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        scale = max(float(np.abs(w).max()), 1e-30)
        assert float(np.abs(g - w).max()) / scale <= tol, float(np.abs(g - w).max()) / scale
