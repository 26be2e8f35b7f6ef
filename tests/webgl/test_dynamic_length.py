"""Any length up to a maximum: a text model exported once at its maximum sequence
length, the real length as a feed (ff.webgl.export(..., dynamic_length=mask)), gives on
the valid positions what an export at that length gives.

The rewrite is checked on its own (the graph before, with a mask of 1s then 0s,
against the graph after, with the length; numpy executor); then a BERT from Hugging
Face transformers (random weights, small config) exported to ONNX at the maximum
length and at a shorter one: GL with a padding mask against the shorter model, and
the dynamic_length export in Chromium (both rasterisers) against it."""
from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import fragflow as ff
from fragflow.tools.cli import main
from fragflow.tools.webgl.export import WebGLExportError, _length_feed
from tests.webgl.browser import CONFIGS, chromium, run_cases
from tests.webgl.conftest import REQUIRE

MAX = 24


def _masked_attention(dtype: str):
    """x (1, MAX, 8) attending over itself with a padding mask (1, MAX) of dtype, as
    BERT adds it: (1 - mask) * -10000 on the scores; and mean pooling over the mask."""
    rng = np.random.default_rng(21)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, MAX, 8), "float32", name="x")
        mask = ff.placeholder((1, MAX), dtype, name="mask")
        m = ff.cast(mask, "float32")
        w = ff.constant(rng.standard_normal((8, 8)).astype(np.float32) * 0.5)
        q = x @ w
        scores = ff.matmul(q, x, transpose_b=True) + (1.0 - m[:, None, :]) * -10000.0
        y = ff.softmax(scores, axis=-1) @ x
        pooled = ff.reduce_sum(y * m[:, :, None], axis=1) / ff.reduce_sum(m, axis=1,
                                                                              keepdims=True)
    return g, x, mask, {"y": y, "pooled": pooled}


def _mask(n: int, dtype: str) -> np.ndarray:
    return (np.arange(MAX)[None, :] < n).astype({"bool": bool}.get(dtype, dtype))


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_the_length_feed_makes_the_mask_of_1s_then_0s(dtype):
    g, x, mask, fetches = _masked_attention(dtype)
    outs = list(fetches.values())
    feeds, types = [x, mask], {x.value: x.value.type, mask.value: mask.value.type}
    new, (nx, length), new_types, new_outs = _length_feed(
        g, mask.value, [x.value, mask.value], types, [o.value for o in outs])
    assert length.node.name == "length" and new_types[length] == ff.TensorType((1,), "int32")
    xb = np.random.default_rng(22).standard_normal((1, MAX, 8)).astype(np.float32)
    with ff.Session(g, backend="numpy", passes=[]) as before, \
            ff.Session(new, backend="numpy", passes=[]) as after:
        for n in (1, 7, 13, MAX):
            want = before.run(outs, {x: xb, mask: _mask(n, dtype)})
            got = after.run(new_outs, {nx: xb, length: np.int32([n])})
            for w, o in zip(want, got):
                np.testing.assert_array_equal(o, w)
    assert feeds[0] is x        # the user's graph is left as it was


def test_dynamic_length_needs_a_mask_among_the_feeds(tmp_path):
    g, x, mask, fetches = _masked_attention("float32")
    with pytest.raises(WebGLExportError, match="'x'.*a mask|not among the feeds"):
        ff.webgl.export(fetches, [mask], tmp_path, dynamic_length=x)
    with g.as_default():
        scalar = ff.placeholder((), "float32", name="s")
        out = fetches["pooled"] * scalar
    with pytest.raises(WebGLExportError, match="'s' is a scalar"):
        ff.webgl.export(out, [x, mask, scalar], tmp_path, dynamic_length=scalar)


def test_dynamic_length_refuses_a_graph_with_a_node_named_length(tmp_path):
    g, x, mask, fetches = _masked_attention("float32")
    with g.as_default():
        taken = ff.identity(fetches["pooled"], name="length")
    with pytest.raises(WebGLExportError, match="already has a node named 'length'"):
        ff.webgl.export(taken, [x, mask], tmp_path, dynamic_length=mask)


def test_the_export_takes_length_in_the_masks_place(tmp_path):
    g, x, mask, fetches = _masked_attention("int32")
    export = ff.webgl.export(fetches, [x, mask], tmp_path, dynamic_length=mask)
    assert [(i["name"], i["shape"], i["dtype"]) for i in export.schedule["inputs"]] == \
        [("x", [1, MAX, 8], "float32"), ("length", [1], "int32")]
    assert [n.name for n in g.nodes].count("length") == 0


def test_the_command_line_takes_the_masks_name(tmp_path, capsys):
    g, x, mask, fetches = _masked_attention("float32")
    g.outputs = [fetches["pooled"].value]
    ff.save_graph(g, tmp_path / "g.json")
    out = tmp_path / "web"
    assert main(["export", str(tmp_path / "g.json"), "--webgl", "-o", str(out),
                 "--dynamic-length", "mask"]) == 0
    text = (out / "model.js").read_text(encoding="utf-8")
    assert '"inputs":[{"name":"x"' in text and '{"name":"length","shape":[1],' in text
    assert main(["export", str(tmp_path / "g.json"), "--webgl", "-o", str(out),
                 "--dynamic-length", "masks"]) != 0
    assert "--dynamic-length masks: no such placeholder; the feeds are x, mask" in \
        capsys.readouterr().err


# -- a BERT from transformers -----------------------------------------------------------
SHORT = (13, 20)                   # not multiples of 4


@pytest.fixture(scope="module")
def berts(tmp_path_factory):
    """{length: ONNX path} of one BERT (2 layers, 32 wide, random weights) exported at
    MAX and at each SHORT length."""
    torch = pytest.importorskip("torch", reason="torch (the test extra) is not installed")
    transformers = pytest.importorskip("transformers",
                                       reason="transformers (the test extra) is not installed")
    pytest.importorskip("onnx", reason="onnx (the test extra) is not installed")
    torch.manual_seed(34)
    config = transformers.BertConfig(vocab_size=100, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=2, intermediate_size=64,
                                     max_position_embeddings=MAX)
    bert = transformers.BertModel(config).eval()

    class Hidden(torch.nn.Module):           # the last hidden state alone, as a tensor
        def __init__(self):
            super().__init__()
            self.bert = bert

        def forward(self, ids, mask):
            return self.bert(input_ids=ids, attention_mask=mask).last_hidden_state

    root = tmp_path_factory.mktemp("bert")
    paths = {}
    for n in (MAX, *SHORT):
        paths[n] = str(root / f"bert{n}.onnx")
        ids = torch.ones(1, n, dtype=torch.int64)
        torch.onnx.export(Hidden().eval(), (ids, torch.ones_like(ids)), paths[n],
                          dynamo=False, opset_version=17,
                          input_names=["input_ids", "attention_mask"],
                          output_names=["hidden"])
    return paths


def _ids(n: int) -> np.ndarray:
    return np.random.default_rng(n).integers(1, 100, (1, n)).astype(np.int32)


def _run_gl(path: str, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    model = ff.onnx.load(path)
    with ff.Session(model.graph) as sess:
        return sess.run(model.outputs[0], model.feed_dict({"input_ids": ids,
                                                           "attention_mask": mask}))


def _padded(n: int) -> tuple:
    ids = np.zeros((1, MAX), np.int32)
    ids[0, :n] = _ids(n)
    return ids, _mask(n, "int32")


def _assert_valid_positions_match(long, short, n, what):
    scale = float(np.abs(short).max())
    np.testing.assert_allclose(long[:, :n], short, rtol=1e-5, atol=1e-5 * scale,
                               err_msg=what)


@pytest.fixture(scope="module")
def shorter(berts):
    """{n: the n-token model's hidden states on GL}."""
    return {n: _run_gl(berts[n], _ids(n), np.ones((1, n), np.int32)) for n in SHORT}


@pytest.mark.usefixtures("gl")
def test_a_padding_mask_gives_the_shorter_models_results_on_gl(berts, shorter):
    for n in SHORT:
        long = _run_gl(berts[MAX], *_padded(n))
        _assert_valid_positions_match(long, shorter[n], n, f"{n} of {MAX} tokens")
    unmasked = _run_gl(berts[MAX], _padded(SHORT[0])[0], np.ones((1, MAX), np.int32))
    assert np.abs(unmasked[:, :SHORT[0]] - shorter[SHORT[0]]).max() > 1e-3  # it matters


@pytest.mark.usefixtures("gl")
@pytest.mark.parametrize("config", list(CONFIGS))
def test_one_export_at_the_maximum_serves_shorter_inputs_in_chromium(berts, shorter,
                                                                     config, tmp_path):
    if chromium() is None:
        if REQUIRE:
            pytest.fail("FRAGFLOW_REQUIRE_CHROMIUM is set but chromium is not on PATH")
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    model = ff.onnx.load(berts[MAX])
    ids, mask = model.inputs_by_name["input_ids"], model.inputs_by_name["attention_mask"]
    export = ff.webgl.export({"hidden": model.outputs[0]}, [ids, mask],
                             os.path.join(tmp_path, "bert"), dynamic_length=mask,
                             page=False)
    assert [i["name"] for i in export.schedule["inputs"]] == ["input_ids", "length"]
    for n in SHORT:        # the same files; a folder each, as the harness keeps feeds there
        shutil.copytree(export.directory, os.path.join(tmp_path, f"n{n}"))
    cases = [{"id": f"n{n}", "dir": f"n{n}", "runs": 1,
              "feeds": {"input_ids": (_padded(n)[0], "int32"),
                        "length": (np.int32([n]), "int32")},
              "outputs": {"hidden": ((1, MAX, 32), "float32")}} for n in SHORT]
    results = run_cases(str(tmp_path), cases, config)
    for n in SHORT:
        got = results[f"n{n}"]
        assert got["error"] is None, got["error"]
        _assert_valid_positions_match(got["outputs"][0]["hidden"], shorter[n], n,
                                      f"{n} of {MAX} tokens in chromium ({config})")
