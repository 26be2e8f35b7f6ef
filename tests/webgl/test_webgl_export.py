"""ff.webgl.export and `fragflow export --webgl` without a browser: what the files hold
(no eval, no imports, no network beyond model.bin), the runtime's size budget, fixed
shapes, model.bin's layout, errors."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.ops.reduce import COMBINES
from fragflow.tools.cli import main
from fragflow.tools.webgl.export import kernel_source, read_schedule, runtime_text, zero_period
from tests.webgl.cases import cnn_training_step, matmuls, mlp_adam_from_session, rgb_stems

# bytes of model.js without the schedule (issues 22, 36; 42 KB from 40 with issue 34's
# readback of an output left in render targets: 1.4 KB; 48 KB with the variant for 8
# render targets, taken after the first run, and programs written as lines: 4.7 KB)
RUNTIME_BUDGET = 48 * 1024
TARGETS = os.path.join(os.path.dirname(__file__), "..", "tools", "cli_targets.py")


@pytest.fixture(scope="module")
def training_export(tmp_path_factory):
    case = cnn_training_step()
    return ff.webgl.export(case.fetches, list(case.feeds),
                           tmp_path_factory.mktemp("cnn"))


def _read(path) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _code(text: str) -> str:
    """JavaScript without its comments and string contents' shader sources: the
    schedule's JSON literal is data, so checks look at it separately."""
    return re.sub(r"//[^\n]*", "", text)


def test_model_js_evaluates_and_imports_nothing(training_export):
    text = _read(training_export.files["model.js"])
    code = _code(text)
    assert not re.search(r"\beval\s*\(", code)
    assert not re.search(r"\bnew\s+Function\b|\bFunction\s*\(", code)
    # import.meta.url (where model.bin is) is not an import; nothing else may be
    assert not re.search(r"\bimport\s*[(\"'{*\w]", code)
    assert not re.search(r"^\s*export\s+[^;]*\bfrom\b", code, re.M)
    assert "export async function load(" in code
    assert not re.search(r"\b(importScripts|XMLHttpRequest|WebSocket|sendBeacon|"
                         r"EventSource|Worker)\b", code)


def test_the_only_address_model_js_fetches_is_model_bin(training_export):
    text = _read(training_export.files["model.js"])
    assert re.findall(r"\bfetch\s*\(", _code(text)) == ["fetch("]
    assert re.findall(r"new URL\(([^)]*)\)", text) == ["'model.bin', import.meta.url"]
    assert not re.search(r"\b(https?|wss?|ftp):|//[\w.-]+\.[a-z]{2,}/", _code(text))


def test_index_html_loads_only_model_js(training_export):
    text = _read(training_export.files["index.html"])
    assert re.findall(r"\bimport\s*\(([^)]*)\)", text) == ["'./model.js'"]
    assert not re.search(r"\beval\s*\(|new\s+Function|\bfetch\s*\(", text)
    assert not re.search(r"\b(https?|wss?|ftp)://|\bsrc\s*=|<link\b", text)


def test_runtime_without_shaders_and_weights_is_under_48_kb(training_export):
    size = len(runtime_text().replace("/*@fragflow-model@*/null", "null").encode())
    assert training_export.runtime_bytes == size
    assert size < RUNTIME_BUDGET, f"runtime.js is {size} bytes; the budget is {RUNTIME_BUDGET}"


def test_schedule_is_one_json_literal_in_place_of_the_mark(training_export):
    text = _read(training_export.files["model.js"])
    assert "/*@fragflow-model@*/" not in text
    assert text.count("const MODEL = {\"format\":\"fragflow.webgl\"") == 1


def test_shaders_are_glsl_es_300_with_their_headers(training_export):
    schedule = training_export.schedule
    for kernel in schedule["kernels"]:
        lines = kernel_source(schedule, kernel).splitlines()
        assert lines[0] == "#version 300 es"
        first_uniform = next(i for i, line in enumerate(lines) if line.startswith("uniform"))
        assert {"precision highp float;", "precision highp int;"} <= \
            set(lines[:first_uniform])
        assert any(line.startswith(f"// fragflow kernel {kernel['name']}:") for line in lines)
        assert "// -- end of header --" in lines


def test_shaders_pass_glslang_as_glsl_es_300(training_export):
    """Khronos' reference compiler (Debian: glslang-tools) on every exported shader."""
    tool = shutil.which("glslangValidator")
    if tool is None:
        pytest.skip("glslangValidator is not installed (Debian: glslang-tools)")
    for program in training_export.schedule["programs"]:
        result = subprocess.run([tool, "--stdin", "-S", "frag"], input=program,
                                capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, f"{program}: {result.stdout}{result.stderr}"


def test_model_bin_holds_constants_and_variables_where_the_schedule_says(tmp_path):
    case = mlp_adam_from_session()
    with ff.Session(case.graph, backend="numpy", passes=[]) as sess:
        sess.run(case.fetches, case.feeds)
        export = ff.webgl.export(case.fetches, list(case.feeds), tmp_path, session=sess)
        blob = (tmp_path / "model.bin").read_bytes()
        slots = export.schedule["slots"]
        for var in export.schedule["variables"]:
            offset, count = slots[var["slot"]]["data"]
            dtype = "<f4" if var["dtype"] == "float32" else "<i4"
            stored = np.frombuffer(blob, dtype, count, offset).reshape(var["shape"])
            node = case.graph.node(var["name"])
            np.testing.assert_array_equal(stored, sess.get(node.outputs[0]))
        assert all(s["data"][0] % 16 == 0 for s in slots if "data" in s)
        assert len(blob) == export.schedule["binBytes"]


def test_model_bin_takes_a_gl_sessions_variables(gl, tmp_path):
    case = mlp_adam_from_session()
    with ff.Session(case.graph) as sess:
        for _ in range(2):
            sess.run(case.fetches, case.feeds)
        export = ff.webgl.export(case.fetches, list(case.feeds), tmp_path, session=sess)
        blob = (tmp_path / "model.bin").read_bytes()
        w1 = next(v for v in export.schedule["variables"] if v["name"] == "w1")
        offset, count = export.schedule["slots"][w1["slot"]]["data"]
        stored = np.frombuffer(blob, "<f4", count, offset).reshape(w1["shape"])
        trained = sess.get(case.graph.node("w1").outputs[0])
    np.testing.assert_array_equal(stored, trained)
    assert not np.array_equal(stored, case.graph.node("w1").attrs["initial_value"])


def test_zero_period_finds_whole_zero_texels_in_a_period():
    panel = np.arange(1, 1 + 4 * 4 * 30, dtype=np.float32).reshape(-1, 4, 4)
    panel[:, 3] = 0.0                                   # C = 3 padded to 4: every 4th row
    assert zero_period(panel.reshape(-1)) == (4, 3)
    hwio = np.ones((3, 3, 8, 24), np.float32)           # C = 6 padded to 8, HWIO
    hwio[:, :, 6:] = 0.0
    assert zero_period(hwio.reshape(-1)) == (48, 36)    # a tap's 8 rows of 6 texels
    negative = panel.copy()
    negative[:, 3] = -0.0                               # -0.0 is a value, kept
    assert zero_period(negative.reshape(-1)) is None
    few = np.ones(400, np.float32)
    few[:4] = 0.0                                       # one zero texel: not worth it
    assert zero_period(few) is None
    assert zero_period(np.zeros(18, np.float32)) is None      # not whole texels


def test_padded_filters_cost_no_bytes_and_decode_to_the_padded_filter(tmp_path):
    """pad_channels' zero filter rows are left out of model.bin (slot field `zeros`):
    the export is as big as with the knob off, and expanding the stored texels as
    runtime.js does gives the padded filter."""
    case = rgb_stems()
    on = ff.webgl.export(case.fetches, list(case.feeds), tmp_path / "on")
    off = ff.webgl.export(case.fetches, list(case.feeds), tmp_path / "off",
                          tuning=ff.Tuning.named("webgl").from_env("conv.pad_channels=false"))
    assert on.bin_bytes == off.bin_bytes
    blob = (tmp_path / "on" / "model.bin").read_bytes()
    zeros = [s for s in on.schedule["slots"] if s.get("zeros")]
    assert sorted(s["zeros"][0] for s in zeros) == [4, 8]        # C = 3 -> 4, 6 -> 8
    filters = sorted((n.attrs["value"] for n in case.graph.nodes if n.op == "constant"
                      and n.attrs["value"].ndim == 4), key=np.size)
    for s, w in zip(sorted(zeros, key=lambda s: s["data"][1]), filters):
        offset, count = s["data"]
        period, kept = s["zeros"]
        stored = np.frombuffer(blob, "<f4", count, offset)
        # the stored texels are the filter's values (its panel: a permutation of them)
        assert np.array_equal(np.sort(stored), np.sort(w.reshape(-1)))
        assert (period - kept) * w.shape[2] == kept * (-w.shape[2] % 4)


def test_inputs_and_outputs_keep_feed_and_fetch_order(training_export):
    schedule = training_export.schedule
    assert [i["name"] for i in schedule["inputs"]] == ["x", "labels"]
    assert [(i["shape"], i["dtype"]) for i in schedule["inputs"]] == \
        [([8, 16, 16, 1], "float32"), ([8], "int32")]
    assert [o["name"] for o in schedule["outputs"]] == ["loss", "step"]
    assert len(schedule["assigns"]) == 5      # 4 variables and the step counter


def _unknown_batch():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, 4), "float32", name="images")
        y = ff.relu(x * 2.0)
    return x, y


def test_an_unknown_dimension_names_the_feed(tmp_path):
    x, y = _unknown_batch()
    with pytest.raises(ff.webgl.UnknownShapeError,
                       match=r"feed 'images' has shape f32\[\?,4\].*fixed shapes.*"
                             r"feeds=\{images: \(1, 4\)\}"):
        ff.webgl.export(y, [x], tmp_path)
    assert issubclass(ff.webgl.UnknownShapeError, ff.FragflowError)


def test_a_shape_given_with_the_feed_fixes_it(tmp_path):
    x, y = _unknown_batch()
    export = ff.webgl.export({"y": y}, {x: (3, 4)}, tmp_path)
    assert export.schedule["inputs"][0]["shape"] == [3, 4]
    assert export.schedule["outputs"][0]["shape"] == [3, 4]


def test_a_shape_that_does_not_fit_the_declared_one_is_refused(tmp_path):
    x, y = _unknown_batch()
    with pytest.raises(ff.webgl.WebGLExportError, match="does not fit"):
        ff.webgl.export(y, {x: (3, 5)}, tmp_path)


def test_a_feed_that_is_not_a_placeholder_is_refused(tmp_path):
    x, y = _unknown_batch()
    with pytest.raises(ff.webgl.WebGLExportError, match="not a placeholder"):
        ff.webgl.export(y, [y], tmp_path)


def test_a_needed_placeholder_missing_from_the_feeds_is_refused(tmp_path):
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder((2,), "float32", name="a")
        b = ff.placeholder((2,), "float32", name="b")
        y = a + b
    with pytest.raises(ff.FragflowError, match="b"):
        ff.webgl.export(y, [a], tmp_path)


@pytest.mark.parametrize("targets", [4, 8])
def test_no_kernel_writes_more_render_targets_than_asked(tmp_path, targets):
    case = matmuls()
    export = ff.webgl.export(case.fetches, list(case.feeds), tmp_path,
                             max_draw_buffers=targets)
    written = [max(len(k["outputs"]), k["layers"]) for k in export.schedule["kernels"]]
    assert max(written) == export.schedule["drawBuffers"] == targets    # blocked matmuls


def test_max_draw_buffers_is_4_or_8(tmp_path):
    x, y = _unknown_batch()
    with pytest.raises(ff.webgl.WebGLExportError, match="max_draw_buffers=6"):
        ff.webgl.export(y, {x: (2, 4)}, tmp_path, max_draw_buffers=6)


def test_cli_exports_a_python_target(tmp_path, capsys):
    out = tmp_path / "web"
    assert main(["export", f"{TARGETS}:dense", "--webgl", "-o", str(out),
                 "--feed-shape", "x=8,4"]) == 0
    assert sorted(os.listdir(out)) == ["index.html", "model.bin", "model.js"]
    assert "kernel(s)" in capsys.readouterr().err


def test_cli_exports_a_target_that_returns_its_feed_dict(tmp_path):
    """A (fetches, feed_dict) target's fed placeholders are the export's inputs, at the
    fed arrays' shapes (they were left out: 'placeholder x must be fed')."""
    out = tmp_path / "web"
    assert main(["export", f"{TARGETS}:dense_fed", "--webgl", "-o", str(out)]) == 0
    schedule = read_schedule(open(out / "model.js", encoding="utf-8").read())
    assert [(i["name"], i["shape"]) for i in schedule["inputs"]] == [("x", [8, 4])]


def test_cli_exports_an_onnx_file(tmp_path, capsys):
    pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
    from tests.webgl.cases import onnx_proto
    path = tmp_path / "tiny.onnx"
    path.write_bytes(onnx_proto().SerializeToString())
    assert main(["export", str(path), "--webgl", "-o", str(tmp_path / "web")]) == 0
    text = (tmp_path / "web" / "model.js").read_text()
    assert '"name":"probabilities"' in text and '"shape":[2,3,8,8]' in text


def test_cli_names_the_feed_whose_shape_is_unknown(tmp_path, capsys):
    assert main(["export", f"{TARGETS}:dense", "--webgl", "-o", str(tmp_path)]) == 2
    assert "feed 'x'" in capsys.readouterr().err


def test_cli_export_needs_a_format(tmp_path, capsys):
    assert main(["export", f"{TARGETS}:dense", "-o", str(tmp_path)]) == 2
    assert "--webgl" in capsys.readouterr().err


def _readme_section() -> str:
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "README.md"),
              encoding="utf-8") as f:
        return f.read().split("## Run it in a browser", 1)[1].split("\n## ", 1)[0]


def test_readme_export_runs_as_written(tmp_path, monkeypatch):
    code = re.search(r"```python\n(.*?)```", _readme_section(), re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    assert sorted(os.listdir(tmp_path / "web")) == ["index.html", "model.bin", "model.js"]
    js = re.search(r"```js\n(.*?)```", _readme_section(), re.S).group(1)
    schedule = (tmp_path / "web" / "model.js").read_text()
    assert "Float32Array(32)" in js and '"shape":[8,4]' in schedule   # x: 8x4 = 32


def test_readme_cli_export_runs_as_written(tmp_path, monkeypatch):
    lines = [line.split("#")[0].split() for line in _readme_section().splitlines()
             if line.startswith("fragflow export model.py:build")]
    assert lines == [["fragflow", "export", "model.py:build", "--webgl", "-o", "web/"]]
    (tmp_path / "model.py").write_text(
        "import fragflow as ff\n\ndef build():\n"
        "    x = ff.placeholder((2, 3), 'float32', name='x')\n    return ff.exp(x)\n")
    monkeypatch.chdir(tmp_path)
    assert main(lines[0][1:]) == 0
    assert (tmp_path / "web" / "model.js").exists()


def test_reduction_updates_select_values_not_expressions():
    """The updates the passes unroll in their loops: a `?:` whose arm is an expression
    (`v > -inf ? exp(v - m) : 0.0`) made SwiftShader compile the unrolled sum-of-exp
    pass for minutes and hang the page (issue 36, docs/WEBGL.md "Rasterisers"); a
    select of plain values (`v > a ? v : a`) or mix() compiles in milliseconds."""
    value = r"[\w{}\[\].]+"        # a name, a placeholder, an element, a literal
    for name, combine in COMBINES.items():
        for glsl in filter(None, (combine.glsl, combine.glsl_int)):
            for arms in re.findall(r"\?\s*([^:;]+?)\s*:\s*([^;]+?)\s*;", glsl):
                assert all(re.fullmatch(value, arm) for arm in arms), \
                    f"combine {name}: select with an expression arm: {glsl}"
            assert not re.search(r"\bif\s*\(", glsl), \
                f"combine {name}: an update under an `if` (a branch per element): {glsl}"


@pytest.mark.parametrize("op", ["argmax", "argmin", "reduce_max", "reduce_min", "reduce_sum"])
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_row_reductions_have_no_branches(tmp_path, op, dtype):
    """A pass along rows of 1001 (windows not whole texels), unrolled U x 4 elements a
    lane: argmax/argmin's better() and its updates, max/min's NaN-sticky update and the
    window bound of each element. With `if`, `||` and `&&` (branches in SPIR-V)
    SwiftShader's JIT took ~5x longer over movenet's argmax pass and 1.6x over
    facemesh-attention's max, and their draws 2-5x (docs/WEBGL.md, "Rasterisers")."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 1001), dtype, name="x")
        y = getattr(ff, op)(x, axis=1)
    export = ff.webgl.export({"y": y}, [x], tmp_path, page=False)
    (body,) = export.schedule["programs"]
    code = re.sub(r"//[^\n]*", "", body)
    assert not re.search(r"\bif\s*\(|\|\||&&", code), body
    assert "bool ff_in" in code        # the window bound, as a select


def test_a_fetched_reshape_keeps_its_own_shape(tmp_path):
    # the reshape is a view of the tanh kernel's result: it shares that slot, but the
    # output is described by the fetched value's shape, and its elements in order
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 5, 2, 4), "float32", name="x")
        y = ff.reshape(ff.tanh(x), (2, 5, 8))
    export = ff.webgl.export({"y": y}, [x], tmp_path)
    (out,) = export.schedule["outputs"]
    assert out["name"] == "y" and out["shape"] == [2, 5, 8] and out["size"] == 80


FETCHED_ROWS = ff.Tuning.named("webgl").with_({"reduce.norm_rows_fetched": True,
                                               "reduce.norm_rows_fetched_reads": 1 << 20})


def _norm_export(tmp_path, build, tuning=FETCHED_ROWS):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((37, 128), "float32", name="x")
        y = build(ff.layer_normalization(x, epsilon=1e-5))
    return ff.webgl.export({"y": y}, [x], tmp_path, page=False, tuning=tuning)


def test_a_fetched_norm_is_read_from_its_render_targets(tmp_path):
    """norm.rows' output fetched (reduce.norm_rows_fetched on): the output's slot is
    its 4 layers (WebGL2's draw buffers), the record says where each texel is
    (runtime.js inOrder); the value's own shape and size."""
    export = _norm_export(tmp_path, lambda y: y)
    (out,) = export.schedule["outputs"]
    assert [k.strategy for k in export.kernels] == ["norm.rows"]
    assert out["shape"] == [37, 128] and out["size"] == 37 * 128
    assert out["blocks"] == {"m": 37, "n": 128, "rows": 1, "cols": 4, "slab": 37,
                             "colSlab": 8}
    assert export.schedule["slots"][out["slot"]]["layers"] == 4


@pytest.mark.parametrize("why, build, tuning", [
    ("the webgl profile's default (reduce.norm_rows_fetched off)", lambda y: y, None),
    ("its fragments' reads past reduce.norm_rows_fetched_reads", lambda y: y,
     FETCHED_ROWS.with_({"reduce.norm_rows_fetched_reads": 37 * 128 * 5 - 1})),
    ("a view of it fetched", lambda y: ff.reshape(y, (37, 4, 32)), FETCHED_ROWS),
])
def test_a_fetched_norm_keeps_a_texture(tmp_path, why, build, tuning):
    export = _norm_export(tmp_path, build, tuning)
    (out,) = export.schedule["outputs"]
    assert "blocks" not in out and not export.schedule["slots"][out["slot"]]["layers"], why
    assert "norm.rows" not in {k.strategy for k in export.kernels}, why


def test_a_loop_bodys_norm_is_handed_on_in_a_texture(tmp_path):
    """A while_loop whose body returns a LayerNorm: the loop swaps or copies the
    body's result textures, so its programs lower without reduce.norm_rows_fetched
    (an array texture would be refused: _copyable)."""
    w = (np.random.default_rng(3).standard_normal((64, 64)) / 8).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((12, 64), "float32", name="x")
        _, y = ff.while_loop(lambda i, v: i < 3,
                             lambda i, v: (i + 1, ff.layer_normalization(
                                 ff.matmul(v, ff.constant(w)), epsilon=1e-5)),
                             [ff.constant(np.int32(0)), x])
    export = ff.webgl.export({"y": ff.layer_normalization(y)}, [x], tmp_path, page=False,
                             tuning=FETCHED_ROWS)
    assert "program" in export.schedule
    norms = [k for k in export.kernels if k.op == "fused_layer_norm"]
    assert norms and not any(k.output_layers for k in norms), \
        [(k.strategy, k.output_layers) for k in norms]
    assert "blocks" not in export.schedule["outputs"][0]
