"""The numpy pipeline runs its passes inside loop bodies and branches (issue 25):
folding, CSE, simplify and fusion there too, nested loops included, with every
parameter kept and the user's sub-graphs unchanged; results equal the graph as built
(Session(backend="numpy", passes=[]))."""
import numpy as np
import pytest

import fragflow as tf
from fragflow.ir.ops.control import params
from fragflow.passes import PassManager, prune
from fragflow.runtime import driver
from tests.control_flow.helpers import both

X = np.array([1.0, -2.0, 0.5, 0.0, 3.25], np.float32)


def _loop():
    x = tf.placeholder(tf.float32, [5], name="x")

    def body(i, v, unused):
        # exp(1 * 2): foldable; sin(v) twice: one after CSE; * 1.0: simplified away
        return i + 1, (tf.sin(v) * 2.0 + tf.sin(v)) * 1.0 + tf.exp(tf.constant(1.0) * 2.0), \
            unused
    return x, tf.while_loop(lambda i, v, u: i < 3, body, (0, x, x), name="loop")[1]


def _compiled(build):
    g = tf.Graph("cf")
    with g.as_default():
        x, y = build()
    before = tf.dump(g)
    graph = driver.optimize(g, [y.value], {x.value: x.value.type}).graph
    assert tf.dump(g) == before          # the user's sub-graphs are not touched
    return g, graph


def _sub(graph, op, key):
    node = next(n for n in graph.nodes if n.op == op)
    return node.attrs[key]


def test_a_bodys_constant_expression_is_folded_and_its_repeats_merged():
    g, graph = _compiled(_loop)
    body_built = tf.dump(_sub(g, "while_loop", "body"))
    body = tf.dump(_sub(graph, "while_loop", "body"))
    assert "exp(" in body_built and "exp(" not in body
    assert "constant 7.3890557 : f32[]" in body             # exp(2) folded
    assert body.count("sin") == 1                           # CSE then fusion: one sin
    assert "fused_elementwise(" in body
    assert "s0=sin(in0)" in body and "mul(s0" in body
    # the third loop variable, which the condition does not read, is still a parameter
    assert [p.name for p in params(_sub(graph, "while_loop", "cond"))] == \
        ["loop/arg0", "loop/arg1", "loop/arg2"]


def test_results_equal_the_graph_as_built():
    g = tf.Graph("cf")
    with g.as_default():
        x, y = _loop()
    want = tf.Session(g, backend="numpy", passes=[]).run(y, {x: X})
    got = tf.Session(g, backend="numpy").run(y, {x: X})
    np.testing.assert_array_equal(got, want)
    # the formula, written out
    v = X.astype(np.float64)
    for _ in range(3):
        v = 3.0 * np.sin(v) + np.exp(2.0)
    np.testing.assert_allclose(got, v, rtol=1e-5)


def test_nested_loops_a_scan_and_a_cond_are_optimized_inside_too():
    def build():
        x = tf.placeholder(tf.float32, [5], name="x")

        def outer(i, v):
            w = tf.while_loop(lambda j, w: j < 2,
                              lambda j, w: (j + 1, w + tf.exp(tf.constant(0.5) * 2.0)),
                              (0, v))[1]
            w = tf.cond(tf.reduce_sum(w) > 0.0, lambda: w * (tf.constant(3.0) - 1.0),
                        lambda: w - tf.sqrt(tf.constant(4.0)))
            return i + 1, w
        _, v = tf.while_loop(lambda i, v: i < 2, outer, (0, x))
        s = tf.scan(lambda a, e: a + e * tf.square(tf.constant(3.0)), tf.reshape(v, [5, 1]),
                    initializer=tf.zeros([1]))
        return x, s
    g, graph = _compiled(build)
    text = tf.dump(graph)
    assert "constant 2.7182817" in text or "constant 2.718282" in text   # exp(1), inner
    assert "constant 9." in text                                        # square(3), scan
    assert "constant 2. : f32[]" in text                                # 3 - 1, sqrt(4)
    assert "exp(" not in text and "sqrt(" not in text and "square(" not in text
    g2 = tf.Graph("cf")
    with g2.as_default():
        x, s = build()
    want = tf.Session(g2, backend="numpy", passes=[]).run(s, {x: X})
    got = tf.Session(g2, backend="numpy").run(s, {x: X})
    np.testing.assert_array_equal(got, want)


def test_the_pass_report_says_what_it_did_inside_a_body():
    g = tf.Graph("cf")
    with g.as_default():
        x, y = _loop()
    compiled, _ = prune(g, [y.value], {x.value: x.value.type})
    manager = PassManager()
    manager.run(compiled)
    lines = [line for _, _, _, report in manager.log for line in report]
    assert any(line.startswith("in loop's body: folded exp 'loop/exp'") for line in lines)


def test_on_gl_the_pipeline_leaves_bodies_to_the_plans_of_their_own():
    """A GPU's pipeline (max_texture_units given) does not go inside: each body is
    optimized where runtime/control_flow.py inlines it."""
    g = tf.Graph("cf")
    with g.as_default():
        x, y = _loop()
    graph = driver.optimize(g, [y.value], {x.value: x.value.type},
                            max_texture_units=16).graph
    assert "exp(" in tf.dump(_sub(graph, "while_loop", "body"))


@pytest.mark.parametrize("shape", [[None], [5]])
def test_unknown_dims_in_a_body_and_gradients_through_it(shape):
    def build():
        x = tf.placeholder(tf.float32, shape, name="x")
        y = tf.scan(lambda a, e: a * tf.exp(tf.constant(0.0)) + tf.sin(e) * e,
                    x, initializer=tf.constant(0.0))
        return tf.gradients(tf.reduce_sum(y), x)[0]
    both(build, {"x": X})


def folded_target():
    """`fragflow dump` target: the loop above, its fetch."""
    g = tf.Graph("cf")
    with g.as_default():
        _, y = _loop()
    return y


def test_fragflow_dump_after_a_pass_shows_the_body_after_it(capsys):
    from fragflow.tools.cli import main
    capsys.readouterr()
    assert main(["dump", f"{__file__}:folded_target", "--after", "fold_constants"]) == 0
    text = capsys.readouterr().out
    body = text[text.index("graph body("):]
    assert "constant 7.3890557 : f32[]" in body and "exp(" not in body
    assert "// in loop's body: folded exp 'loop/exp' into a constant" in text
