"""A kernel's header comment is rendered once, from its record: the same text in
kernel.source, in fn.dump_shaders' files and in `fragflow shaders`, following every
change of the record, and with all outside text through the sanitiser."""
import dataclasses
import re

import numpy as np

import fragflow as ff
from fragflow.codegen.kernel import HEADER_END, Binding, Kernel, NodeRecord
from fragflow.codegen.layout import Layout
from fragflow.ir import sanitize

BODY = "#version 330 core\n" + HEADER_END + "\nout vec4 ff_out;\nvoid main() {}\n"


def _kernel(**changes):
    out = Binding("ff_out", "y", Layout((8, 3), "float32", 6, 1))
    x = Binding("x0", "x", Layout((8, 4), "float32", 8, 1))
    record = dict(name="k0_y", op="relu", nodes=("y",), scope="", location="m.py:3",
                  source=BODY, inputs=(x,), output=out,
                  implements=(NodeRecord("y", "relu", "", "m.py:3"),))
    record.update(changes)
    return Kernel(**record)


def _header(source):
    return source.split(HEADER_END, 1)[0]


def test_the_header_is_rendered_from_the_record():
    head = _header(_kernel().source)
    assert head.startswith("#version 330 core\n// fragflow kernel k0_y: relu\n")
    assert "// implements 1 node:\n//   y = relu  scope '(root)'  m.py:3\n" in head
    assert "//   x0 <- x : f32[8,4]  (8x1 RGBA32F texels)" in head
    assert "//   ff_out -> y : f32[8,3]  (6x1 RGBA32F texels)" in head
    assert "// uniforms: none" in head
    assert _kernel().source.endswith(HEADER_END + "\nout vec4 ff_out;\nvoid main() {}\n")


def test_a_replaced_record_gets_its_header_rendered_afresh():
    kernel = _kernel()
    blocks = Binding("ff_blocks", "y#blocks", Layout((64,), "float32", 4, 4))
    stitched = dataclasses.replace(kernel, inputs=(blocks,) + kernel.inputs,
                                   uniforms={"scale": ("float", 0.5)})
    head = _header(stitched.source)
    assert "//   ff_blocks <- y#blocks : f32[64]  (4x4 RGBA32F texels)" in head
    assert "// uniforms:\n//   float scale = 0.5\n" in head
    assert head.count("// fragflow kernel") == 1                 # replaced, not added
    layered = dataclasses.replace(kernel, output=blocks, output_layers=4,
                                  extra_outputs=(Binding("t1", "y#blocks", blocks.layout),))
    head = _header(layered.source)
    assert "// outputs:\n//   ff_blocks -> y#blocks : f32[64]  (4x4 RGBA32F texels, 4 " \
        "layers of one array texture)\n//   t1 -> y#blocks" in head


def test_fused_nodes_and_programs_are_named_as_the_user_wrote_them():
    kernel = _kernel(op="fused_matmul", implements=(
        NodeRecord("d/matmul", "matmul", "d", "m.py:1"),
        NodeRecord("d/relu", "relu", "d", "m.py:2"),
        NodeRecord("p", "gpgpu_program", "", "", "square_add")))
    head = _header(kernel.source)
    assert "// implements 3 nodes, fused into one kernel:" in head
    assert re.search(r"//   d/matmul = matmul +scope 'd'  m.py:1", head)
    assert "//   p = gpgpu_program 'square_add'  scope '(root)'\n" in head


def test_outside_text_in_the_header_goes_through_the_sanitiser():
    payload = "evil.py:1 \\\n#define exp(a) 42.0 */ é%"
    kernel = _kernel(implements=(NodeRecord("y", "relu", "", payload),),
                     user_code=None)
    sanitize.check_shader(kernel.source)
    for line in _header(kernel.source).splitlines()[1:]:
        assert line.startswith("// ") and re.fullmatch(r"[\x20-\x7e]*", line), line
        assert "\\" not in line and "*/" not in line[2:], line
    assert sanitize.comment(payload) in kernel.source


def test_the_user_code_line_counts_the_header():
    body = ("#version 330 core\n" + HEADER_END + "\nfloat f() {\n// -- user code --\n"
            "float v = 1.0;\n}\n")
    kernel = _kernel(source=body, user_code=("sq", 0, "float v = 1.0;"))
    line = kernel.user_code[1]
    assert kernel.source.splitlines()[line - 1] == "float v = 1.0;"
    assert f"user GLSL of program 'sq' starts at line {line} of this file" in kernel.source


def test_source_and_dumped_files_agree_for_blocked_and_stitch_kernels(gl, tmp_path):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(ff.float32, (64, 64), name="x")
        with ff.name_scope("dense"):
            y = ff.relu(ff.matmul(x, ff.constant(b, name="w")) + 1.0)
    with ff.Session(g) as sess:
        fn = sess.compile([y], feeds=[x])
        np.testing.assert_allclose(fn(a)[0], np.maximum(a @ b + 1.0, 0), rtol=1e-4,
                                   atol=1e-4)
        paths = fn.dump_shaders(str(tmp_path))
        kernels = fn.kernels
    assert [open(p, encoding="utf-8").read() for p in paths] == [k.source for k in kernels]
    heads = [_header(k.source) for k in kernels]
    assert any("layers of one array texture" in h for h in heads), heads   # blocked
    assert any("ff_blocks <- " in h for h in heads), heads                 # its stitch
    for kernel in kernels:
        for node in ("dense/matmul", "dense/add", "dense/relu"):
            assert re.search(rf"//   {node} = \w+ +scope 'dense'", _header(kernel.source))


def test_fusion_report_and_shader_files_name_a_kernel_alike(gl, tmp_path):
    rng = np.random.default_rng(1)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(ff.float32, (6, 5), name="x")
        with ff.name_scope("dense"):
            h = ff.relu(ff.matmul(x, ff.constant(rng.standard_normal((5, 7)).astype(
                np.float32), name="w")) + 0.5)
        with ff.name_scope("head"):
            y = ff.exp(ff.square(h) * 2.0) - 1.0
    data = rng.standard_normal((6, 5)).astype(np.float32)
    with ff.Session(g) as sess:
        fn = sess.compile([h, y], feeds=[x])      # h fetched: the epilogue ends there
        reference = ff.Session(g, backend="numpy", passes=[]).run([h, y], {x: data})
        for got, want in zip(fn(data), reference):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        files = [p.rsplit("/", 1)[1] for p in fn.dump_shaders(str(tmp_path))]
        report = fn.fusion_report
    named = [re.search(r"'([^']+)'", line).group(1) for line in report
             if line.startswith("fused")]
    assert len(named) == 2, report          # the epilogue and the elementwise group
    for name in named:
        assert any(f.endswith("_" + name.replace("/", "_") + ".frag") for f in files), \
            (name, files)
