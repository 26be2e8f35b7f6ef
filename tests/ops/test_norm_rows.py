"""norm.rows: a LayerNorm (or RMSNorm) read only by blocked matmuls as their A and by
matmuls' epilogues as a residual operand (post-LN BERT: the next layer's q, k, v
product and its residual add) runs as one kernel writing render targets; its readers
read its texels there through px_ (codegen/norm.py plan_blocks, templates/
layer_norm.glsl.j2 mode "rows", codegen/fused.py matmul_epilogue). On GL against the
float64 formula: rows not a multiple of 4, a batch, widths of 5 and 11 texels (targets
that divide them), NaN and inf rows, RMSNorm, the norm reading its own x from a
matmul's render targets (K split, a residual epilogue) as BERT's second norm does; and
where the norm keeps norm.stats: its result fetched, a reader of another kind, the knob
off, the strategy excluded."""
import math

import numpy as np
import pytest

import fragflow as ff
from tests.passes.test_fuse_norms import norm64
from tests.reference import assert_matches, normal


def _weights(rng, k, n):
    return normal(rng, k, n) / np.float32(math.sqrt(k)), normal(rng, n)


def _layer(rng, rows_shape, width, hidden, *, center=True, pending_x=False):
    """y = norm(x) (or of x @ w0 + b0 + r: x read from a product's targets), then
    z = y @ w1 + b1 (y as A) and o = (z @ w2 + b2) + y (y as a residual): the graph
    builder and the float64 reference of o, with the inputs (a NaN row, an inf)."""
    k0 = 512
    w0, b0 = _weights(rng, k0, width)
    w1, b1 = _weights(rng, width, hidden)
    w2, b2 = _weights(rng, hidden, width)
    scale = rng.uniform(0.5, 1.5, width).astype(np.float32)
    offset = normal(rng, width)
    x = normal(rng, *rows_shape, k0 if pending_x else width) * np.float32(3)
    x[(0,) * len(rows_shape) + (1,)] = np.nan            # a row of NaN
    x[(-1,) * len(rows_shape) + (-1,)] = -np.inf         # a row of NaN (or -inf's)
    r = normal(rng, *rows_shape, width)

    def build(xp, rp):
        h = ff.matmul(xp, ff.constant(w0)) + ff.constant(b0) + rp if pending_x else xp
        if center:
            y = ff.layer_normalization(h, ff.constant(scale), ff.constant(offset),
                                       epsilon=1e-5)
        else:       # LlamaRMSNorm's form (passes/norms.py fuses it)
            y = h * ff.rsqrt(ff.reduce_mean(ff.square(h), axis=-1, keepdims=True) +
                             1e-5) * ff.constant(scale)
        z = ff.matmul(y, ff.constant(w1)) + ff.constant(b1)
        return ff.matmul(z, ff.constant(w2)) + ff.constant(b2) + y

    def reference(x, r):
        with np.errstate(invalid="ignore", over="ignore"):
            h = x.astype(np.float64)
            if pending_x:
                h = h @ w0 + b0 + r
            y = norm64(h, scale, offset if center else None, center=center)
            z = y @ w1 + b1
            return z @ w2 + b2 + y
    return build, reference, x, r


def _run(build, x, r, tuning=None, fetch_y=False):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        rp = ff.placeholder(r.shape, name="r")
        o = build(xp, rp)
        fetches = [o]
        if fetch_y:
            fetches.append(next(n.outputs[0] for n in g.nodes
                                if n.op in ("layer_normalization", "mul") and
                                n.outputs[0].shape == o.shape))
    with ff.Session(g, tuning=tuning) as sess:
        fn = sess.compile(fetches, feeds=[xp, rp])
        return fn(x, r)[0], fn.kernels


def _norms(kernels):
    return [k for k in kernels if k.op == "fused_layer_norm"]


@pytest.mark.parametrize("rows_shape, width, hidden, center, pending_x", [
    ((37,), 128, 64, True, False),      # rows not a multiple of 4, 32 texels: 8 targets
    ((1, 18), 20, 512, True, False),    # a leading 1, 5 texels a row: 5 targets
    ((13,), 44, 256, True, False),      # 11 texels: one target, 11 fragments a row
    ((21,), 64, 128, False, False),     # RMSNorm
    ((16,), 128, 128, True, True),      # x from a product's targets, K split, residual
])
def test_one_kernel_read_in_place_by_the_matmul_and_the_residual(
        gl, rows_shape, width, hidden, center, pending_x):
    rng = np.random.default_rng(sum(rows_shape) + width + hidden)
    build, reference, x, r = _layer(rng, rows_shape, width, hidden, center=center,
                                    pending_x=pending_x)
    got, kernels = _run(build, x, r)
    want = reference(x, r)
    assert_matches(got, want.astype(np.float32), rtol=1e-4, atol=1e-4)
    assert np.isnan(want).any() and np.isfinite(want).any() and (want < 0).any()
    ops = [(k.op, k.strategy) for k in kernels]
    norms = _norms(kernels)
    assert [k.strategy for k in norms] == ["norm.rows"], ops
    norm = norms[0]
    texels = width // 4
    targets = max(c for c in range(1, 9) if texels % c == 0)
    assert norm.output_layers == targets and norm.output.value.endswith("#blocks"), ops
    readers = [k for k in kernels if any(b.value == norm.output.value for b in k.inputs)]
    # y's readers: the matmul reading it as A and the kernel applying the residual add
    assert len(readers) == 2 and all(k.op.startswith("fused_matmul") for k in readers), \
        [(k.op, k.part) for k in readers]
    for k in readers:
        sampler = next(b.sampler for b in k.inputs if b.value == norm.output.value)
        assert f"px_{sampler}(" in k.source, k.op
    if pending_x:       # the norm's x: the product's targets, their K splits added up
        assert any(b.value.endswith("#blocks") for b in norm.inputs), ops


@pytest.mark.parametrize("why, tuning, fetch_y", [
    ("its result fetched", None, True),
    ("the knob off", ff.Tuning().with_({"reduce.norm_rows": False}), False),
    ("the strategy excluded", ff.Tuning(exclude=("norm.rows",)), False),
])
def test_the_norm_keeps_its_texture(gl, why, tuning, fetch_y):
    rng = np.random.default_rng(7)
    build, reference, x, r = _layer(rng, (24,), 128, 64)
    got, kernels = _run(build, x, r, tuning, fetch_y)
    assert_matches(got, reference(x, r).astype(np.float32), rtol=1e-4, atol=1e-4)
    assert "norm.rows" not in {k.strategy for k in _norms(kernels)}, why
    assert not any(k.output_layers for k in _norms(kernels)), why


def test_a_reader_of_another_kind_keeps_its_texture(gl):
    """y read by a relu too: the elementwise kernel reads textures, so norm.stats."""
    rng = np.random.default_rng(8)
    w1, b1 = _weights(rng, 128, 64)
    x = normal(rng, 24, 128)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y = ff.layer_normalization(xp, epsilon=1e-5)
        o = ff.matmul(y, ff.constant(w1)) + ff.constant(b1)
        s = ff.reduce_sum(ff.relu(y), axis=-1)
    with ff.Session(g) as sess:
        fn = sess.compile([o, s], feeds=[xp])
        got_o, got_s = fn(x)
    y64 = norm64(x)
    assert_matches(got_o, (y64 @ w1 + b1).astype(np.float32), rtol=1e-4, atol=1e-4)
    assert_matches(got_s, np.maximum(y64, 0).sum(-1).astype(np.float32), rtol=1e-4,
                   atol=1e-4)
    assert {k.strategy for k in _norms(fn.kernels)} <= {"norm.stats", "norm.direct"}
