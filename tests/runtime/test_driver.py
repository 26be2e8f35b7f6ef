"""The compile driver (runtime/driver.py) and the backend interface (runtime/backend.py):
plans compiled outside a Session, GL against numpy, one variable-store API."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.ops.state import RUN_COUNTER
from fragflow.ir.types import TensorType
from fragflow.runtime import driver
from fragflow.runtime.backend import get_backend


def _graph():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 5), "float32", name="x")
        unused = ff.placeholder((3,), "float32", name="unused")
        w = ff.Variable(np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3), name="w")
        y = ff.relu(x @ w + 0.5)
        loss = ff.reduce_sum(ff.square(y))
        step = w.assign(w * 0.5)
    return g, x, unused, w, y, loss, step


def _run(backend, compiled, feeds, run=0):
    """compiled.plan.run as a Session runs it: under the backend's lock (GL: the
    context current on this thread), with the run counter fed."""
    by_name = {compiled.feed_names[v]: a for v, a in feeds.items()
               if v in compiled.feed_names}
    by_name[RUN_COUNTER] = np.array(run, np.int32)
    with backend.lock:
        return compiled.plan.run(by_name)


@pytest.mark.parametrize("backend", ["gl", "numpy"])
def test_compile_outside_a_session_matches_the_session(backend):
    g, x, unused, _, y, loss, _ = _graph()
    xb = np.random.RandomState(1).randn(4, 5).astype(np.float32)
    xb[0, :2] = [0.0, -0.0]
    feeds = {x.value: xb, unused.value: np.zeros(3, np.float32)}
    types = {v: TensorType(a.shape, v.dtype) for v, a in feeds.items()}
    chosen = get_backend(backend)
    compiled = driver.compile(g, [y.value, loss.value], types, chosen)
    try:
        assert unused.value not in compiled.feed_names      # pruned: not a feed of the plan
        assert compiled.graph is not g and compiled.fusion_report is not None
        got = _run(chosen, compiled, feeds)
    finally:
        with chosen.lock:
            chosen.release_plan(compiled.plan)
            compiled.variables.release()
    expected = ff.Session(g, backend="numpy", passes=[]).run([y, loss], {x: xb})
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["gl", "numpy"])
def test_variables_live_in_the_store_given_and_assigns_apply_at_the_end(backend):
    g, _, _, w, _, _, step = _graph()
    chosen = get_backend(backend)
    variables = chosen.variables()
    compiled = driver.compile(g, [step.value, w.value], {}, chosen, variables)
    try:
        assert compiled.variables is variables
        w0 = np.array(g.node("w").attrs["initial_value"])
        _, read = _run(chosen, compiled, {})
        np.testing.assert_allclose(read, w0)         # reads see the run's start
        with chosen.lock:
            assert "w" in variables
            np.testing.assert_allclose(variables.read("w"), w0 * 0.5)
    finally:
        with chosen.lock:
            chosen.release_plan(compiled.plan)
            variables.release()


@pytest.mark.parametrize("backend", ["gl", "numpy"])
def test_one_variable_store_api(backend):
    chosen = get_backend(backend)
    with chosen.lock:
        store = chosen.variables()
        assert "v" not in store
        values = [np.arange(7, dtype=np.float32) - 3, np.array([[1, -2, 3]], np.int32),
                  np.array([True, False, True, True, False]), np.asarray(np.float32(2.5))]
        for index, value in enumerate(values):
            store.write(f"v{index}", value)            # created on first write
            assert f"v{index}" in store
        for index, value in enumerate(values):
            np.testing.assert_array_equal(store.read(f"v{index}"), value)
            assert store.read(f"v{index}").dtype == value.dtype
        store.write("v0", np.full(7, np.nan, np.float32))      # then overwritten
        assert np.isnan(store.read("v0")).all()
        assert len(store.textures()) == (4 if backend == "gl" else 0)
        store.release()
        assert "v0" not in store


@pytest.mark.parametrize("backend", ["gl", "numpy"])
def test_run_is_run_observed_without_an_observer(backend):
    g, x, _, _, _, loss, _ = _graph()
    xb = np.random.RandomState(2).randn(3, 5).astype(np.float32)
    chosen = get_backend(backend)
    compiled = driver.compile(g, [loss.value], {x.value: TensorType(xb.shape, "float32")},
                              chosen)
    plan = compiled.plan

    class Recorder:
        def __init__(self):
            self.inputs, self.kernels, self.phases = [], [], []

        def input(self, name, read):
            self.inputs.append((name, read()))

        def phase(self, name, seconds):
            self.phases.append(name)

        def kernel(self, kernel, seconds, read):
            self.kernels.append((kernel.name, read()))

    try:
        by_name = {compiled.feed_names[x.value]: xb, RUN_COUNTER: np.array(0, np.int32)}
        recorder = Recorder()
        with chosen.lock:
            plain = plan.run(dict(by_name))
            unobserved = plan.run_observed(dict(by_name), None)
            observed = plan.run_observed(dict(by_name), recorder)
    finally:
        with chosen.lock:
            chosen.release_plan(plan)
            compiled.variables.release()
    np.testing.assert_array_equal(plain[0], unobserved[0])
    np.testing.assert_array_equal(plain[0], observed[0])
    assert [n for n, _ in recorder.inputs if n != RUN_COUNTER] == ["x"]
    np.testing.assert_array_equal(dict(recorder.inputs)["x"], xb)
    assert recorder.kernels and all(v is not None for _, v in recorder.kernels)


def test_an_unknown_backend_is_named():
    with pytest.raises(ff.FragflowError, match=r"unknown backend 'vulkan'; use one of "
                                               r"\('gl', 'numpy'\)"):
        get_backend("vulkan")
    with pytest.raises(ff.FragflowError, match="unknown backend 'vulkan'"):
        ff.Session(ff.Graph(), backend="vulkan")


def test_session_memory_is_the_same_shape_on_both_backends():
    g, x, _, _, y, _, _ = _graph()
    xb = np.ones((2, 5), np.float32)
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        sess.run(y, {x: xb})
        numpy_memory = sess.memory()
    with ff.Session(g) as sess:
        sess.run(y, {x: xb})
        gl_memory = sess.memory()
    assert set(numpy_memory) == set(gl_memory)
    assert numpy_memory["textures"] == 0 and numpy_memory["plans"] == 1
    assert gl_memory["textures"] > 0 and gl_memory["plans"] == 1
