"""The pass pipeline: configuration, dumps, the verifier, and the simplifying passes."""
import os

import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.graph import Graph, Value
from fragflow.passes import DEFAULT_PIPELINE, VerificationError, verify
from tests.reference import assert_matches


def ops_of(fn):
    return [n.op for n in fn.graph.nodes]


def test_unknown_pass_names_are_refused_with_the_known_ones():
    with pytest.raises(ff.FragflowError, match="unknown pass.*'nope'.*fuse_elementwise"):
        ff.Session(ff.Graph(), backend="numpy", passes=["nope"])


def test_passes_can_be_chosen_and_disabled_by_name():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4,), name="x")
        y = ff.exp(x) * 2.0 + 1.0
    xb = np.arange(4, dtype=np.float32)
    with ff.Session(g, backend="numpy", disable_passes=["fuse_elementwise"]) as sess:
        fn = sess.compile([y], feeds=[x])
        fn(xb)
        assert "fused_elementwise" not in ops_of(fn)
        only_verify = sess.compile([y], feeds=[x], passes=["verify"])
        only_verify(xb)
        assert ops_of(only_verify).count("constant") == 2
    with ff.Session(g, backend="numpy") as sess:
        fn = sess.compile([y], feeds=[x])
        (out,) = fn(xb)
        assert "fused_elementwise" in ops_of(fn)
    assert_matches(out, np.exp(xb) * 2 + 1)


def test_dump_passes_writes_each_stage_with_statistics(tmp_path):
    g = ff.Graph("dumped")
    with g.as_default():
        x = ff.placeholder((3,), name="x")
        y = ff.relu(x * 1.0 + ff.constant(2.0) * 3.0)
    with ff.Session(g, backend="numpy", dump_passes=str(tmp_path)) as sess:
        sess.run(y, {x: np.ones(3, np.float32)})
    names = sorted(os.listdir(tmp_path))
    assert names[0] == "dumped.00.prune.txt"
    assert [n.split(".")[2] for n in names[1:]] == list(DEFAULT_PIPELINE)
    folded = (tmp_path / "dumped.01.fold_constants.txt").read_text()
    assert folded.startswith("// after fold_constants: ")
    assert "// folded mul 'mul_1' into a constant" in folded
    index = DEFAULT_PIPELINE.index("fuse_elementwise") + 1
    fused = (tmp_path / f"dumped.{index:02d}.fuse_elementwise.txt").read_text()
    assert "fused_elementwise" in fused and "// fused 2 ops" in fused


def test_environment_variable_turns_dumps_on(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAGFLOW_DUMP_PASSES", str(tmp_path))
    g = ff.Graph("env")
    with g.as_default():
        x = ff.placeholder((3,), name="x")
        y = ff.exp(x)
    with ff.Session(g, backend="numpy") as sess:
        sess.run(y, {x: np.ones(3, np.float32)})
    assert "env.00.prune.txt" in os.listdir(tmp_path)


def _broken(kind):
    g = Graph("broken")
    with g.as_default():
        x = ff.placeholder((2,), name="x")
        y = ff.exp(x)
    if kind == "dangling":
        other = Graph("other")
        with other.as_default():
            z = ff.placeholder((2,), name="z")
        y.op.inputs = (z.value,)
    elif kind == "types":
        y.op.outputs = (Value(y.op, 0, ff.TensorType((3,), "float32")),)
    elif kind == "duplicate":
        g.nodes.append(g.nodes[0])
    elif kind == "cycle":
        g.nodes.reverse()
    return g


@pytest.mark.parametrize("kind, message", [
    ("dangling", "not defined before it"), ("types", "outputs typed"),
    ("duplicate", "duplicate node name"), ("cycle", "not defined before it"),
])
def test_verifier_rejects_broken_graphs(kind, message):
    with pytest.raises(VerificationError, match=message):
        verify(_broken(kind))


def test_constant_folding_cse_and_simplification(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 3), name="x")
        c = ff.constant(np.arange(3, dtype=np.float32)) * 2.0 + 1.0       # folds
        a = ff.exp(x) + c
        b = ff.exp(x) + c                                                  # CSE
        s = -(-(a * 1.0 + 0.0))  # noqa: B002                             # simplifies
        t = ff.transpose(ff.transpose(s, (1, 0)), (1, 0))
        r = ff.reshape(ff.reshape(t, (3, 2)), (6,))
        y = ff.cast(r, "float32") + ff.reshape(b, (6,))
    xb = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    with ff.Session(g) as sess:
        fn = sess.compile([y], feeds=[x], passes=["fold_constants", "cse", "simplify",
                                                  "verify"])
        (out,) = fn(xb)
        ops = ops_of(fn)
    expected = (np.exp(xb) + np.arange(3) * 2 + 1).reshape(6) * 2
    assert_matches(out, expected.astype(np.float32))
    assert ops.count("exp") == 1 and ops.count("constant") == 1
    assert "neg" not in ops and "transpose" not in ops and "cast" not in ops
    assert ops.count("reshape") == 2 and "mul" not in ops
    with ff.Session(g) as sess:
        fn = sess.compile([y], feeds=[x])
        (fused_out,) = fn(xb)
    assert_matches(fused_out, out)


def test_a_broadcasting_one_is_not_simplified_away():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3,), name="x")
        y = x * ff.constant(np.ones((2, 3), np.float32))
    with ff.Session(g, backend="numpy") as sess:
        out = sess.run(y, {x: np.arange(3, dtype=np.float32)})
    assert out.shape == (2, 3)


@pytest.mark.parametrize("padding", ["SAME", "VALID", [(2, 0), (1, 1)]])
@pytest.mark.parametrize("kernel", [(3, 3), (2, 3)])
def test_conv_input_gradient_as_a_convolution_equals_the_backprop_kernel(padding, kernel,
                                                                         gl):
    rng = np.random.default_rng(4)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 7, 6, 4), name="x")
        w = ff.placeholder(kernel + (4, 8), name="w")
        y = ff.conv2d(x, w, padding=padding)
        (dx,) = ff.gradients(ff.sum(y * ff.constant(rng.standard_normal(y.shape).astype(
            np.float32))), [x])
    feeds = {x: rng.standard_normal((2, 7, 6, 4)).astype(np.float32),
             w: rng.standard_normal(kernel + (4, 8)).astype(np.float32)}
    without = [p for p in DEFAULT_PIPELINE if p != "conv_backprop_as_conv"]
    with ff.Session(g) as sess, ff.Session(g, passes=without) as plain:
        fn = sess.compile([dx], feeds=[x, w])
        (got,) = fn(*feeds.values())
        (want,) = plain.run([dx], feeds)
        rewritable = padding in ("SAME", "VALID") or kernel[0] > 2
        assert ("conv2d_backprop_input" not in ops_of(fn)) == rewritable
    with ff.Session(g, backend="numpy", passes=[]) as ref:
        (reference,) = ref.run([dx], feeds)
    assert_matches(got, want, rtol=1e-4, atol=1e-4)
    assert_matches(got, reference, rtol=1e-4, atol=1e-4)
