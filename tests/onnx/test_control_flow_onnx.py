"""ONNX's Loop, If and Scan (frontend/onnx/control_flow.py: fragflow's while_loop,
cond and scan) and RNN / GRU / LSTM whose sequence length is known only at feed time
(one scan per direction, frontend/onnx/recurrent.py), against onnxruntime. Models are
built with onnx.helper, with sub-graphs that read outer-scope values and
initializers. Run on the numpy executor; one case also on GL where it runs control
flow."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
pytest.importorskip("onnxruntime", reason="onnxruntime (the test extra) is not installed")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import fragflow as ff  # noqa: E402
from tests.onnx.helpers import assert_close, ort_run  # noqa: E402

FLOAT, INT64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
rng = np.random.default_rng(25)


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def model(nodes, inputs, outputs, initializers=(), opset=17):
    graph = helper.make_graph(nodes, "cf", inputs, outputs, list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(
        np.asarray(value), name))


def both(m, feeds, input_shapes=None, backend="numpy", rtol=1e-5):
    """fragflow's outputs (the imported graph as built, and after the default
    pipeline) against onnxruntime's."""
    imported = ff.onnx.load(m, input_shapes=input_shapes)
    want = ort_run(m, feeds)
    for passes in ([], None):
        sess = ff.Session(imported.graph, backend=backend, passes=passes)
        got = sess.run(imported.outputs, imported.feed_dict(
            {k: v.astype(np.int32) if v.dtype == np.int64 else v for k, v in feeds.items()}))
        for a, b in zip(got, want):
            assert_close(a, b, rtol)
    return imported


# -- If -------------------------------------------------------------------------------------
def _if_model():
    """y = If(sum(x) > 0): x @ W + 1 (W an initializer, x from the outer scope) else
    x * -2."""
    then_g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), const("one", np.float32(1.0)),
         helper.make_node("Add", ["xw", "one"], ["t_out"])], "then", [],
        [vi("t_out", FLOAT, [2, 3])])
    else_g = helper.make_graph(
        [const("m2", np.float32(-2.0)), helper.make_node("Mul", ["x", "m2"], ["e_out"])],
        "else", [], [vi("e_out", FLOAT, [2, 3])])
    W = numpy_helper.from_array(np.eye(3, dtype=np.float32) * 3.0, "W")
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             const("zero", np.float32(0.0)),
             helper.make_node("Greater", ["s", "zero"], ["p"]),
             helper.make_node("If", ["p"], ["y"], then_branch=then_g, else_branch=else_g)]
    return model(nodes, [vi("x", FLOAT, [2, 3])], [vi("y", FLOAT, [2, 3])], [W])


def test_if_takes_the_branch_of_the_fed_predicate_and_reads_outer_values():
    m = _if_model()
    for x in (np.abs(rng.normal(size=(2, 3))), -np.abs(rng.normal(size=(2, 3)))):
        imported = both(m, {"x": x.astype(np.float32)})
    assert [n.op for n in imported.graph.nodes].count("cond") == 1
    assert list(imported.variables) == ["W"]          # the initializer: a Variable, outside


def test_if_with_a_predicate_known_at_import_imports_one_branch():
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["a"])], "then", [],
                               [vi("a", FLOAT, [3])])
    else_g = helper.make_graph([helper.make_node("Abs", ["x"], ["b"])], "else", [],
                               [vi("b", FLOAT, [3])])
    m = model([const("p", np.array(False)),
               helper.make_node("If", ["p"], ["y"], then_branch=then_g, else_branch=else_g)],
              [vi("x", FLOAT, [3])], [vi("y", FLOAT, [3])])
    imported = both(m, {"x": np.array([-1.0, 2.0, -3.0], np.float32)})
    assert "cond" not in [n.op for n in imported.graph.nodes]


# -- Loop -----------------------------------------------------------------------------------
def _doubling_loop():
    """v doubles while sum(v) < limit, at most M times (both fed): a data-dependent
    trip count."""
    body = helper.make_graph(
        [const("two", np.float32(2.0)), helper.make_node("Mul", ["v_in", "two"], ["v_out"]),
         helper.make_node("ReduceSum", ["v_out"], ["s"], keepdims=0),
         helper.make_node("Less", ["s", "limit"], ["c_out"])],
        "body", [vi("i", INT64, []), vi("c_in", BOOL, []), vi("v_in", FLOAT, [3])],
        [vi("c_out", BOOL, []), vi("v_out", FLOAT, [3])])
    nodes = [helper.make_node("Loop", ["M", "c0", "v0"], ["v"], body=body)]
    return model(nodes, [vi("M", INT64, []), vi("c0", BOOL, []), vi("v0", FLOAT, [3]),
                         vi("limit", FLOAT, [])], [vi("v", FLOAT, [3])])


@pytest.mark.parametrize("M,limit", [(10, 100.0), (3, 100.0), (10, 0.5), (0, 100.0)],
                         ids=["cond-stops", "M-stops", "one-step", "zero-steps"])
def test_loop_with_a_data_dependent_stop_equals_onnxruntime(M, limit):
    imported = both(_doubling_loop(), {"M": np.array(M, np.int64), "c0": np.array(True),
                                       "v0": np.array([0.5, 1.0, 1.5], np.float32),
                                       "limit": np.array(limit, np.float32)})
    assert "while_loop" in [n.op for n in imported.graph.nodes]


def test_loop_with_scan_outputs_and_a_static_trip_count_is_a_scan():
    """y += x[i] * W (the iteration number used as an index), the running values
    stacked: M = 4 known at import."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Gather", ["x", "i"], ["row"], axis=0),
         helper.make_node("Mul", ["row", "W"], ["rw"]),
         helper.make_node("Add", ["y_in", "rw"], ["y_out"]),
         helper.make_node("Cast", ["i"], ["fi"], to=FLOAT),
         helper.make_node("Mul", ["y_out", "fi"], ["scan_out"])],
        "body", [vi("i", INT64, []), vi("c_in", BOOL, []), vi("y_in", FLOAT, [3])],
        [vi("c_out", BOOL, []), vi("y_out", FLOAT, [3]), vi("scan_out", FLOAT, [3])])
    W = numpy_helper.from_array(np.array([1.0, -2.0, 0.5], np.float32), "W")
    nodes = [const("M", np.int64(4)), const("c", np.array(True)),
             helper.make_node("Loop", ["M", "c", "y0"], ["y", "ys"], body=body)]
    m = model(nodes, [vi("y0", FLOAT, [3]), vi("x", FLOAT, [4, 3])],
              [vi("y", FLOAT, [3]), vi("ys", FLOAT, [4, 3])], [W])
    imported = both(m, {"y0": rng.normal(size=3).astype(np.float32),
                        "x": rng.normal(size=(4, 3)).astype(np.float32)})
    assert "scan" in [n.op for n in imported.graph.nodes]
    # gradients flow through the imported loop to the initializer
    g = imported.graph
    with g.as_default():
        grad = ff.gradients(ff.reduce_sum(imported.outputs[1]), [imported.variables["W"]])[0]
    assert grad.shape == (3,)


def test_loop_with_scan_outputs_and_a_computed_stop_is_refused_clearly():
    body = helper.make_graph(
        [helper.make_node("ReduceSum", ["y_in"], ["s"], keepdims=0),
         const("z", np.float32(0.0)), helper.make_node("Greater", ["s", "z"], ["c_out"]),
         helper.make_node("Identity", ["y_in"], ["y_out"]),
         helper.make_node("Identity", ["y_in"], ["scan_out"])],
        "body", [vi("i", INT64, []), vi("c_in", BOOL, []), vi("y_in", FLOAT, [3])],
        [vi("c_out", BOOL, []), vi("y_out", FLOAT, [3]), vi("scan_out", FLOAT, [3])])
    m = model([const("M", np.int64(4)), const("c", np.array(True)),
               helper.make_node("Loop", ["M", "c", "y0"], ["y", "ys"], body=body)],
              [vi("y0", FLOAT, [3])], [vi("y", FLOAT, [3]), vi("ys", FLOAT, [None, 3])])
    with pytest.raises(ff.onnx.OnnxImportError, match=r"Loop .*scan outputs and may stop "
                                                      r"early"):
        ff.onnx.load(m)


def test_a_loop_inside_a_loop_body():
    """Nested: the inner loop adds x three times per outer step."""
    inner = helper.make_graph(
        [helper.make_node("Identity", ["ci"], ["co"]),
         helper.make_node("Add", ["a_in", "x"], ["a_out"])],
        "inner", [vi("j", INT64, []), vi("ci", BOOL, []), vi("a_in", FLOAT, [2])],
        [vi("co", BOOL, []), vi("a_out", FLOAT, [2])])
    outer = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), const("three", np.int64(3)),
         helper.make_node("Loop", ["three", "", "v_in"], ["v_added"], body=inner),
         const("half", np.float32(0.5)),
         helper.make_node("Mul", ["v_added", "half"], ["v_out"])],
        "outer", [vi("i", INT64, []), vi("c_in", BOOL, []), vi("v_in", FLOAT, [2])],
        [vi("c_out", BOOL, []), vi("v_out", FLOAT, [2])])
    m = model([helper.make_node("Loop", ["M", "", "v0"], ["v"], body=outer)],
              [vi("M", INT64, []), vi("v0", FLOAT, [2]), vi("x", FLOAT, [2])],
              [vi("v", FLOAT, [2])])
    both(m, {"M": np.array(5, np.int64), "v0": np.array([1.0, -1.0], np.float32),
             "x": np.array([0.25, 2.0], np.float32)})


# -- Scan -----------------------------------------------------------------------------------
def _scan_model(in_axis=0, in_dir=0, out_axis=0, out_dir=0):
    """Two states (a running sum and a running max) over the rows of x along in_axis;
    the stacked output is sum * scale (scale read from the outer scope)."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "row"], ["s_out"]),
         helper.make_node("Max", ["m_in", "row"], ["m_out"]),
         helper.make_node("Mul", ["s_out", "scale"], ["y"])],
        "body", [vi("s_in", FLOAT, [3]), vi("m_in", FLOAT, [3]), vi("row", FLOAT, [3])],
        [vi("s_out", FLOAT, [3]), vi("m_out", FLOAT, [3]), vi("y", FLOAT, [3])])
    x_shape = [5, 3] if in_axis == 0 else [3, 5]
    y_shape = [5, 3] if out_axis == 0 else [3, 5]
    nodes = [helper.make_node("Scan", ["s0", "m0", "x"], ["s", "mx", "ys"], body=body,
                              num_scan_inputs=1, scan_input_axes=[in_axis],
                              scan_input_directions=[in_dir], scan_output_axes=[out_axis],
                              scan_output_directions=[out_dir])]
    return model(nodes, [vi("s0", FLOAT, [3]), vi("m0", FLOAT, [3]), vi("x", FLOAT, x_shape),
                         vi("scale", FLOAT, [])],
                 [vi("s", FLOAT, [3]), vi("mx", FLOAT, [3]), vi("ys", FLOAT, y_shape)])


@pytest.mark.parametrize("in_axis,in_dir,out_axis,out_dir",
                         [(0, 0, 0, 0), (1, 0, 0, 0), (0, 1, 0, 0), (0, 0, 1, 1), (1, 1, 1, 0)])
def test_scan_axes_and_directions_equal_onnxruntime(in_axis, in_dir, out_axis, out_dir):
    x = rng.normal(size=(5, 3) if in_axis == 0 else (3, 5)).astype(np.float32)
    both(_scan_model(in_axis, in_dir, out_axis, out_dir),
         {"s0": np.zeros(3, np.float32), "m0": np.full(3, -10.0, np.float32), "x": x,
          "scale": np.array(1.5, np.float32)})


def _scan8_model(lens, directions=(0, 1)):
    """Opset 8's Scan: batch axis 0, sequence axis 1, a running sum over x read forward
    and x read backward (the same input twice: a bidirectional scan); lens: None (no
    sequence_lens), a list (a Constant) or "fed" (a graph input)."""
    body = helper.make_graph([helper.make_node("Add", ["a", "f"], ["a2"]),
                              helper.make_node("Mul", ["a2", "r"], ["y"])], "body",
                             [vi("a", FLOAT, [2]), vi("f", FLOAT, [2]), vi("r", FLOAT, [2])],
                             [vi("a2", FLOAT, [2]), vi("y", FLOAT, [2])])
    pre = [] if lens is None or lens == "fed" else [const("lens", np.array(lens, np.int64))]
    m = model(pre + [helper.make_node("Scan", ["" if lens is None else "lens", "s0", "x", "x"],
                                      ["s", "ys"], body=body, num_scan_inputs=2,
                                      directions=list(directions))],
              [vi("s0", FLOAT, [3, 2]), vi("x", FLOAT, [3, 4, 2])] +
              ([vi("lens", INT64, [3])] if lens == "fed" else []),
              [vi("s", FLOAT, [3, 2]), vi("ys", FLOAT, [3, 4, 2])], opset=8)
    return m


def _scan8_loop(s0, x, lens, directions):
    """Opset 8's semantics spelled out: row b runs lens[b] steps; a reversed input
    reads its row's valid steps from the last; outputs past the length are 0."""
    s, ys = s0.astype(np.float64).copy(), np.zeros(x.shape)
    for b in range(x.shape[0]):
        n = lens[b]
        for t in range(n):
            f = x[b, n - 1 - t] if directions[0] else x[b, t]
            r = x[b, n - 1 - t] if directions[1] else x[b, t]
            s[b] = s[b] + f
            ys[b, t] = s[b] * r
    return s, ys


@pytest.mark.parametrize("directions", [(0, 1), (1, 0), (0, 0)])
def test_opset_8_scan_with_a_batch_and_static_sequence_lens(directions):
    """Lengths known at import (a Constant here; a fed one bound by the ONNX backend),
    shorter than the sequence axis and different per row: each row's inputs are cut to
    its length. Against the loop (onnxruntime's opset-8 Scan is not relied on)."""
    s0 = rng.normal(size=(3, 2)).astype(np.float32)
    x = rng.normal(size=(3, 4, 2)).astype(np.float32)
    for lens in ([4, 4, 4], [3, 1, 4]):
        imported = ff.onnx.load(_scan8_model(lens, directions))
        want_s, want_ys = _scan8_loop(s0, x, lens, directions)
        got = ff.Session(imported.graph, backend="numpy", passes=[]).run(
            imported.outputs, imported.feed_dict({"s0": s0, "x": x}))
        assert_close(got[0], want_s.astype(np.float32), 1e-5)
        assert_close(got[1], want_ys.astype(np.float32), 1e-5)
        assert [n.op for n in imported.graph.nodes].count("scan") == 3   # one per row


def test_opset_8_scan_without_lengths_equals_onnxruntime():
    s0 = rng.normal(size=(3, 2)).astype(np.float32)
    x = rng.normal(size=(3, 4, 2)).astype(np.float32)
    m = _scan8_model(None)
    imported = both(m, {"s0": s0, "x": x})
    want_s, want_ys = _scan8_loop(s0, x, [4, 4, 4], (0, 1))
    got = ff.Session(imported.graph, backend="numpy").run(
        imported.outputs, imported.feed_dict({"s0": s0, "x": x}))
    assert_close(got[0], want_s.astype(np.float32), 1e-5)
    assert_close(got[1], want_ys.astype(np.float32), 1e-5)


def test_opset_8_scan_with_fed_sequence_lens_masks_the_steps_past_them():
    s0 = rng.normal(size=(3, 2)).astype(np.float32)
    x = rng.normal(size=(3, 4, 2)).astype(np.float32)
    imported = ff.onnx.load(_scan8_model("fed", (0, 0)))
    sess = ff.Session(imported.graph, backend="numpy")
    for lens in ([4, 2, 1], [1, 4, 3]):
        got = sess.run(imported.outputs, imported.feed_dict(
            {"s0": s0, "x": x, "lens": np.array(lens, np.int32)}))
        want_s, want_ys = _scan8_loop(s0, x, lens, (0, 0))
        assert_close(got[0], want_s.astype(np.float32), 1e-5)
        assert_close(got[1], want_ys.astype(np.float32), 1e-5)


def test_opset_8_scan_fed_lens_with_a_reversed_input_is_refused_clearly():
    with pytest.raises(ff.onnx.OnnxImportError, match="fed sequence_lens with a reversed"):
        ff.onnx.load(_scan8_model("fed", (0, 1)))


# -- Slice at starts the graph computes: dynamic_slice ------------------------------------
def _slice_loop_model(offset, width):
    """A Loop of 4 steps whose body slices a constant row at [i + offset, i + offset +
    width) (loop11's pattern, wider) and adds the slice up; the slices stacked."""
    table = np.arange(2 * 9, dtype=np.float32).reshape(2, 9) * 0.5 - 3
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]), const("table", table),
         const("off", np.int64(offset)), const("w", np.int64(offset + width)),
         helper.make_node("Add", ["i", "off"], ["b"]),
         helper.make_node("Add", ["i", "w"], ["e"]),
         helper.make_node("Unsqueeze", ["b"], ["starts"], axes=[0]),
         helper.make_node("Unsqueeze", ["e"], ["ends"], axes=[0]),
         const("axis", np.array([1], np.int64)),
         helper.make_node("Slice", ["table", "starts", "ends", "axis"], ["piece"]),
         helper.make_node("Add", ["y_in", "piece"], ["y_out"]),
         helper.make_node("Identity", ["y_out"], ["scan_out"])],
        "body", [vi("i", INT64, []), vi("c_in", BOOL, []), vi("y_in", FLOAT, [2, width])],
        [vi("c_out", BOOL, []), vi("y_out", FLOAT, [2, width]),
         vi("scan_out", FLOAT, [2, width])])
    nodes = [const("M", np.int64(4)), const("c", np.array(True)),
             helper.make_node("Loop", ["M", "c", "y0"], ["y", "ys"], body=body)]
    return model(nodes, [vi("y0", FLOAT, [2, width])],
                 [vi("y", FLOAT, [2, width]), vi("ys", FLOAT, [4, 2, width])], opset=11)


@pytest.mark.parametrize("offset,width", [(0, 1), (2, 3), (-7, 2)])
def test_slice_at_the_iteration_number_is_a_dynamic_slice(offset, width):
    """Starts from the iteration number, ends = starts + width: the size is known at
    import. offset -7: negative starts count from the end (9 - 7 + i)."""
    m = _slice_loop_model(offset, width)
    imported = both(m, {"y0": rng.normal(size=(2, width)).astype(np.float32)})
    from fragflow.ir.printer import format_graph
    text = format_graph(imported.graph)          # sub-graphs printed nested
    assert "scan" in text and "dynamic_slice" in text, text


def test_slice_at_a_fed_start_with_a_static_width_equals_onnxruntime():
    """Top level: starts a graph input s, ends = s + 3 (two axes listed, the other
    static): a dynamic_slice, no rebinding."""
    nodes = [const("three", np.array([3], np.int64)), const("z", np.array([1], np.int64)),
             const("zz", np.array([3], np.int64)),
             helper.make_node("Add", ["s", "three"], ["e1"]),
             helper.make_node("Concat", ["z", "s"], ["starts"], axis=0),
             helper.make_node("Concat", ["zz", "e1"], ["ends"], axis=0),
             helper.make_node("Slice", ["x", "starts", "ends"], ["y"])]
    m = model(nodes, [vi("x", FLOAT, [4, 7]), vi("s", INT64, [1])], [vi("y", FLOAT, [2, 3])])
    x = rng.normal(size=(4, 7)).astype(np.float32)
    for start in (0, 2, 4, -5):
        imported = both(m, {"x": x, "s": np.array([start], np.int64)})
    assert "dynamic_slice" in [n.op for n in imported.graph.nodes]


def test_slice_whose_size_depends_on_the_data_is_refused_clearly():
    m = model([helper.make_node("Slice", ["x", "b", "e"], ["y"])],
              [vi("x", FLOAT, [5]), vi("b", INT64, [1]), vi("e", INT64, [1])],
              [vi("y", FLOAT, [None])])
    with pytest.raises(ff.onnx.OnnxImportError, match=r"ends - starts, known at import"):
        ff.onnx.load(m)


def test_an_imported_dynamic_slice_loop_on_gl_equals_numpy(gl):
    imported = ff.onnx.load(_slice_loop_model(1, 2))
    feed = imported.feed_dict({"y0": rng.normal(size=(2, 2)).astype(np.float32)})
    want = ff.Session(imported.graph, backend="numpy", passes=[]).run(imported.outputs, feed)
    got = ff.Session(imported.graph).run(imported.outputs, feed)
    for a, b in zip(got, want):
        assert_close(a, b, 1e-6)


# -- RNN / GRU / LSTM over a sequence length known at feed time ----------------------------
F_, H_ = 4, 5


def _recurrent_model(kind, direction, with_lens, **attrs):
    g = {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
    dirs = 2 if direction == "bidirectional" else 1
    inits = [numpy_helper.from_array(rng.normal(0, 0.5, (dirs, g * H_, F_)).astype(
                 np.float32), "W"),
             numpy_helper.from_array(rng.normal(0, 0.5, (dirs, g * H_, H_)).astype(
                 np.float32), "R"),
             numpy_helper.from_array(rng.normal(0, 0.5, (dirs, 2 * g * H_)).astype(
                 np.float32), "B")]
    names = ["x", "W", "R", "B", "lens" if with_lens else ""]
    outs = ["y", "yh"] + (["yc"] if kind == "LSTM" else [])
    node = helper.make_node(kind, names, outs, hidden_size=H_, direction=direction, **attrs)
    inputs = [vi("x", FLOAT, ["seq", "batch", F_])]
    if with_lens:
        inputs.append(vi("lens", TensorProto.INT32, ["batch"]))
    outputs = [vi("y", FLOAT, ["seq", dirs, "batch", H_]), vi("yh", FLOAT, [dirs, "batch", H_])]
    if kind == "LSTM":
        outputs.append(vi("yc", FLOAT, [dirs, "batch", H_]))
    return model([node], inputs, outputs, inits)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_recurrent_ops_over_a_fed_sequence_length_equal_onnxruntime(kind, direction):
    attrs = {"linear_before_reset": 1} if kind == "GRU" and direction == "reverse" else {}
    m = _recurrent_model(kind, direction, with_lens=False, **attrs)
    imported = ff.onnx.load(m)
    assert imported.inputs[0].shape == (None, None, F_)
    assert "scan" in [n.op for n in imported.graph.nodes]
    sess = ff.Session(imported.graph, backend="numpy")
    for seq, batch in ((1, 2), (6, 3)):                     # one graph, two lengths
        x = rng.normal(size=(seq, batch, F_)).astype(np.float32)
        got = sess.run(imported.outputs, {imported.inputs[0]: x})
        for a, b in zip(got, ort_run(m, {"x": x})):
            assert_close(a, b, 1e-5)


@pytest.mark.parametrize("kind", ["GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse"])
def test_fed_sequence_lens_equal_onnxruntime(kind, direction):
    m = _recurrent_model(kind, direction, with_lens=True)
    imported = ff.onnx.load(m)
    sess = ff.Session(imported.graph, backend="numpy")
    x = rng.normal(size=(5, 4, F_)).astype(np.float32)
    lens = np.array([5, 2, 1, 3], np.int32)
    got = sess.run(imported.outputs, imported.feed_dict({"x": x, "lens": lens}))
    for a, b in zip(got, ort_run(m, {"x": x, "lens": lens})):
        assert_close(a, b, 1e-5)


def _gl_equals_numpy(imported, feed):
    """The imported graph on GL against the numpy executor running it as built."""
    want = ff.Session(imported.graph, backend="numpy", passes=[]).run(imported.outputs, feed)
    got = ff.Session(imported.graph).run(imported.outputs, feed)
    for a, b in zip(got, want):
        assert_close(a, b, 1e-5)


def test_an_imported_if_on_gl_equals_numpy(gl):
    imported = ff.onnx.load(_if_model())
    x = rng.normal(size=(2, 3)).astype(np.float32)
    _gl_equals_numpy(imported, imported.feed_dict({"x": x}))


def test_sub_graphs_nested_too_deep_are_refused():
    """An untrusted file's Ifs nested 10 deep: refused at MAX_DEPTH (8), not a deep
    recursion."""
    inner = helper.make_graph([helper.make_node("Neg", ["x"], ["o0"])], "b0", [],
                              [vi("o0", FLOAT, [2])])
    for k in range(1, 11):
        inner = helper.make_graph(
            [helper.make_node("If", ["p"], [f"o{k}"], then_branch=inner, else_branch=inner)],
            f"b{k}", [], [vi(f"o{k}", FLOAT, [2])])
    m = model(list(inner.node), [vi("p", BOOL, []), vi("x", FLOAT, [2])],
              [vi("o10", FLOAT, [2])])
    with pytest.raises(ff.onnx.OnnxImportError, match="nest deeper than 8 levels"):
        ff.onnx.load(m)


def test_an_imported_lstm_over_a_fed_length_on_gl_equals_numpy(gl):
    m = _recurrent_model("LSTM", "bidirectional", with_lens=False)
    imported = ff.onnx.load(m)
    x = rng.normal(size=(7, 2, F_)).astype(np.float32)
    _gl_equals_numpy(imported, {imported.inputs[0]: x})
