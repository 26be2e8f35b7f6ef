"""fuse_norms and the fused_layer_norm kernels: LayerNorm and RMSNorm as torch, ONNX,
TF and Keras write them become one node and one kernel, or two for long rows
(codegen/norm.py's table, each row run here), computing the
float64 formula, edge values included (zero-variance rows, epsilon 0, NaN and inf rows,
widths not a multiple of 4, weights broadcast along the normalized axes); every
variance left alone says why. GELU (erf and tanh forms) after a matmul joins the
matmul's epilogue (passes/fusion.py _diamond). Gradients:
tests/autodiff/test_layer_norm_gradients.py."""
import math

import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, run_both

rng = np.random.default_rng(34)
# each row of codegen/norm.py's table, on rows of every width here (the fetched norms
# here would run norm.rows where rows are whole texels: tests/ops/test_norm_rows.py)
NO_ROWS = ff.Tuning().with_({"reduce.norm_rows_fetched": False})
ROWS = {"norm.direct": NO_ROWS.with_({"reduce.norm_direct_width": 1 << 14}),
        "norm.stats": NO_ROWS.with_(exclude=("norm.direct",))}


def _norm_kernels(fn, row):
    """The kernels' ops, checked to be row's."""
    assert {k.strategy for k in fn.kernels} == {row}, fn.fusion_report
    return [k.op for k in fn.kernels]


ONE = {"norm.direct": ["fused_layer_norm"], "norm.stats": ["fused_layer_norm"] * 2}


def norm64(x, scale=None, offset=None, eps=1e-5, center=True, axes=(-1,)):
    """The float64 formula: torch's layer_norm, or RMSNorm (T5, Llama)."""
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        c = x - x.mean(axis=axes, keepdims=True) if center else x
        y = c / np.sqrt((c * c).mean(axis=axes, keepdims=True) + eps)
        if scale is not None:
            y = y * scale
        if offset is not None:
            y = y + offset
    return y


def _torch_onnx(x, w, b, eps):
    """nn.LayerNorm as torch exports it below opset 17: ReduceMean, Sub, Pow, ReduceMean,
    Add, Sqrt, Div, Mul, Add."""
    c = x - ff.reduce_mean(x, axis=-1, keepdims=True)
    var = ff.reduce_mean(ff.pow(c, 2.0), axis=-1, keepdims=True)
    return c / ff.sqrt(var + eps) * w + b


def _reciprocal(x, w, b, eps):
    c = x - ff.reduce_mean(x, axis=-1, keepdims=True)
    var = ff.reduce_mean(ff.square(c), axis=-1, keepdims=True)
    return b + w * (c * ff.reciprocal(ff.sqrt(var + eps)))


def _moments(x, w, b, eps):
    """A TF script: tf.nn.moments, then tf.nn.batch_normalization (x * inv + (b - mean
    * inv))."""
    mean, var = ff.nn.moments(x, axes=[-1], keepdims=True)
    return ff.nn.batch_normalization(x, mean, var, b, w, eps)


def _moments_no_affine(x, w, b, eps):
    mean, var = ff.nn.moments(x, axes=[-1], keepdims=True)
    return ff.nn.batch_normalization(x, mean, var, None, None, eps)


def _rms(x, w, b, eps):
    """LlamaRMSNorm / T5LayerNorm: x * rsqrt(mean(x²) + eps) * w."""
    return x * ff.rsqrt(ff.reduce_mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rms_div(x, w, b, eps):
    return w * (x / ff.sqrt(ff.reduce_mean(ff.pow(x, 2.0), axis=-1, keepdims=True) + eps))


FORMS = {   # builder, center, scaled, shifted
    "layer_normalization": (lambda x, w, b, eps: ff.layer_normalization(
        x, w, b, epsilon=eps), True, True, True),
    "torch_onnx": (_torch_onnx, True, True, True),
    "reciprocal": (_reciprocal, True, True, True),
    "moments": (_moments, True, True, True),
    "moments_no_affine": (_moments_no_affine, True, False, False),
    "rms": (_rms, False, True, False),
    "rms_div": (_rms_div, False, True, False),
}


def _compile(build, shape, eps=1e-5, tuning=None, w_shape=None):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(shape, name="x")
        w = ff.constant(rng.uniform(0.5, 1.5, w_shape or shape[-1:]).astype(np.float32))
        b = ff.constant(rng.standard_normal(w_shape or shape[-1:]).astype(np.float32))
        y = build(x, w, b, eps)
    fn = ff.Session(g, tuning=tuning).compile([y], feeds=[x])
    return g, x, y, fn, (w.op.attrs["value"], b.op.attrs["value"])


@pytest.mark.parametrize("row", sorted(ROWS))
@pytest.mark.parametrize("width", [7, 128])
@pytest.mark.parametrize("form", sorted(FORMS))
def test_each_form_is_one_node_computing_the_formula(form, width, row, gl):
    build, center, scaled, shifted = FORMS[form]
    g, x, y, fn, (w, b) = _compile(build, (2, 3, width), tuning=ROWS[row])
    xb = (rng.standard_normal((2, 3, width)) * 3 + 2).astype(np.float32)
    got = fn(xb)[0]
    assert _norm_kernels(fn, row) == ONE[row]
    want = norm64(xb, w if scaled else None, b if shifted else None, center=center)
    assert_matches(got, want.astype(np.float32), rtol=2e-5, atol=2e-5)
    _, ref = run_both(g, y, {x: xb})
    assert_matches(got, ref, rtol=2e-5, atol=2e-5)


def _edge_rows(width):
    rows = rng.standard_normal((7, width)).astype(np.float32)
    rows[0] = 0.0                                 # zero variance: the offset
    rows[1] = 3.5                                 # constant: zero variance too
    rows[2, width // 2] = np.nan                  # NaN: NaN throughout
    rows[3, 0] = np.inf                           # inf: NaN throughout
    rows[4] = rows[4] * 1e4 + 1e5                 # large, far from 0
    rows[5] = -np.abs(rows[5])                    # all negative
    rows[6, -1] = -np.inf
    return rows


@pytest.mark.parametrize("row", sorted(ROWS))
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("width", [5, 12, 33])
def test_edge_rows_match_the_float64_formula(width, center, row, gl):
    form = "layer_normalization" if center else "rms"
    build = FORMS[form][0]
    g, x, y, fn, (w, b) = _compile(build, (7, width), eps=1e-5, tuning=ROWS[row])
    xb = _edge_rows(width)
    got = fn(xb)[0]
    assert _norm_kernels(fn, row) == ONE[row]
    want = norm64(xb, w, b if center else None, center=center).astype(np.float32)
    assert_matches(got, want, rtol=1e-4, atol=1e-4)
    assert np.isnan(got[2]).all()
    if center:           # RMSNorm: rsqrt(inf) = 0 leaves the finite elements 0
        assert np.isnan(got[3]).all() and np.isnan(got[6]).all()
        np.testing.assert_array_equal(got[0], b)


def test_epsilon_zero_on_a_zero_variance_row_is_nan_as_the_formula(gl):
    g, x, y, fn, (w, b) = _compile(FORMS["layer_normalization"][0], (2, 6), eps=0.0)
    xb = np.stack([np.zeros(6), np.arange(6)]).astype(np.float32)
    got = fn(xb)[0]
    assert np.isnan(got[0]).all()
    assert_matches(got[1], norm64(xb[1], w, b, eps=0.0).astype(np.float32), rtol=1e-5,
                   atol=1e-5)


@pytest.mark.parametrize("row", sorted(ROWS))
def test_weights_broadcast_along_several_normalized_axes(row, gl):
    """ONNX's axis=-2: rows over the last two axes, the scale (1, 5) over the last one."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 3, 5), name="x")
        w = rng.uniform(0.5, 1.5, (1, 5)).astype(np.float32)
        b = rng.standard_normal((3, 5)).astype(np.float32)
        y = ff.layer_normalization(x, w, b, axis=(1, 2), epsilon=1e-3)
    xb = rng.standard_normal((2, 3, 5)).astype(np.float32)
    fn = ff.Session(g, tuning=ROWS[row]).compile([y], feeds=[x])
    got = fn(xb)[0]
    assert _norm_kernels(fn, row) == ONE[row]
    assert_matches(got, norm64(xb, w, b, 1e-3, axes=(1, 2)).astype(np.float32),
                   rtol=2e-5, atol=2e-5)


def _report(fn):
    return [line for line in fn.fusion_report if "layer norm" in line]


def test_a_fetched_mean_stays_as_built_and_says_why(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 8), name="x")
        mean = ff.reduce_mean(x, axis=-1, keepdims=True)
        c = x - mean
        y = c * ff.rsqrt(ff.reduce_mean(ff.square(c), axis=-1, keepdims=True) + 1e-5)
    xb = rng.standard_normal((3, 8)).astype(np.float32)
    fn = ff.Session(g).compile([y, mean], feeds=[x])
    got = fn(xb)
    assert "fused_layer_norm" not in [k.op for k in fn.kernels]
    assert any("is fetched" in line for line in _report(fn)), fn.fusion_report
    assert_matches(got[0], norm64(xb).astype(np.float32), rtol=2e-5, atol=2e-5)


def test_keras_rms_scaling_is_not_rms_norm(gl):
    """Keras 3's rms_scaling multiplies x (not x - mean) by the centred variance's
    rsqrt: no normalization the op computes."""
    layer = ff.keras.layers.LayerNormalization(rms_scaling=True, epsilon=1e-3)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 6), name="x")
        y = layer(x)
    xb = rng.standard_normal((4, 6)).astype(np.float32)
    got, want = run_both(g, y, {x: xb})
    fn = ff.Session(g).compile([y], feeds=[x])
    fn(xb)
    assert "fused_layer_norm" not in [k.op for k in fn.kernels]
    assert _report(fn), fn.fusion_report
    assert_matches(got, want, rtol=2e-5, atol=2e-5)


def test_keras_layer_normalization_is_one_kernel(gl):
    layer = ff.keras.layers.LayerNormalization(epsilon=1e-3)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 10), name="x")
        y = layer(x)
    xb = rng.standard_normal((4, 10)).astype(np.float32) * 2 - 1
    got, want = run_both(g, y, {x: xb})
    fn = ff.Session(g).compile([y], feeds=[x])
    fn(xb)
    assert [k.op for k in fn.kernels] == ["fused_layer_norm"], fn.fusion_report
    assert_matches(got, want, rtol=2e-5, atol=2e-5)
    assert_matches(got, norm64(xb, eps=1e-3).astype(np.float32), rtol=2e-5, atol=2e-5)


def test_rows_past_the_tuning_width_keep_their_reductions(gl):
    tuning = ff.Tuning().with_({"reduce.norm_max_width": 16})
    g, x, y, fn, (w, b) = _compile(FORMS["torch_onnx"][0], (3, 20), tuning=tuning)
    xb = rng.standard_normal((3, 20)).astype(np.float32)
    got = fn(xb)[0]
    assert "fused_layer_norm" not in [k.op for k in fn.kernels]
    assert any("norm_max_width" in line for line in _report(fn)), fn.fusion_report
    assert_matches(got, norm64(xb, w, b).astype(np.float32), rtol=2e-5, atol=2e-5)


def test_bad_operands_raise_clear_errors():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 6), name="x")
        with pytest.raises(ff.ShapeError, match="normalized shape"):
            ff.fused.layer_norm(x, np.ones(5, np.float32))
        with pytest.raises(ff.DTypeError):
            ff.fused.layer_norm(ff.cast(x, "int32"))
        with pytest.raises(ff.AttrError, match="axis"):
            ff.fused.layer_norm(x, axis=2)


# -- GELU in the matmul's epilogue -------------------------------------------------------
def _gelu_torch(h):
    """transformers' BERT: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    return h * 0.5 * (1.0 + ff.erf(h / math.sqrt(2.0)))


def _gelu_gpt2(h):
    """transformers' NewGELUActivation (GPT-2)."""
    inner = math.sqrt(2.0 / math.pi) * (h + 0.044715 * ff.pow(h, 3.0))
    return 0.5 * h * (1.0 + ff.tanh(inner))


GELUS = {"torch_erf": _gelu_torch, "gpt2_tanh": _gelu_gpt2,
         "ff_gelu": lambda h: ff.gelu(h), "ff_gelu_tanh": lambda h: ff.gelu(h, True)}


def gelu64(h, tanh):
    h = np.asarray(h, np.float64)
    if tanh:
        return 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
    erf = np.vectorize(math.erf)
    return 0.5 * h * (1 + erf(h / math.sqrt(2)))


@pytest.mark.parametrize("form", sorted(GELUS))
def test_gelu_after_a_matmul_is_its_epilogue(form, gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5, 6), name="x")
        w = rng.standard_normal((6, 7)).astype(np.float32)
        b = rng.standard_normal(7).astype(np.float32)
        y = GELUS[form](ff.matmul(x, w) + b)
    xb = rng.standard_normal((5, 6)).astype(np.float32) * 2
    xb[0, 0] = np.nan                             # a NaN row of the product
    fn = ff.Session(g).compile([y], feeds=[x])
    got = fn(xb)[0]
    assert [k.op for k in fn.kernels] == ["fused_matmul"], fn.fusion_report
    h = xb.astype(np.float64) @ w + b
    assert_matches(got, gelu64(h, "tanh" in form).astype(np.float32), rtol=2e-5,
                   atol=2e-5)
    _, ref = run_both(g, y, {x: xb})
    assert_matches(got, ref, rtol=2e-5, atol=2e-5)


def test_a_fetched_value_inside_gelu_keeps_it_out_of_the_epilogue(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5, 6), name="x")
        h = ff.matmul(x, rng.standard_normal((6, 8)).astype(np.float32))
        e = ff.erf(h / math.sqrt(2.0))
        y = h * 0.5 * (1.0 + e)
    xb = rng.standard_normal((5, 6)).astype(np.float32)
    fn = ff.Session(g).compile([y, e], feeds=[x])
    got = fn(xb)
    _, ref = run_both(g, [y, e], {x: xb})
    assert [k.op for k in fn.kernels].count("fused_matmul") == 0, fn.fusion_report
    assert_matches(got[0], ref[0], rtol=2e-5, atol=2e-5)
    assert_matches(got[1], ref[1], rtol=2e-5, atol=2e-5)


def test_a_diamond_reading_a_value_twice_in_one_op_joins_the_epilogue(gl):
    """h * h and h + h read h twice in one node (the square of a GELU-like diamond)."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 6), name="x")
        h = ff.matmul(x, rng.standard_normal((6, 5)).astype(np.float32))
        y = ff.tanh(h * h) + h
    xb = rng.standard_normal((3, 6)).astype(np.float32)
    fn = ff.Session(g).compile([y], feeds=[x])
    got = fn(xb)[0]
    assert [k.op for k in fn.kernels] == ["fused_matmul"], fn.fusion_report
    h64 = xb.astype(np.float64) @ g.value("matmul").node.inputs[1].node.attrs["value"]
    assert_matches(got, (np.tanh(h64 * h64) + h64).astype(np.float32), rtol=2e-5,
                   atol=2e-5)


@pytest.mark.parametrize("row", sorted(ROWS))
@pytest.mark.parametrize("width", [7, 36, 256])
def test_walks_unrolled_to_a_small_loop_budget(width, row, gl):
    """A loop budget of 8 trips (Tuning.max_loop_trips): each walk unrolled to stay in it
    (norm.direct's 4 lanes of 7-wide rows: 2 x 4 x 7 steps, 8 a trip, then the rest)."""
    tuning = ROWS[row].with_(max_loop_trips=8)
    g, x, y, fn, (w, b) = _compile(FORMS["torch_onnx"][0], (3, width), tuning=tuning)
    xb = rng.standard_normal((3, width)).astype(np.float32) * 2
    got = fn(xb)[0]
    assert _norm_kernels(fn, row) == ONE[row]
    assert all(k.params["unroll"] > 1 for k in fn.kernels), [k.params for k in fn.kernels]
    assert_matches(got, norm64(xb, w, b).astype(np.float32), rtol=2e-5, atol=2e-5)


def test_a_direct_walk_past_the_unroll_limit_takes_norm_stats(gl):
    """norm.direct's 4 lanes of 130-wide rows need 1040 steps: unrolled past MAX_UNROLL
    (64) in 8 trips, so norm.stats (260 steps, 64 a trip) takes the node."""
    tuning = ROWS["norm.direct"].with_(max_loop_trips=8)
    g, x, y, fn, (w, b) = _compile(FORMS["torch_onnx"][0], (3, 130), tuning=tuning)
    xb = rng.standard_normal((3, 130)).astype(np.float32)
    got = fn(xb)[0]
    assert _norm_kernels(fn, "norm.stats") == ONE["norm.stats"]
    assert_matches(got, norm64(xb, w, b).astype(np.float32), rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("rows, width, row", [
    (7, 128, "norm.direct"),        # 7 x 128² = 114,688: within the knob
    (8, 130, "norm.direct"),        # 135,200, rows not whole texels
    (9, 128, "norm.stats"),         # 147,456: past it
])
def test_few_rows_run_direct_within_norm_direct_work(rows, width, row, gl):
    """reduce.norm_direct_work: rows of any width run as norm.direct where rows x
    width² stays within it (past reduce.norm_direct_width); edge rows as above."""
    tuning = NO_ROWS.with_({"reduce.norm_direct_work": 140_000})
    g, x, y, fn, (w, b) = _compile(FORMS["layer_normalization"][0], (rows, width),
                                   tuning=tuning)
    xb = _edge_rows(width)[:rows] if rows <= 7 else \
        np.concatenate([_edge_rows(width), rng.standard_normal((rows - 7, width))
                        .astype(np.float32)])
    got = fn(xb)[0]
    assert _norm_kernels(fn, row) == ONE[row]
    assert_matches(got, norm64(xb, w, b).astype(np.float32), rtol=2e-5, atol=2e-5)
