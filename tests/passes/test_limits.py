"""Limits that must not break training: kernels reading more textures than the GPU binds
(GL_MAX_TEXTURE_IMAGE_UNITS) and user GLSL loops past llvmpipe's 65,535 iterations.

Wide nodes (add_n of a weight's 100 gradient contributions, long concats) are split
into trees of kernels within the limit, fusion stays within it, and what cannot be
split (a gpgpu_program) is refused with a clear error. Results are compared with the
numpy reference executor and with numpy itself."""
import os
import warnings

import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.program_loops import loop_iterations
from fragflow.ir.types import TensorType
from fragflow.passes import PassManager
from fragflow.runtime.driver import optimize
from fragflow.runtime.numpy_executor import NumpyPlan, NumpyVariables

RNG = np.random.default_rng(12)


def _compiled(graph, fetches, feeds: dict, units: int):
    """The graph the default pipeline makes for a GPU with `units` texture units."""
    compiled = optimize(graph, [f.value for f in fetches],
                        {x.value: TensorType(a.shape, x.dtype) for x, a in feeds.items()},
                        max_texture_units=units)
    by_name = {compiled.feed_names[x.value]: a for x, a in feeds.items()}
    return compiled.graph, by_name


def _widest(graph) -> int:
    """Most textures a kernel of graph may read: a node's inputs (the fused ops' are
    their distinct operands); a fused matmul / conv may run as a blocked kernel and a
    stitch that reads 8 render targets, then the epilogue's operands."""
    def textures(node):
        if node.op in ("fused_matmul", "fused_conv"):
            return 8 + len(node.inputs) - 2
        return len(node.inputs)
    return max(textures(n) for n in graph.nodes)


def _gl_units(gl) -> int:
    return gl.context.info()["max_texture_image_units"]


def _wide_add_n(count, shape=(3, 5)):
    g = ff.Graph()
    with g.as_default():
        xs = [ff.placeholder(shape, "float32", name=f"x{k}") for k in range(count)]
        total = ff.add_n(xs)
    feeds = {x: RNG.standard_normal(shape).astype(np.float32) for x in xs}
    return g, xs, total, feeds


# -- splitting and fusion within the limit (no GL needed) ------------------------------
@pytest.mark.parametrize("units", [4, 16])
def test_add_n_of_100_tensors_becomes_a_tree_within_the_limit(units):
    g, xs, total, feeds = _wide_add_n(100)
    compiled, by_name = _compiled(g, [total], feeds, units)
    assert _widest(compiled) <= units
    out, = NumpyPlan(compiled, NumpyVariables()).run(by_name)
    expected = np.sum([feeds[x] for x in xs], axis=0, dtype=np.float64)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)
    assert compiled.outputs[0].node.name == total.name      # the root keeps the name


def test_concat_node_of_40_pieces_becomes_a_tree_in_order():
    g = ff.Graph()
    with g.as_default():
        xs = [ff.placeholder((2, k % 3 + 1), "float32", name=f"x{k}") for k in range(40)]
        # one concat node of 40 inputs, as a loaded graph may hold (ff.concat itself
        # already builds a tree)
        wide = g.add_node("concat", [x.value for x in xs], {"axis": 1}).outputs[0]
    feeds = {x: RNG.standard_normal(x.shape).astype(np.float32) for x in xs}
    compiled, by_name = _compiled(g, [ff.Tensor(wide)], feeds, 16)
    assert _widest(compiled) <= 16
    out, = NumpyPlan(compiled, NumpyVariables()).run(by_name)
    np.testing.assert_array_equal(out, np.concatenate([feeds[x] for x in xs], axis=1))


def test_fusion_counts_distinct_textures_including_epilogue_operands():
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder((4, 6), "float32", name="a")
        w = ff.placeholder((6, 5), "float32", name="w")
        bs = [ff.placeholder((5,), "float32", name=f"b{k}") for k in range(6)]
        y = a @ w
        for b in bs:                       # an epilogue reading six more textures
            y = ff.tanh(y + b)
        zs = [ff.placeholder((4, 5), "float32", name=f"z{k}") for k in range(20)]
        for z in zs:                       # an elementwise group reading 21
            y = y * z + z
    feeds = {t: RNG.standard_normal(t.shape).astype(np.float32) for t in [a, w, *bs, *zs]}
    # a big matmul's stitch kernel reads 8 targets before the epilogue's operands
    for units in (9, 12, 16):
        compiled, by_name = _compiled(g, [y], feeds, units)
        assert _widest(compiled) <= units, units
        assert any(n.op.startswith("fused") for n in compiled.nodes)
        out, = NumpyPlan(compiled, NumpyVariables()).run(by_name)
        ref = ff.Session(g, backend="numpy", passes=()).run(y, feeds)
        np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_a_big_matmuls_epilogue_stays_within_the_limit_on_gl(gl):
    """Big enough for the blocked matmul, whose stitch kernel reads its 8 render targets
    and then the epilogue's operands."""
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder((64, 64), "float32", name="a")
        w = ff.placeholder((64, 64), "float32", name="w")
        bs = [ff.placeholder((64,), "float32", name=f"b{k}") for k in range(40)]
        y = a @ w
        for b in bs:
            y = y + b
    feeds = {t: RNG.standard_normal(t.shape).astype(np.float32) for t in [a, w, *bs]}
    expected = feeds[a].astype(np.float64) @ feeds[w] + np.sum([feeds[b] for b in bs], 0)
    sess = ff.Session(g)
    fn = sess.compile(y, feeds=list(feeds))
    out, = fn(*feeds.values())
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    assert max(len(k.inputs) for k in fn.kernels) <= _gl_units(gl)
    assert any(n.op == "fused_matmul" and len(n.inputs) > 2 for n in fn.graph.nodes)
    sess.close()


def test_fusion_reports_the_texture_limit_it_kept_to():
    g, xs, total, feeds = _wide_add_n(6)
    with g.as_default():
        y = total
        for x in xs:
            y = y * x
    report = optimize(g, [y.value], {x.value: x.value.type for x in xs},
                      max_texture_units=5).fusion_report
    assert any("more than the 5 it may bind" in line for line in report)


def test_a_custom_pipeline_for_a_gpu_still_splits_wide_nodes_unless_told_not_to():
    g, xs, total, feeds = _wide_add_n(40)
    types = {x.value: x.value.type for x in xs}
    split = optimize(g, [total.value], types, passes=["cse"], max_texture_units=16).graph
    assert _widest(split) <= 16
    kept = optimize(g, [total.value], types, passes=[], disable=["split_wide_nodes"],
                    max_texture_units=16).graph
    assert _widest(kept) == 40


def test_the_numpy_executor_with_no_passes_runs_the_graph_as_built():
    """The tests' oracle: no pass at all, not even the split a GPU needs."""
    g, xs, total, feeds = _wide_add_n(40)
    types = {x.value: x.value.type for x in xs}
    assert _widest(optimize(g, [total.value], types, passes=[]).graph) == 40
    fn = ff.Session(g, backend="numpy", passes=[]).compile(total, feeds=xs)
    fn(*feeds.values())
    assert [n.op for n in fn.graph.nodes].count("add_n") == 1


def test_the_numpy_backend_plans_with_gl_33s_16_units():
    assert PassManager().options["max_texture_units"] == 16
    g, xs, total, feeds = _wide_add_n(40)
    fn = ff.Session(g, backend="numpy").compile(total, feeds=xs)
    out, = fn(*feeds.values())
    assert _widest(fn.graph) <= 16
    np.testing.assert_allclose(out, np.sum(list(feeds.values()), axis=0), rtol=1e-5,
                               atol=1e-5)


# -- on GL -----------------------------------------------------------------------------
def test_a_weight_used_100_times_gives_its_gradient_on_gl(gl):
    """An RNN unrolled 100 steps (one input, so the steps' kernels share shaders): the
    gradient of its recurrent weight is an add_n of 100 contributions, more than any
    GPU binds textures."""
    steps, batch, hidden = 100, 4, 8
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((batch, hidden), "float32", name="x")
        w = ff.Variable(RNG.standard_normal((hidden, hidden)).astype(np.float32) * 0.3,
                        name="w")
        h = ff.zeros((batch, hidden))
        for _ in range(steps):
            h = ff.tanh(h @ w + x)
        loss = ff.reduce_mean(ff.square(h))
        dw, = ff.gradients(loss, [w])
    assert dw.op.op == "add_n" and len(dw.op.inputs) == steps
    feed = {x: RNG.standard_normal((batch, hidden)).astype(np.float32)}
    ref = ff.Session(g, backend="numpy", passes=[]).run([loss, dw], feed)
    sess = ff.Session(g)
    fn = sess.compile([loss, dw], feeds=[x])
    out = fn(feed[x])
    np.testing.assert_allclose(out[0], ref[0], rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(out[1], ref[1], rtol=1e-3, atol=1e-5)
    assert max(len(k.inputs) for k in fn.kernels) <= _gl_units(gl)
    sess.close()


@pytest.mark.parametrize("passes", [None, ()], ids=["default", "no_passes"])
def test_add_n_of_40_tensors_on_gl(gl, passes):
    g, xs, total, feeds = _wide_add_n(40, shape=(7, 9))
    with ff.Session(g, passes=passes) as sess:
        out = sess.run(total, feeds)
    expected = np.sum([feeds[x] for x in xs], axis=0, dtype=np.float64)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_concat_of_40_tensors_on_gl(gl):
    g = ff.Graph()
    with g.as_default():
        xs = [ff.placeholder((3, k % 4 + 1), "float32", name=f"x{k}") for k in range(40)]
        joined = ff.concat(xs, axis=1)
        wide = ff.Tensor(g.add_node("concat", [x.value for x in xs], {"axis": 1}).outputs[0])
    feeds = {x: RNG.standard_normal(x.shape).astype(np.float32) for x in xs}
    sess = ff.Session(g)
    out = sess.run([joined, wide], feeds)
    expected = np.concatenate([feeds[x] for x in xs], axis=1)
    np.testing.assert_array_equal(out[0], expected)
    np.testing.assert_array_equal(out[1], expected)
    sess.close()


def test_fused_elementwise_group_of_40_distinct_inputs_on_gl(gl):
    """20 where() steps read 40 distinct textures: fusion may not put them all in one
    kernel on a GPU with fewer units (llvmpipe has 32)."""
    g = ff.Graph()
    with g.as_default():
        start = ff.placeholder((6, 7), "float32", name="start")
        conds = [ff.placeholder((6, 7), "bool", name=f"c{k}") for k in range(20)]
        vals = [ff.placeholder((6, 7), "float32", name=f"v{k}") for k in range(20)]
        y = start
        for c, v in zip(conds, vals):
            y = ff.where(c, v, y)
    feeds = {start: RNG.standard_normal((6, 7)).astype(np.float32)}
    feeds.update({c: RNG.random((6, 7)) < 0.2 for c in conds})
    feeds.update({v: RNG.standard_normal((6, 7)).astype(np.float32) for v in vals})
    sess = ff.Session(g)
    fn = sess.compile(y, feeds=list(feeds))
    out, = fn(*feeds.values())
    expected = feeds[start].copy()
    for c, v in zip(conds, vals):
        expected = np.where(feeds[c], feeds[v], expected)
    np.testing.assert_array_equal(out, expected)
    units = _gl_units(gl)
    assert max(len(k.inputs) for k in fn.kernels) <= units
    fused = [n for n in fn.graph.nodes if n.op == "fused_elementwise"]
    assert fused and max(len(n.inputs) for n in fused) > 16 or units <= 16
    sess.close()


def test_a_program_reading_more_textures_than_the_gpu_binds_is_refused(gl):
    count = _gl_units(gl) + 1
    names = [f"t{k}" for k in range(count)]
    body = " + ".join(f"get{n[0].upper()}{n[1:]}AtOutCoords()" for n in names)
    wide = ff.gpgpu_program(name="wide_sum", inputs=names,
                            output=lambda *ts: (ts[0].shape, "float32"),
                            glsl=f"setOutput({body});")
    g = ff.Graph()
    with g.as_default():
        xs = [ff.placeholder((4,), "float32", name=f"x{k}") for k in range(count)]
        y = wide(*xs)
    sess = ff.Session(g)
    with pytest.raises(ff.TooManyInputsError, match=rf"wide_sum.*{count} textures.*at most "
                                                  rf"{count - 1}"):
        sess.run(y, {x: np.zeros(4, np.float32) for x in xs})
    sess.close()


# -- user GLSL loops and llvmpipe's 65,535 iterations ------------------------------------
COUNT = """
    float s = 0.0;
    for (int k = 0; k < n; ++k) { s += 1.0; }
    setOutput(s);
"""


def _counter(glsl=COUNT, uniforms=None):
    return ff.gpgpu_program(name="count", inputs=["x"], output=lambda x: (x.shape, x.dtype),
                            uniforms=uniforms if uniforms is not None else {"n": "int"},
                            glsl=glsl, reference=lambda x, **u: np.zeros_like(x))


def test_loop_iterations_reads_for_headers():
    assert loop_iterations("for (int i = 0; i < 10; i++) {}", {}) == 10
    assert loop_iterations("for (int i = 0; i <= 10; i += 2) s += 1.0;", {}) == 6
    assert loop_iterations("for (int i = n - 1; i >= 0; --i) {}", {"n": 7}) == 7
    nested = "for (int i = 0; i < 100; i++) { for (int j = 0; j < xShape.y; j++) {} }"
    assert loop_iterations(nested, {"xShape": (3, 50)}) == 100 * (1 + 50)
    consts = "const int N = 300;\nfor (int i = 0; i < N / 2; i++) {}\n// for (;;)"
    assert loop_iterations(consts, {}) == 150
    # unknown bounds count as nothing: never a warning for a program that may be fine
    assert loop_iterations("for (int i = 0; i < xSize; i++) {} while (true) {}",
                           {"xSize": None}) == 0
    assert loop_iterations("for (int i = 0; i < 10; i--) {}", {}) == 0
    # if / else blocks end a loop's statement: the loop after them is not nested
    branches = ("for (int k = 0; k < 3; k++) if (k > 1) { a; } else { for (int j = 0; "
                "j < 10; j++) {} } for (int q = 0; q < 5; q++) {}")
    assert loop_iterations(branches, {}) == 3 * (1 + 10) + 5
    # thousands deep, braced or not: read in linear time, no recursion
    for deep in ["for (int i = 0; i < 2; i++) {" * 3000 + "}" * 3000,
                 "for (int i = 0; i < 2; i++) " * 3000 + "s += 1.0;"]:
        assert loop_iterations(deep, {}) > 2 ** 60


@pytest.mark.parametrize("glsl, uniforms, values", [
    (COUNT, {"n": "int"}, {"n": 70000}),                                   # a uniform
    (COUNT.replace("k < n", "k < 20000"), {}, {}),                         # a literal
    (COUNT.replace("k < n", "k < xSize * 2"), {}, {}),                     # a shape
    ("for (int i = 0; i < 200; i++) for (int j = 0; j < 200; j++) {}\nsetOutput(0.0);",
     {}, {}),                                                              # nested
], ids=["uniform", "literal", "shape", "nested"])
def test_a_program_whose_loops_pass_the_limit_warns_at_the_call(glsl, uniforms, values):
    prog = _counter(glsl, uniforms)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((10000,), "float32", name="x")
        with pytest.warns(ff.LoopLimitWarning,
                          match=r"'count'.*65,535 iterations") as record:
            prog(x, **values)
    # it points at the user's call
    assert os.path.abspath(record[0].filename) == os.path.abspath(__file__)


def test_a_program_within_the_limit_does_not_warn():
    prog = _counter()
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None,), "float32", name="x")
        with warnings.catch_warnings():
            warnings.simplefilter("error", ff.LoopLimitWarning)
            prog(x, n=16000)
            _counter(COUNT.replace("k < n", "k < xSize"), {})(x)   # size unknown yet


def test_a_bound_known_only_at_compile_time_warns_when_compiled(gl):
    prog = _counter(COUNT.replace("k < n", "k < xSize"), {})
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None,), "float32", name="x")
        y = prog(x)
    sess = ff.Session(g)
    with pytest.warns(ff.LoopLimitWarning, match=r"'count'.*20,000 iterations per element"):
        sess.run(y, {x: np.zeros(20000, np.float32)})
    sess.close()


def test_loops_within_the_documented_limit_are_exact_on_gl(gl):
    prog = _counter()
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((9,), "float32", name="x")
        y = prog(x, n=16000)
    sess = ff.Session(g)
    np.testing.assert_array_equal(sess.run(y, {x: np.zeros(9, np.float32)}),
                                  np.full(9, 16000, np.float32))
    sess.close()
