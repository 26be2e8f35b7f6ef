"""The fragflow command takes ONNX files as targets: dump (after every pass), shaders."""
import os

import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")

from tests.tools.cli_targets import run_cli

pytestmark = pytest.mark.usefixtures("gl")


def test_dump_of_an_onnx_model_shows_the_transposes_go(torch_models, capsys):
    path = str(torch_models / "mobile_block.onnx")
    code, out, err = run_cli(capsys, "dump", path, "--feed-shape", "input=2,3,20,20",
                             "--after", "all")
    assert code == 0, err
    assert "cancelled transposes" in out
    final = out.rsplit("// after verify", 1)[1]
    assert final.count("transpose(") == 1          # the input's, before the first conv
    assert "mobile_block.onnx:" in out             # nodes say which ONNX node made them


def test_shaders_of_an_onnx_model(torch_models, capsys, tmp_path):
    path = str(torch_models / "mlp.onnx")
    code, out, err = run_cli(capsys, "shaders", path, "--feed-shape", "input=4,20",
                             "-o", str(tmp_path / "shaders"))
    assert code == 0, err
    assert len([f for f in os.listdir(tmp_path / "shaders") if f.endswith(".frag")]) == 3


def test_a_missing_onnx_file_is_a_clear_error(capsys, tmp_path):
    code, out, err = run_cli(capsys, "dump", str(tmp_path / "none.onnx"))
    assert code != 0 and "none.onnx" in err


def test_profile_of_an_onnx_model(torch_models, capsys):
    path = str(torch_models / "mobile_block.onnx")
    code, out, err = run_cli(capsys, "profile", path, "--feed-shape", "input=2,3,20,20")
    assert code == 0, err
    assert "depthwise_conv2d" in out and "total per run" in out
