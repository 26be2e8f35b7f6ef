"""Deep graphs: ff.gradients, every pass and the dumps walk chains of any depth without
Python's recursion limit (ff.gradients used to fail past ~450 ops).

The chain alternates sin and a scale, so d(out)/dx is the product of cos(h_k) * scale
over the chain: computed here in float64 with numpy, independently of fragflow."""
import sys

import numpy as np
import pytest

import fragflow as ff

SCALE = 1.001


def _chain(depth: int):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5,), "float32", name="x")
        h = x
        for _ in range(depth // 2):
            h = ff.sin(h) * SCALE
        dx, = ff.gradients(h, [x])
    return g, x, h, dx


def _analytic(x: np.ndarray, depth: int):
    """(chain output, its derivative) in float64."""
    h, d = x.astype(np.float64), np.ones_like(x, np.float64)
    for _ in range(depth // 2):
        d *= np.cos(h) * SCALE
        h = np.sin(h) * SCALE
    return h, d


X = np.array([1.0, -0.5, 2.0, 0.0, -3.0], np.float32)


@pytest.fixture(scope="module")
def chain_3000():
    return _chain(3_000)


def test_gradients_of_a_10000_op_chain_match_the_analytic_value():
    g, x, h, dx = _chain(10_000)
    assert sum(n.op in ("sin", "mul") for n in g.nodes) >= 10_000
    # the reference executor on the graph as built (passes=(): prune only); the passes
    # are checked on a shorter chain below, to keep this test a few seconds
    out, grad = ff.Session(g, backend="numpy", passes=()).run([h, dx], {x: X})
    want_out, want_grad = _analytic(X, 10_000)
    np.testing.assert_allclose(out, want_out, rtol=1e-3, atol=1e-6)
    # float32 over 10,000 steps: rounding adds up to ~1e-4 relative
    np.testing.assert_allclose(grad, want_grad, rtol=2e-3, atol=1e-12)


def test_every_pass_handles_a_gradient_graph_deeper_than_the_recursion_limit(chain_3000):
    g, x, h, dx = chain_3000
    assert 3_000 > sys.getrecursionlimit()
    # the whole pipeline, verified after each pass (the suite sets FRAGFLOW_VERIFY=1)
    fn = ff.Session(g, backend="numpy").compile([h, dx], feeds=[x])
    out, grad = fn(X)
    want_out, want_grad = _analytic(X, 3_000)
    np.testing.assert_allclose(out, want_out, rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-3, atol=1e-9)
    assert any(n.op == "fused_elementwise" for n in fn.graph.nodes)


def test_a_deep_gradient_graph_dumps_and_reloads(chain_3000):
    g, x, h, dx = chain_3000
    text = ff.dump(g)
    assert text.count("\n") > 6_000
    again = ff.load_graph(ff.dump(g, format="json"))
    assert ff.dump(again) == text
    assert "digraph" in ff.dump(g, format="dot")


def test_second_order_gradients_of_a_deep_chain():
    g, x, h, dx = _chain(1_200)
    with g.as_default():
        ddx, = ff.gradients(dx, [x])
    got = ff.Session(g, backend="numpy", passes=()).run(ddx, {x: X})
    # d/dx of dh/dx against central differences of the analytic first derivative
    step = 1e-4
    want = (_analytic(X.astype(np.float64) + step, 1_200)[1]
            - _analytic(X.astype(np.float64) - step, 1_200)[1]) / (2 * step)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-5)


def test_gradients_of_a_600_op_chain_on_gl(gl):
    g, x, h, dx = _chain(600)
    sess = ff.Session(g)
    out, grad = sess.run([h, dx], {x: X})
    sess.close()
    want_out, want_grad = _analytic(X, 600)
    np.testing.assert_allclose(out, want_out, rtol=1e-3, atol=1e-6)
    np.testing.assert_allclose(grad, want_grad, rtol=1e-3, atol=1e-7)
