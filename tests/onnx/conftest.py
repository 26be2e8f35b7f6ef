"""ONNX tests need onnx and onnxruntime (the `test` extra installs them); torch only
for the models tests/onnx/torch_models.py exports in a subprocess."""
import importlib.util
import os
import subprocess
import sys

import pytest


def require_onnx_packages():
    """Skip the calling test module (with the reason) where onnx or onnxruntime is
    missing; the `test` extra installs both."""
    for module in ("onnx", "onnxruntime"):
        pytest.importorskip(module, reason=f"{module} is not installed "
                                           f"(pip install 'fragflow[test]')")


@pytest.fixture(scope="session")
def torch_models(tmp_path_factory):
    """A directory of ONNX files exported by torch (torch_models.py: small models and
    torchvision's resnet18, mobilenet_v2, squeezenet1_1), each with NAME.input.npy,
    NAME.torch.npy (and NAME.sgd.npy for the small ones)."""
    require_onnx_packages()
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed: no exported models to import")
    out = tmp_path_factory.mktemp("torch_models")
    script = os.path.join(os.path.dirname(__file__), "torch_models.py")
    done = subprocess.run([sys.executable, script, str(out)], capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        pytest.fail(f"exporting the torch models failed:\n{done.stderr[-3000:]}")
    return out
