"""Keras's attention layers: Attention (dot-product, Luong), AdditiveAttention
(Bahdanau) and MultiHeadAttention, on (batch, steps, features) inputs.

Attention and AdditiveAttention take [query, value] or [query, value, key] and
return softmax(scores) @ value; MultiHeadAttention(query, value, key=None,
attention_mask=None) projects each of query, key and value into num_heads heads
(weights query/kernel (features, heads, key_dim), query/bias (heads, key_dim), then
key/..., value/..., attention_output/kernel (heads, value_dim, out), attention_output/
bias, as Keras names and orders them). use_causal_mask lets step t attend to steps <= t;
attention_mask (batch, T, S), 1 where attending is allowed; the Keras masks of the
inputs (Embedding(mask_zero=True), Masking) are read as Keras reads them. Masked scores
are set to (MultiHeadAttention) or lowered by (Attention) 1e9 before the softmax.

>>> import fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     x = ff.placeholder((None, 5, 6))
...     y = ff.keras.layers.MultiHeadAttention(num_heads=2, key_dim=3)(x, x)
>>> y.shape
(None, 5, 6)
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.errors import AttrError, ShapeError
from . import ops as _ops
from .layers import Layer, export, keras_mask, set_keras_mask

__all__ = ["Attention", "AdditiveAttention", "MultiHeadAttention"]

_MASKED = 1e9         # taken off masked scores (Keras's value for float32)


def _causal(t, s):
    """(1, T, S) float32: 1 where query step i may see key step j (j <= i)."""
    return np.tril(np.ones((t, s), np.float32))[None]


def _masked_softmax(scores, allowed):
    """softmax over the last axis after scores -= 1e9 * (1 - allowed) (Attention's
    rule: a row with nothing allowed is the softmax of its scores)."""
    if allowed is not None:
        scores = scores - _MASKED * (1.0 - allowed)
    return _ops.softmax(scores, axis=-1)


def _mask_float(mask):
    return None if mask is None else _ops.cast(mask, "float32")


def _and(a, b):
    return b if a is None else a if b is None else a * b


def _check_sequences(layer, shapes):
    for s in shapes:
        if len(s) != 3 or s[-1] is None:
            raise ShapeError(f"{type(layer).__name__} '{layer.name}' takes (batch, steps, "
                             f"features) inputs with known features, got {list(s)}")


class _BaseAttention(Layer):
    def __init__(self, dropout=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.dropout, self.seed = float(dropout), seed
        self.training_dependent = self.dropout > 0

    def build(self, input_shape):
        if not isinstance(input_shape, list) or len(input_shape) not in (2, 3):
            raise ShapeError(f"{type(self).__name__} '{self.name}' takes a list [query, "
                             f"value] or [query, value, key]")
        _check_sequences(self, input_shape)

    def call(self, inputs, training=False, use_causal_mask=False,
             return_attention_scores=False, mask=None):
        if mask is not None:
            raise AttrError(f"{type(self).__name__} '{self.name}': mask= is not supported; "
                            f"use_causal_mask is")
        query, value = inputs[0], inputs[1]
        key = inputs[2] if len(inputs) == 3 else value
        scores = self._scores(query, key)
        # Keras's masks (Embedding(mask_zero=True), Masking): the value's steps out of
        # the scores, the query's masked steps give zeros (and keep their mask)
        query_mask, value_mask = keras_mask(query), keras_mask(value)
        allowed = None if value_mask is None else \
            _ops.expand_dims(_mask_float(value_mask), 1)
        if use_causal_mask:
            allowed = _and(allowed, _ops.constant(_causal(query.shape[1], key.shape[1])))
        weights = _masked_softmax(scores, allowed)
        if training and self.dropout > 0:
            weights = _ops.dropout(weights, self.dropout, seed=self.seed)
        out = _ops.matmul(weights, value)
        if query_mask is not None:
            out = out * _ops.expand_dims(_mask_float(query_mask), -1)
            set_keras_mask(out, query_mask)
        return (out, weights) if return_attention_scores else out


class Attention(_BaseAttention):
    """Dot-product attention: scores = query @ key^T (times a learnt scalar scale
    with use_scale); score_mode "concat": concat_score_weight * sum(tanh(scale *
    (query_i + key_j)))."""

    def __init__(self, use_scale=False, score_mode="dot", dropout=0.0, seed=None,
                 **kwargs):
        super().__init__(dropout, seed, **kwargs)
        if score_mode not in ("dot", "concat"):
            raise AttrError(f"Attention: score_mode must be 'dot' or 'concat', got "
                            f"{score_mode!r}")
        self.use_scale, self.score_mode = bool(use_scale), score_mode

    def build(self, input_shape):
        super().build(input_shape)
        self.scale = self.add_weight("scale", (), "ones") if self.use_scale else None
        self.concat_score_weight = self.add_weight("concat_score_weight", (), "ones") \
            if self.score_mode == "concat" else None

    def _scores(self, query, key):
        if self.score_mode == "dot":
            scores = _ops.matmul(query, key, transpose_b=True)
            return scores * self.scale if self.scale is not None else scores
        pair = _ops.expand_dims(query, 2) + _ops.expand_dims(key, 1)
        if self.scale is not None:
            pair = pair * self.scale
        return self.concat_score_weight * _ops.reduce_sum(_ops.tanh(pair), axis=-1)


class AdditiveAttention(_BaseAttention):
    """Additive attention: scores = sum(scale * tanh(query_i + key_j)) over the
    features, scale a learnt (features,) weight with use_scale."""

    def __init__(self, use_scale=True, dropout=0.0, seed=None, **kwargs):
        super().__init__(dropout, seed, **kwargs)
        self.use_scale = bool(use_scale)

    def build(self, input_shape):
        super().build(input_shape)
        self.scale = self.add_weight("scale", (input_shape[0][-1],), "glorot_uniform") \
            if self.use_scale else None

    def _scores(self, query, key):
        pair = _ops.tanh(_ops.expand_dims(query, 2) + _ops.expand_dims(key, 1))
        if self.scale is not None:
            pair = pair * self.scale
        return _ops.reduce_sum(pair, axis=-1)


class MultiHeadAttention(Layer):
    """Keras's MultiHeadAttention over the steps axis (attention_axes=None) of
    (batch, steps, features) inputs; the output has the query's features (or
    output_shape)."""

    def __init__(self, num_heads, key_dim, value_dim=None, dropout=0.0, use_bias=True,
                 output_shape=None, attention_axes=None, sliding_window=None,
                 flash_attention=None, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", use_gate=False, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.num_heads, self.key_dim = int(num_heads), int(key_dim)
        self.value_dim = int(value_dim) if value_dim is not None else self.key_dim
        self.dropout, self.use_bias, self.seed = float(dropout), bool(use_bias), seed
        self.training_dependent = self.dropout > 0
        if isinstance(output_shape, (list, tuple)):
            if len(output_shape) != 1:
                raise AttrError(f"MultiHeadAttention: output_shape must be one size, got "
                                f"{output_shape!r}")
            output_shape = output_shape[0]
        self.output_shape = None if output_shape is None else int(output_shape)
        for key, value in (("attention_axes", attention_axes),
                           ("sliding_window", sliding_window), ("use_gate", use_gate)):
            if value not in (None, False) and not (key == "attention_axes" and
                                                   list(np.ravel(value)) in ([1], [-2])):
                raise AttrError(f"MultiHeadAttention: {key}={value!r} is not supported "
                                f"(docs/KERAS.md)")
        self.attention_axes, self.sliding_window, self.use_gate = None, None, False
        self.flash_attention = flash_attention
        self.kernel_initializer, self.bias_initializer = kernel_initializer, bias_initializer

    def __call__(self, query, value, key=None, attention_mask=None,
                 return_attention_scores=False, training=False, use_causal_mask=False):
        inputs = [query, value] + ([key] if key is not None else [])
        return super().__call__(inputs, training=training, attention_mask=attention_mask,
                                return_attention_scores=return_attention_scores,
                                use_causal_mask=use_causal_mask)

    def build(self, input_shape):
        _check_sequences(self, input_shape)
        q, v = input_shape[0][-1], input_shape[1][-1]
        k = input_shape[2][-1] if len(input_shape) == 3 else v
        h = self.num_heads

        def dense(name, fan_in, heads_dim):
            kernel = self.add_weight(f"{name}/kernel", (fan_in, h, heads_dim),
                                     self.kernel_initializer)
            bias = self.add_weight(f"{name}/bias", (h, heads_dim), self.bias_initializer) \
                if self.use_bias else None
            return kernel, bias

        self._query = dense("query", q, self.key_dim)
        self._key = dense("key", k, self.key_dim)
        self._value = dense("value", v, self.value_dim)
        out = self.output_shape or q
        self._output = (self.add_weight("attention_output/kernel",
                                        (h, self.value_dim, out), self.kernel_initializer),
                        self.add_weight("attention_output/bias", (out,),
                                        self.bias_initializer) if self.use_bias else None)

    def _heads(self, x, projection, size):
        """(batch, steps, features) -> (batch, heads, steps, size)."""
        kernel, bias = projection
        steps, features = x.shape[1], x.shape[2]
        y = _ops.matmul(_ops.reshape(x, (-1, features)),
                        _ops.reshape(kernel, (features, self.num_heads * size)))
        if bias is not None:
            y = y + _ops.reshape(bias, (self.num_heads * size,))
        y = _ops.reshape(y, (-1, steps if steps is not None else -1, self.num_heads, size))
        return _ops.transpose(y, (0, 2, 1, 3))

    def call(self, inputs, training=False, attention_mask=None,
             return_attention_scores=False, use_causal_mask=False):
        query, value = inputs[0], inputs[1]
        key = inputs[2] if len(inputs) == 3 else value
        q = self._heads(query, self._query, self.key_dim) * (1.0 / math.sqrt(self.key_dim))
        k = self._heads(key, self._key, self.key_dim)
        v = self._heads(value, self._value, self.value_dim)
        scores = _ops.matmul(q, k, transpose_b=True)           # (batch, heads, T, S)
        # Keras's rule: the query's, value's and key's Keras masks, attention_mask and
        # the causal mask, all ANDed to (batch, T, S); masked scores to -1e9 and a row
        # with nothing allowed gives zeros
        query_mask = keras_mask(query)
        allowed = None
        if query_mask is not None:
            allowed = _ops.expand_dims(_mask_float(query_mask), -1)
        for source in ([value] if key is value else [value, key]):
            mask = keras_mask(source)
            if mask is not None:
                allowed = _and(allowed, _ops.expand_dims(_mask_float(mask), 1))
        if use_causal_mask:
            allowed = _and(allowed, _ops.constant(_causal(query.shape[1], key.shape[1])))
        if attention_mask is not None:
            allowed = _and(allowed, _ops.cast(attention_mask, "float32"))
        if allowed is not None:
            allowed = _ops.expand_dims(allowed, 1)             # one mask for every head
            # masked scores set to -1e9: a row with nothing allowed attends to every
            # step alike (Keras's dot_product_attention); with dropout or
            # return_attention_scores Keras takes its masked-softmax path, which
            # gives such a row zeros
            weights = _ops.softmax(scores * allowed - _MASKED * (1.0 - allowed), axis=-1)
            if self.dropout > 0 or return_attention_scores:
                weights = weights * allowed
        else:
            weights = _ops.softmax(scores, axis=-1)
        if training and self.dropout > 0:
            weights = _ops.dropout(weights, self.dropout, seed=self.seed)
        heads = _ops.transpose(_ops.matmul(weights, v), (0, 2, 1, 3))   # (b, T, h, v)
        kernel, bias = self._output
        t, out = query.shape[1], kernel.shape[-1]
        y = _ops.matmul(_ops.reshape(heads, (-1, self.num_heads * self.value_dim)),
                        _ops.reshape(kernel, (self.num_heads * self.value_dim, out)))
        if bias is not None:
            y = y + bias
        y = _ops.reshape(y, (-1, t if t is not None else -1, out))
        if query_mask is not None:
            set_keras_mask(y, query_mask)
        return (y, weights) if return_attention_scores else y


export(__all__, globals())
