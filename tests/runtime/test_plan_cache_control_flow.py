"""The plan cache for graphs with control flow (runtime/plan_cache.py store_graph):
the entry holds the compiled graph (ir/serialize.py's JSON, sub-graphs included), a
later compile builds its ControlFlowPlan from it without running the pass pipeline
on the user's graph, and an entry that is broken, edited or does not fit the compile
is a miss with a warning."""
import base64
import json

import numpy as np
import pytest
from test_plan_cache import _loads  # the spy on plan_cache.load

import fragflow as ff
from fragflow.runtime import driver, plan_cache

XB = np.random.default_rng(3).standard_normal((4, 3)).astype(np.float32)


@pytest.fixture
def cache(tmp_path, monkeypatch, gl):
    monkeypatch.setenv("FRAGFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FRAGFLOW_PLAN_CACHE", "1")
    return tmp_path / "plans"


def _model(scale=1.5, program=None, steps=True):
    """A scan over x's rows, a data-dependent while_loop, a cond, a variable and an
    SGD step through the scan."""
    g = ff.Graph("cached_control_flow")
    with g.as_default():
        x = ff.placeholder((4, 3), "float32", name="x")
        w = ff.Variable(np.float32([0.5, -0.25, 0.75]), name="w")
        h = ff.scan(lambda a, e: ff.tanh(a * w + e), x, initializer=ff.zeros([3]))
        grown = ff.while_loop(lambda v: ff.reduce_sum(ff.abs(v)) < 20.0,
                              lambda v: v * scale + 0.5, h[-1], maximum_iterations=50)
        picked = ff.cond(ff.reduce_sum(grown) > 0.0, lambda: grown * 2.0,
                         lambda: grown - 1.0)
        if program is not None:
            picked = program(picked)
        loss = ff.reduce_mean(ff.square(h))
        step = ff.optim.SGD(0.1).minimize(loss) if steps else None
    return g, x, w, [picked, loss], step


def _run(model):
    g, x, w, fetches, step = model
    with ff.Session(g) as sess:
        fn = sess.compile(fetches, feeds=[x])
        out = fn(XB)
        return out, fn


def _passes_on(monkeypatch, graph) -> list:
    """Calls of the pass pipeline on graph itself (sub-plans run it on graphs of
    their own, at their first run)."""
    calls = []
    real = driver.optimize

    def spy(g, *args, **kwargs):
        calls.append(g is graph)
        return real(g, *args, **kwargs)
    monkeypatch.setattr(driver, "optimize", spy)
    return calls


def test_a_second_compile_builds_the_plan_from_the_entry(cache, monkeypatch):
    found = _loads(monkeypatch)
    model = _model()
    first, fn = _run(model)
    text = ff.dump(fn.graph)
    (entry,) = cache.glob("*.json")
    assert json.loads(entry.read_text())["kind"] == "graph"
    g, x, _, fetches, _ = model
    want = ff.Session(g, backend="numpy", passes=[]).run(fetches, {x: XB})
    calls = _passes_on(monkeypatch, g)
    again, fn = _run(model)
    assert found == [False, True]
    assert True not in calls                   # the passes never ran on the user's graph
    assert ff.dump(fn.graph) == text
    for a, b, c in zip(first, again, want):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(a, c, rtol=1e-5, atol=1e-6)


def test_training_steps_from_a_cached_plan_update_the_variable_alike(cache, monkeypatch):
    found = _loads(monkeypatch)
    finals = []
    g, x, w, (_, loss), step = _model()
    for _ in range(2):
        with ff.Session(g) as sess:
            for _ in range(3):
                sess.run(step, {x: XB})
            finals.append(sess.run(w))
    # the step and the read of w: compiled in the first session, loaded in the second
    assert found == [False, False, True, True]
    reference = ff.Session(g, backend="numpy", passes=[])
    for _ in range(3):
        reference.run(step, {x: XB})
    for got in finals:
        np.testing.assert_allclose(got, reference.run(w), rtol=1e-5, atol=1e-6)


def test_what_is_inside_a_body_is_in_the_key():
    def key(scale=1.5):
        g, x, _, fetches, _ = _model(scale, steps=False)
        return plan_cache.plan_key(g, [f.value for f in fetches], {x.value: x.value.type},
                                   (8192, 16))
    assert key() == key()
    assert key(1.25) != key()                  # a constant of the loop's body


def _entry(cache):
    (path,) = cache.glob("*.json")
    return path, json.loads(path.read_text())


def _resign(cache, doc, graph_doc):
    """The entry with graph_doc as its graph, signed as this cache signs (so that it
    gets past the digest: what check_graph and the loader must catch)."""
    text = json.dumps(graph_doc)
    doc["graph"] = text
    doc["digest"] = plan_cache._digest(plan_cache._secret(cache), doc["key"], text)
    return doc


def _node(graph_doc, op):
    return next(n for n in graph_doc["nodes"] if n["op"] == op)


def _edit(cache, how):
    path, doc = _entry(cache)
    if how == "truncated":
        path.write_bytes(path.read_bytes()[:2000])
        return
    if how == "not json":
        path.write_bytes(b"\x00\xff garbage")
        return
    graph_doc = json.loads(doc["graph"])
    if how == "edited, digest kept":
        graph_doc["outputs"] = graph_doc["outputs"][::-1]     # as below, not re-signed
        doc["graph"] = json.dumps(graph_doc)
    elif how == "signed by another cache":
        (cache / "secret").write_bytes(b"\x01" * 32)
    elif how == "other variable value":
        spec = _node(graph_doc, "variable")["attrs"]["initial_value"]["ndarray"]
        spec["data"] = base64.b64encode(np.float32([9, 9, 9]).tobytes()).decode()
        doc = _resign(cache, doc, graph_doc)
    elif how == "outputs swapped":
        graph_doc["outputs"] = graph_doc["outputs"][::-1]
        doc = _resign(cache, doc, graph_doc)
    elif how == "feed renamed":
        feed = _node(graph_doc, "placeholder")
        for node in graph_doc["nodes"]:
            node["inputs"] = ["y" if v == feed["name"] else v for v in node["inputs"]]
        feed["name"] = "y"
        doc = _resign(cache, doc, graph_doc)
    elif how == "an unknown op":
        _node(graph_doc, "while_loop")["op"] = "os_system"
        doc = _resign(cache, doc, graph_doc)
    elif how == "sub-graphs too deep":
        body = _node(graph_doc, "while_loop")["attrs"]["body"]
        for _ in range(12):
            body = {"graph": {"name": "deep", "nodes": [
                {"name": "c", "op": "cond", "inputs": [], "scope": "", "source": "",
                 "attrs": {"true_branch": body, "false_branch": body}}], "outputs": []}}
        _node(graph_doc, "while_loop")["attrs"]["body"] = body
        doc = _resign(cache, doc, graph_doc)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("how", ["truncated", "not json", "edited, digest kept",
                                 "signed by another cache", "other variable value",
                                 "outputs swapped", "feed renamed", "an unknown op",
                                 "sub-graphs too deep"])
def test_a_broken_or_foreign_entry_is_a_miss_with_a_warning(cache, monkeypatch, how):
    model = _model()
    first, _ = _run(model)
    _edit(cache, how)
    with pytest.warns(UserWarning, match="plan cache"):
        again, _ = _run(model)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    found = _loads(monkeypatch)                 # rewritten: the next compile loads it
    _run(model)
    assert found == [True]


def test_only_the_graphs_own_user_glsl_comes_back(cache, monkeypatch):
    def program(name):
        return ff.gpgpu_program(
            name=name, inputs=["a"], output=lambda a: (a.shape, a.dtype),
            glsl="float v = getAAtOutCoords();\nsetOutput(v + 1.0);",
            reference=lambda a: a + 1.0)
    model = _model(program=program("plus_one"))
    first, _ = _run(model)
    path, doc = _entry(cache)
    graph_doc = json.loads(doc["graph"])
    node = _node(graph_doc, "gpgpu_program")
    text = json.dumps(node["attrs"])
    assert "setOutput(v + 1.0)" in text
    node["attrs"] = json.loads(text.replace("setOutput(v + 1.0)", "setOutput(v + 2.0)"))
    path.write_text(json.dumps(_resign(cache, doc, graph_doc)))
    with pytest.warns(UserWarning, match="gpgpu_program"):
        again, _ = _run(model)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


def test_a_graph_the_json_form_cannot_hold_is_compiled_and_not_kept(cache, monkeypatch):
    def refuse(graph, indent=1):
        raise ff.SerializationError("an attr the JSON form cannot hold")
    monkeypatch.setattr(plan_cache, "graph_to_json", refuse)
    model = _model()
    got, _ = _run(model)
    g, x, _, fetches, _ = model
    want = ff.Session(g, backend="numpy", passes=[]).run(fetches, {x: XB})
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not list(cache.glob("*.json"))
