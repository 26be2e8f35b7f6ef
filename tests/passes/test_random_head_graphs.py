"""Random awkward graphs around the kernels the passes rewrite most: a matmul, conv2d,
depthwise conv or sparse softmax cross-entropy, then a chain of elementwise ops, bias
adds (broadcast or not), reshapes with operands at the reshaped shape and their
producers, int32 casts, ReLU + max pool, fetched intermediates and second readers, and
first and second-order gradients (bias gradients become fused_sum_like). Sizes are not
multiples of 4, axes have 1 element, batches are 1 or 2, inputs hold NaN, infinities
and zeros. GL with every pass is compared with the numpy executor running the graph as
built (no passes), so a rewrite that changes a result fails here even where the numpy
executor, which runs the same passes by default, would agree with GL. Filters stay
finite: a NaN weight is tests/passes/test_conv_backprop_nan.py's case."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches

SPECIAL = [np.nan, np.inf, -np.inf, 0.0]


class Inputs:
    """Placeholders and the arrays fed to them, drawn from one generator."""

    def __init__(self, rng):
        self.rng, self.feeds = rng, {}

    def __call__(self, shape, dtype="float32", finite=False):
        t = ff.placeholder(shape, dtype)
        if dtype == "int32":
            a = self.rng.integers(-3, 4, shape).astype(np.int32)
        else:
            a = self.rng.standard_normal(shape).astype(np.float32)
            if a.size > 3 and not finite and self.rng.random() < 0.3:
                a.flat[self.rng.integers(a.size)] = self.rng.choice(SPECIAL)
        self.feeds[t] = a
        return t


def _head(rng, new):
    """(head tensor, its shape, the inputs to differentiate)."""
    kind = rng.choice(["matmul", "conv", "depthwise", "loss"])
    if kind == "matmul":
        m, k, n = (int(rng.choice(c)) for c in ([1, 3, 5, 33], [1, 3, 7, 16], [1, 2, 6, 12]))
        a = new((m, k))
        return ff.matmul(a, new((k, n), finite=True)), (m, n), [a]
    if kind == "loss":
        rows, classes = int(rng.choice([1, 4, 7])), int(rng.choice([1, 2, 3, 5, 10]))
        logits = new((rows, classes))
        labels = ff.placeholder((rows,), "int32")
        new.feeds[labels] = rng.integers(0, classes, rows).astype(np.int32)
        loss = ff.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        return ff.reshape(loss, (rows, 1)) * new((1, 3)), (rows, 3), [logits]
    size, c = int(rng.choice([1, 3, 5, 6])), int(rng.choice([1, 3, 4, 8, 16]))
    x = new((int(rng.choice([1, 2])), size, size, c))
    k, stride = int(rng.choice([1, 3])), int(rng.choice([1, 2]))
    padding = str(rng.choice(["SAME", "VALID"])) if size >= k else "SAME"
    if kind == "conv":
        w = new((k, k, c, int(rng.choice([4, 8, 12, 64]))), finite=True)
        y = ff.conv2d(x, w, strides=stride, padding=padding)
    else:
        w = new((k, k, c, 1), finite=True)
        y = ff.depthwise_conv2d(x, w, strides=stride, padding=padding)
    return y, tuple(y.shape), [x]


def build(seed):
    rng = np.random.default_rng(seed)
    new = Inputs(rng)
    g = ff.Graph()
    fetches = []
    with g.as_default():
        t, shape, xs = _head(rng, new)
        for _ in range(int(rng.integers(0, 4))):
            pick = rng.random()
            if pick < 0.3:                                  # a bias, broadcast or not
                bias = new(shape[-1:]) if rng.random() < 0.5 else new(shape)
                if rng.random() < 0.5:
                    xs.append(bias)
                t = t + bias
            elif pick < 0.5:                                # through a reshape and back
                size = int(np.prod(shape))
                flat = (size,) if rng.random() < 0.5 else (1, size)
                operand = new(flat) if rng.random() < 0.5 else ff.exp(new(flat) * 0.1)
                t = ff.reshape(ff.reshape(t, flat) * operand, shape)
            elif pick < 0.6:
                t = t * ff.cast(new(shape, "int32"), "float32")
            elif pick < 0.7 and len(shape) == 4 and shape[1] > 1:
                t = ff.max_pool(ff.relu(t), 2, 2, padding="SAME")
                shape = tuple(t.shape)
            else:
                unary = [ff.relu, ff.tanh, ff.sigmoid, ff.exp, ff.abs, ff.square, ff.relu6,
                         lambda v: ff.where(ff.greater(v, 0.0), v, v * 0.1)]
                t = unary[int(rng.integers(len(unary)))](t)
            if rng.random() < 0.15:
                fetches.append(t)                           # a fetched intermediate
            if rng.random() < 0.1:
                fetches.append(ff.reduce_sum(t * 2.0))     # a second reader
        fetches.append(t)
        if rng.random() < 0.6:
            grads = ff.gradients(ff.reduce_sum(ff.square(ff.tanh(t)) * 0.5), xs)
            fetches += [d for d in grads if d is not None]
            if rng.random() < 0.3 and grads[0] is not None:
                second = ff.gradients(ff.reduce_sum(grads[0] * grads[0]), xs)
                fetches += [d for d in second if d is not None]
    return g, fetches, new.feeds


@pytest.mark.parametrize("seed", range(24))
def test_random_graph_matches_the_graph_as_built(gl, seed):
    g, fetches, feeds = build(seed)
    got = ff.Session(g).run(fetches, feeds)
    want = ff.Session(g, backend="numpy", passes=["verify"]).run(fetches, feeds)
    for k, (a, e) in enumerate(zip(got, want)):
        scale = 1 + float(np.max(np.abs(np.nan_to_num(e, posinf=0, neginf=0)), initial=0))
        assert_matches(a, e, rtol=1e-3, atol=1e-4 * scale, what=f"seed {seed}, fetch {k}")
