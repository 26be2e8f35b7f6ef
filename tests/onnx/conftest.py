"""ONNX tests need onnx and onnxruntime (the `test` extra installs them); torch only
for the models tests/onnx/torch_models.py exports in a subprocess."""
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest

for _module in ("onnx", "onnxruntime"):
    if importlib.util.find_spec(_module) is None:
        pytest.skip(f"{_module} is not installed (pip install 'fragflow[test]')",
                    allow_module_level=True)


@pytest.fixture(scope="session")
def torch_models(tmp_path_factory):
    """A directory of ONNX files exported by torch (mlp, cnn, mobile_block), each with
    NAME.input.npy and NAME.torch.npy."""
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed: no exported models to import")
    out = tmp_path_factory.mktemp("torch_models")
    script = os.path.join(os.path.dirname(__file__), "torch_models.py")
    done = subprocess.run([sys.executable, script, str(out)], capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        pytest.fail(f"exporting the torch models failed:\n{done.stderr[-3000:]}")
    return out
