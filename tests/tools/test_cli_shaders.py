"""`fragflow shaders` and fn.dump_shaders: one .frag per kernel, numbered in run order,
each starting with a header that names what it computes, and each compiling as it is
(on GL, and under glslangValidator where it is installed)."""
import os
import re
import shutil
import subprocess
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest

import fragflow as ff
from tests.reference import version_line

from cli_targets import run_cli, target


def compile_on_gl(path):
    """Compile and link a .frag file as it is, in a linked-shader cache of its own."""
    from fragflow.runtime.gl_resources import LinkedShaderCache
    text = open(path, encoding="utf-8").read()
    cache = LinkedShaderCache()
    try:
        shader = cache.get(SimpleNamespace(body=text, source=text, compiled_source=text,
                                           name=str(path), user_code=None,
                                           compiled_user_code=None, inputs=()))
        assert shader > 0
    finally:
        cache.clear()


def glslang(path):
    result = subprocess.run(["glslangValidator", str(path)], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def header(path) -> str:
    text = open(path, encoding="utf-8").read()
    return text.split("// -- end of header --", 1)[0]


def test_one_file_per_kernel_in_run_order_each_compiling(gl, capsys, tmp_path):
    code, out, err = run_cli(capsys, "shaders", target("dense_fed"), "-o", tmp_path)
    assert code == 0, err
    paths = out.split()
    names = sorted(os.listdir(tmp_path))
    assert [os.path.basename(p) for p in paths] == names
    assert names == ["00_k0_dense_matmul.frag", "01_k1_square.frag", "02_k2_mean.frag"]
    for path in paths:
        text = open(path, encoding="utf-8").read()
        assert text.startswith(f"{version_line()}\n// fragflow kernel ")
        compile_on_gl(path)
        if shutil.which("glslangValidator"):
            glslang(path)


def test_the_header_lists_fused_nodes_scopes_lines_layouts_and_uniforms(gl, capsys,
                                                                         tmp_path):
    code, out, err = run_cli(capsys, "shaders", target("dense_fed"), "-o", tmp_path)
    assert code == 0, err
    first = header(tmp_path / "00_k0_dense_matmul.frag")
    assert "// fragflow kernel k0_dense_matmul: fused_matmul" in first
    assert "implements 3 nodes, fused into one kernel:" in first
    for name, op in (("dense/matmul", "matmul"), ("dense/add", "add"),
                     ("dense/relu", "relu")):
        assert re.search(rf"//   {name} = {op} +scope 'dense'  \S*cli_targets.py:\d+",
                         first), name
    assert "//   x0 <- x : f32[8,4]  (8x1 RGBA32F texels)" in first
    assert "//   x1 <- w : f32[4,3]  (3x1 RGBA32F texels)" in first
    assert "//   ff_out -> dense/relu : f32[8,3]  (6x1 RGBA32F texels)" in first
    assert "// uniforms: none" in first
    last = header(tmp_path / "02_k2_mean.frag")
    assert re.search(r"//   mean = mean +scope '\(root\)'", last)


def test_a_gpgpu_program_is_written_under_its_name_with_its_uniforms(gl, capsys, tmp_path):
    code, out, err = run_cli(capsys, "shaders", target("program"), "-o", tmp_path)
    assert code == 0, err
    (path,) = [p for p in out.split() if "square_add" in p]
    head = header(path)
    assert "01_k1_custom_square_add.frag" in path
    assert "// fragflow kernel k1_custom_square_add: square_add" in head
    assert "custom/square_add = gpgpu_program 'square_add'" in head
    assert "//   float scale = 0.5" in head
    first_line = int(re.search(r"user GLSL of program 'square_add' starts at line (\d+)",
                               head).group(1))
    from cli_targets import square_add
    user = textwrap.dedent(square_add.glsl).rstrip().splitlines()   # the user's line 1..
    lines = open(path, encoding="utf-8").read().splitlines()
    assert lines[first_line - 1:first_line - 1 + len(user)] == user
    assert "float v = getXAtOutCoords();" in user
    compile_on_gl(path)


def test_each_file_is_the_kernel_source_header_included(gl, tmp_path):
    from cli_targets import program
    out = program()
    x = out.graph.node("x").outputs[0]
    with ff.Session(out.graph) as sess:
        fn = sess.compile([out], feeds=[x])
        fn(np.ones((6, 5), np.float32))
        paths = fn.dump_shaders(str(tmp_path / "shaders"))
        kernels = fn.kernels
    assert len(paths) == len(kernels)
    for path, kernel in zip(paths, kernels):
        assert open(path, encoding="utf-8").read() == kernel.source
        assert kernel.source.startswith(f"{version_line()}\n// fragflow kernel {kernel.name}")


def test_one_kernel_by_name_or_node_and_unknown_names_list_the_kernels(gl, capsys):
    code, out, err = run_cli(capsys, "shaders", target("dense"), "--feed-shape", "x=5,4",
                             "--kernel", "square")
    assert code == 0, err
    assert out.count(version_line()) == 1
    assert "// fragflow kernel k1_square: square" in out
    assert "x0 <- dense/relu : f32[5,3]" in out
    code, out, err = run_cli(capsys, "shaders", target("dense"), "--feed-shape", "x=5,4",
                             "--kernel", "dense/add")          # a node a fusion folded in
    assert code == 0 and "k0_dense_matmul" in out
    code, out, err = run_cli(capsys, "shaders", target("dense"), "--feed-shape", "x=5,4",
                             "--kernel", "nope")
    assert code == 2
    assert "no kernel named 'nope'" in err and "k0_dense_matmul, k1_square, k2_mean" in err


def test_a_saved_graph_with_a_feed_shape(gl, capsys, tmp_path):
    from cli_targets import dense
    path = tmp_path / "demo.json"
    ff.save_graph(dense()[0].graph, str(path))       # no outputs: its sinks are fetched
    code, out, err = run_cli(capsys, "shaders", path, "--feed-shape", "x=2,4",
                             "-o", tmp_path / "s")
    assert code == 0, err
    paths = out.split()
    assert "x0 <- x : f32[2,4]" in header(paths[0])
    assert re.search(r"ff_out -> mean : f32\[\]", header(paths[-1]))   # the sink
    for p in paths:
        compile_on_gl(p)


@pytest.mark.skipif(shutil.which("glslangValidator") is None,
                    reason="glslangValidator is not installed (Debian: glslang-tools)")
def test_validation_hook_rejects_what_glslang_rejects(gl, monkeypatch):
    from fragflow.runtime.gl_resources import LinkedShaderCache
    monkeypatch.setenv("FRAGFLOW_VALIDATE_SHADERS", "1")
    bad = "#version 330 core\nout vec4 o;\nvoid main() { o = vec4(undeclared); }\n"
    rejected = "(?s)glslangValidator.*'undeclared' : undeclared identifier"
    with pytest.raises(ff.ShaderCompileError, match=rejected):    # before the driver sees it
        LinkedShaderCache().get(SimpleNamespace(body=bad, source=bad, compiled_source=bad,
                                                name="bad", user_code=None,
                                                compiled_user_code=None, inputs=()))
