"""Control-flow graphs in text (ff.dump: sub-graphs nested, as a jaxpr prints
while[cond_jaxpr={...} body_jaxpr={...}]) and JSON (ff.load_graph, untrusted)."""
import json

import numpy as np
import pytest

import fragflow as tf
from fragflow.ir import serialize
from fragflow.ir.printer import format_graph


def _graph():
    g = tf.Graph("loops")
    with g.as_default():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        w = tf.placeholder(tf.float32, [2], name="w")

        def body(i, v):
            inner = tf.cond(tf.reduce_sum(v) > 0, lambda: v * w, lambda: v - w)
            return i + 1, inner
        i, v = tf.while_loop(lambda i, v: i < 3, body, (0, x), maximum_iterations=5)
        s = tf.scan(lambda a, e: a + e, v, initializer=tf.zeros([2]), reverse=True)
        y = tf.identity(s, name="y")
    return g, y


def test_the_text_dump_nests_each_sub_graph_under_its_node():
    g, _ = _graph()
    text = tf.dump(g)
    lines = text.splitlines()
    loop = next(k for k, line in enumerate(lines) if "= while_loop(" in line)
    assert "{num_vars=2, maximum_iterations=5}" in lines[loop]
    assert lines[loop + 1].startswith("    graph cond(")
    body = next(k for k, line in enumerate(lines) if line.startswith("    graph body("))
    nested = next(k for k, line in enumerate(lines) if line.startswith("        graph "
                                                                        "true_branch("))
    assert loop < body < nested
    assert "%captured_w: f32[2]" in text       # the captured value is a parameter
    assert "scan(" in text and "reverse=true" in text


def test_json_round_trips_control_flow_exactly_and_runs_the_same():
    g, y = _graph()
    text = tf.dump(g, "json")
    loaded = tf.load_graph(text)
    assert format_graph(loaded) == format_graph(g)
    xb = np.array([[1.0, -2.0], [0.5, 0.25], [3.0, 1.0]], np.float32)
    wb = np.array([0.5, 2.0], np.float32)
    want = tf.Session(g, backend="numpy").run(y, {"x": xb, "w": wb})
    got = tf.Session(loaded, backend="numpy").run(loaded.value("y"), {"x": xb, "w": wb})
    np.testing.assert_array_equal(got, want)


def _nested_doc(depth):
    g = tf.Graph()
    with g.as_default():
        def nest(k, v):
            if k == 0:
                return v + 1.0
            return tf.while_loop(lambda u: tf.reduce_sum(u) < 10.0,
                                 lambda u: nest(k - 1, u), [v])
        nest(depth, tf.zeros([1]))
    return json.loads(tf.dump(g, "json"))


def test_sub_graphs_nested_past_the_depth_limit_are_refused(monkeypatch):
    monkeypatch.setattr(serialize, "MAX_GRAPH_DEPTH", 3)
    tf.load_graph(json.dumps(_nested_doc(3)))
    with pytest.raises(tf.SerializationError, match="sub-graphs nested more than 3 deep"):
        tf.load_graph(json.dumps(_nested_doc(4)))


def test_nodes_inside_sub_graphs_count_against_the_node_limit(monkeypatch):
    doc = _nested_doc(2)
    monkeypatch.setattr(serialize, "MAX_NODES", 8)
    with pytest.raises(tf.SerializationError, match="at most 8 nodes .sub-graphs"):
        tf.load_graph(json.dumps(doc))


def _loop_node(doc):
    return next(n for n in doc["nodes"] if n["op"] == "while_loop")


def test_bad_sub_graphs_are_serialization_errors():
    doc = _nested_doc(1)
    body = _loop_node(doc)["attrs"]["body"]["graph"]
    body["nodes"][-1]["op"] = "no_such_op"
    with pytest.raises(tf.SerializationError, match=r"attr 'body': node \d+ .*unknown op"):
        tf.load_graph(json.dumps(doc))
    doc = _nested_doc(1)
    _loop_node(doc)["attrs"]["num_vars"] = -1
    with pytest.raises(tf.SerializationError, match="num_vars' must be a non-negative"):
        tf.load_graph(json.dumps(doc))
    doc = _nested_doc(1)
    _loop_node(doc)["attrs"]["body"] = 7
    with pytest.raises(tf.SerializationError, match="sub-graph attr must be a Graph"):
        tf.load_graph(json.dumps(doc))
    doc = _nested_doc(1)
    fill = next(n for n in doc["nodes"] if n["op"] == "fill")
    fill["attrs"]["value"] = {"graph": _loop_node(doc)["attrs"]["body"]["graph"]}
    with pytest.raises(tf.SerializationError, match="cannot be a graph"):
        tf.load_graph(json.dumps(doc))


def test_a_program_inside_a_body_needs_allow_programs_too():
    doc = _nested_doc(1)
    body = _loop_node(doc)["attrs"]["body"]["graph"]
    body["nodes"][-1]["op"] = "gpgpu_program"
    with pytest.raises(tf.SerializationError, match="allow_programs=True"):
        tf.load_graph(json.dumps(doc))
