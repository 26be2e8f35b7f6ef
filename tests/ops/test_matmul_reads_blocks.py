"""A blocked matmul read only by blocked matmuls as their A (BERT's first feed-forward
matmul, read by the second) applies its epilogue (bias, GELU) itself and leaves its
result in its render targets: no stitch; the readers' blocked kernels read A's texels
there (codegen/matmul.py plan_blocks, _reads_a_blocks; templates/matmul_blocked.glsl.j2
a_blocks). On GL against the float64 formula: rows not a multiple of 4, a leading
batch dim of 1, negatives, NaN and inf in the input, the reader's own result left for
a LayerNorm too, reshapes between them (GPT-2's Gemms); and where the stitch stays:
the producer's K split, a reader that reads it as B, or runs another strategy, the
knob off."""
import math

import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, normal

ON = {"matmul.matmul_reads_blocks": True}


def _gelu64(v):
    return 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))


def _weights(rng, k, n):
    return normal(rng, k, n) / np.float32(math.sqrt(k)), normal(rng, n)


def _run(build, feeds, knobs):
    g = ff.Graph()
    with g.as_default():
        holders = [ff.placeholder(a.shape, name=f"x{i}") for i, a in enumerate(feeds)]
        fetches = build(*holders)
    with ff.Session(g, tuning=ff.Tuning().with_(knobs)) as sess:
        fn = sess.compile(fetches, feeds=holders)
        return fn(*feeds), fn.kernels


def _ffn(x_shape, d, hidden, norm, rng):
    """y = gelu(x @ w1 + b1) @ w2 + b2 + x (then a LayerNorm where `norm`)."""
    (w1, b1), (w2, b2) = _weights(rng, d, hidden), _weights(rng, hidden, d)
    x = normal(rng, *x_shape, d) * np.float32(2)
    x[(0,) * len(x_shape) + (1,)] = np.nan
    x[(-1,) * len(x_shape) + (-1,)] = np.inf

    def build(xp):
        f = xp @ ff.constant(w1) + ff.constant(b1)
        f = 0.5 * f * (1.0 + ff.erf(f * np.float32(1 / math.sqrt(2))))
        y = f @ ff.constant(w2) + ff.constant(b2) + xp
        return [ff.layer_normalization(y, epsilon=1e-5) if norm else y]

    def reference(x):
        with np.errstate(invalid="ignore", over="ignore"):
            x64 = x.astype(np.float64)
            y = _gelu64(x64 @ w1 + b1) @ w2 + b2 + x64
            if norm:
                c = y - y.mean(-1, keepdims=True)
                y = c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5)
            return y
    return build, reference, x


@pytest.mark.parametrize("x_shape, d, hidden, norm", [
    ((37,), 64, 256, False),        # rows not a multiple of 4
    ((1, 13), 32, 320, False),      # a leading batch dim of 1; 80 column texels
    ((32,), 128, 512, True),        # BERT's test size, the second product into a norm
])
def test_the_reader_reads_a_from_the_targets(gl, x_shape, d, hidden, norm):
    rng = np.random.default_rng(sum(x_shape) + d + hidden)
    build, reference, x = _ffn(x_shape, d, hidden, norm, rng)
    (got,), kernels = _run(build, [x], {**ON, "matmul.norm_blocks_max_elements": 1 << 30})
    want = reference(x)
    assert_matches(got, want.astype(np.float32), rtol=1e-4, atol=1e-4 * (1 + 3 * (not norm)))
    assert np.isnan(want).any() and np.isfinite(want).any() and (want < 0).any()
    ops = [(k.op, k.strategy, k.part) for k in kernels]
    assert [k.op for k in kernels if k.op.endswith("matmul_stitch")] == [] if norm else \
        ["fused_matmul_stitch"], ops                    # the second product's, unless normed
    first, second = [k for k in kernels if k.op == "fused_matmul"]
    assert first.part == "blocks" and first.strategy == "matmul.blocked", ops
    assert "epilogue4(" in first.source, "the producer applies its epilogue"
    a = next(b for b in second.inputs if b.value == first.output.value)
    assert f"px_{a.sampler}(" in second.source, ops


def test_the_reader_reads_a_through_reshapes(gl):
    """GPT-2's feed-forward: Gemm on 2-D, its result reshaped to [1, L, 4D] and back
    before the next Gemm. The views keep the rows: the reader binds the producer's
    targets, no alias of the never-written value is left in the steps."""
    rng = np.random.default_rng(7)
    (w1, b1), (w2, b2) = _weights(rng, 32, 384), _weights(rng, 384, 64)
    x = normal(rng, 29, 32)
    x[4, 4] = np.nan

    def build(xp):
        f = ff.tanh(xp @ ff.constant(w1) + ff.constant(b1))
        f = ff.reshape(ff.reshape(f, (1, 29, 384)), (29, 384))
        return [f @ ff.constant(w2) + ff.constant(b2)]
    (got,), kernels = _run(build, [x], ON)
    with np.errstate(invalid="ignore"):
        want = np.tanh(x.astype(np.float64) @ w1 + b1) @ w2 + b2
    assert_matches(got, want.astype(np.float32), rtol=1e-4, atol=1e-4)
    assert np.isnan(want).any()
    first, second = [k for k in kernels if k.op == "fused_matmul"]
    assert first.part == "blocks" and first.output.value in [b.value for b in second.inputs]
    assert [k.op for k in kernels].count("fused_matmul_stitch") == 1     # the second's


def _two(k1, n1, n2, rows, as_b=False):
    """f = x @ w1 + b1 (k1 -> n1), then y = f @ w2 (n1 -> n2), or w2ᵀ @ f as B."""
    rng = np.random.default_rng(k1 + n1 + n2 + rows)
    (w1, b1), (w2, _) = _weights(rng, k1, n1), _weights(rng, n1, n2)
    x = normal(rng, rows, k1)
    w2t = normal(rng, 64, rows)

    def build(xp):
        f = xp @ ff.constant(w1) + ff.constant(b1)
        return [ff.constant(w2t) @ f if as_b else f @ ff.constant(w2)]

    def reference(x):
        f = x.astype(np.float64) @ w1 + b1
        return w2t.astype(np.float64) @ f if as_b else f @ w2
    return build, reference, x


@pytest.mark.parametrize("why, k1, n1, n2, rows, as_b, knobs", [
    ("the producer's K split", 256, 64, 256, 8, False, ON),
    ("read as B", 64, 256, 0, 64, True, ON),
    ("a reader too small to run blocked", 64, 256, 8, 16, False, ON),
    ("the knob off", 64, 256, 64, 32, False, {"matmul.matmul_reads_blocks": False}),
])
def test_the_stitch_stays(gl, why, k1, n1, n2, rows, as_b, knobs):
    build, reference, x = _two(k1, n1, n2, rows, as_b)
    (got,), kernels = _run(build, [x], knobs)
    want = reference(x)
    assert_matches(got, want.astype(np.float32), rtol=1e-4, atol=1e-4)
    ops = [(k.op, k.strategy, k.part) for k in kernels]
    assert any(k.op == "fused_matmul_stitch" for k in kernels), (why, ops)
    assert not any(b.value.endswith("#blocks") and b.value != k.output.value
                   and not k.op.endswith("_stitch") for k in kernels for b in k.inputs), why


def test_the_stitch_goes_where_the_knob_is_on(gl):
    """The last case of test_the_stitch_stays with the knob on: the same product
    without the stitch (the test above can fail)."""
    build, reference, x = _two(64, 256, 64, 32)
    (got,), kernels = _run(build, [x], ON)
    assert_matches(got, reference(x).astype(np.float32), rtol=1e-4, atol=1e-4)
    assert not any(k.op == "fused_matmul_stitch" for k in kernels), \
        [(k.op, k.part) for k in kernels]
