"""load_graph treats a file as hostile: bounded reading, a schema check of the whole
document before anything is built, and no user GLSL unless the caller allows it."""
import json
import os

import numpy as np
import pytest

import fragflow as ff
from fragflow.ir import serialize
from fragflow.ir.errors import SerializationError


def _graph():
    g = ff.Graph("g")
    with g.as_default():
        x = ff.placeholder((None, 3), "float32", name="x")
        w = ff.Variable(np.arange(6, dtype=np.float32).reshape(3, 2), name="w")
        with ff.name_scope("dense"):
            y = ff.reduce_sum(ff.exp(x @ w), axis=1, keepdims=True)
    g.outputs = [y.value]
    return g, x, y


def _doc():
    g, _, _ = _graph()
    return json.loads(ff.dump(g, format="json"))


def _node(doc, op):
    return next(n for n in doc["nodes"] if n["op"] == op)


def test_a_valid_graph_still_round_trips():
    g, _, _ = _graph()
    text = ff.dump(g, format="json")
    assert ff.dump(ff.load_graph(text)) == ff.dump(g)
    assert ff.dump(ff.load_graph(text.encode())) == ff.dump(g)


def test_nothing_is_built_before_the_whole_file_is_checked(monkeypatch):
    doc = _doc()
    doc["nodes"][-1]["attrs"]["keepdims"] = "yes"
    built = []
    monkeypatch.setattr(ff.Graph, "add_node",
                        lambda self, *a, **k: built.append(a) or pytest.fail("built"))
    with pytest.raises(SerializationError, match="keepdims"):
        ff.load_graph(json.dumps(doc))
    assert built == []


@pytest.mark.parametrize("op, attr, value, fragment", [
    ("sum", "keepdims", "yes", "true or false"),
    ("sum", "axis", "21", "null, an int or a list of ints"),
    ("sum", "axis", 1.5, "null, an int or a list of ints"),
    ("sum", "axis", [True], "null, an int or a list of ints"),
    ("placeholder", "shape", [2.5, 3], "list of ints"),
    ("placeholder", "shape", "23", "list of ints"),
    ("placeholder", "dtype", "float64", "float32, int32, bool"),
    ("placeholder", "dtype", 7, "float32, int32, bool"),
    ("matmul", "transpose_a", 1, "true or false"),
    ("variable", "initial_value", [1, 2], "must be an array"),
    ("sum", "bogus", 1, "has no attribute 'bogus'"),
    ("sum", "keepdims", {"object": "os.system"}, "unknown attribute encoding"),
    ("sum", "keepdims", {"float": "1e999"}, "not nan, inf or -inf"),
])
def test_attrs_of_the_wrong_type_name_the_node_and_attr(op, attr, value, fragment):
    doc = _doc()
    _node(doc, op)["attrs"][attr] = value
    with pytest.raises(SerializationError, match=fragment) as err:
        ff.load_graph(json.dumps(doc))
    assert f"'{_node(doc, op)['name']}'" in str(err.value)


@pytest.mark.parametrize("change, fragment", [
    (lambda d: d.update(nodes="x"), "must be a list"),
    (lambda d: d.update(version=2), "version 2"),
    (lambda d: d.pop("format"), "not a fragflow graph"),
    (lambda d: d.update(extra=1), "unknown \\['extra'\\]"),
    (lambda d: d.update(name="a\nb"), "printable"),
    (lambda d: d["nodes"].append(dict(d["nodes"][0])), "comes twice"),
    (lambda d: d["nodes"][0].update(op="no_such_op"), "unknown op 'no_such_op'"),
    (lambda d: d["nodes"][0].update(op=["exp"]), "unknown op"),
    (lambda d: d["nodes"][0].pop("attrs"), "missing \\['attrs'\\]"),
    (lambda d: d["nodes"][0].update(inputs="x"), "list of tensor names"),
    (lambda d: d["nodes"][-1].update(inputs=["nowhere"]), "not an output of an earlier"),
    (lambda d: d["nodes"][-1].update(inputs=[d["nodes"][-1]["name"]]),
     "not an output of an earlier"),
    (lambda d: d["nodes"][-1].update(inputs=["x:abc"]), "not an output of an earlier"),
    (lambda d: d["nodes"][-1].update(inputs=["x:7"]), "x:7"),
    (lambda d: d.update(outputs=["nowhere"]), "not an output of an earlier"),
    (lambda d: d["nodes"][0].update(name="a b"), "invalid node name"),
    (lambda d: d["nodes"][0].update(name=None), "node name must be a string"),
    (lambda d: d["nodes"][0].update(scope="s\n#define x"), "invalid scope"),
    (lambda d: d["nodes"][0].update(source="m.py:1\r\n#define x"), "invalid source"),
    (lambda d: _node(d, "variable")["attrs"]["initial_value"]["ndarray"].update(
        dtype="object"), "unsupported dtype 'object'"),
    (lambda d: _node(d, "variable")["attrs"]["initial_value"]["ndarray"].update(
        shape=[10 ** 6, 10 ** 6]), "base64 characters"),
    (lambda d: _node(d, "variable")["attrs"]["initial_value"]["ndarray"].update(
        shape=[-1]), "non-negative"),
    (lambda d: _node(d, "variable")["attrs"]["initial_value"]["ndarray"].update(
        data="!!!!" * 8), "not base64"),
])
def test_malformed_documents_are_refused(change, fragment):
    doc = _doc()
    change(doc)
    with pytest.raises(SerializationError, match=fragment):
        ff.load_graph(json.dumps(doc))


def test_deeply_nested_json_is_a_serialization_error():
    for depth in (100_000, 1000):
        for opener, closer in (("[", "]"), ('{"a":', "}")):
            text = '{"format": "fragflow.graph", "version": 1, "nodes": [], "x": ' \
                + opener * depth + "1" + closer * depth + "}"
            with pytest.raises(SerializationError):
                ff.load_graph(text)
    doc = _doc()
    _node(doc, "sum")["attrs"]["axis"] = json.loads("[" * 40 + "1" + "]" * 40)
    with pytest.raises(SerializationError, match="nested more than"):
        ff.load_graph(json.dumps(doc))


def test_huge_and_endless_files_are_read_only_up_to_the_cap(tmp_path):
    path = tmp_path / "big.json"
    g, _, _ = _graph()
    path.write_text(ff.dump(g, format="json") + " " * 5000)
    with pytest.raises(SerializationError, match="larger than max_bytes=4096"):
        ff.load_graph(str(path), max_bytes=4096)
    assert ff.load_graph(str(path), max_bytes=10 ** 6).name == "g"
    if os.path.exists("/dev/zero"):
        with pytest.raises(SerializationError, match="larger than max_bytes"):
            ff.load_graph("/dev/zero", max_bytes=10 ** 6)
    with pytest.raises(SerializationError, match="directory"):
        ff.load_graph(str(tmp_path))
    with pytest.raises(SerializationError, match="neither JSON text nor an existing"):
        ff.load_graph(str(tmp_path / "missing.json"))
    with pytest.raises(SerializationError, match="not UTF-8"):
        ff.load_graph(b"\xff\xfe{}")
    with pytest.raises(SerializationError, match="JSON text or a path"):
        ff.load_graph(12)
    assert serialize.MAX_FILE_BYTES >= 64 * 2 ** 20


def test_nan_and_infinity_literals_are_not_json():
    doc = _doc()
    text = json.dumps(doc).replace('"keepdims": true', '"keepdims": NaN')
    with pytest.raises(SerializationError, match="NaN is not a JSON value"):
        ff.load_graph(text)


def _program_graph():
    prog = ff.gpgpu_program("twice", ["x"], lambda t: (t.shape, t.dtype),
                            "setOutput(2.0 * getXAtOutCoords());",
                            reference=lambda x: 2 * x)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4,), "float32", name="x")
        y = prog(x)
    return g, x, y


def test_programs_are_refused_unless_allowed():
    g, _, y = _program_graph()
    text = ff.dump(g, format="json")
    with pytest.raises(SerializationError, match="allow_programs=True"):
        ff.load_graph(text)
    loaded = ff.load_graph(text, allow_programs=True)
    assert loaded.node(y.op.name).op == "gpgpu_program"


@pytest.mark.parametrize("attr, value, fragment", [
    ("inputs", ["gl_Position"], "not usable in GLSL"),
    ("inputs", ["x; }\n#define exp(a) 42.0\nvoid f() {"], "control characters"),
    ("inputs", ["x; } void f() {"], "not usable in GLSL"),
    ("uniforms", [["s\n#define", "float"]], "control characters"),
    ("uniforms", [["s;#define", "float"]], "not usable in GLSL"),
    ("uniforms", [["s", "sampler2D"]], "has type 'sampler2D'"),
    ("uniform_values", [["s", 1]], "do not match"),
    ("name", "a b", "letters, digits"),
])
def test_allowed_programs_still_have_safe_names(attr, value, fragment):
    g, _, y = _program_graph()
    doc = json.loads(ff.dump(g, format="json"))
    _node(doc, "gpgpu_program")["attrs"][attr] = value
    with pytest.raises(SerializationError, match=fragment):
        ff.load_graph(json.dumps(doc), allow_programs=True)


def _fused_doc():
    from fragflow.runtime.driver import optimize
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 8), name="x")
        w = ff.Variable(np.ones((8, 5), np.float32), name="w")
        y = ff.exp(ff.leaky_relu(ff.relu(x @ w + 1.0), 0.2) * 3.0)
        im = ff.placeholder((1, 6, 6, 2), name="im")
        k = ff.Variable(np.ones((3, 3, 2, 4), np.float32), name="k")
        c = ff.relu(ff.conv2d(im, k, padding="SAME") + 1.0)
        e = ff.exp(ff.leaky_relu(x, 0.2) - 1.0)
    fetches = [y.value, c.value, e.value]
    compiled = optimize(g, fetches, {x.value: x.value.type, im.value: im.value.type}).graph
    return json.loads(ff.dump(compiled, format="json"))


@pytest.mark.parametrize("op, attr, value, fragment", [
    ("fused_matmul", "nodes", [["a\n#define exp(a) 42.0", "exp", ""]], "control char"),
    ("fused_matmul", "nodes", [["a;b", "exp", ""]], "triples"),
    ("fused_matmul", "nodes", [["a", "exp"]], "triples"),
    ("fused_conv", "nodes", [["a", "no_such_op", ""]], "triples"),
    ("fused_conv", "nodes", [["a", "exp", "m.py:1\r\n#define"]], "control characters"),
    ("fused_conv", "conv_attrs", [], "conv_attrs must set"),
    ("fused_conv", "conv_attrs", [1, 2], "pairs"),
    ("fused_elementwise", "steps", [["leaky_relu", [["alpha", "1); x"]], [["in", 0]]]],
     "alpha must be a Python number"),
    ("fused_elementwise", "steps", [["exp", [], [["in", 9]]]], "operand 9"),
])
def test_fused_nodes_from_a_file_are_checked(op, attr, value, fragment):
    doc = _fused_doc()
    _node(doc, op)["attrs"][attr] = value
    with pytest.raises(SerializationError, match=fragment):
        ff.load_graph(json.dumps(doc))


def test_a_fused_step_without_its_attrs_takes_the_defaults_on_gl_and_numpy(gl):
    doc = _fused_doc()
    fused = _node(doc, "fused_elementwise")
    step = next(s for s in fused["attrs"]["steps"] if s[0] == "leaky_relu")
    step[1] = []                                   # alpha left out: its default, 0.2
    g = ff.load_graph(json.dumps(doc))
    x = np.linspace(-3, 3, 32, dtype=np.float32).reshape(4, 8)
    feeds = {g.value("x"): x, g.value("im"): np.ones((1, 6, 6, 2), np.float32)}
    out = ff.Session(g).run(list(g.outputs), feeds)
    ref = ff.Session(g, backend="numpy", passes=[]).run(list(g.outputs), feeds)
    for a, b in zip(out, ref):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
