"""The plan cache (runtime/plan_cache.py, FRAGFLOW_PLAN_CACHE=1): a second compile of
the same graph loads the lowered graph instead of running the passes, computes what
the numpy reference computes, misses on any change, and ignores broken or hostile
entries with a warning."""
import json
import os

import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.ops.state import RUN_COUNTER
from fragflow.runtime import driver, plan_cache
from fragflow.runtime.backend import get_backend


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAGFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FRAGFLOW_PLAN_CACHE", "1")
    return tmp_path / "plans"


def _model(bias=0.5, steps=True):
    """A small model with a feed, weights, a fused epilogue, a reduction, a NaN in a
    constant and an SGD step (variables and assigns)."""
    g = ff.Graph("cached")
    rng = np.random.default_rng(0)
    with g.as_default():
        x = ff.placeholder((3, 5), "float32", name="x")
        w = ff.Variable(rng.standard_normal((5, 7)).astype(np.float32), name="w")
        b = ff.constant(np.full(7, bias, np.float32))
        with ff.name_scope("dense"):
            y = ff.relu(x @ w + b)
        odd = ff.constant(np.array([1.0, np.nan, -0.0, np.inf, 2.0, 3.0, 4.0],
                                   np.float32))
        out = ff.reduce_sum(y * 2.0, axis=1) + ff.reduce_max(ff.maximum(y, odd))
        loss = ff.reduce_mean(ff.square(y))
        step = ff.optim.SGD(0.1).minimize(loss) if steps else None
    return g, x, w, out, loss, step


def _feed():
    xb = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    xb[0, 0] = -0.0
    return xb


def _loads(monkeypatch) -> list:
    """Calls of plan_cache.load and whether each found an entry."""
    found = []
    real = plan_cache.load

    def spy(key):
        entry = real(key)
        found.append(entry is not None)
        return entry
    monkeypatch.setattr(plan_cache, "load", spy)
    return found


def _compile_and_run(model, xb):
    g, x, _, out, loss, _ = model
    with ff.Session(g) as sess:
        fn = sess.compile([out, loss], feeds=[x])
        return fn(xb), list(fn.fusion_report), fn


def test_a_second_compile_loads_the_entry_and_computes_the_same(cache, monkeypatch):
    found = _loads(monkeypatch)
    xb = _feed()
    model = _model()
    first, report, _ = _compile_and_run(model, xb)
    assert len(list(cache.glob("*.json"))) == 1 and len(list(cache.glob("*.bin"))) == 1
    g, x, _, out, loss, _ = model
    expected = ff.Session(g, backend="numpy", passes=[]).run([out, loss], {x: xb})
    # the second compile must not run the passes (only Compiled.graph would)
    monkeypatch.setattr(driver, "optimize", lambda *a, **k: pytest.fail("passes ran"))
    second, report_again, _ = _compile_and_run(model, xb)
    assert found == [False, True]
    for got, again, want in zip(first, second, expected):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got, again)
    assert report_again == report


def test_the_compiled_graph_of_a_cached_plan_is_made_when_asked_for(cache, monkeypatch):
    model, xb = _model(), _feed()
    _, _, fn = _compile_and_run(model, xb)
    text = ff.dump(fn.graph)
    found = _loads(monkeypatch)
    g, x, _, out, loss, _ = model
    with ff.Session(g) as sess:
        fn = sess.compile([out, loss], feeds=[x])
        assert found == [True]
        assert ff.dump(fn.graph) == text


def test_training_steps_from_a_cached_plan_update_the_variables_alike(cache, monkeypatch):
    found = _loads(monkeypatch)
    xb = _feed()
    finals = []
    g, x, w, _, loss, step = _model()
    for _ in range(2):                  # a new session compiles (and loads) again
        with ff.Session(g) as sess:
            for _ in range(3):
                sess.run(step, {x: xb})
            finals.append((sess.run(w), sess.run(loss, {x: xb})))
    assert found == [False] * 3 + [True] * 3
    reference = ff.Session(g, backend="numpy", passes=[])
    for _ in range(3):
        reference.run(step, {x: xb})
    for got in finals:
        np.testing.assert_allclose(got[0], reference.run(w), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got[1], reference.run(loss, {x: xb}), rtol=1e-5)


def test_a_changed_attr_or_feed_type_misses(cache, monkeypatch):
    xb = _feed()
    _compile_and_run(_model(bias=0.5), xb)
    found = _loads(monkeypatch)
    changed = _model(bias=0.25)                     # one constant's value
    got, _, _ = _compile_and_run(changed, xb)
    g, x, _, out, loss, _ = changed
    want = ff.Session(g, backend="numpy", passes=[]).run([out, loss], {x: xb})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    g, x, _, out, _, _ = _model(bias=0.5)
    key = plan_cache.plan_key
    types = {x.value: x.value.type}
    assert key(g, [out.value], types, (8192, 16)) != key(g, [out.value], types, (8192, 8))
    assert key(g, [out.value], types, (8192, 16)) != \
        key(g, [out.value], {x.value: ff.ir.types.TensorType((3, 5), "int32")}, (8192, 16))
    assert found == [False]
    assert len(list(cache.glob("*.json"))) == 2


def test_off_unless_asked_for(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAGFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("FRAGFLOW_PLAN_CACHE", raising=False)
    _compile_and_run(_model(), _feed())
    assert not (tmp_path / "plans").exists()


def _break(path, how):
    if how == "truncated":
        path.write_bytes(path.read_bytes()[:1000])
    elif how == "not json":
        path.write_bytes(b"\x00\xff garbage")
    else:
        doc = json.loads(path.read_text())
        kernel = next(s for s in doc["lowered"]["steps"]
                      if s["tuple"][0] == "kernel")["tuple"][1]
        if how == "foreign record":       # a class outside codegen: never made
            kernel["record"] = "subprocess:Popen"
        elif how == "other fields":
            kernel["fields"]["surprise"] = 1
        elif how == "unsafe shader":      # text the sanitiser's check refuses
            source = kernel["fields"]["source"]
            kernel["fields"]["source"] = source.replace("\n", "\n#define x 1\n", 1)
        elif how == "other key":
            doc["key"] = "0" * 40
        path.write_text(json.dumps(doc))


@pytest.mark.parametrize("how", ["truncated", "not json", "foreign record",
                                 "other fields", "unsafe shader", "other key"])
def test_a_broken_entry_is_ignored_with_a_warning_and_rewritten(cache, monkeypatch, how):
    xb = _feed()
    model = _model(steps=False)
    first, _, _ = _compile_and_run(model, xb)
    (entry,) = cache.glob("*.json")
    _break(entry, how)
    with pytest.warns(UserWarning, match="plan cache"):
        again, _, _ = _compile_and_run(model, xb)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)
    found = _loads(monkeypatch)                     # rewritten: the next one loads
    _compile_and_run(model, xb)
    assert found == [True]


@pytest.mark.parametrize("how", ["object dtype", "truncated"])
def test_arrays_are_plain_numbers_read_without_pickle(cache, how):
    xb = _feed()
    model = _model(steps=False)
    first, _, _ = _compile_and_run(model, xb)
    (arrays,) = cache.glob("*.bin")
    table, _, blob = arrays.read_bytes().partition(b"\n")
    if how == "object dtype":     # an object array would need pickle: never read
        table = json.dumps([[0, "|O", [1]]] * len(json.loads(table))).encode()
    else:
        blob = blob[:len(blob) // 2]
    arrays.write_bytes(table + b"\n" + blob)
    with pytest.warns(UserWarning, match="plan cache"):
        again, _, _ = _compile_and_run(model, xb)
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


def test_an_edit_of_fragflows_code_misses(tmp_path, monkeypatch):
    """The key holds the compile's code: each source and template file's size and
    mtime (here a stand-in package of two files)."""
    package = tmp_path / "layer"
    (package / "templates").mkdir(parents=True)
    template = package / "templates" / "k.glsl.j2"
    template.write_text("void main() {}\n")
    monkeypatch.setattr(plan_cache, "_layer_dirs", lambda: [package])
    g, x, _, out, _, _ = _model(steps=False)

    def key():
        monkeypatch.setattr(plan_cache, "_code_fingerprint", None)
        return plan_cache.plan_key(g, [out.value], {x.value: x.value.type}, (8192, 16))
    before = key()
    assert key() == before
    template.write_text("void main() { }\n")           # another size
    assert key() != before
    edited = key()
    stat = template.stat()
    os.utime(template, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1))   # same size
    assert key() != edited


def test_user_glsl_random_ops_and_ints_come_back_from_the_cache(cache, monkeypatch):
    """An entry with a gpgpu_program (user GLSL lines, uniforms), a random op (the run
    counter) and int/bool values computes what a fresh compile computes."""
    affine = ff.gpgpu_program(
        name="affine_cached", inputs=["a"], output=lambda a: (a.shape, a.dtype),
        uniforms={"scale": "float"},
        glsl="""
            float v = getAAtOutCoords();
            setOutput(v * scale + 1.0);
        """, reference=lambda a, scale: a * scale + 1.0)
    g = ff.Graph("cached_programs")
    with g.as_default():
        x = ff.placeholder((4, 6), "float32", name="x")
        y = affine(x, scale=2.5)
        noise = ff.random_uniform((4, 6), seed=3)
        counts = ff.cast(ff.reduce_sum(ff.cast(y > 0.0, "int32"), axis=1), "int32")
        mask = ff.logical_and(y > 1.0, noise < 0.5)
    xb = np.random.default_rng(2).standard_normal((4, 6)).astype(np.float32)
    found = _loads(monkeypatch)
    results = []
    for _ in range(2):
        with ff.Session(g) as sess:
            results.append(sess.run([y, noise, counts, mask], {x: xb}))
    assert found == [False, True]
    for fresh, cached in zip(*results):
        np.testing.assert_array_equal(fresh, cached)
    np.testing.assert_allclose(results[0][0], xb * 2.5 + 1.0, rtol=1e-6)
    assert results[1][2].dtype == np.int32 and results[1][3].dtype == bool


def test_names_scopes_and_source_lines_are_in_the_key():
    """They are in the kernels' headers: graphs differing only there must miss."""
    def key(name="y", scope="s", source="a.py:1"):
        g = ff.Graph("k")
        x = g.add_node("placeholder", [], {"shape": (2,), "dtype": "float32"},
                       exact_name="x", source="a.py:1")
        y = g.add_node("relu", x.outputs, exact_name=name, scope=scope, source=source)
        return plan_cache.plan_key(g, list(y.outputs), {x.outputs[0]: x.outputs[0].type},
                                   (8192, 16))
    keys = {key(), key(name="z"), key(scope="t"), key(source="a.py:2"),
            key(source="a.py:1|[0]|x")}
    assert len(keys) == 5
    assert key() == key()


def test_the_cache_is_bounded_in_entries_and_bytes(cache, monkeypatch):
    xb = _feed()
    monkeypatch.setattr(plan_cache, "MAX_ENTRIES", 2)
    for bias in (0.1, 0.2, 0.3):
        _compile_and_run(_model(bias=bias, steps=False), xb)
    assert len(list(cache.glob("*.json"))) == 2 and len(list(cache.glob("*.bin"))) == 2
    two = sum(p.stat().st_size for p in cache.glob("*"))      # two entries
    monkeypatch.setattr(plan_cache, "MAX_BYTES", two * 3 // 4)    # room for one
    _compile_and_run(_model(bias=0.4, steps=False), xb)
    kept = set(cache.glob("*.json"))
    assert len(kept) == 1
    monkeypatch.setattr(plan_cache, "MAX_ENTRY_BYTES", 8)          # weights too big
    _compile_and_run(_model(bias=0.5, steps=False), xb)
    assert set(cache.glob("*.json")) == kept        # not written (nor the other evicted)


@pytest.mark.parametrize("foreign", ["fetch", "feed"])
def test_a_tensor_of_another_graph_fails_as_without_the_cache(cache, foreign):
    """The key cannot name a tensor of another graph: prune reports it, as it does
    with the cache off (a FragflowError, never a KeyError from the key)."""
    g, x, _, out, _, _ = _model(steps=False)
    other, x2, _, out2, _, _ = _model(steps=False)
    fetches, feeds = (([out2.value], {x.value: x.value.type}) if foreign == "fetch"
                      else ([out.value], {x2.value: x2.value.type}))
    with pytest.raises(ff.FragflowError, match="not a tensor of graph" if foreign == "fetch"
                       else "must be fed"):
        driver.compile(g, fetches, feeds, "gl")


def _affine_model():
    affine = ff.gpgpu_program(
        name="affine_claimed", inputs=["a"], output=lambda a: (a.shape, a.dtype),
        glsl="""
            setOutput(getAAtOutCoords() * 3.0 - 1.0);
        """, reference=lambda a: a * 3.0 - 1.0)
    g = ff.Graph("claimed")
    with g.as_default():
        x = ff.placeholder((4, 6), "float32", name="x")
        y = ff.exp(affine(x))
    return g, x, y


def _claim_user_code(path, how):
    """Rewrite the entry so that its shader text holds a directive the sanitiser's check
    refuses, on lines its record says are the user's GLSL (which the check skips)."""
    doc = json.loads(path.read_text())
    kernels = [s["tuple"][1] for s in doc["lowered"]["steps"] if s["tuple"][0] == "kernel"]
    fields = next(k["fields"] for k in kernels if (k["fields"]["user_code"] is not None)
                  == (how == "other user text"))
    source = fields["source"].split("\n")
    if how == "lines not the user's":       # a kernel with no user code claims them all
        source.insert(1, "#define FF_CLAIMED 1")     # compiles: nothing else stops it
        fields["user_code"] = {"tuple": ["evil", 1, "\n" * len(source)]}
    else:                                   # the user's lines swapped for other text
        name, first, text = fields["user_code"]["tuple"]
        count = text.count("\n") + 1
        evil = "#define getAAtOutCoords() 42.0\n" + text
        source[first - 1:first - 1 + count] = evil.split("\n")
        fields["user_code"] = {"tuple": [name, first, evil]}
    fields["source"] = "\n".join(source)
    path.write_text(json.dumps(doc))


@pytest.mark.parametrize("how", ["lines not the user's", "other user text"])
def test_only_the_graphs_own_user_glsl_skips_the_sanitisers_check(cache, monkeypatch,
                                                                   how):
    g, x, y = _affine_model()
    xb = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32)
    with ff.Session(g) as sess:
        first = sess.run(y, {x: xb})
    (entry,) = cache.glob("*.json")
    _claim_user_code(entry, how)
    with pytest.warns(UserWarning, match="plan cache.*user"):
        with ff.Session(g) as sess:
            again = sess.run(y, {x: xb})
    np.testing.assert_allclose(first, np.exp(xb * 3.0 - 1.0), rtol=1e-5)
    np.testing.assert_array_equal(first, again)


def test_fetches_given_as_an_iterator_are_all_computed(cache):
    """The key reads the fetches once: the compile must still see all of them."""
    g, x, _, out, loss, _ = _model(steps=False)
    xb = _feed()
    backend = get_backend("gl")
    with backend.lock:
        compiled = driver.compile(g, iter([out.value, loss.value]),
                                  {x.value: x.value.type}, backend)
        try:
            got = compiled.plan.run({compiled.feed_names[x.value]: xb,
                                     RUN_COUNTER: np.array(0, np.int32)})
        finally:
            backend.release_plan(compiled.plan)
            compiled.variables.release()
    want = ff.Session(g, backend="numpy", passes=[]).run([out, loss], {x: xb})
    assert len(got) == 2
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_a_failed_write_leaves_no_temporary_file(cache, monkeypatch):
    """A full disk (or any OSError) while writing an entry skips the entry and removes
    what it had written: nothing bounds stray temporary files."""
    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(plan_cache.os, "replace", full)
    xb = _feed()
    got, _, _ = _compile_and_run(_model(steps=False), xb)
    assert list(cache.iterdir()) == []
    g, x, _, out, loss, _ = _model(steps=False)
    want = ff.Session(g, backend="numpy", passes=[]).run([out, loss], {x: xb})
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
