"""`fragflow dump --format html`: one self-contained page; in headless Chromium it loads
without script errors and clicking a node shows the GLSL of the kernel that runs it."""
import html
import json
import os
import re
import subprocess
from urllib.parse import quote

import pytest

from tests.reference import version_line

from cli_targets import program, run_cli, target

CHROMIUM = "/usr/bin/chromium"


def page(capsys, tmp_path, func="dense_fed", *extra):
    path = tmp_path / f"{func}.html"
    code, out, err = run_cli(capsys, "dump", target(func), "--format", "html", "-o", path,
                             *extra)
    assert code == 0, err
    return path, path.read_text(encoding="utf-8")


def page_data(text):
    raw = re.search(r'<script type="application/json" id="ff-data">(.*?)</script>', text,
                    re.S).group(1)
    return json.loads(raw)


def test_page_is_self_contained(gl, capsys, tmp_path):
    _, text = page(capsys, tmp_path)
    assert text.startswith("<!DOCTYPE html>")
    # the SVG namespace is a name, not a fetch; nothing else points off the page
    assert "://" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=", text)


def test_page_holds_every_node_its_kernel_and_the_fused_outline(gl, capsys, tmp_path):
    from cli_targets import dense
    _, text = page(capsys, tmp_path)
    data = page_data(text)
    graph = dense()[0].graph
    assert set(data["nodes"]) == {n.name for n in graph.nodes}
    for name in data["nodes"]:
        assert f'data-node="{html.escape(name)}"' in text
    kernels = data["kernels"]
    assert [k["name"] for k in kernels] == ["k0_dense_matmul", "k1_square", "k2_mean"]
    for name in ("dense/matmul", "dense/add", "dense/relu"):
        assert data["nodes"][name]["kernel"] == 0
    assert kernels[0]["source"].startswith(f"{version_line()}\n// fragflow kernel "
                                           "k0_dense_matmul")
    assert "fused kernel k0_dense_matmul" in text                # the outline's label
    assert data["nodes"]["b"]["note"].startswith("a constant")
    assert data["nodes"]["dense/add"]["source"].endswith(
        re.search(r"cli_targets.py:\d+", data["nodes"]["dense/add"]["source"]).group(0))
    assert ["dense/matmul", "f32[8,3]"] in data["nodes"]["dense/add"]["inputs"]
    assert ">f32[8,4]</text>" in text                            # an edge's label


def test_a_program_node_carries_its_glsl(gl, capsys, tmp_path):
    _, text = page(capsys, tmp_path, "program")
    data = page_data(text)
    node = data["nodes"]["custom/square_add"]
    assert node["op"] == "gpgpu_program" and node["family"] == "program"
    assert ["name", "square_add"] in node["attrs"]
    kernel = data["kernels"][node["kernel"]]
    assert kernel["op"] == "square_add" and "setOutput(scale * (v * v + v));" in \
        kernel["source"]
    assert {n.name for n in program().graph.nodes} == set(data["nodes"])


def chromium_dom(path, fragment, tmp_path):
    result = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--enable-logging=stderr", "--v=0", "--dump-dom",
         f"file://{path}#{fragment}"],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    console = [ln for ln in result.stderr.splitlines() if "CONSOLE" in ln]
    return result.stdout, console


@pytest.mark.skipif(not os.path.exists(CHROMIUM),
                    reason="Chromium is not installed (Debian: apt-get install chromium)")
def test_in_chromium_a_click_shows_the_kernels_glsl(gl, capsys, tmp_path):
    path, _ = page(capsys, tmp_path)
    for fragment, name in (("click=" + quote("dense/add", safe=""), "dense/add"),
                           ("select=square", "square")):
        dom, console = chromium_dom(path, fragment, tmp_path)
        assert console == [], console
        assert 'data-ff-ready="1"' in dom and 'data-ff-errors="' not in dom
        assert f'<h2 id="selected-name">{name}</h2>' in dom
        glsl = re.search(r'<pre id="glsl">(.*?)</pre>', dom, re.S)
        assert glsl, dom[-3000:]
        shader = html.unescape(glsl.group(1))
        kernel = "k0_dense_matmul" if name == "dense/add" else "k1_square"
        assert shader.startswith(f"{version_line()}\n// fragflow kernel {kernel}")
        assert "void main()" in shader
        assert re.search(rf'<g class="node selected" data-node="{name}"', dom)
    dom, console = chromium_dom(path, "select=b", tmp_path)           # no kernel of its own
    assert console == [] and 'id="no-kernel">a constant' in dom


# --- a node lowered to several kernels; a graph wider than the window ------------------

def test_a_node_shows_the_kernel_that_computes_it_and_lists_its_others(gl, capsys, tmp_path):
    _, text = page(capsys, tmp_path, "heavy")
    data = page_data(text)
    kernels, nodes = data["kernels"], data["nodes"]
    parts = [k["part"] for k in kernels]
    stitch, main = parts.index("stitch"), parts.index("targets")
    assert main < stitch and kernels[stitch]["name"].startswith("k0s_layer_matmul")
    # the epilogue's nodes: the stitch writes them; the product: the blocked kernel
    for name in ("layer/add", "layer/relu"):
        assert nodes[name]["kernel"] == stitch, (name, nodes[name])
        assert name in kernels[stitch]["computes"]
    assert nodes["layer/matmul"]["kernel"] == main
    assert kernels[main]["computes"] == ["layer/matmul"]
    lowering = list(range(stitch + 1))                # packing kernels, blocked, stitch
    for name in ("layer/matmul", "layer/add", "layer/relu"):
        assert nodes[name]["kernels"] == lowering, (name, nodes[name])
    assert nodes["head/sum"]["kernels"] == [nodes["head/sum"]["kernel"]]
    outline = " + ".join(kernels[i]["name"] for i in lowering)
    assert f"fused kernels {html.escape(outline)}</text>" in text
    assert "// computes the product of matmul 'layer/matmul' into" in kernels[main]["source"]


def wide_target(tmp_path):
    """A graph some 5000 px wide (eight branches a block), its one input at the top."""
    path = tmp_path / "wide.py"
    path.write_text(
        "import fragflow as ff\n\n\n"
        "def wide():\n"
        "    g = ff.Graph('wide')\n"
        "    with g.as_default():\n"
        "        x = ff.placeholder((4, 8), name='x')\n"
        "        h = x\n"
        "        for i in range(4):\n"
        "            with ff.name_scope(f'block{i}'):\n"
        "                h = ff.add_n([ff.tanh(h * float(j + 1) + float(i))\n"
        "                              for j in range(8)])\n"
        "    return h\n", encoding="utf-8")
    out = tmp_path / "wide.html"
    return f"{path}:wide", out


def test_the_page_marks_the_graphs_inputs_to_open_on(gl, capsys, tmp_path):
    source, out = wide_target(tmp_path)
    code, _, err = run_cli(capsys, "dump", source, "--format", "html", "-o", out)
    assert code == 0, err
    text = out.read_text(encoding="utf-8")
    width = float(re.search(r'<svg [^>]*width="(\d+)"', text).group(1))
    marked = re.findall(r'<g class="node" data-node="([^"]+)" data-x="(\d+)" '
                        r'data-y="(\d+)" data-input="1"', text)
    assert [m[0] for m in marked] == ["x"], marked
    assert width > 3000 and 0.25 * width < float(marked[0][1]) < 0.75 * width


@pytest.mark.skipif(not os.path.exists(CHROMIUM),
                    reason="Chromium is not installed (Debian: apt-get install chromium)")
def test_in_chromium_a_stitched_node_shows_its_stitch_and_a_wide_graph_its_input(
        gl, capsys, tmp_path):
    path, text = page(capsys, tmp_path, "heavy")
    kernels = page_data(text)["kernels"]
    stitch = next(k for k in kernels if k["part"] == "stitch")
    others = [k for k in kernels if k is not stitch and "layer/relu" in k["nodes"]]
    dom, console = chromium_dom(path, "click=" + quote("layer/relu", safe=""), tmp_path)
    assert console == [] and 'data-ff-errors="' not in dom, console
    assert re.search(r'<h2 id="kernel-name">kernel #\d+ ' + re.escape(stitch["name"]), dom)
    shader = html.unescape(re.search(r'<pre id="glsl">(.*?)</pre>', dom, re.S).group(1))
    assert shader.startswith(f"{version_line()}\n// fragflow kernel {stitch['name']}")
    listed = re.findall(r'<details class="other-kernel" data-kernel="(\d+)"><summary>'
                        r'kernel #\d+ ([^ ]+) ', dom)
    assert [name for _, name in listed] == [k["name"] for k in others], listed
    # a graph far wider than the window opens with its input in view
    source, out = wide_target(tmp_path)
    code, _, err = run_cli(capsys, "dump", source, "--format", "html", "-o", out)
    assert code == 0, err
    dom, console = chromium_dom(out, "", tmp_path)
    assert console == [] and 'data-ff-errors="' not in dom, console
    left, top, width, height = map(float, re.search(
        r'id="canvas" data-ff-view="([\d.,]+)"', dom).group(1).split(","))
    x, y = (float(v) for v in re.search(
        r'data-node="x" data-x="(\d+)" data-y="(\d+)"', dom).groups())
    assert left > 0 and left < x < left + width and top <= y < top + height, \
        (left, top, width, height, x, y)
