"""The fragflow command takes TF.js graph models as targets; --feed-shape fixes free dims
at import, where the model's shape arithmetic needs them."""
import os

import numpy as np
import pytest
from tfjs_builder import ModelBuilder

from tests.tools.cli_targets import run_cli

pytestmark = pytest.mark.usefixtures("gl")


def model_with_a_free_batch(folder) -> str:
    """x [?, 4] -> relu(x @ w) reshaped to [batch, 2, 1] through Shape/StridedSlice/Pack."""
    b = ModelBuilder()
    b.placeholder("x", [None, 4])
    b.const("w", np.arange(8, dtype=np.float32).reshape(4, 2))
    b.op("MatMul", "mm", ["x", "w"], transpose_a=False, transpose_b=False)
    b.op("Relu", "relu", ["mm"])
    b.op("Shape", "shape", ["x"], out_type="DT_INT32")
    for name, value in (("b0", [0]), ("b1", [1]), ("two", 2), ("one", 1)):
        b.const(name, np.array(value, np.int32))
    b.op("StridedSlice", "batch", ["shape", "b0", "b1", "b1"], shrink_axis_mask=1,
         begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0)
    b.op("Pack", "newshape", ["batch", "two", "one"], axis=0, N=3)
    b.op("Reshape", "out", ["relu", "newshape"])
    return b.write(str(folder))


def test_dump_of_a_tfjs_model_with_feed_shape(capsys, tmp_path):
    path = model_with_a_free_batch(tmp_path / "m")
    code, out, err = run_cli(capsys, "dump", path, "--feed-shape", "x=3,4")
    assert code == 0, err
    assert "placeholder \"x\" : f32[3,4]" in out
    assert "reshape(" in out and ": f32[3,2,1]" in out
    assert "m/model.json: out" in out              # nodes say which TF.js node made them


def test_a_free_dim_stays_free_in_the_dump(capsys, tmp_path):
    path = model_with_a_free_batch(tmp_path / "m")
    code, out, err = run_cli(capsys, "dump", path)
    assert code == 0, err
    assert "placeholder \"x\" : f32[?,4]" in out and ": f32[?,2,1]" in out


def test_shaders_and_profile_of_a_tfjs_model(capsys, tmp_path):
    path = model_with_a_free_batch(tmp_path / "m")
    code, out, err = run_cli(capsys, "shaders", str(tmp_path / "m"), "--feed-shape",
                             "x=2,4", "-o", str(tmp_path / "shaders"))
    assert code == 0, err
    assert [f for f in os.listdir(tmp_path / "shaders") if f.endswith(".frag")]
    code, out, err = run_cli(capsys, "profile", path, "--feed-shape", "x=2,4")
    assert code == 0, err
    assert "matmul" in out or "relu" in out


def test_export_of_a_tfjs_model_names_its_inputs(capsys, tmp_path):
    path = model_with_a_free_batch(tmp_path / "m")
    code, out, err = run_cli(capsys, "export", path, "--webgl", "-o", str(tmp_path / "web"),
                             "--feed-shape", "x=2,4")
    assert code == 0, err
    script = (tmp_path / "web" / "model.js").read_text()
    assert '"name":"x"' in script and (tmp_path / "web" / "model.bin").exists()


def test_a_staged_model_is_refused_with_the_way_out(capsys, tmp_path):
    b = ModelBuilder()
    b.placeholder("x", [3])
    b.const("zero", np.array(0.0, np.float32))
    b.op("Greater", "pos", ["x", "zero"])
    b.op("Where", "where", ["pos"])
    path = b.write(str(tmp_path / "m"))
    code, out, err = run_cli(capsys, "dump", path)
    assert code != 0
    assert "staged TF.js model" in err and "Where node 'where'" in err and ".stage(feeds)" in err
