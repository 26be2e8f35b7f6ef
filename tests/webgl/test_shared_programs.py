"""Programs shared between repeated layers: kernels equal but for their operands (the
same layer with other weights, under other names) have byte-identical bodies, so a
WebGL export holds each program once (the runtime compiles and links it once and binds
other textures) and a Session links one shader for them. The browser runs such an
export as tests/webgl/cases.py's repeated_layers (test_browser.py)."""
from __future__ import annotations

import json

import numpy as np
import pytest

import fragflow as ff
from fragflow.runtime.gl_resources import LinkedShaderCache
from fragflow.tools.webgl.export import kernel_source, read_schedule
from tests.webgl.cases import layers


def _by_layer(schedule) -> dict:
    """{scope: [program per kernel]} in run order."""
    out: dict = {}
    for k in schedule["kernels"]:
        out.setdefault(k["scope"], []).append(k["program"])
    return out


def test_equal_layers_share_one_program_per_kernel(tmp_path):
    g, x, y = layers((12, 12, 12))
    export = ff.webgl.export({"y": y}, [x], tmp_path)
    first, second = _by_layer(export.schedule).values()
    assert first == second and len(first) >= 3      # matmul, LayerNorm, ... (fused)
    programs = export.schedule["programs"]
    assert len(programs) == len(set(programs)) == len(set(first))
    # the headers stay per kernel, naming each layer's own nodes
    for record, kernel in zip(export.schedule["kernels"], export.kernels):
        assert kernel_source(export.schedule, record) == kernel.source
        assert record["scope"] in record["header"]
        assert record["scope"] not in programs[record["program"]]


def test_differently_shaped_layers_share_no_program(tmp_path):
    g, x, y = layers((12, 12, 20))
    first, second = _by_layer(ff.webgl.export({"y": y}, [x], tmp_path).schedule).values()
    assert not set(first) & set(second)


def test_model_js_holds_each_program_once(tmp_path):
    g, x, y = layers((12, 12))
    one = ff.webgl.export(y, [x], tmp_path / "one")
    g, x, y = layers((12,) * 5)
    four = ff.webgl.export(y, [x], tmp_path / "four")
    assert four.schedule["programs"] == one.schedule["programs"]
    text = open(four.files["model.js"], encoding="utf-8").read()
    written = json.JSONDecoder().raw_decode(text[text.index("const MODEL = ") + 14:])[0]
    assert len(written["lines"]) == len(set(written["lines"]))     # each line once
    assert len(written["programs"]) == len(four.schedule["programs"])
    assert read_schedule(text) == json.loads(json.dumps(four.schedule))
    # the lines programs have in common (version, precision, helpers) are written once
    assert sum(map(len, written["lines"])) < 0.8 * sum(map(len, four.schedule["programs"]))


@pytest.mark.usefixtures("gl")
def test_a_session_links_one_shader_for_equal_layers():
    g, x, y = layers((12, 12, 12, 12))
    xb = np.random.default_rng(3).standard_normal((6, 12)).astype(np.float32)
    with ff.Session(g) as sess:
        fn = sess.compile([y], feeds=[x])
        got = fn(xb)[0]
    with ff.Session(g, backend="numpy", passes=[]) as ref:
        np.testing.assert_allclose(got, ref.run(y, {x: xb}), rtol=1e-5, atol=1e-6)
    by_scope: dict = {}
    for k in fn.kernels:
        by_scope.setdefault(k.scope, []).append(k.compiled_source)
    first, *rest = by_scope.values()
    assert len(rest) == 2 and all(sources == first for sources in rest)
    cache = LinkedShaderCache()
    try:
        for kernel in fn.kernels:
            cache.get(kernel)
        assert cache.compiles == len(cache) == len(set(first))
    finally:
        cache.clear()
