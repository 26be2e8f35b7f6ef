"""GPT-2 generation exported with ff.webgl.export and run in headless Chromium: one
`run` of the page generates every token (the prefill's kernels, then one scan step
per token), greedy tokens equal to transformers' generate(do_sample=False) and sampled
tokens equal to Session.run's first run (the page's run counter starts at 0 as a
session's does, and the draws are Philox in both). docs/TRANSFORMERS.md,
"Generation"."""
from __future__ import annotations

import os

import numpy as np
import pytest

import fragflow as ff
from tests.webgl.browser import CONFIGS, chromium, run_cases

torch = pytest.importorskip("torch", reason="torch is missing (the test extra)")
transformers = pytest.importorskip("transformers",
                                   reason="transformers is missing (the test extra)")

CONFIG = dict(n_layer=2, n_embd=64, n_head=2, vocab_size=500, n_positions=128,
              initializer_range=0.4, bos_token_id=0, eos_token_id=None, pad_token_id=0)
STEPS, NEW = 7, 10
REQUIRE = os.environ.get("FRAGFLOW_REQUIRE_CHROMIUM", "") not in ("", "0")


@pytest.fixture(scope="module")
def generation(tmp_path_factory):
    if chromium() is None:
        if REQUIRE:
            pytest.fail("FRAGFLOW_REQUIRE_CHROMIUM is set but chromium is not on PATH")
        pytest.skip("chromium is not installed (Debian: apt-get install chromium)")
    torch.manual_seed(1)
    config = transformers.GPT2Config(**CONFIG)
    model = transformers.GPT2LMHeadModel(config).eval()
    prompt = torch.randint(0, config.vocab_size, (1, STEPS))
    with torch.no_grad():
        greedy = model.generate(prompt, max_new_tokens=NEW, do_sample=False)[:, STEPS:]
    decoder = ff.gpt2_decoder(model.state_dict(), config)
    g = ff.Graph()
    with g.as_default():
        ids = ff.placeholder((1, STEPS), "int32", name="input_ids")
        fetches = {"greedy": decoder.generate(ids, NEW),
                   "sampled": decoder.generate(ids, NEW, do_sample=True, top_k=20,
                                               temperature=0.8, seed=7)}
    feeds = {ids: prompt.numpy().astype(np.int32)}
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        sampled = sess.run(fetches["sampled"], feeds)
    root = str(tmp_path_factory.mktemp("generate"))
    export = ff.webgl.export(fetches, [ids], os.path.join(root, "gpt2"), page=False)
    spec = {"id": "gpt2", "dir": "gpt2", "runs": 1,
            "feeds": {"input_ids": (feeds[ids], "int32")},
            "outputs": {o["name"]: (tuple(o["shape"]), o["dtype"])
                        for o in export.schedule["outputs"]}}
    return root, spec, export, greedy.numpy(), sampled


def test_the_generation_export_is_a_prefill_and_one_loop_per_fetch(generation):
    schedule = generation[2].schedule
    assert schedule["version"] == 2
    assert [s["kind"] for s in schedule["program"]] == ["kernels", "scan", "scan"]
    assert [s["length"] for s in schedule["program"][1:]] == [NEW - 1] * 2


@pytest.mark.parametrize("config", sorted(CONFIGS))
def test_one_run_in_chromium_generates_transformers_tokens(generation, config):
    root, spec, _, greedy, sampled = generation
    result = run_cases(root, [spec], config)["gpt2"]
    assert result["error"] is None, result["error"]
    out = result["outputs"][0]
    np.testing.assert_array_equal(out["greedy"], greedy)
    np.testing.assert_array_equal(out["sampled"], sampled)
    assert not np.array_equal(sampled, greedy)
