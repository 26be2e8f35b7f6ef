"""ONNX's shipped model tests (onnx/backend/test/data: pytorch-operator, simple, a
seeded sample) through fragflow's onnx.backend.base.Backend on GL: each passes, is
skipped for a dtype fragflow lacks, or fails to import with an OnnxImportError naming
what is missing -- never a wrong value or a crash. The full run (with onnx's ~1,900
generated node cases) is `make onnx-conformance`."""
import random

import numpy as np
import pytest

pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")

from fragflow.frontend.onnx import conformance

pytestmark = pytest.mark.usefixtures("gl")
SAMPLE = 16


def _sample():
    cases = conformance.file_cases(("pytorch-operator", "simple"))
    return random.Random(20261201).sample(cases, min(SAMPLE, len(cases)))


CASES = _sample()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_shipped_model_passes_or_says_what_is_missing(case):
    status, reason = conformance.run_case(case, "gl")
    assert status in ("pass", "skip") or reason.startswith(
        ("unsupported op", "OnnxImportError")), reason


def test_backend_runs_a_model_with_inputs_it_must_bind_at_import():
    from onnx import TensorProto, helper

    from fragflow.frontend.onnx.backend import FragflowBackend
    node = helper.make_node("Reshape", ["x", "shape"], ["y"])
    graph = helper.make_graph(
        [node], "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
                      helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["a", "b"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    rep = FragflowBackend.prepare(model)
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    np.testing.assert_array_equal(rep.run([x, np.array([3, 4])])[0], x.reshape(3, 4))
    np.testing.assert_array_equal(rep.run([x, np.array([4, 3])])[0], x.reshape(4, 3))


def test_report_counts_and_explains():
    summary = conformance.summarize([
        {"name": "a", "kind": "node", "ops": ["Relu"], "status": "pass", "reason": ""},
        {"name": "b", "kind": "node", "ops": ["Det"], "status": "fail",
         "reason": "unsupported op Det"},
        {"name": "c", "kind": "node", "ops": ["Relu"], "status": "skip",
         "reason": "dtype float64"}])
    assert summary["totals"] == {"pass": 1, "fail": 1, "skip": 1}
    assert summary["per_op"]["Relu"] == {"pass": 1, "skip": 1}
    assert ("unsupported op Det", 1) in summary["reasons"]
