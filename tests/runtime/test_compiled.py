"""The compile driver's stages and its Compiled record (runtime/driver.py): the driver
lowers, backends take what it made (GL: a LoweredGraph; numpy: the compiled graph),
nothing is set on a plan, and a plan from the plan cache makes its graph on demand."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen.kernel import LoweredGraph
from fragflow.codegen.limits import Limits
from fragflow.codegen.lower import lower
from fragflow.ir.ops.state import RUN_COUNTER
from fragflow.runtime import driver
from fragflow.runtime.backend import get_backend
from fragflow.runtime.driver import Compiled
from tests.reference import reference_session

# what the driver once set on plans (issue 24): they are the record's now
RECORD_FIELDS = ("graph", "fusion_report", "feed_names", "variables", "compile_graph")


def _model():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 6), name="x")
        w = ff.Variable(np.linspace(-1, 1, 18, dtype=np.float32).reshape(6, 3), name="w")
        y = ff.nn.relu(ff.matmul(x, w) + 0.25)
        step = w.assign(w * 0.5)
    return g, x, y, step


def _feed():
    return np.random.default_rng(5).standard_normal((4, 6)).astype(np.float32)


def _run(backend, compiled, xb, x):
    with backend.lock:
        return compiled.plan.run({compiled.feed_names[x.value]: xb,
                                  RUN_COUNTER: np.array(0, np.int32)})


@pytest.fixture(params=["gl", "numpy"])
def backend(request):
    if request.param == "gl":
        request.getfixturevalue("gl")
    return get_backend(request.param)


def test_compile_returns_one_record_and_sets_nothing_on_the_plan(backend):
    g, x, y, _ = _model()
    compiled = driver.compile(g, [y.value], {x.value: x.value.type}, backend)
    try:
        assert isinstance(compiled, Compiled)
        assert set(compiled.feed_names) == {x.value}
        assert compiled.graph is not g and compiled.graph.outputs
        assert isinstance(compiled.fusion_report, list)
        plan = compiled.plan
        if backend.name == "gl":
            for name in RECORD_FIELDS:
                assert not hasattr(plan, name), f"a GL plan has {name}"
        else:       # a NumpyPlan holds what it runs, as its constructor set it
            assert set(vars(plan)) == set(vars(backend.build_plan(
                compiled.graph, compiled.variables, {})))
        if backend.name == "gl":
            assert isinstance(compiled.lowered, LoweredGraph)
            assert compiled.kernels == plan.kernels == compiled.lowered.kernels
        else:
            assert compiled.lowered is None and compiled.kernels == []
            assert plan.graph is compiled.graph
        got = _run(backend, compiled, _feed(), x)
    finally:
        with backend.lock:
            backend.release_plan(compiled.plan)
            compiled.variables.release()
    with reference_session(g) as ref:
        want = ref.run(y, {x: _feed()})
    np.testing.assert_allclose(got[0], want, rtol=1e-5, atol=1e-6)


def test_the_variables_given_are_the_records(backend):
    g, x, y, step = _model()
    variables = backend.variables()
    compiled = driver.compile(g, [step.value], {}, backend, variables)
    try:
        assert compiled.variables is variables
        with backend.lock:
            compiled.plan.run({RUN_COUNTER: np.array(0, np.int32)})
            np.testing.assert_allclose(variables.read("w"),
                                       0.5 * g.node("w").attrs["initial_value"])
    finally:
        with backend.lock:
            backend.release_plan(compiled.plan)
            variables.release()


def test_the_gl_backend_builds_a_plan_from_a_lowered_graph(gl):
    """Backends take what the driver made: a LoweredGraph lowered elsewhere runs."""
    g, x, y, _ = _model()
    optimized = driver.optimize(g, [y.value], {x.value: x.value.type})
    backend = get_backend("gl")
    lowered = lower(optimized.graph, backend.limits, tuning=backend.tuning)
    xb = _feed()
    with backend.lock:
        variables = backend.variables()
        plan = backend.build_plan(lowered, variables,
                                  {"w": g.node("w").attrs["initial_value"]})
        try:
            assert plan.lowered_graph is lowered
            got = plan.run({optimized.feed_names[x.value]: xb,
                            RUN_COUNTER: np.array(0, np.int32)})
        finally:
            backend.release_plan(plan)
            variables.release()
    with reference_session(g) as ref:
        np.testing.assert_allclose(got[0], ref.run(y, {x: xb}), rtol=1e-5, atol=1e-6)


def test_the_driver_lowers_with_the_tuning_given_or_the_backends(gl, monkeypatch):
    seen = []
    real = driver.lower

    def spy(graph, limits, tuning=None):
        seen.append((limits, tuning))
        return real(graph, limits, tuning=tuning)
    monkeypatch.setattr(driver, "lower", spy)
    g, x, y, _ = _model()
    backend = get_backend("gl")
    gpu = ff.Tuning.named("gpu")
    for tuning in (None, gpu):
        compiled = driver.compile(g, [y.value], {x.value: x.value.type}, backend,
                                  tuning=tuning)
        with backend.lock:
            backend.release_plan(compiled.plan)
            compiled.variables.release()
    assert seen == [(backend.limits, backend.tuning), (backend.limits, gpu)]
    with ff.Session(g, tuning=gpu) as sess:
        sess.run(y, {x: _feed()})
    assert seen[-1] == (backend.limits, gpu)
    numpy = get_backend("numpy")
    assert numpy.limits is None and numpy.tuning is None
    compiled = driver.compile(g, [y.value], {x.value: x.value.type}, numpy)
    assert len(seen) == 3 and compiled.lowered is None      # numpy lowers nothing


def test_a_plan_cache_hit_makes_its_graph_on_demand(gl, tmp_path, monkeypatch):
    monkeypatch.setenv("FRAGFLOW_PLAN_CACHE", "1")
    monkeypatch.setenv("FRAGFLOW_CACHE_DIR", str(tmp_path))
    g, x, y, _ = _model()
    backend = get_backend("gl")
    types = {x.value: x.value.type}
    first = driver.compile(g, [y.value], types, backend)
    calls = []
    real = driver.optimize

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(driver, "optimize", counted)
    again = driver.compile(g, [y.value], types, backend)
    try:
        assert calls == []                              # the passes did not run
        assert again.fusion_report == first.fusion_report
        assert [k.source for k in again.kernels] == [k.source for k in first.kernels]
        assert {v: n for v, n in again.feed_names.items()} == first.feed_names
        graph = again.graph                             # now they do, once
        assert calls == [1] and again.graph is graph
        assert ff.dump(graph) == ff.dump(first.graph)
        np.testing.assert_array_equal(_run(backend, again, _feed(), x)[0],
                                      _run(backend, first, _feed(), x)[0])
    finally:
        with backend.lock:
            for compiled in (first, again):
                backend.release_plan(compiled.plan)
                compiled.variables.release()


def test_a_compiled_function_shows_the_records_report_and_graph():
    g, x, y, _ = _model()
    with ff.Session(g, backend="numpy") as sess:
        fn = sess.compile([y], feeds=[x])
        assert isinstance(fn._last, Compiled)
        assert fn.fusion_report == fn._last.fusion_report
        assert fn.graph is fn._last.graph
        fn(_feed())


def test_webgl2_limits_and_a_session_on_them_agree():
    """The lowering the driver does is codegen's lower() with the backend's limits:
    WebGL2's give GLSL ES kernels from the same record."""
    g, x, y, _ = _model()
    optimized = driver.optimize(g, [y.value], {x.value: x.value.type})
    lowered = lower(optimized.graph, Limits.webgl2(), tuning=ff.Tuning.named("webgl"))
    assert lowered.kernels and all(k.source.startswith("#version 300 es")
                                   for k in lowered.kernels)
