"""A blocked (or packed) matmul read only by a LayerNorm as its x leaves its product in
its render targets: no stitch; the norm's kernels read x there, add up the product's K
splits and apply the matmul's epilogue (bias, GELU, a residual add) as they read it
(codegen/matmul.py plan_blocks, codegen/norm.py reads_blocks, templates/
layer_norm.glsl.j2 xt). On GL against the float64 formula: rows not a multiple of 4,
a batch, K split, the packed path, negatives, NaN and inf in the input, each row of
the norm's table (norm.rows: the fetched y read back from its own targets); and where
the stitch stays: the product fetched too, rows not whole texels, the knob off, x past
norm_blocks_max_elements."""
import math

import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, normal

# each row of codegen/norm.py's table: y is fetched, which norm.rows takes where
# reduce.norm_rows_fetched is on (its readback reads y from its own targets), here
# whatever its fragments read (reduce.norm_rows_fetched_reads)
ROWS = {"norm.direct": {"reduce.norm_direct_width": 1 << 14,
                        "reduce.norm_rows_fetched": False},
        "norm.stats": {"reduce.norm_direct_width": 0, "reduce.norm_rows_fetched": False},
        "norm.rows": {"reduce.norm_rows_fetched_reads": 1 << 30}}
ON = {"matmul.norm_reads_blocks": True, "matmul.norm_blocks_max_elements": 1 << 30}


def _gelu64(v):
    return 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2)))


def _case(x_shape, k, n, epilogue, rng):
    """x [.., k] @ w [k, n] with the epilogue, then a LayerNorm with scale and offset:
    (build(x, r) -> (y, h), float64 reference(x, r) -> y, feeds)."""
    w = normal(rng, k, n) / np.float32(math.sqrt(k))
    b = normal(rng, n)
    scale, offset = rng.uniform(0.5, 1.5, n).astype(np.float32), normal(rng, n)
    x = normal(rng, *x_shape, k) * np.float32(2)
    x[(0,) * len(x_shape) + (1,)] = np.nan          # a row of NaN
    x[(-1,) * len(x_shape) + (-1,)] = -np.inf       # a row of NaN (inf - inf)
    r = normal(rng, *x_shape, n)

    def build(xp, rp):
        h = ff.matmul(xp, ff.constant(w))
        if epilogue in ("bias", "residual", "gelu"):
            h = h + ff.constant(b)
        if epilogue == "residual":
            h = h + rp
        if epilogue == "gelu":
            h = 0.5 * h * (1.0 + ff.erf(h * np.float32(1 / math.sqrt(2))))
        y = ff.layer_normalization(h, ff.constant(scale), ff.constant(offset),
                                   epsilon=1e-5)
        return y, h

    def reference(x, r):
        with np.errstate(invalid="ignore", over="ignore"):
            h = x.astype(np.float64) @ w.astype(np.float64)
            if epilogue in ("bias", "residual", "gelu"):
                h = h + b
            if epilogue == "residual":
                h = h + r
            if epilogue == "gelu":
                h = _gelu64(h)
            c = h - h.mean(-1, keepdims=True)
            return c / np.sqrt((c * c).mean(-1, keepdims=True) + 1e-5) * scale + offset
    return build, reference, x, r


def _run(build, x, r, knobs, fetch_h=False):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        rp = ff.placeholder(r.shape, name="r")
        y, h = build(xp, rp)
        fetches = [y, h] if fetch_h else [y]
    with ff.Session(g, tuning=ff.Tuning().with_(knobs)) as sess:
        fn = sess.compile(fetches, feeds=[xp, rp])
        return fn(x, r)[0], fn.kernels


def _stitches(kernels):
    return [k for k in kernels if k.op.endswith("matmul_stitch")]


@pytest.mark.parametrize("row", list(ROWS))
@pytest.mark.parametrize("x_shape, k, n, epilogue, strategy", [
    ((37,), 128, 36, "residual", "matmul.blocked"),    # rows not a multiple of 4
    ((2, 9), 512, 20, "bias", "matmul.blocked"),       # a batch, 5 column texels, K split
    ((6,), 512, 64, "residual", "matmul.blocked"),     # K split among fragments
    ((16,), 256, 48, "gelu", "matmul.blocked"),        # a non-linear epilogue
    ((13,), 320, 32, "none", "matmul.blocked"),        # a plain matmul: no epilogue
    ((64,), 256, 256, "residual", "matmul.packed"),    # panels, then the blocked kernel
])
def test_the_norm_reads_the_product_from_the_targets(gl, x_shape, k, n, epilogue,
                                                     strategy, row):
    rng = np.random.default_rng(sum(x_shape) + k + n)
    build, reference, x, r = _case(x_shape, k, n, epilogue, rng)
    got, kernels = _run(build, x, r, {**ON, **ROWS[row]})
    want = reference(x, r)
    assert_matches(got, want.astype(np.float32), rtol=1e-4, atol=1e-4)
    assert np.isnan(want).any() and np.isfinite(want).any() and (want < 0).any()
    ops = [(k_.op, k_.strategy) for k_ in kernels]
    assert not _stitches(kernels), ops
    head = next(k_ for k_ in kernels if k_.output_layers)
    assert head.strategy == strategy and head.part == "blocks", ops
    blocks = head.output.value
    norms = [k_ for k_ in kernels if k_.op == "fused_layer_norm"]
    assert {k_.strategy for k_ in norms} == {row}, ops
    first = next(b.sampler for b in norms[0].inputs if b.value == blocks)
    assert f"px_{first}(" in norms[0].source, ops
    if row == "norm.stats":
        assert all(blocks in [b.value for b in k_.inputs] for k_ in norms), ops
    if k >= 512:
        assert head.params["blocking"]["splits"] > 1, head.params


@pytest.mark.parametrize("why, x_shape, n, knobs, fetch_h", [
    ("the product fetched too", (16,), 32, ON, True),
    ("rows not whole texels", (16,), 30, ON, False),
    ("the knob off", (16,), 32, {"matmul.norm_reads_blocks": False}, False),
    ("x past norm_blocks_max_elements", (16,), 32,
     {**ON, "matmul.norm_blocks_max_elements": 16 * 32 - 1}, False),
])
def test_the_stitch_stays(gl, why, x_shape, n, knobs, fetch_h):
    rng = np.random.default_rng(n)
    build, reference, x, r = _case(x_shape, 512, n, "residual", rng)
    got, kernels = _run(build, x, r, knobs, fetch_h)
    assert_matches(got, reference(x, r).astype(np.float32), rtol=1e-4, atol=1e-4)
    assert len(_stitches(kernels)) == 1, (why, [k.op for k in kernels])
    assert not any(b.value.endswith("#blocks") for k in kernels
                   if k.op == "fused_layer_norm" for b in k.inputs), why
