"""Nothing from a user or a file reaches GLSL except through ir/sanitize.py.

A newline in a node name, scope or source string copied into a shader comment ends the
comment; what follows would be compiled, e.g. '#define exp(a) 42.0' changing what every
exp of the kernel computes. These tests try it through each door."""
import json
import re

import numpy as np
import pytest

import fragflow as ff
from fragflow.ir import sanitize
from fragflow.ir.errors import SerializationError

PAYLOAD = "a\n#define exp(a) 42.0\n//b"   # on unescaped code: exp(x) = 42 on GL
HOSTILE_TEXTS = [PAYLOAD, "a\rb", "a\\", "a*/b", "tab\there", "nul\x00", "é\u2028x",
                 "a%0Ab", "ok/../../etc", "line\x0bfeed", "\\\n#define exp(a) 42.0"]


def _exp_graph(scope=None):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 5), "float32", name="x")
        if scope is None:
            y = ff.exp(x) * 2.0 + 1.0
        else:
            with ff.name_scope(scope):
                y = ff.exp(x) * 2.0 + 1.0
    return g, x, y


def _comments(source):
    return [line.split("//", 1)[1] for line in source.splitlines() if "//" in line]


@pytest.mark.parametrize("text", HOSTILE_TEXTS)
def test_comment_escapes_everything_that_could_leave_the_comment(text):
    out = sanitize.comment(text)
    assert re.fullmatch(r"[\x20-\x7e]*", out), out
    assert "\\" not in out and "*/" not in out
    assert "\n" not in out and "\r" not in out


@pytest.mark.parametrize("scope", [PAYLOAD, "a\\", "dense/\nx", "bad scope", "a:1",
                                   "x\n#define exp(a) 42.0\n/"])
def test_hostile_name_scope_is_refused_where_it_is_made(scope):
    g = ff.Graph()
    with g.as_default(), pytest.raises(sanitize.InvalidNameError, match="name scope"):
        with ff.name_scope(scope):
            ff.constant(1.0)


@pytest.mark.parametrize("name", [PAYLOAD, "a b", "x:0", "", "a//b", 7])
def test_hostile_node_name_is_refused_where_it_is_made(name):
    g = ff.Graph()
    with g.as_default(), pytest.raises(sanitize.InvalidNameError):
        ff.placeholder((2,), name=name)


@pytest.mark.parametrize("field, value", [("name", PAYLOAD), ("scope", PAYLOAD),
                                          ("source", PAYLOAD), ("name", "a\\"),
                                          ("scope", "a\\")])
def test_hostile_json_graph_is_refused_before_anything_is_built(field, value):
    g, _, _ = _exp_graph()
    doc = json.loads(ff.dump(g, format="json"))
    exp_node = next(n for n in doc["nodes"] if n["op"] == "exp")
    exp_node[field] = value
    with pytest.raises(SerializationError, match=field):
        ff.load_graph(json.dumps(doc))


def test_hostile_fused_attrs_in_json_are_refused():
    g, _, _ = _exp_graph()
    doc = json.loads(ff.dump(g, format="json"))
    node = next(n for n in doc["nodes"] if n["op"] == "exp")
    node["attrs"]["bogus"] = PAYLOAD
    with pytest.raises(SerializationError):
        ff.load_graph(json.dumps(doc))


def test_source_lines_are_cleaned_when_the_node_is_made():
    g = ff.Graph()
    x = g.add_node("placeholder", [], {"shape": (2,), "dtype": "float32"},
                   source=PAYLOAD).outputs[0]
    assert "\n" not in x.node.source and x.node.source.startswith("a?#define")


def _run_both(g, x, y, feed):
    gl_out = ff.Session(g).run(y, {x: feed})
    ref = ff.Session(g, backend="numpy", passes=[]).run(y, {x: feed})
    return gl_out, ref


@pytest.fixture
def no_name_checks(monkeypatch):
    """As if a name got past the checks at creation: codegen must still be safe."""
    from fragflow.ir import graph
    for check in ("check_name", "check_scope", "clean_source"):
        monkeypatch.setattr(graph, check, lambda text, *what: text)


def test_names_that_bypass_validation_still_cannot_change_a_kernel(gl, no_name_checks):
    """Text that got past the gate reaches the shader only inside escaped comments:
    results stay right."""
    g, x, y = _exp_graph(scope=PAYLOAD)
    assert "\n" in y.name
    for node in g.nodes:
        node.source = PAYLOAD
    feed = np.linspace(-2, 2, 15, dtype=np.float32).reshape(3, 5)
    gl_out, ref = _run_both(g, x, y, feed)
    np.testing.assert_allclose(gl_out, ref, rtol=1e-5)
    assert not np.any(gl_out == 85.0)               # 42 * 2 + 1: the define took effect


def test_every_generated_comment_line_is_clean(gl, no_name_checks):
    g, x, y = _exp_graph(scope="evil\\")
    for node in g.nodes:
        node.source = "evil.py:1\\"
    sess = ff.Session(g)
    fn = sess.compile([y], feeds=[x])
    assert fn.kernels
    for kernel in fn.kernels:
        assert "#define" not in kernel.source.replace("%0A#define", "")
        for line in kernel.source.splitlines()[1:]:
            assert not line.lstrip().startswith("#"), line
        for text in _comments(kernel.source):
            assert re.fullmatch(r"[\x20-\x7e]*", text), text
            assert "\\" not in text and "*/" not in text
    np.testing.assert_allclose(fn(np.ones((3, 5), np.float32))[0],
                               np.exp(np.ones((3, 5), np.float32)) * 2 + 1, rtol=1e-5)


def test_dumped_shader_files_escape_their_headers(gl, tmp_path):
    from fragflow.frontend.shaders import write_shaders
    g, x, y = _exp_graph()
    for node in g.nodes:
        node.source = PAYLOAD
    fn = ff.Session(g).compile([y], feeds=[x])
    for path in write_shaders(fn.kernels, str(tmp_path)):
        text = open(path).read()
        lines = text.splitlines()
        assert all(not line.startswith("#") for line in lines[1:]), text
        assert all(re.fullmatch(r"[\t\x20-\x7e]*", line) for line in lines)


def test_the_shader_check_catches_a_bypassed_template():
    with pytest.raises(sanitize.UnsafeShaderError, match="preprocessor"):
        sanitize.check_shader("#version 330 core\n// a\n#define exp(a) 42.0\n")
    with pytest.raises(sanitize.UnsafeShaderError, match="next line"):
        sanitize.check_shader("#version 330 core\n// a\\\nvoid main() {}\n")
    sanitize.check_shader("#version 330 core\n// ok\nvoid main() {}\n")


@pytest.mark.parametrize("name", ["gl_Position", "ff_out", "a__b", "float", "1x",
                                  "x y", "main", PAYLOAD])
def test_program_identifiers_must_be_safe_glsl(name):
    with pytest.raises(sanitize.InvalidNameError):
        sanitize.identifier(name)
