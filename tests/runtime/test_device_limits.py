"""The dialect switch and the device's limits (codegen/limits.py): the same templates
render GLSL 330 core and GLSL ES 3.00, kernels never write more render targets than
the limits allow, and the ES sources pass Khronos' reference compiler as ES shaders.

Lowering only: no GL context is needed (the ES context's own tests are test_gles.py)."""
import shutil
import subprocess

import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen import lower
from fragflow.codegen.limits import DESKTOP, Limits, active
from fragflow.ir.errors import FragflowError
from fragflow.runtime.driver import optimize
from fragflow.runtime.gl_resources import vertex_shader


def _matmul():
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder((64, 128), "float32", name="a")
        b = ff.placeholder((128, 96), "float32", name="b")
        y = ff.matmul(a, b)
    return g, [y], [a, b]


def _column_sum():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((512, 256), "float32", name="x")
        y = ff.reduce_sum(x, axis=0)
    return g, [y], [x]


def _conv_training():
    """Blocked conv2d, its filter gradient, a depthwise conv, and Adam's fused updates."""
    g = ff.Graph()
    rng = np.random.default_rng(0)
    with g.as_default():
        x = ff.placeholder((2, 24, 24, 8), "float32", name="x")
        w = ff.Variable(rng.standard_normal((3, 3, 8, 16)).astype(np.float32), name="w")
        d = ff.Variable(rng.standard_normal((3, 3, 16, 1)).astype(np.float32), name="d")
        h = ff.relu(ff.nn.conv2d(x, w, strides=1, padding="SAME"))
        h = ff.nn.depthwise_conv2d(h, d, strides=[1, 1, 1, 1], padding="SAME")
        loss = ff.reduce_mean(ff.square(h))
        step = ff.optim.Adam(0.01).minimize(loss)
    return g, [loss, step], [x]


def _mirror_pad_gradient():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5, 6, 7), "float32", name="x")
        y = ff.pad(x, [[1, 2], [2, 1], [0, 3]], mode="REFLECT")
        dx, = ff.gradients(ff.reduce_sum(y * y), [x])
    return g, [dx], [x]


GRAPHS = {"matmul": _matmul, "column_sum": _column_sum, "conv_training": _conv_training,
          "mirror_pad_gradient": _mirror_pad_gradient}


def _kernels(build, limits):
    g, fetches, feeds = build()
    values = [getattr(f, "value", f) for f in fetches]
    optimized = optimize(g, values, {f.value: f.value.type for f in feeds},
                         max_texture_units=limits.max_texture_units,
                         max_draw_buffers=limits.max_draw_buffers)
    return lower(optimized.graph, limits).kernels


def _targets(kernel) -> int:
    return max(kernel.output_layers, 1 + len(kernel.extra_outputs))


def test_the_desktop_dialect_is_the_old_lowering():
    """lower(graph, Limits()) renders what lower(graph, max_texture_size) rendered."""
    for build in GRAPHS.values():
        g, fetches, feeds = build()
        values = [getattr(f, "value", f) for f in fetches]
        graph = optimize(g, values, {f.value: f.value.type for f in feeds}).graph
        old = [k.source for k in lower(graph, 16384, 16).kernels]
        new = [k.source for k in lower(graph, Limits(max_texture_size=16384)).kernels]
        assert old == new
        assert all(s.startswith("#version 330 core\n") and "precision" not in s
                   for s in new)


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_render_targets_stay_within_max_draw_buffers(name):
    desktop = _kernels(GRAPHS[name], DESKTOP)
    es = _kernels(GRAPHS[name], Limits.webgl2())
    assert max(_targets(k) for k in es) <= 4
    if name != "mirror_pad_gradient":     # the others write 8 targets on desktop GL
        assert max(_targets(k) for k in desktop) > 4
        assert max(_targets(k) for k in es) == 4
    for k in es:
        assert k.source.startswith("#version 300 es\n")
        assert "precision highp float;" in k.source and "precision highp int;" in k.source


def test_two_draw_buffers_still_lower_every_graph():
    tight = Limits(max_draw_buffers=2)
    for build in GRAPHS.values():
        assert max(_targets(k) for k in _kernels(build, tight)) <= 2


def test_es_sources_pass_glslang_as_es_fragment_shaders(tmp_path):
    tool = shutil.which("glslangValidator")
    if tool is None:
        pytest.skip("glslangValidator is not installed (Debian: glslang-tools)")
    sources = {k.source for build in GRAPHS.values()
               for k in _kernels(build, Limits.webgl2())}
    paths = []
    for i, source in enumerate(sorted(sources)):
        path = tmp_path / f"k{i}.frag"
        path.write_text(source)
        paths.append(str(path))
    vertex = tmp_path / "v.vert"
    vertex.write_text(vertex_shader(Limits.webgl2()))
    result = subprocess.run([tool, str(vertex), *paths], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout[-4000:]
    assert len(paths) > 20


def test_limits_are_checked_and_active_only_while_lowering():
    with pytest.raises(FragflowError, match="dialect"):
        Limits(glsl="310 es")
    with pytest.raises(FragflowError, match="max_draw_buffers"):
        Limits(max_draw_buffers=0)
    assert active() is DESKTOP
    assert Limits.from_context({"api": "gles", "max_draw_buffers": 4,
                                "max_texture_image_units": 16,
                                "max_texture_size": 8192}) == \
        Limits("300 es", 4, 16, 8192)


@pytest.mark.parametrize("draw_buffers", [4, 2])
def test_fewer_draw_buffers_compute_the_same(gl, monkeypatch, draw_buffers):
    """A device that draws into fewer targets (ES 3.0, WebGL2: 4) gets other blockings;
    their results still match the numpy executor on the graph as built."""
    from dataclasses import replace

    from reference import assert_matches, reference_session
    monkeypatch.setattr(gl, "limits", replace(gl.limits, max_draw_buffers=draw_buffers))
    rng = np.random.default_rng(draw_buffers)
    for name, build in GRAPHS.items():
        g, fetches, feeds = build()
        feed = {f: rng.standard_normal(f.shape).astype(np.float32) for f in feeds}
        sess, ref = ff.Session(g), reference_session(g)
        try:
            assert max(_targets(k) for k in sess.compile(fetches, feeds=feeds).kernels) \
                <= draw_buffers
            # twice: the second run reads the variables the first one's assigns wrote
            for _ in range(2):
                got, expected = sess.run(fetches, feed), ref.run(fetches, feed)
                assert_matches(got[0], expected[0], rtol=1e-4, atol=1e-4, what=name)
        finally:
            sess.close()


def test_the_plan_cache_key_holds_the_dialect_and_every_limit():
    from fragflow.runtime.plan_cache import plan_key
    g, fetches, feeds = _matmul()
    key = [f.value for f in fetches], {f.value: f.value.type for f in feeds}
    keys = {plan_key(g, *key, limits) for limits in (
        DESKTOP, Limits.webgl2(max_texture_size=16384, max_draw_buffers=8),
        Limits(max_draw_buffers=4), Limits(max_texture_units=32),
        Limits(max_texture_size=4096), Limits(max_loop_iterations=1 << 20))}
    assert len(keys) == 6
    assert plan_key(g, *key, Limits()) == plan_key(g, *key, DESKTOP)
