"""ff.gpt2_decoder against Hugging Face's GPT2LMHeadModel on the same (random) weights:
the forward pass's logits, greedy generation token for token against transformers'
generate(do_sample=False), on GL and on the numpy executor running the graph as built;
the generation graph's shape (one loop, the prompt computed once); top-k/temperature
sampling's distribution and seeds (docs/TRANSFORMERS.md, "Generation")."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.graph import Graph

torch = pytest.importorskip("torch", reason="torch is missing (the test extra)")
transformers = pytest.importorskip("transformers",
                                   reason="transformers is missing (the test extra)")

# initializer_range 0.4: random weights whose greedy tokens vary (examples/generate.py)
CONFIG = dict(n_layer=2, n_embd=64, n_head=2, vocab_size=500, n_positions=128,
              initializer_range=0.4, bos_token_id=0, eos_token_id=None, pad_token_id=0)
BATCH, STEPS, NEW = 2, 5, 11            # 5 and 11: not multiples of 4


@pytest.fixture(scope="module")
def gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(**CONFIG)
    model = transformers.GPT2LMHeadModel(config).eval()
    prompt = torch.randint(0, config.vocab_size, (BATCH, STEPS))
    return config, model, prompt


def _hf_generate(model, prompt, n):
    with torch.no_grad():
        return model.generate(prompt, max_new_tokens=n, do_sample=False)[:, prompt.shape[1]:] \
            .numpy()


def _hf_logits(model, ids):
    with torch.no_grad():
        return model(torch.as_tensor(ids, dtype=torch.long)).logits.numpy()


def _graph(gpt2, build):
    config, model, prompt = gpt2
    decoder = ff.gpt2_decoder(model.state_dict(), config)
    g = ff.Graph()
    with g.as_default():
        ids = ff.placeholder(tuple(prompt.shape), "int32", name="input_ids")
        fetches = build(decoder, ids)
    return g, fetches, {ids: prompt.numpy().astype(np.int32)}


def _run(g, fetches, feeds, backend):
    kwargs = {"passes": []} if backend == "numpy" else {}
    with ff.Session(g, backend=backend, **kwargs) as sess:
        return sess.run(fetches, feeds)


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_logits_match_the_transformers_forward_pass(gpt2, backend):
    g, logits, feeds = _graph(gpt2, lambda d, ids: d.logits(ids))
    got = _run(g, logits, feeds, backend)
    want = _hf_logits(gpt2[1], gpt2[2])
    assert got.shape == want.shape == (BATCH, STEPS, CONFIG["vocab_size"])
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_greedy_tokens_equal_transformers_generate(gpt2, backend):
    g, tokens, feeds = _graph(gpt2, lambda d, ids: d.generate(ids, NEW))
    got = _run(g, tokens, feeds, backend)
    want = _hf_generate(gpt2[1], gpt2[2], NEW)
    assert got.dtype == np.int32 and got.shape == (BATCH, NEW)
    np.testing.assert_array_equal(got, want)
    assert len(set(want.ravel().tolist())) > NEW       # not one token repeated


def test_one_new_token_is_the_prefill_s_argmax(gpt2):
    g, tokens, feeds = _graph(gpt2, lambda d, ids: d.generate(ids, 1))
    np.testing.assert_array_equal(_run(g, tokens, feeds, "numpy"),
                                  _hf_generate(gpt2[1], gpt2[2], 1))


def _eos_run(gpt2, prompt, eos, pad, backend):
    config, model, _ = gpt2
    decoder = ff.gpt2_decoder(model.state_dict(), config)
    g = ff.Graph()
    with g.as_default():
        ids = ff.placeholder(tuple(prompt.shape), "int32", name="input_ids")
        tokens = decoder.generate(ids, NEW, eos_token_id=eos, pad_token_id=pad)
    return _run(g, tokens, {ids: prompt.numpy().astype(np.int32)}, backend)


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_a_finished_sequence_is_padded_as_transformers_pads_it(gpt2, backend):
    _, model, prompt = gpt2
    eos = int(_hf_generate(model, prompt, NEW)[0, 3])       # row 0 ends at its 4th token
    with torch.no_grad():
        want = model.generate(prompt, max_new_tokens=NEW, do_sample=False,
                              eos_token_id=eos, pad_token_id=7)[:, STEPS:].numpy()
    got = _eos_run(gpt2, prompt, eos, 7, backend)
    np.testing.assert_array_equal(got, want)
    assert (got[0, 4:] == 7).all() and (got[1] != 7).any()


def test_when_every_sequence_has_ended_transformers_stops_and_the_loop_pads(gpt2):
    _, model, prompt = gpt2
    prompt = prompt[1:]
    eos = int(_hf_generate(model, prompt, NEW)[0, 2])
    with torch.no_grad():
        want = model.generate(prompt, max_new_tokens=NEW, do_sample=False,
                              eos_token_id=eos)[:, STEPS:].numpy()
    got = _eos_run(gpt2, prompt, eos, None, "numpy")      # pad_token_id None: eos's
    assert want.shape[1] < NEW
    np.testing.assert_array_equal(got[:, :want.shape[1]], want)
    assert (got[:, want.shape[1]:] == eos).all()


def _nodes(graph):
    for node in graph.nodes:
        yield node
        for sub in node.attrs.values():
            if isinstance(sub, Graph):
                yield from _nodes(sub)


def test_generation_is_one_loop_whose_body_sees_one_token_per_row(gpt2):
    g, tokens, _ = _graph(gpt2, lambda d, ids: d.generate(ids, NEW))
    loops = [n for n in g.nodes if n.op in ("scan", "while_loop")]
    assert len(loops) == 1
    body = next(v for v in loops[0].attrs.values() if isinstance(v, Graph))
    body_nodes = list(_nodes(body))
    matmuls = [n for n in body_nodes if n.op == "matmul"]
    # per layer: c_attn, q k^T, weights v, c_proj, c_fc, c_proj; then the logits
    assert len(matmuls) == 6 * CONFIG["n_layer"] + 1
    for n in matmuls:        # one token a row: no matmul in the body sees the prompt
        assert n.inputs[0].type.shape[-2] in (1, BATCH), n.inputs[0].type
    updates = [n for n in body_nodes if n.op == "dynamic_update_slice"]
    assert len(updates) == 2 * CONFIG["n_layer"] + 1     # keys, values; the tokens
    cache = (BATCH, CONFIG["n_head"], STEPS + NEW - 1, CONFIG["n_embd"] // CONFIG["n_head"])
    assert sum(tuple(n.outputs[0].type.shape) == cache for n in updates) == \
        2 * CONFIG["n_layer"]


def _sampled(gpt2, **kwargs):
    g, tokens, feeds = _graph(gpt2, lambda d, ids: d.generate(ids, NEW, do_sample=True,
                                                              **kwargs))
    return _run(g, tokens, feeds, "numpy")


def test_sampled_tokens_are_in_the_top_k_of_their_step(gpt2):
    k = 4
    tokens = _sampled(gpt2, top_k=k, temperature=0.7, seed=5)
    prompt = gpt2[2].numpy()
    # the logits each step sampled from: transformers' forward on prompt + tokens
    logits = _hf_logits(gpt2[1], np.concatenate([prompt, tokens], axis=1))
    for j in range(NEW):
        step = logits[:, STEPS - 1 + j]
        top = np.argsort(-step, axis=-1, kind="stable")[:, :k]
        assert all(tokens[b, j] in top[b] for b in range(BATCH)), j
    assert not np.array_equal(tokens, _hf_generate(gpt2[1], gpt2[2], NEW))


def test_top_k_1_sampling_is_greedy(gpt2):
    np.testing.assert_array_equal(_sampled(gpt2, top_k=1, temperature=3.0, seed=9),
                                  _hf_generate(gpt2[1], gpt2[2], NEW))


def test_the_same_seed_draws_the_same_tokens_and_another_seed_others(gpt2):
    a = _sampled(gpt2, top_k=50, temperature=1.0, seed=1)
    assert np.array_equal(a, _sampled(gpt2, top_k=50, temperature=1.0, seed=1))
    assert not np.array_equal(a, _sampled(gpt2, top_k=50, temperature=1.0, seed=2))


def test_sampling_on_gl_draws_the_numpy_executor_s_tokens(gpt2):
    g, tokens, feeds = _graph(gpt2, lambda d, ids: d.generate(ids, NEW, do_sample=True,
                                                              top_k=8, seed=4))
    np.testing.assert_array_equal(_run(g, tokens, feeds, "gl"),
                                  _run(g, tokens, feeds, "numpy"))


def _frequencies(logits, rows, **kwargs):
    g = ff.Graph()
    with g.as_default():
        drawn = ff.sample_logits(np.tile(np.float32(logits), (rows, 1)), **kwargs)
    got = ff.Session(g, backend="numpy").run(drawn)
    assert got.dtype == np.int32 and got.shape == (rows,)
    return np.bincount(got, minlength=len(logits)) / rows


@pytest.mark.parametrize("top_k, temperature", [(3, 1.0), (3, 0.5), (None, 2.0), (6, 1.0)])
def test_sample_logits_follows_the_softmax_of_the_top_k_over_temperature(top_k, temperature):
    logits = np.array([1.5, -2.0, 0.0, 3.0, -0.0, 2.5, -7.0, 1.0, 0.5], np.float64)
    rows = 40000
    freq = _frequencies(logits, rows, top_k=top_k, temperature=temperature, seed=11)
    keep = np.argsort(-logits, kind="stable")[:top_k or len(logits)]
    z = np.full(len(logits), -np.inf)
    z[keep] = logits[keep] / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    assert (freq[p == 0] == 0).all()                     # never outside the top k
    sigma = np.sqrt(p * (1 - p) / rows)
    assert (np.abs(freq - p) <= 5 * sigma + 1e-12).all(), (freq, p)


def test_sample_logits_top_1_is_the_argmax_and_a_low_temperature_nearly_so():
    logits = [0.3, -1.0, 2.0, 1.9, np.float32(-np.inf)]
    assert (_frequencies(logits, 200, top_k=1, seed=0) == [0, 0, 1, 0, 0]).all()
    assert _frequencies(logits, 2000, temperature=0.01, seed=0)[2] > 0.99


@pytest.mark.parametrize("kwargs, match", [
    ({"max_new_tokens": 0}, "max_new_tokens"),
    ({"max_new_tokens": 125}, "n_positions"),
    ({"max_new_tokens": 3, "do_sample": True, "temperature": 0.0}, "temperature"),
    ({"max_new_tokens": 3, "do_sample": True, "top_k": 0}, "top_k"),
    ({"max_new_tokens": 3, "eos_token_id": 500}, "eos_token_id"),
    ({"max_new_tokens": 3, "eos_token_id": 1, "pad_token_id": -1}, "pad_token_id"),
])
def test_bad_generation_arguments_raise_clear_errors(gpt2, kwargs, match):
    with pytest.raises(ff.FragflowError, match=match):
        _graph(gpt2, lambda d, ids: d.generate(ids, **kwargs))


def test_bad_weights_and_configs_raise_clear_errors(gpt2):
    config, model, _ = gpt2
    weights = dict(model.state_dict())
    with pytest.raises(ff.ShapeError, match="c_fc.weight"):
        ff.gpt2_decoder({**weights, "transformer.h.1.mlp.c_fc.weight": np.zeros((64, 3))},
                        config)
    del weights["transformer.ln_f.bias"]
    with pytest.raises(ff.FragflowError, match="ln_f.bias' is missing"):
        ff.gpt2_decoder(weights, config)
    with pytest.raises(ff.FragflowError, match="activation_function"):
        ff.gpt2_decoder(model.state_dict(), {**CONFIG, "activation_function": "relu"})
    g = ff.Graph()
    with g.as_default(), pytest.raises(ff.ShapeError, match="input_ids"):
        ff.gpt2_decoder(model.state_dict(), config).generate(
            ff.placeholder((None, 4), "int32"), 2)
