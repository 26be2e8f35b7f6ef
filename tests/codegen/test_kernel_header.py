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


# --- a node lowered to several kernels: which kernel computes which node ---------------

MEMBERS = (NodeRecord("d/matmul", "matmul", "d", "m.py:1"),
           NodeRecord("d/add", "add", "d", "m.py:1"),
           NodeRecord("d/relu", "relu", "d", "m.py:1"))


def _part(output, inputs=(), layers=0, implements=MEMBERS, params=None, layout=None):
    layout = layout or Layout((64,), "float32", 4, 4)
    return _kernel(op="fused_matmul", nodes=tuple(n.name for n in implements),
                   implements=implements, output=Binding("ff_out", output, layout),
                   inputs=tuple(Binding(f"x{i}", v, layout) for i, v in enumerate(inputs)),
                   output_layers=layers, params=params or {})


def test_a_blocked_kernel_and_its_stitch_say_which_computes_which_node():
    main = _part("d/relu#blocks", ("x", "w"), layers=8)
    stitch = _part("d/relu", ("d/relu#blocks", "b"))
    assert (main.part, stitch.part) == ("targets", "stitch")
    assert main.computes == MEMBERS[:1] and stitch.computes == MEMBERS[1:]
    head, tail = _header(main.source), _header(stitch.source)
    for text in (head, tail):
        assert "fused into one kernel" not in text
        assert "implements 3 nodes with the other kernels of their lowering" in text
    assert "// computes the product of matmul 'd/matmul' into 8 render targets (the " \
        "layers of 'd/relu#blocks'), not its value;\n" in head
    assert "// its stitch, the kernel that reads 'd/relu#blocks' and writes 'd/relu', " \
        "computes add 'd/add' and relu 'd/relu'\n" in head
    assert re.search(r"//   d/matmul = matmul +scope 'd'  m.py:1  \[computed here\]\n", head)
    assert re.search(r"//   d/relu = relu +scope 'd'  m.py:1\n", head)
    assert "// the stitch of matmul 'd/matmul': gathers its result from the render " \
        "targets in 'd/relu#blocks'" in tail
    assert "// computes add 'd/add' and relu 'd/relu' and writes 'd/relu'\n" in tail
    assert re.search(r"//   d/matmul = matmul +scope 'd'  m.py:1\n", tail)
    assert re.search(r"//   d/add = add +scope 'd'  m.py:1  \[computed here\]\n", tail)
    # a product with no epilogue: the stitch only gathers it, and so computes it
    plain = (NodeRecord("m", "matmul", "", "m.py:2"),)
    main, stitch = _part("m#blocks", ("x",), 4, plain), _part("m", ("m#blocks",), 0, plain)
    assert main.computes == () and stitch.computes == plain
    assert "its stitch, the kernel that reads 'm#blocks', gathers them into 'm'" in \
        main.source


def test_passes_stitch_free_kernels_and_one_kernel_nodes_say_so_too():
    total = (NodeRecord("sum", "sum", "", "m.py:4"),)
    first = _part("sum:r0", ("x",), implements=total,
                  params={"pass_number": 1, "pass_count": 2})
    last = _part("sum", ("sum:r0",), implements=total,
                 params={"pass_number": 2, "pass_count": 2})
    assert (first.part, last.part, first.computes, last.computes) == \
        ("pass", "last", (), total)
    assert "// one step of sum 'sum' (pass 1 of 2): writes 'sum:r0', which a later " \
        "kernel of the same node reads;\n// the kernel that writes 'sum' finishes it\n" in \
        first.source
    assert "// finishes sum 'sum' (pass 2 of 2) from 'sum:r0' (written by earlier " \
        "kernels of the same node) and writes 'sum'\n" in last.source
    from fragflow.codegen.matmul import Blocking, BlocksLayout
    left = BlocksLayout((64,), "float32", 4, 4, Blocking(batch=1, m=8, n=8, rows=4, cols=2))
    free = _part("d/relu#blocks", ("x", "w", "b"), 8, layout=left)
    assert free.part == "blocks" and free.computes == MEMBERS
    assert "// computes matmul 'd/matmul', add 'd/add' and relu 'd/relu' into 8 render " \
        "targets (the layers of 'd/relu#blocks'),\n// which the kernels reading it read " \
        "in place: no stitch, 'd/relu' itself is never written\n" in free.source
    # a reader of those targets is a node's one kernel, not a part of d/relu's
    reader = _kernel(inputs=(Binding("ff_blocks", "d/relu#blocks", left),))
    assert reader.part == "" and "fused into one kernel" not in reader.source
    assert "// implements 1 node:\n" in reader.source


def _lowered(build, shape):
    from fragflow.codegen.lower import lower
    from fragflow.runtime.driver import optimize
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(ff.float32, shape, name="x")
        y = build(x)
    return lower(optimize(g, [y.value], {x.value: x.value.type}).graph, 16384).kernels


def _ones(*shape):
    return ff.constant(np.ones(shape, np.float32) * 0.01)


LOWERINGS = {
    # (build, input shape, the head node, its epilogue's nodes)
    "matmul": (lambda x: ff.relu(ff.matmul(x, _ones(64, 64)) + 1.0), (64, 64),
               "h/matmul", ("h/add", "h/relu")),
    "packed matmul": (lambda x: ff.relu(ff.matmul(x, _ones(256, 256)) + 1.0), (256, 256),
                      "h/matmul", ("h/add", "h/relu")),
    "conv2d": (lambda x: ff.relu(ff.nn.conv2d(x, _ones(3, 3, 16, 32), strides=1,
                                              padding="SAME") + 1.0),
               (1, 32, 32, 16), "h/conv2d", ("h/add", "h/relu")),
    "depthwise": (lambda x: ff.relu(ff.nn.depthwise_conv2d(
        x, _ones(3, 3, 32, 1), strides=[1, 1, 1, 1], padding="SAME") + 1.0),
        (1, 64, 64, 32), "h/depthwise_conv2d", ("h/add", "h/relu")),
}


def test_lowered_blocked_kernels_and_stitches_name_what_each_computes():
    for label, (build, shape, head, epilogue) in LOWERINGS.items():
        def scoped(x, build=build):
            with ff.name_scope("h"):
                return build(x)
        kernels = _lowered(scoped, shape)
        parts = [k.part for k in kernels]
        assert parts[-2:] == ["targets", "stitch"], (label, parts)
        assert all(p == "pass" for p in parts[:-2]), (label, parts)     # packing kernels
        main, stitch = kernels[-2:]
        assert [n.name for n in main.computes] == [head], label
        assert tuple(n.name for n in stitch.computes) == epilogue, label
        text = _header(main.source)
        assert "fused into one kernel" not in text, label
        assert re.search(rf"// computes .*'{head}' into {main.output_layers} render "
                         rf"targets", text), (label, text)
        assert f"its stitch, the kernel that reads '{main.output.value}' and writes " \
            f"'{stitch.output.value}', computes add 'h/add' and relu 'h/relu'" in text
        assert re.search(rf"//   {head} = \w+ +scope 'h'  \S+  \[computed here\]", text)
        tail = _header(stitch.source)
        assert f"from the render targets in '{main.output.value}'" in tail, label
        assert re.search(r"//   h/relu = relu +scope 'h'  \S+  \[computed here\]", tail)
        assert not re.search(rf"//   {head} = .*computed here", tail), label


def test_a_reduction_tree_names_its_passes_and_the_one_that_finishes():
    kernels = _lowered(lambda x: ff.reduce_sum(x), (1000, 1000))
    assert len(kernels) >= 2 and [k.part for k in kernels] == \
        ["pass"] * (len(kernels) - 1) + ["last"]
    count = len(kernels)
    for number, kernel in enumerate(kernels, 1):
        text = _header(kernel.source)
        if number < count:
            assert f"// one step of sum 'sum' (pass {number} of {count}): writes " \
                f"'{kernel.output.value}'" in text
            assert kernel.computes == ()
        else:
            assert f"// finishes sum 'sum' (pass {count} of {count}) from 'sum:r" in text
            assert [n.name for n in kernel.computes] == ["sum"]
