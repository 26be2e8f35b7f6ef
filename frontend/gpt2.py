"""A GPT-2 decoder built from fragflow's ops, and text generation in one run.

`gpt2_decoder(weights, config)` takes a GPT-2's weights under the names Hugging Face's
`GPT2LMHeadModel.state_dict()` gives them (`transformer.wte.weight`,
`transformer.h.0.attn.c_attn.weight`, ...; arrays, or anything `np.asarray` reads)
and its configuration (an object or a dict with n_layer, n_head, n_embd, vocab_size,
n_positions, layer_norm_epsilon, activation_function). The decoder's

- `logits(input_ids)` is the whole forward pass: [batch, steps, vocab];
- `generate(input_ids, max_new_tokens, do_sample=False, top_k=None, temperature=1.0,
  seed=None)` is [batch, max_new_tokens] int32: the prompt goes through the model once
  (the prefill), filling a key/value cache of prompt + max_new_tokens - 1 positions per
  layer, then a counted loop (`fori_loop`: one scan node, no readback on GL) feeds
  one token per iteration, attending to the cache; the cache, the last token and the
  tokens so far are its loop variables, each step writing its row with
  `dynamic_update_slice`. Greedy (argmax, as transformers' `generate(do_sample=False)`)
  or sampled (`sample_logits`: top-k and temperature, a Philox draw per iteration).

One `Session.run` (or one exported WebGL `run`) generates every token. Shapes are
static: the prompt's (batch, steps) are known when the graph is built and every prompt
in a batch has that length (no padding mask); the loop runs all max_new_tokens steps
(no stop at an end-of-text token). docs/TRANSFORMERS.md, "Generation".
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.errors import AttrError, ShapeError
from . import ops as _ops
from .control_flow import fori_loop

__all__ = ["gpt2_decoder", "GPT2Decoder", "sample_logits"]

_MASKED = 1e9          # taken off the scores of cache rows not yet written
_ACTIVATIONS = {"gelu_new": True, "gelu_pytorch_tanh": True, "gelu": False}
_CONFIG = ("n_layer", "n_head", "n_embd", "vocab_size", "n_positions")


def gpt2_decoder(weights, config):
    """A GPT2Decoder of these weights (a state_dict-like mapping) and config."""
    return GPT2Decoder(weights, config)


def sample_logits(logits, top_k=None, temperature=1.0, seed=None, name=None):
    """One class index per row of logits [batch, classes], int32 [batch]: the k largest
    logits divided by temperature, softmaxed, one drawn (Philox: `ff.multinomial`,
    a fresh draw per run and per loop iteration, the same for a seed in every
    session). top_k=None keeps every class; top_k=1 is the argmax.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     t = ff.sample_logits(np.float32([[0.0, 5.0, 1.0, 4.0]]), top_k=2, seed=1)
    >>> int(ff.Session(g, backend="numpy").run(t)[0]) in (1, 3)
    True
    """
    x = _tensor(logits, np.float32)
    if x.dtype != "float32" or len(x.shape) != 2 or x.shape[1] is None:
        raise ShapeError(f"sample_logits takes float32 logits [batch, classes] with known "
                         f"classes, got {x.dtype} {list(x.shape)}")
    classes = x.shape[1]
    if not (isinstance(temperature, (int, float)) and temperature > 0
            and math.isfinite(temperature)):
        raise AttrError(f"sample_logits: temperature must be a positive number, got "
                        f"{temperature!r}")
    if top_k is not None and (not isinstance(top_k, (int, np.integer)) or top_k < 1):
        raise AttrError(f"sample_logits: top_k must be a positive int or None, got {top_k!r}")
    with _ops.name_scope(name or "sample_logits"):
        if top_k is not None and top_k == 1:
            return _ops.argmax(x, axis=-1)
        if top_k is None or top_k >= classes:
            return _ops.reshape(_ops.multinomial(x / float(temperature), 1, seed=seed), (-1,))
        values, indices = _ops.top_k(x, k=int(top_k))
        choice = _ops.multinomial(values / float(temperature), 1, seed=seed)  # [batch, 1]
        return _ops.reshape(_ops.gather(indices, choice, batch_dims=1), (-1,))


def _tensor(x, dtype):
    """A Tensor as it is; anything else a constant of dtype."""
    return x if isinstance(x, _ops.Tensor) else _ops.constant(np.asarray(x, dtype))


class GPT2Decoder:
    """GPT-2 (Radford et al. 2019, as Hugging Face's GPT2LMHeadModel computes it):
    token and position embeddings, n_layer pre-norm blocks (LayerNorm, causal
    multi-head attention, LayerNorm, MLP with GELU), a final LayerNorm and the tied
    output projection. Weights are constants of the graph each method builds in."""

    def __init__(self, weights, config):
        cfg = dict(config) if isinstance(config, dict) else {
            k: getattr(config, k) for k in (*_CONFIG, "layer_norm_epsilon",
                                             "activation_function") if hasattr(config, k)}
        missing = [k for k in _CONFIG if k not in cfg]
        if missing:
            raise AttrError(f"gpt2_decoder: the config lacks {missing}")
        self.n_layer, self.n_head, self.n_embd, self.vocab_size, self.n_positions = (
            int(cfg[k]) for k in _CONFIG)
        if self.n_embd % self.n_head:
            raise AttrError(f"gpt2_decoder: n_embd {self.n_embd} is not a multiple of "
                            f"n_head {self.n_head}")
        self.epsilon = float(cfg.get("layer_norm_epsilon", 1e-5))
        activation = cfg.get("activation_function", "gelu_new")
        if activation not in _ACTIVATIONS:
            raise AttrError(f"gpt2_decoder: activation_function {activation!r} is not one "
                            f"of {sorted(_ACTIVATIONS)}")
        self.approximate_gelu = _ACTIVATIONS[activation]
        self.head_dim = self.n_embd // self.n_head
        self.weights = self._read(weights)

    # -- weights -------------------------------------------------------------------------
    def _read(self, weights):
        e, v = self.n_embd, self.vocab_size
        shapes = {"transformer.wte.weight": (v, e),
                  "transformer.wpe.weight": (self.n_positions, e),
                  "transformer.ln_f.weight": (e,), "transformer.ln_f.bias": (e,)}
        for i in range(self.n_layer):
            p = f"transformer.h.{i}."
            shapes.update({p + "ln_1.weight": (e,), p + "ln_1.bias": (e,),
                           p + "attn.c_attn.weight": (e, 3 * e),
                           p + "attn.c_attn.bias": (3 * e,),
                           p + "attn.c_proj.weight": (e, e), p + "attn.c_proj.bias": (e,),
                           p + "ln_2.weight": (e,), p + "ln_2.bias": (e,),
                           p + "mlp.c_fc.weight": (e, 4 * e), p + "mlp.c_fc.bias": (4 * e,),
                           p + "mlp.c_proj.weight": (4 * e, e),
                           p + "mlp.c_proj.bias": (e,)})
        out = {}
        for name, shape in shapes.items():
            if name not in weights:
                raise AttrError(f"gpt2_decoder: weight {name!r} is missing")
            a = np.asarray(weights[name], dtype=np.float32)
            if a.shape != shape:
                raise ShapeError(f"gpt2_decoder: weight {name!r} is {list(a.shape)}, the "
                                 f"config needs {list(shape)}")
            out[name] = a
        head = weights.get("lm_head.weight") if hasattr(weights, "get") else None
        if head is not None and not np.array_equal(np.asarray(head, np.float32),
                                                   out["transformer.wte.weight"]):
            raise AttrError("gpt2_decoder: lm_head.weight differs from transformer.wte."
                            "weight; only GPT-2's tied output projection is built")
        return out

    def _constants(self):
        """The weights as constants of the default graph."""
        return {k: _ops.constant(a, name=k.replace("transformer.", "").replace(".", "/"))
                for k, a in self.weights.items()}

    # -- pieces --------------------------------------------------------------------------
    def _norm(self, x, w, prefix):
        return _ops.layer_normalization(x, w[prefix + ".weight"], w[prefix + ".bias"],
                                        epsilon=self.epsilon)

    @staticmethod
    def _linear(x, w, prefix):
        """x [rows, in] @ Conv1D weight [in, out] + bias."""
        return _ops.matmul(x, w[prefix + ".weight"]) + w[prefix + ".bias"]

    def _mlp(self, x, w, p):
        h = _ops.gelu(self._linear(self._norm(x, w, p + "ln_2"), w, p + "mlp.c_fc"),
                      approximate=self.approximate_gelu)
        return x + self._linear(h, w, p + "mlp.c_proj")

    def _heads(self, x, batch, steps):
        """[batch * steps, n_embd] -> [batch, heads, steps, head_dim]."""
        return _ops.transpose(_ops.reshape(x, (batch, steps, self.n_head, self.head_dim)),
                              (0, 2, 1, 3))

    def _attend(self, q, k, v, allowed, batch, steps):
        """softmax(q k^T / sqrt(d) where allowed) v, heads merged: [batch * steps, e]."""
        scores = _ops.matmul(q, k, transpose_b=True) * (1.0 / math.sqrt(self.head_dim))
        weights = _ops.softmax(scores - _MASKED * (1.0 - allowed), axis=-1)
        heads = _ops.transpose(_ops.matmul(weights, v), (0, 2, 1, 3))
        return _ops.reshape(heads, (batch * steps, self.n_embd))

    def _logits(self, x, w):
        return _ops.matmul(self._norm(x, w, "transformer.ln_f"),
                           w["transformer.wte.weight"], transpose_b=True)

    def _prompt(self, input_ids, extra):
        ids = _tensor(input_ids, np.int32)
        if ids.dtype != "int32" or len(ids.shape) != 2 or None in ids.shape:
            raise ShapeError(f"gpt2_decoder: input_ids must be int32 [batch, steps] with "
                             f"known sizes, got {ids.dtype} {list(ids.shape)}")
        batch, steps = ids.shape
        if steps < 1 or steps + extra > self.n_positions:
            raise ShapeError(f"gpt2_decoder: {steps} prompt steps + {extra} more exceed "
                             f"n_positions {self.n_positions}")
        return ids, batch, steps

    def _prefill(self, ids, w, batch, steps, cache_len):
        """The prompt through every block (causal attention); returns the hidden states
        [batch * steps, e] and per layer the (key, value) caches [batch, heads,
        cache_len, head_dim] with the prompt's rows written."""
        e = self.n_embd
        x = _ops.reshape(_ops.gather(w["transformer.wte.weight"], ids)
                         + w["transformer.wpe.weight"][:steps], (batch * steps, e))
        causal = np.tril(np.ones((steps, steps), np.float32))
        caches = []
        for i in range(self.n_layer):
            p = f"transformer.h.{i}."
            with _ops.name_scope(f"h{i}"):
                qkv = self._linear(self._norm(x, w, p + "ln_1"), w, p + "attn.c_attn")
                q, k, v = (self._heads(qkv[:, j * e:(j + 1) * e], batch, steps)
                           for j in range(3))
                a = self._attend(q, k, v, causal, batch, steps)
                x = self._mlp(x + self._linear(a, w, p + "attn.c_proj"), w, p)
                pad = ((0, 0), (0, 0), (0, cache_len - steps), (0, 0))
                caches += [_ops.pad(k, pad), _ops.pad(v, pad)]
        return x, caches

    def _step(self, token, pos, caches, w, batch, cache_len):
        """One token [batch] at position pos (an int32 scalar tensor) through every
        block, its key and value written into the caches at row pos; returns the
        logits [batch, vocab] and the new caches."""
        e = self.n_embd
        x = (_ops.gather(w["transformer.wte.weight"], token)
             + _ops.dynamic_slice(w["transformer.wpe.weight"], [pos, 0], [1, e]))
        allowed = _ops.cast(_ops.less_equal(_ops.range(cache_len), pos), "float32")
        new = []
        for i in range(self.n_layer):
            p = f"transformer.h.{i}."
            with _ops.name_scope(f"h{i}"):
                qkv = self._linear(self._norm(x, w, p + "ln_1"), w, p + "attn.c_attn")
                q, k, v = (self._heads(qkv[:, j * e:(j + 1) * e], batch, 1)
                           for j in range(3))
                keys = _ops.dynamic_update_slice(caches[2 * i], k, [0, 0, pos, 0])
                values = _ops.dynamic_update_slice(caches[2 * i + 1], v, [0, 0, pos, 0])
                a = self._attend(q, keys, values, allowed, batch, 1)
                x = self._mlp(x + self._linear(a, w, p + "attn.c_proj"), w, p)
                new += [keys, values]
        return self._logits(x, w), new

    # -- the public methods --------------------------------------------------------------
    def logits(self, input_ids, name=None):
        """The forward pass of input_ids (int32 [batch, steps]): logits [batch, steps,
        vocab], as GPT2LMHeadModel(input_ids).logits."""
        ids, batch, steps = self._prompt(input_ids, 0)
        with _ops.name_scope(name or "gpt2"):
            w = self._constants()
            x, _ = self._prefill(ids, w, batch, steps, steps)
            return _ops.reshape(self._logits(x, w), (batch, steps, self.vocab_size))

    def generate(self, input_ids, max_new_tokens, do_sample=False, top_k=None,
                 temperature=1.0, seed=None, eos_token_id=None, pad_token_id=None,
                 name=None):
        """max_new_tokens tokens after the prompt input_ids (int32 [batch, steps]),
        int32 [batch, max_new_tokens], in one run: the prompt computed once, then one
        token per iteration of a counted loop whose loop variables are the key/value
        caches. Greedy by default (transformers' generate(do_sample=False)); with
        do_sample, each token by sample_logits(top_k, temperature, seed). With
        eos_token_id, a sequence's tokens after its first eos_token_id are
        pad_token_id (eos_token_id if None), as transformers pads a finished sequence;
        the loop still runs every iteration (transformers stops once all are done and
        returns fewer columns: those columns are equal)."""
        if not isinstance(max_new_tokens, (int, np.integer)) or max_new_tokens < 1:
            raise AttrError(f"generate: max_new_tokens must be a positive int, got "
                            f"{max_new_tokens!r}")
        for what, token_id in (("eos_token_id", eos_token_id),
                               ("pad_token_id", pad_token_id)):
            if token_id is not None and not (isinstance(token_id, (int, np.integer))
                                             and 0 <= token_id < self.vocab_size):
                raise AttrError(f"generate: {what} must be a token id in [0, "
                                f"{self.vocab_size}), got {token_id!r}")
        n = int(max_new_tokens)
        ids, batch, steps = self._prompt(input_ids, n - 1)
        cache_len = steps + n - 1
        pad_id = eos_token_id if pad_token_id is None else pad_token_id

        def choose(logits, done):
            token = _ops.argmax(logits, axis=-1) if not do_sample else \
                sample_logits(logits, top_k, temperature, seed)
            if eos_token_id is None:
                return token, done
            token = _ops.where(done, _ops.fill([batch], np.int32(pad_id)), token)
            return token, _ops.logical_or(done, _ops.equal(token, np.int32(eos_token_id)))

        with _ops.name_scope(name or "generate"):
            w = self._constants()
            x, caches = self._prefill(ids, w, batch, steps, cache_len)
            last = _ops.reshape(x, (batch, steps, self.n_embd))[:, steps - 1]
            first, done = choose(self._logits(last, w),
                                 _ops.fill([batch], False) if eos_token_id is not None
                                 else None)
            tokens = _ops.pad(_ops.reshape(first, (batch, 1)), ((0, 0), (0, n - 1)))

            def body(i, carry):
                token, out, cache, *done = carry
                logits, cache = self._step(token, i + steps, cache, w, batch, cache_len)
                token, done = choose(logits, done[0] if done else None)
                out = _ops.dynamic_update_slice(out, _ops.reshape(token, (batch, 1)),
                                                [0, i + 1])
                return (token, out, cache) + ((done,) if done is not None else ())

            init = (first, tokens, caches) + ((done,) if done is not None else ())
            tokens = fori_loop(0, n - 1, body, init, name="decode")[1]
            return tokens
