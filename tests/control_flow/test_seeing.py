"""Seeing control flow (issue 25): `fragflow shaders` and fn.dump_shaders write each
loop's or branch's kernels in a folder of their own (nested loops nested, an index
naming the control node), the HTML view draws sub-graphs as nested boxes, the DOT
dump as nested clusters, and sess.profile shows the time per step and per kernel
inside a loop."""
import html
import json
import os
import re
import shutil
import subprocess
from types import SimpleNamespace
from urllib.parse import quote

import numpy as np
import pytest

import fragflow as tf
from fragflow.ir.dot import graph_to_dot
from fragflow.tools.cli import main
from fragflow.tools.html import render_page

XB = np.array([1.0, -2.0, 0.5], np.float32)
CHROMIUM = "/usr/bin/chromium"


def nested():
    """A while_loop holding a while_loop and a cond, then a scan: `fragflow` target."""
    g = tf.Graph("cfm")
    with g.as_default():
        x = tf.placeholder(tf.float32, [3], name="x")
        with tf.name_scope("outer"):
            def body(i, v):
                w = tf.while_loop(lambda j, w: j < 2, lambda j, w: (j + 1, tf.sin(w) * 2.0),
                                  (0, v), name="inner")[1]
                # a reduction in a branch keeps it a cond (passes/cond_select.py)
                w = tf.cond(tf.reduce_sum(w) > 0.0, lambda: w * 3.0,
                            lambda: w - tf.reduce_max(w))
                return i + 1, w
            y = tf.while_loop(lambda i, v: i < 4, body, (0, tf.exp(x)), name="loop")[1]
        s = tf.scan(lambda a, e: a + e, y, initializer=tf.constant(0.0))
        z = tf.exp(s * 1e-3)
    return z, {x: XB}


def one_branch():
    """A cond whose predicate holds for the target's data: its false branch never runs."""
    g = tf.Graph("branch")
    with g.as_default():
        x = tf.placeholder(tf.float32, [3], name="x")
        y = tf.cond(tf.reduce_sum(x) < 100.0, lambda: tf.tanh(x),
                    lambda: tf.sigmoid(x) - tf.reduce_max(x), name="pick")    # not a select
    return y, {x: XB}


def cli(capsys, *argv):
    capsys.readouterr()
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


def compile_on_gl(path):
    """A .frag file compiles and links as it is (a linked-shader cache of its own)."""
    from fragflow.runtime.gl_resources import LinkedShaderCache
    text = open(path, encoding="utf-8").read()
    cache = LinkedShaderCache()
    try:
        assert cache.get(SimpleNamespace(body=text, source=text, compiled_source=text,
                                         name=str(path), user_code=None,
                                         compiled_user_code=None, inputs=())) > 0
    finally:
        cache.clear()


def _line(func) -> str:
    return f"test_seeing.py:{func.__code__.co_firstlineno}"


# -- fragflow shaders, fn.dump_shaders ------------------------------------------------------
def test_fragflow_shaders_writes_each_loops_kernels_in_a_folder_of_its_own(gl, capsys,
                                                                           tmp_path):
    out, err = cli(capsys, "shaders", f"{__file__}:nested", "-o", tmp_path)
    paths = out.split()
    files = sorted(os.path.relpath(p, tmp_path) for p in paths)
    assert re.search(r"^(\d+) shader\(s\) of \1 kernel\(s\)", err)
    top = sorted(os.listdir(tmp_path))
    loop = next(n for n in top if n.endswith("_outer_loop.cond_and_body"))
    scan = next(n for n in top if n.endswith("_scan.body"))
    assert top.index(loop) < top.index(scan)                 # run order
    inside = sorted(os.listdir(tmp_path / loop))
    inner = next(n for n in inside if n.endswith("_inner.cond_and_body"))
    assert any(n.endswith("_cond.true_branch") for n in inside)
    assert any(n.endswith("_cond.false_branch") for n in inside)
    # the kernels of the innermost loop: less (its condition), sin+mul (its body)
    inner_files = [f for f in files if f.startswith(f"{loop}/{inner}/")]
    assert any("_less.frag" in f for f in inner_files)
    assert any("_mul.frag" in f for f in inner_files)
    assert any(f.startswith(f"{scan}/") for f in files)
    assert any("/" not in f and f.endswith("_exp.frag") for f in files)   # outside
    index = (tmp_path / loop / "index.txt").read_text()
    assert index.startswith("while_loop 'outer/loop' (")
    assert re.search(r"test_seeing\.py:\d+\): its condition and body", index)
    assert "parameters: i32[], f32[3]" in index
    assert f"{inner}/" in index and "while_loop 'inner'" in index
    top_index = (tmp_path / "index.txt").read_text()
    assert f"{loop}/" in top_index and "while_loop 'outer/loop'" in top_index
    for path in paths:
        text = open(path, encoding="utf-8").read()
        assert "// fragflow kernel " in text and "void main()" in text
        compile_on_gl(path)
    printed, _ = cli(capsys, "shaders", f"{__file__}:nested")
    assert "// ---- in outer/loop.cond_and_body > inner.cond_and_body (while_loop" in printed


def test_a_branch_not_taken_is_named_in_the_index_without_a_folder(gl, capsys, tmp_path):
    cli(capsys, "shaders", f"{__file__}:one_branch", "-o", tmp_path)
    names = sorted(os.listdir(tmp_path))
    assert [n for n in names if n.endswith("pick.true_branch")]
    assert not [n for n in names if "false_branch" in n]
    index = (tmp_path / "index.txt").read_text()
    assert re.search(r"pick\.false_branch/ +cond 'pick': not compiled: not run yet", index)
    (branch,) = [n for n in names if n.endswith("pick.true_branch")]
    assert any(n.endswith("_tanh.frag") for n in os.listdir(tmp_path / branch))


def test_fn_dump_shaders_writes_the_same_folders(gl, tmp_path):
    z, feeds = nested()
    (x,) = feeds
    with tf.Session(z.graph) as sess:
        fn = sess.compile([z], feeds=[x])
        fn(XB)
        paths = fn.dump_shaders(str(tmp_path / "shaders"))
    rel = [os.path.relpath(p, tmp_path / "shaders") for p in paths]
    assert any(r.count("/") == 2 and "_inner.cond_and_body/" in r for r in rel)
    assert all(os.path.exists(p) for p in paths)
    assert (tmp_path / "shaders" / "index.txt").exists()


# -- DOT and HTML: sub-graphs nested ----------------------------------------------------------
def test_dot_draws_each_sub_graph_as_a_cluster_inside_its_loops():
    z, _ = nested()
    dot = tf.dump(z.graph, format="dot")
    assert dot == graph_to_dot(z.graph)
    assert 'label="while_loop outer/loop"' in dot and 'label="scan scan"' in dot
    lines = dot.splitlines()
    depth, depths = 0, {}
    for line in lines:
        m = re.match(r'\s*label="([^"]+)";', line)
        if m:
            depths.setdefault(m.group(1), depth)
        depth += line.count("{") - line.count("}")
    # the inner loop's cluster sits inside the outer loop's body cluster
    assert depths["while_loop loop/inner"] > depths["while_loop outer/loop"]
    assert depths["true_branch"] > depths["while_loop outer/loop"]
    # nodes inside are named for their place; edges inside join them
    assert '"outer/loop:body:loop/inner:body:inner/sin" -> ' \
           '"outer/loop:body:loop/inner:body:inner/mul"' in dot
    if shutil.which("dot"):
        result = subprocess.run(["dot", "-Tsvg"], input=dot, capture_output=True,
                                text=True, timeout=60)
        assert result.returncode == 0, result.stderr


def _rects(text, cls):
    return [tuple(float(v) for v in m.groups()) for m in re.finditer(
        rf'<g class="{cls}"><rect x="([\d.-]+)" y="([\d.-]+)" width="([\d.]+)" '
        rf'height="([\d.]+)"', text)]


def _node_box(text, node_id):
    m = re.search(rf'data-node="{re.escape(node_id)}" data-x="[\d.-]+" data-y="[\d.-]+"'
                  rf'[^>]*>.*?<rect x="([\d.-]+)" y="([\d.-]+)" width="(\d+)" '
                  rf'height="(\d+)"', text)
    assert m, node_id
    return tuple(float(v) for v in m.groups())


def _inside(a, b):
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    return bx <= ax and by <= ay and ax + aw <= bx + bw and ay + ah <= by + bh


def test_the_html_view_draws_a_loop_as_a_box_holding_its_sub_graphs(tmp_path):
    z, _ = nested()
    text = render_page(z.graph, title="cf")
    data = json.loads(re.search(r'id="ff-data">(.*?)</script>', text, re.S).group(1))
    boxes, subs = _rects(text, "cfbox"), _rects(text, "cfsub")
    assert len(boxes) == 4           # outer/loop, its inner loop and cond, the scan
    assert len(subs) == 7            # cond+body, cond+body, true+false, body
    outer = _node_box(text, "outer/loop")           # its title bar, inside its box
    box = next(b for b in boxes if _inside(outer, b))
    sin = _node_box(text, "outer/loop:body:loop/inner:body:inner/sin")
    inner_boxes = [b for b in boxes if _inside(sin, b)]
    assert len(inner_boxes) == 2 and box in inner_boxes     # nested: two boxes hold it
    record = data["nodes"]["outer/loop:body:loop/inner:body:inner/sin"]
    assert record["op"] == "sin" and record["kernel"] is None
    assert "inside while_loop 'loop/inner', its body" in record["note"]
    assert ["body", "a sub-graph of 10 nodes, drawn in this node's box"] in \
        data["nodes"]["outer/loop"]["attrs"]
    path = tmp_path / "cf.html"
    path.write_text(text, encoding="utf-8")
    if os.path.exists(CHROMIUM):
        name = "outer/loop:body:loop/inner:body:inner/sin"
        result = subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update",
             f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom",
             f"file://{path}#click={quote(name, safe='')}"],
            capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-2000:]
        assert 'data-ff-ready="1"' in result.stdout
        assert f'<h2 id="selected-name">{html.escape(name)}</h2>' in result.stdout
        assert 'id="no-kernel">inside while_loop' in result.stdout


def test_fragflow_dump_html_shows_the_kernels_around_the_loops(gl, capsys, tmp_path):
    path = tmp_path / "cf.html"
    cli(capsys, "dump", f"{__file__}:nested", "--format", "html", "-o", path)
    text = path.read_text(encoding="utf-8")
    data = json.loads(re.search(r'id="ff-data">(.*?)</script>', text, re.S).group(1))
    kernel = data["nodes"]["outer/exp"]["kernel"]
    assert kernel is not None and "exp" in data["kernels"][kernel]["source"]
    assert len(_rects(text, "cfbox")) == 4


# -- sess.profile inside loops ----------------------------------------------------------------
def test_profile_shows_time_per_step_and_per_kernel_inside_each_loop(gl):
    z, feeds = nested()
    with tf.Session(z.graph) as sess:
        want = tf.Session(z.graph, backend="numpy", passes=[]).run(z, feeds)
        np.testing.assert_allclose(sess.run(z, feeds), want, rtol=1e-5)
        p = sess.profile(z, feeds, runs=2)
    loops = {r["part"]: r for r in p.loops}
    outer, inner = "outer/loop.cond_and_body", \
        "outer/loop.cond_and_body > inner.cond_and_body"
    # the outer condition is tested 5 times (i = 0..4); each test runs its plan, body
    # included (its result discarded on the last), so the inner loop runs 5 times with
    # 3 tests each; the cond inside takes one branch per outer step; the scan: 3 steps
    assert loops[outer]["steps"] == 5 and loops[outer]["op"] == "while_loop"
    assert loops[inner]["steps"] == 15 and loops[inner]["node"] == "inner"
    branches = [r for r in p.loops if r["op"] == "cond"]
    assert sum(r["steps"] for r in branches) == 5
    assert loops["scan.body"]["steps"] == 3
    for r in p.loops:
        assert r["seconds"] > 0 and r["seconds_per_step"] * r["steps"] == \
            pytest.approx(r["seconds"])
    assert loops[outer]["seconds"] >= loops[inner]["seconds"]     # nested: included
    # per kernel: each body kernel's row is in the plan it runs in, counted per call
    rows = {r["kernel"]: r for r in p.kernel_rows}
    sin = next(r for name, r in rows.items() if name.startswith(inner) and "sin" in r["op"])
    assert round(sin["calls"]) == 15 and sin["scope"] == inner
    assert any(r["scope"] == outer and r["op"] == "sum" for r in p.rows)
    assert any(r["scope"] == "outer" and r["op"] == "exp" for r in p.rows)   # outside
    text = p.table()
    assert "inside loops and branches" in text and "steps per run" in text
    assert re.search(r"…nner\.cond_and_body > k\d+_mul +sin\+mul +15 ", p.table(by="kernel"))


def test_fn_kernels_lists_the_kernels_inside_loops_where_they_run(gl):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [4], name="x")
        n = tf.placeholder(tf.int32, [], name="n")
        y = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, tf.sin(v) * 2.0),
                          (0, x))[1]
        z = tf.exp(y)
    fn = tf.Session(g).compile([z], feeds=[x, n])
    fn(np.ones(4, np.float32), np.int32(3))
    assert [k.name for k in fn.kernels] == ["k0_less", "k1_add", "k2_mul", "k0_exp"]
    assert all(k.strategy for k in fn.kernels)
