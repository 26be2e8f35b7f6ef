"""Property-based tests: random elementwise / broadcasting / reduction graphs compute
the same with every pass on, with the passes off, and on the numpy executor; and every
pass is idempotent."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import fragflow as ff
from fragflow.passes import DEFAULT_PIPELINE, PASSES, prune
from tests.reference import assert_matches

UNARY = ["neg", "abs", "sin", "cos", "tanh", "sigmoid", "relu", "exp"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]
REDUCE = ["sum", "mean", "max", "min"]
SHAPES = [(3, 5), (5,), (3, 1), (1, 5), ()]


@st.composite
def graphs(draw):
    """(input shapes, steps): each step (kind, op, operand indices, axis)."""
    n_inputs = draw(st.integers(1, 3))
    shapes = [(3, 5)] + [draw(st.sampled_from(SHAPES)) for _ in range(n_inputs - 1)]
    steps = []
    for _ in range(draw(st.integers(2, 9))):
        available = n_inputs + len(steps)
        kind = draw(st.sampled_from(["unary", "binary", "binary", "reduce"]))
        a = draw(st.integers(0, available - 1))
        b = draw(st.integers(0, available - 1))
        op = draw(st.sampled_from({"unary": UNARY, "binary": BINARY, "reduce": REDUCE}[kind]))
        steps.append((kind, op, a, b, draw(st.sampled_from([0, 1, -1]))))
    fetch_extra = draw(st.booleans())
    return shapes, steps, fetch_extra


def build(shapes, steps, fetch_extra):
    g = ff.Graph("property")
    with g.as_default():
        values = [ff.placeholder(s, name=f"x{i}") for i, s in enumerate(shapes)]
        for kind, op, a, b, axis in steps:
            x = values[a]
            if kind == "unary":
                y = getattr(ff, op)(ff.tanh(x) if op == "exp" else x)
            elif kind == "binary":
                y = getattr(ff, op)(x, values[b])
            else:
                y = getattr(ff, op)(x, axis=axis % x.ndim if x.ndim else None,
                                    keepdims=True) if x.ndim else x
            values.append(y)
        fetches = [values[-1]] + ([values[len(shapes)]] if fetch_extra else [])
    return g, values[:len(shapes)], fetches


def feeds_for(inputs, seed):
    rng = np.random.default_rng(seed)
    return {x: rng.uniform(-2, 2, x.shape).astype(np.float32) for x in inputs}


UNFUSED = ["verify"]
SETTINGS = dict(deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@settings(max_examples=300, **SETTINGS)
@given(graphs())
def test_passes_on_equal_passes_off_on_the_reference_executor(graph):
    g, inputs, fetches = build(*graph)
    feeds = feeds_for(inputs, 0)
    with ff.Session(g, backend="numpy") as on, \
            ff.Session(g, backend="numpy", passes=UNFUSED) as off:
        got, want = on.run(fetches, feeds), off.run(fetches, feeds)
    for a, e in zip(got, want):
        assert_matches(a, e, rtol=1e-5, atol=1e-5)


@settings(max_examples=25, **SETTINGS)
@given(graph=graphs())
def test_passes_on_equal_passes_off_on_gl(gl, graph):
    g, inputs, fetches = build(*graph)
    feeds = feeds_for(inputs, 1)
    with ff.Session(g) as on, ff.Session(g, passes=UNFUSED) as off, \
            ff.Session(g, backend="numpy", passes=UNFUSED) as ref:
        got, plain, want = on.run(fetches, feeds), off.run(fetches, feeds), \
            ref.run(fetches, feeds)
    for a, p, e in zip(got, plain, want):
        assert_matches(a, e, rtol=1e-4, atol=1e-5)
        assert_matches(p, e, rtol=1e-4, atol=1e-5)


def _sample_graphs():
    rng = np.random.default_rng(3)
    g = ff.Graph("sample")
    with g.as_default():
        x = ff.placeholder((2, 6, 6, 3), name="x")
        w = ff.constant(rng.standard_normal((3, 3, 3, 4)).astype(np.float32))
        h = ff.relu6(ff.conv2d(x, w, padding="SAME") * ff.constant(np.full(4, 2.0, np.float32))
                     + 1.0)
        flat = ff.reshape(ff.reshape(h, (2, 144)), (2, 144))
        m = ff.Variable(rng.standard_normal((144, 5)).astype(np.float32), name="m")
        logits = ff.transpose(ff.transpose(flat @ m + 0.0, (1, 0)), (1, 0)) * 1.0
        loss = ff.mean(ff.square(ff.sigmoid(logits) - ff.constant(2.0) * 0.25))
        grads = ff.gradients(loss, [m, x])
    fetches = [loss.value] + [t.value for t in grads]
    compiled, _ = prune(g, fetches, {x.value: ff.TensorType((2, 6, 6, 3), "float32")})
    return compiled


@pytest.mark.parametrize("name", sorted(PASSES))
def test_every_pass_is_idempotent(name):
    graph = _sample_graphs()
    for earlier in DEFAULT_PIPELINE:        # from a realistic input to the pass
        if earlier == name:
            break
        graph = PASSES[earlier].run(graph, [])
    once = PASSES[name].run(graph, [])
    report: list = []
    twice = PASSES[name].run(once, report)
    assert ff.dump(twice) == ff.dump(once), report
