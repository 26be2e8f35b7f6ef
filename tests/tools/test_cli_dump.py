"""`fragflow dump`: the graph of a saved graph or of a model.py:func target, as text,
after any pass, as DOT/SVG; Graph's Jupyter reprs."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import fragflow as ff

from cli_targets import run_cli, target

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def saved_graph(tmp_path, outputs=True):
    g = ff.Graph("saved")
    with g.as_default():
        x = ff.placeholder((None, 3), name="x")
        with ff.name_scope("block"):
            y = ff.exp(x * 2.0, name="e")
        z = ff.sum(y, axis=1)
    if outputs:
        g.outputs = [z.value]
    path = tmp_path / "g.json"
    ff.save_graph(g, str(path))
    return g, str(path)


def node_names(graph):
    return [n.name for n in graph.nodes]


def test_dump_of_a_model_function_names_every_node(capsys):
    from cli_targets import dense
    graph = dense()[0].graph
    code, out, err = run_cli(capsys, "dump", target("dense"))
    assert code == 0, err
    assert out.strip() == ff.dump(graph)
    for name in node_names(graph):
        assert f"# {name} " in out


def test_dump_after_each_pass_shows_every_stage_and_fusion(capsys):
    code, out, err = run_cli(capsys, "dump", target("dense"), "--after", "all")
    assert code == 0, err
    stages = re.findall(r"^// after (\w+):", out, re.M)
    from fragflow.passes.manager import DEFAULT_PIPELINE, FUSION_PASSES
    assert stages == ["prune", *DEFAULT_PIPELINE]
    epilogues = "fuse_epilogues"               # the pass that fuses matmul epilogues
    assert epilogues in FUSION_PASSES
    code, out, err = run_cli(capsys, "dump", target("dense"), "--after", epilogues)
    assert code == 0, err
    assert out.startswith(f"// after {epilogues}:")
    assert "// fused matmul 'dense/matmul'" in out          # the pass's report
    assert re.search(r"= fused_matmul\(%x, %w, %0\) \{steps=\[s0=add\(in0,in1\); "
                     r"s1=relu\(s0\)\]\} : f32\[\?,3\]", out)
    assert "# dense/relu" in out


def test_dump_of_a_saved_graph_fetches_its_sinks_when_it_has_no_outputs(tmp_path, capsys):
    g, path = saved_graph(tmp_path, outputs=False)
    code, out, err = run_cli(capsys, "dump", path)
    assert code == 0, err
    assert out.strip() == ff.dump(g)
    code, out, err = run_cli(capsys, "dump", path, "--after", "prune",
                             "--feed-shape", "x=2,3")
    assert code == 0, err
    assert "sum(" in out and "return" in out and "f32[2,3]" in out
    code, out, err = run_cli(capsys, "dump", path, "--after", "nonsense")
    assert code == 2 and "no such pass" in err and "fuse_elementwise" in err


def test_dot_outlines_fused_kernels_and_labels_edges_with_run_shapes(capsys):
    code, out, err = run_cli(capsys, "dump", target("dense_fed"), "--format", "dot")
    assert code == 0, err
    assert out.startswith('digraph "demo"')
    cluster = out.split("subgraph cluster_0 {", 1)[1].split("}", 1)[0]
    assert 'label="k0_dense_matmul"' in cluster
    for name in ("dense/matmul", "dense/add", "dense/relu"):
        assert f'"{name}" [label=' in cluster
    assert '"x" -> "dense/matmul" [label="f32[8,4]"]' in out     # the fed shape
    assert 'fillcolor="#ffc9c9"' in out                           # matmul's family colour


@pytest.mark.skipif(shutil.which("dot") is None,
                    reason="Graphviz's dot is not installed (Debian: graphviz)")
def test_svg_draws_every_node(capsys, tmp_path):
    out_file = tmp_path / "g.svg"
    code, out, err = run_cli(capsys, "dump", target("program"), "--format", "svg",
                             "-o", out_file)
    assert code == 0, err
    svg = out_file.read_text()
    assert "<svg" in svg and "</svg>" in svg
    from cli_targets import program
    for name in node_names(program().graph):
        assert f"<title>{name}</title>" in svg
    assert "square_add" in svg


def test_svg_without_graphviz_says_what_to_install(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))          # no `dot` anywhere
    code, out, err = run_cli(capsys, "dump", target("dense"), "--format", "svg")
    assert code == 2
    assert "Graphviz" in err and "apt-get install graphviz" in err


def test_unknown_dimensions_need_a_feed_shape(capsys):
    code, out, err = run_cli(capsys, "shaders", target("dense"))
    assert code == 2
    assert "placeholder 'x' has shape f32[?,4]" in err and "--feed-shape x=" in err
    code, out, err = run_cli(capsys, "shaders", target("dense"), "--feed-shape", "y=3")
    assert code == 2 and "no placeholder the fetches need has that name" in err
    code, out, err = run_cli(capsys, "shaders", target("dense"), "--feed-shape", "x=3,5")
    assert code == 2 and "does not fit" in err


def test_console_script_dumps_a_saved_graph(tmp_path):
    g, path = saved_graph(tmp_path)
    result = subprocess.run([sys.executable, "-m", "fragflow.tools.cli", "dump", path,
                             "--format", "json"], capture_output=True, text=True,
                            timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert ff.dump(ff.load_graph(result.stdout)) == ff.dump(g)


def test_graph_shows_itself_in_jupyter():
    g = ff.Graph("nb")
    with g.as_default():
        x = ff.placeholder((2,), name="x")
        ff.relu(x, name="r")

    class Printer:
        text_out = ""

        def text(self, s):
            self.text_out += s

    printer = Printer()
    g._repr_pretty_(printer, cycle=False)
    assert printer.text_out == ff.dump(g)
    svg = g._repr_svg_()
    if shutil.which("dot") is None:
        assert svg is None                     # IPython falls back to the text
    else:
        assert "<svg" in svg and "<title>r</title>" in svg


def test_info_lists_cache_directories(capsys, gl):
    code, out, err = run_cli(capsys, "info")
    assert code == 0, err
    for key in ("backend", "renderer", "version", "max_texture_size",
                "fragflow_cache_dir", "shader_cache_dir", "glslangValidator"):
        assert re.search(rf"^{key}\s+\S", out, re.M), key
    assert os.environ["FRAGFLOW_CACHE_DIR"] in out


def test_feed_values_are_seeded_and_of_the_declared_dtype():
    from fragflow.tools.target import load_target
    t = load_target(target("dense"))
    feeds = t.feeds({"x": (3, 4)})
    (value, array), = feeds.items()
    assert value.name == "x" and array.shape == (3, 4) and array.dtype == np.float32
    again = load_target(target("dense")).feeds({"x": (3, 4)})
    np.testing.assert_array_equal(next(iter(again.values())), array)
