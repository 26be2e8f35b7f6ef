"""One browser case per row of every kernel strategy table (codegen/strategy.py: the
TABLE of codegen/conv.py, matmul.py, reduce.py, and any table a module of codegen adds),
with shapes chosen so that the "webgl" profile an export lowers with picks that row,
and the attention shapes of issue 36. A row without a case here fails
test_strategies.py; each case's export must hold a kernel of its row.

ROW_CASES: strategy name -> case function (a Case of cases.py); REDUCTION_MODES: the
passes and kernels of reduce_tree.glsl.j2 the reduction rows together must run, as
their headers name them."""
from __future__ import annotations

import importlib
import pkgutil

import numpy as np

import fragflow as ff
from fragflow.codegen.strategy import Strategy
from tests.webgl.cases import Case


def strategy_tables() -> dict:
    """{module name: TABLE} for every module of fragflow.codegen with a table of
    strategies, found by walking the package (a new table is found too)."""
    import fragflow.codegen as codegen
    tables = {}
    for info in pkgutil.iter_modules(codegen.__path__):
        module = importlib.import_module(f"{codegen.__name__}.{info.name}")
        table = getattr(module, "TABLE", None)
        if isinstance(table, tuple) and table and all(isinstance(s, Strategy) for s in table):
            tables[info.name] = table
    return tables


def _case(build, shapes, rtol=1e-4, atol=1e-5, seed=0, dtypes=None, feeds=None):
    """A Case of build(*placeholders) -> {name: tensor} over standard normal feeds."""
    rng = np.random.default_rng(seed)
    g = ff.Graph()
    with g.as_default():
        holders = [ff.placeholder(s, (dtypes or {}).get(i, "float32"), name=f"x{i}")
                   for i, s in enumerate(shapes)]
        fetches = build(*holders)
    values = feeds(rng) if feeds else [rng.standard_normal(s).astype(np.float32)
                                       for s in shapes]
    return Case(g, fetches, dict(zip(holders, values)), rtol=rtol, atol=atol)


def _filter(rng, *shape, scale=0.3):
    return ff.constant((rng.standard_normal(shape) * scale).astype(np.float32))


# -- matmul.TABLE -------------------------------------------------------------------------
def matmul_packed():
    """Panels, the packed kernel into 4 render targets, its stitch (also the case whose
    runs test_browser.py loses the context of)."""
    return _case(lambda a, b: {"product": a @ b}, [(256, 256), (256, 256)],
                 rtol=1e-4, atol=1e-4)


def matmul_1024():
    """The run that load({timeoutMs: 1}) must reject (issue 36): exported, never
    compared (its run does not finish)."""
    return _case(lambda a, b: {"product": a @ b}, [(1024, 1024), (1024, 1024)])


def matmul_blocked():
    return _case(lambda a, b: {"product": a @ b, "dense_relu": ff.relu(a @ b + 1.0)},
                 [(128, 96), (96, 160)], atol=1e-4)


def matmul_lanes():
    return _case(lambda a, b, c: {"n_5": a @ b,
                                  "transposed_b": ff.matmul(a, c, transpose_b=True)},
                 [(7, 12), (12, 5), (10, 12)])


def matmul_plain():
    return _case(lambda a, b: {"batched": ff.matmul(a, b)}, [(3, 10, 7), (3, 7, 6)])


# -- conv.TABLE ---------------------------------------------------------------------------
def _max_pool_gradient(x, ksize, stride, padding):
    y = ff.max_pool(x, ksize, stride, padding)
    return ff.gradients(ff.reduce_sum(y * y * 0.5 + y), [x])[0]   # exact: no sin


def pool_lanes():
    return _case(lambda x: {"gradient": _max_pool_gradient(x, 2, 2, "VALID")}, [(2, 6, 5, 3)])


def pool_routed():
    return _case(lambda x: {"gradient": _max_pool_gradient(x, 3, 2, "SAME")}, [(2, 7, 5, 8)])


def pool_vec4():
    return _case(lambda x: {"avg_pool": ff.avg_pool(x, 3, 2, "SAME"),
                            "max_pool": ff.max_pool2d(x, 2, 2, "VALID")}, [(1, 16, 16, 32)])


def depthwise_direct():
    rng = np.random.default_rng(31)
    return _case(lambda x: {"depthwise": ff.depthwise_conv2d(
        x, _filter(rng, 3, 3, 32, 1), strides=[1, 2, 2, 1], padding="SAME")}, [(1, 16, 16, 32)])


def conv_direct():
    rng = np.random.default_rng(32)
    return _case(lambda x, y: {
        "same": ff.conv2d(x, _filter(rng, 3, 3, 3, 8), padding="SAME"),
        "strided": ff.conv2d(x, _filter(rng, 3, 3, 3, 8), strides=2, padding="VALID"),
        "pointwise": ff.relu(ff.conv2d(y, _filter(rng, 1, 1, 32, 64)))},
        [(2, 9, 11, 3), (1, 16, 16, 32)])


def conv_packed():
    """An input of 420 x 420 x 3 (over packed_min_input): im2col into the packed matmul."""
    rng = np.random.default_rng(33)
    return _case(lambda x: {"conv": ff.conv2d(x, _filter(rng, 3, 3, 3, 16), strides=2,
                                              padding="SAME")}, [(1, 420, 420, 3)])


def conv_blocked():
    """COUT 48, and 34 and 17 (a filter row's channels read as one texel or two:
    conv.filter_row_texels)."""
    rng = np.random.default_rng(34)
    return _case(lambda x: {
        "conv": ff.conv2d(x, _filter(rng, 3, 3, 32, 48, scale=0.1), padding="SAME"),
        "cout_34": ff.conv2d(x, _filter(rng, 1, 1, 32, 34, scale=0.2), padding="SAME"),
        "cout_17": ff.conv2d(x, _filter(rng, 3, 3, 32, 17, scale=0.1), strides=2,
                             padding="SAME")}, [(1, 16, 16, 32)])


def depthwise_blocked():
    rng = np.random.default_rng(35)
    return _case(lambda x: {"depthwise": ff.relu6(ff.depthwise_conv2d(
        x, _filter(rng, 3, 3, 32, 1), padding="SAME") + 0.5)}, [(1, 24, 24, 32)])


def conv_filter_blocked():
    """The filter's gradient of a convolution (conv2d_backprop_filter)."""
    def build(x, w):
        y = ff.conv2d(x, w, padding="SAME")
        return {"filter_gradient": ff.gradients(ff.reduce_sum(y * y), [w])[0]}
    return _case(build, [(4, 16, 16, 8), (3, 3, 8, 8)], atol=1e-3)


def conv_generic():
    """What no other row takes: a 3-channel max pool, a depthwise conv of 6 channels."""
    rng = np.random.default_rng(36)
    return _case(lambda x, y: {"max_pool": ff.max_pool2d(x, 2, 2, "VALID"),
                               "depthwise": ff.depthwise_conv2d(y, _filter(rng, 3, 3, 6, 1),
                                                                padding="SAME")},
                 [(2, 9, 11, 3), (2, 5, 5, 6)])


# -- reduce.TABLE -------------------------------------------------------------------------
def reduce_fill():
    return _case(lambda x: {"empty_sum": ff.reduce_sum(x, axis=1),
                            "empty_max": ff.reduce_max(x, axis=1)}, [(3, 0)])


def reduce_split_few():
    def feeds(rng):
        x = rng.standard_normal((4096, 8)).astype(np.float32)
        y = rng.standard_normal((2049, 5)).astype(np.float32)
        return [x, y]
    return _case(lambda x, y: {"sum_columns": ff.reduce_sum(x, axis=0),
                               "argmax_columns": ff.argmax(y, axis=0)},
                 [(4096, 8), (2049, 5)], atol=1e-3, feeds=feeds)


def reduce_texel_passes():
    """Every pass mode with lane partials: contiguous rows, strided4 columns (one pass
    and into 4 render targets, "columns"), other strides; every combine that keeps
    them: sum, mean, max, min, prod, logsumexp (max then sum of exp), variance."""
    def feeds(rng):
        arrays = [rng.standard_normal(s).astype(np.float32)
                  for s in [(6, 64), (37, 32), (2000, 64), (300, 333), (4, 64, 8), (8, 4096)]]
        arrays[0][2, 5] = np.nan
        arrays[4][1, 7, 3] = -np.inf
        return arrays
    return _case(lambda a, b, c, d, e, f: {
        "sum_rows": ff.reduce_sum(a, axis=1), "max_rows": ff.reduce_max(a, axis=1),
        "prod_rows": ff.reduce_prod(a * 0.1 + 1.0, axis=1),
        "mean_columns": ff.reduce_mean(b, axis=0, keepdims=True),
        "min_columns": ff.reduce_min(b, axis=0),
        "columns_targets": ff.reduce_sum(c, axis=0), "strided": ff.reduce_sum(d, axis=0),
        "all": ff.reduce_sum(d), "unaligned_rows": ff.reduce_max(d, axis=1),
        "logsumexp_strided4": ff.reduce_logsumexp(e, axis=1),
        "logsumexp_rows": ff.reduce_logsumexp(f, axis=1),
        "variance": ff.reduce_variance(f, axis=-1)},
        [(6, 64), (37, 32), (2000, 64), (300, 333), (4, 64, 8), (8, 4096)], rtol=1e-4,
        atol=1e-3, feeds=feeds)


def reduce_element_passes():
    """argmax/argmin (positions: no lane partials) along rows, 4-aligned columns and
    other strides."""
    def feeds(rng):
        arrays = [rng.standard_normal(s).astype(np.float32) for s in [(4, 37), (6, 37, 8),
                                                                     (6, 37, 5)]]
        arrays[2][1, 3, 2] = np.nan                 # NaN wins, as TensorFlow's
        return arrays
    return _case(lambda a, b, c: {"argmax_rows": ff.argmax(a, axis=1),
                                  "argmin_strided4": ff.argmin(b, axis=1),
                                  "argmin_strided": ff.argmin(c, axis=1),
                                  "argmax_strided": ff.argmax(c, axis=1)},
                 [(4, 37), (6, 37, 8), (6, 37, 5)], feeds=feeds)


def _softmaxes(shapes, axes, rtol=1e-5, atol=1e-6):
    def feeds(rng):
        arrays = [rng.standard_normal(s).astype(np.float32) * 3.0 for s in shapes]
        arrays[0].flat[5] = -np.inf                 # a -inf logit gets 0
        return arrays
    return _case(lambda *xs: {f"{kind}_{i}": fn(x, axis)
                              for i, (x, axis) in enumerate(zip(xs, axes))
                              for kind, fn in (("softmax", ff.softmax),
                                               ("log_softmax", ff.log_softmax))},
                 shapes, rtol=rtol, atol=atol, feeds=feeds)


def softmax_direct():
    return _softmaxes([(5, 13), (37, 6)], [-1, 0])


def softmax_partials():
    """Rows of 1000 and issue 36's (1, 4, 32, 32): max and sum of exp as lane
    partials, then normalize."""
    return _softmaxes([(4, 1000), (1, 4, 32, 32)], [-1, -1])


def softmax_tree():
    """Rows of 1001 (not a multiple of 4) and a long axis 0 (a strided tree)."""
    return _softmaxes([(4, 1001), (2000, 6)], [-1, 0])


def scan_blocks():
    return _case(lambda x: {"cumsum": ff.cumsum(x, 1, reverse=True),
                            "exclusive": ff.cumsum(x, 0, exclusive=True)}, [(3, 37)])


def lrn_window():
    return _case(lambda x: {"lrn": ff.nn.local_response_normalization(x)}, [(1, 4, 4, 8)])


# -- attention.TABLE ----------------------------------------------------------------------
def attention_online():
    """softmax(q kᵀ / 2 + mask) v in one kernel: rows of v one texel wide (4 columns),
    13 keys, a causal mask of -inf."""
    mask = np.triu(np.full((13, 13), -np.inf, np.float32), 1)

    def build(q, k, v):
        scores = ff.matmul(q, k, transpose_b=True) / np.float32(2.0) + ff.constant(mask)
        return {"attended": ff.matmul(ff.softmax(scores, axis=-1), v)}
    return _case(build, [(2, 13, 8), (2, 13, 8), (2, 13, 4)], rtol=1e-5, atol=1e-5)


def attention_scores():
    """softmax(q kᵀ / sqrt(d) + mask) v as q kᵀ, then the online-softmax walk times v
    (passes/attention.py): 4 heads of 13 queries and keys (not a multiple of 4), a
    padding mask of -inf over the last 3 keys of the second sequence; and 6 value
    columns (each lane its row)."""
    mask = np.zeros((2, 1, 1, 13), np.float32)
    mask[1, ..., 10:] = -np.inf

    def build(q, k, v, w):
        scores = ff.matmul(q, k, transpose_b=True) / np.float32(4.0) + ff.constant(mask)
        p = ff.softmax(scores, axis=-1)
        scores2 = ff.matmul(k, q, transpose_b=True) * np.float32(0.25)
        return {"attended": ff.matmul(p, v),
                "six_columns": ff.matmul(ff.softmax(scores2, axis=-1), w)}
    return _case(build, [(2, 4, 13, 16)] * 3 + [(2, 4, 13, 6)], rtol=1e-5, atol=1e-5)


def attention_scores_blocks():
    """softmax(q kᵀ / 8 + mask) v with q kᵀ blocked and the walk reading its render
    targets (no stitch): BERT's heads (2 of 32 tokens, 64 wide), a -inf padding mask over
    the last 5 keys; and q·k 264 long, which the blocked product splits in two (the
    walk adds the halves), 20 queries and keys (not a multiple of the blocking)."""
    mask = np.zeros((1, 1, 1, 32), np.float32)
    mask[..., 27:] = -np.inf

    def build(q, k, v, q2, k2, v2):
        scores = ff.matmul(q, k, transpose_b=True) / np.float32(8.0) + ff.constant(mask)
        scores2 = ff.matmul(q2, k2, transpose_b=True) * np.float32(1 / 16)
        return {"attended": ff.matmul(ff.softmax(scores, axis=-1), v),
                "split_k": ff.matmul(ff.softmax(scores2, axis=-1), v2)}
    return _case(build, [(1, 2, 32, 64)] * 3 + [(1, 2, 20, 264)] * 2 + [(1, 2, 20, 8)],
                 rtol=1e-5, atol=1e-5)


# -- norm.TABLE ---------------------------------------------------------------------------
def _norms(width_ln, width_rms):
    """LayerNorm (torch's decomposition, scale and offset) over width_ln and RMSNorm
    (LlamaRMSNorm's) over width_rms, each one fused_layer_norm (passes/norms.py); a row
    of zeros (zero variance)."""
    rng = np.random.default_rng(3)
    w = rng.uniform(0.5, 1.5, width_ln).astype(np.float32)
    b = rng.standard_normal(width_ln).astype(np.float32)
    g = rng.uniform(0.5, 1.5, width_rms).astype(np.float32)

    def build(x, y):
        x = x * np.float32([0.0, 1, 1, 1, 1]).reshape(5, 1)
        c = x - ff.reduce_mean(x, axis=-1, keepdims=True)
        var = ff.reduce_mean(ff.square(c), axis=-1, keepdims=True)
        ms = ff.reduce_mean(y * y, axis=-1, keepdims=True)
        return {"layer_norm": c * ff.rsqrt(var + 1e-5) * w + b,
                "rms_norm": y * ff.rsqrt(ms + 1e-6) * g}
    return _case(build, [(5, width_ln), (3, width_rms)], rtol=1e-5, atol=1e-5)


def norm_direct():
    """Rows of 12 and 7 elements (within reduce.norm_direct_width): one kernel each."""
    return _norms(12, 7)


def norm_stats():
    """Rows of 128 and 130 elements: a row's statistics, then the normalization."""
    return _norms(128, 130)


# a fetched LayerNorm left in its render targets (off in the webgl profile: slower),
# whatever its rows' reads (4 targets: a row of 128 is 8 fragments, each reading it)
FETCHED_ROWS = ff.Tuning.named("webgl").with_({"reduce.norm_rows_fetched": True,
                                               "reduce.norm_rows_fetched_reads": 1 << 20})


def norm_rows():
    """A LayerNorm over rows of 128 read by a blocked matmul as its A and by the next
    product's residual add (post-LN BERT), and fetched (FETCHED_ROWS):
    one kernel writing render targets, its readers reading them there and the readback
    putting them in order; 37 rows, one of zeros."""
    rng = np.random.default_rng(5)
    w = rng.uniform(0.5, 1.5, 128).astype(np.float32)
    b = rng.standard_normal(128).astype(np.float32)
    w1 = (rng.standard_normal((128, 64)) / 11.3).astype(np.float32)
    w2 = (rng.standard_normal((64, 128)) / 8).astype(np.float32)
    b1 = rng.standard_normal(64).astype(np.float32)

    def build(x):
        x = x * np.float32([0.0] + [1.0] * 36).reshape(37, 1)
        c = x - ff.reduce_mean(x, axis=-1, keepdims=True)
        var = ff.reduce_mean(ff.square(c), axis=-1, keepdims=True)
        y = c * ff.rsqrt(var + 1e-5) * w + b
        z = ff.matmul(y, ff.constant(w1)) + b1
        return {"layer": ff.matmul(z, ff.constant(w2)) + y, "normalized": y}
    case = _case(build, [(37, 128)], rtol=1e-4, atol=1e-4)
    case.tuning = FETCHED_ROWS
    return case


# -- top_k.TABLE --------------------------------------------------------------------------
def _top_k_feeds(shape, nan_every):
    def feeds(rng):
        x = np.round(rng.standard_normal(shape) * 3).astype(np.float32)   # many ties
        x.reshape(-1)[::nan_every] = np.nan
        x.reshape(-1)[5::nan_every + 2] = -np.inf
        x.reshape(-1)[7::nan_every + 4] = -0.0
        return [x]
    return feeds


def top_k_radix():
    """2 rows of 517 (rows x n^2 past structure.top_k_rank_max_work), k=40: ties,
    NaN, -inf, -0.0 beside 0.0."""
    return _case(lambda x: dict(zip(("values", "indices"), ff.top_k(x, 40))), [(2, 517)],
                 rtol=0, atol=0, feeds=_top_k_feeds((2, 517), 31))


def top_k_rank():
    """3 rows of 37, k=5: every element ranked against its row."""
    return _case(lambda x: dict(zip(("values", "indices"), ff.top_k(x, 5))), [(3, 37)],
                 rtol=0, atol=0, feeds=_top_k_feeds((3, 37), 11))


ROW_CASES = {
    "matmul.packed": matmul_packed, "matmul.blocked": matmul_blocked,
    "matmul.lanes": matmul_lanes, "matmul.plain": matmul_plain,
    "pool.lanes": pool_lanes, "pool.routed": pool_routed, "pool.vec4": pool_vec4,
    "depthwise.direct": depthwise_direct, "conv.direct": conv_direct,
    "conv.packed": conv_packed, "conv.blocked": conv_blocked,
    "depthwise.blocked": depthwise_blocked, "conv.filter_blocked": conv_filter_blocked,
    "conv.generic": conv_generic,
    "reduce.fill": reduce_fill, "reduce.split_few": reduce_split_few,
    "reduce.texel_passes": reduce_texel_passes,
    "reduce.element_passes": reduce_element_passes,
    "softmax.direct": softmax_direct, "softmax.partials": softmax_partials,
    "softmax.tree": softmax_tree, "scan.blocks": scan_blocks, "lrn.window": lrn_window,
    "attention.online": attention_online, "attention.scores": attention_scores,
    "attention.scores_blocks": attention_scores_blocks,
    "norm.direct": norm_direct, "norm.stats": norm_stats, "norm.rows": norm_rows,

    "top_k.radix": top_k_radix, "top_k.rank": top_k_rank,
}

# reduce_tree.glsl.j2's kernels the reduction rows run between them, as a header
# names them: (kind, mode or "" where the kind has none, render targets > 1)
REDUCTION_MODES = {("pass", "contiguous", False), ("pass", "strided4", False),
                   ("pass", "strided4", True), ("pass", "strided", False),
                   ("normalize", "", False), ("softmax_direct", "", False),
                   ("fill", "", False)}


# -- attention (issue 36) -----------------------------------------------------------------
def attention_softmax():
    """Issue 36's case: 4 heads' scores (1, 4, 32, 32), softmax over the last axis."""
    return _case(lambda x: {"probabilities": ff.softmax(x, axis=-1)}, [(1, 4, 32, 32)],
                 rtol=1e-5, atol=1e-5,
                 feeds=lambda rng: [rng.standard_normal((1, 4, 32, 32)).astype(np.float32)])


def attention_causal():
    """Scores masked causally (key j > query i gets -inf), then softmax; and
    softmax(q k^T / sqrt(d)) v with the same mask."""
    mask = np.tril(np.ones((32, 32), bool))

    def build(q, k, v):
        scores = ff.matmul(q, k, transpose_b=True) / np.float32(np.sqrt(32.0))
        masked = ff.where(ff.constant(mask), scores, ff.constant(np.float32(-np.inf)))
        probabilities = ff.softmax(masked, axis=-1)
        return {"probabilities": probabilities, "attended": ff.matmul(probabilities, v)}
    return _case(build, [(1, 4, 32, 32)] * 3, rtol=1e-5, atol=1e-5)


def bert_attention_proto(hidden=128, heads=4, tokens=32, seed=40):
    """A BERT-style self-attention block in ONNX (onnx.helper): Q, K, V projections
    (MatMul + Add), heads split (Reshape, Transpose), scaled scores plus an additive
    mask, Softmax, the heads merged, the output projection, the residual and
    LayerNormalization."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    d = hidden // heads

    def weight(*shape, scale=0.1):
        return (rng.standard_normal(shape) * scale).astype(np.float32)
    init = {"wq": weight(hidden, hidden), "bq": weight(hidden), "wk": weight(hidden, hidden),
            "bk": weight(hidden), "wv": weight(hidden, hidden), "bv": weight(hidden),
            "wo": weight(hidden, hidden), "bo": weight(hidden),
            "gamma": 1.0 + weight(hidden), "beta": weight(hidden),
            "split": np.array([1, tokens, heads, d], np.int64),
            "merge": np.array([1, tokens, hidden], np.int64),
            "scale": np.array(np.sqrt(d), np.float32)}
    node = helper.make_node
    nodes = []
    for name in "qkv":
        nodes += [node("MatMul", ["x", f"w{name}"], [f"{name}_mm"]),
                  node("Add", [f"{name}_mm", f"b{name}"], [f"{name}_lin"]),
                  node("Reshape", [f"{name}_lin", "split"], [f"{name}_heads"])]
    nodes += [
        node("Transpose", ["q_heads"], ["q"], perm=[0, 2, 1, 3]),
        node("Transpose", ["k_heads"], ["kt"], perm=[0, 2, 3, 1]),
        node("Transpose", ["v_heads"], ["v"], perm=[0, 2, 1, 3]),
        node("MatMul", ["q", "kt"], ["raw_scores"]),
        node("Div", ["raw_scores", "scale"], ["scaled"]),
        node("Add", ["scaled", "mask"], ["scores"]),
        node("Softmax", ["scores"], ["probabilities"], axis=-1),
        node("MatMul", ["probabilities", "v"], ["context"]),
        node("Transpose", ["context"], ["context_t"], perm=[0, 2, 1, 3]),
        node("Reshape", ["context_t", "merge"], ["merged"]),
        node("MatMul", ["merged", "wo"], ["out_mm"]),
        node("Add", ["out_mm", "bo"], ["out_lin"]),
        node("Add", ["out_lin", "x"], ["residual"]),
        node("LayerNormalization", ["residual", "gamma", "beta"], ["y"], axis=-1,
             epsilon=1e-5)]
    graph = helper.make_graph(
        nodes, "bert_attention",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, tokens, hidden]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, [1, 1, 1, tokens])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, tokens, hidden]),
         helper.make_tensor_value_info("probabilities", TensorProto.FLOAT,
                                       [1, heads, tokens, tokens])],
        initializer=[numpy_helper.from_array(v, k) for k, v in init.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    return proto


def attention_bert_onnx():
    """bert_attention_proto imported with ff.onnx.load; the mask hides the last 5
    tokens (-10000 added, as BERT's extended attention mask)."""
    model = ff.onnx.load(bert_attention_proto().SerializeToString())
    rng = np.random.default_rng(41)
    mask = np.zeros((1, 1, 1, 32), np.float32)
    mask[..., 27:] = -10000.0
    x, m = model.inputs_by_onnx_name["x"], model.inputs_by_onnx_name["mask"]
    fetches = {"y": model.outputs_by_onnx_name["y"],
               "probabilities": model.outputs_by_onnx_name["probabilities"]}
    feeds = {x: rng.standard_normal((1, 32, 128)).astype(np.float32), m: mask}
    return Case(model.graph, fetches, feeds, rtol=1e-5, atol=1e-5)


def attention_bert_merged(tokens=13, heads=4, d=16):
    """BERT's self-attention written with fragflow's ops: q, k and v projections of
    one x (constant weights and biases) split into heads, scaled scores, a -inf
    padding mask over the last 3 keys, softmax, the result's heads transposed back
    ([B, L, H, D]): q, k and v become one
    matmul (passes/merge_matmuls.py) whose columns the attention reads in place."""
    rng = np.random.default_rng(42)
    width = heads * d
    mask = np.where(np.arange(tokens) >= tokens - 3, -np.inf, 0).astype(np.float32)

    def build(x):
        def split(name):
            w = ff.constant((rng.standard_normal((width, width)) * 0.2).astype(np.float32))
            b = ff.constant(rng.standard_normal(width).astype(np.float32))
            return ff.transpose(ff.reshape(ff.matmul(x, w) + b, (2, tokens, heads, d)),
                                [0, 2, 1, 3])
        q, k, v = split("q"), split("k"), split("v")
        scores = ff.matmul(q, k, transpose_b=True) / np.float32(4.0) + ff.constant(mask)
        out = ff.matmul(ff.softmax(scores, axis=-1), v)
        return {"y": ff.transpose(out, [0, 2, 1, 3])}
    return _case(build, [(2, tokens, width)], rtol=1e-5, atol=1e-5)


ATTENTION_CASES = {"attention_softmax": attention_softmax, "attention_causal": attention_causal,
                   "attention_bert_onnx": attention_bert_onnx,
                   "attention_bert_merged": attention_bert_merged}


def norm_reads_matmul_blocks():
    """BERT's output projection and feed-forward tail: x @ w + b + residual, then a
    LayerNorm, and gelu(x @ w1 + b1) @ w2 + b2 + residual, then another (K 256: split),
    34 rows: the products before the norms stay in their render targets and the
    norms' kernels read them there, applying the epilogues; the first feed-forward
    product applies its GELU and the second reads it from its targets through a
    reshape (codegen/matmul.py plan_blocks): no stitch; a row of NaN."""
    rng = np.random.default_rng(34)
    w, w1, w2 = ((rng.standard_normal(shape) * 0.1).astype(np.float32)
                 for shape in ((64, 64), (64, 256), (256, 64)))
    b, b1, b2, scale, offset = (rng.standard_normal(n).astype(np.float32)
                                for n in (64, 256, 64, 64, 64))

    def build(x, r):
        h = ff.layer_normalization(x @ ff.constant(w) + ff.constant(b) + r,
                                   ff.constant(scale), ff.constant(offset), epsilon=1e-5)
        f = x @ ff.constant(w1) + ff.constant(b1)
        f = 0.5 * f * (1.0 + ff.erf(f * np.float32(0.7071067811865476)))
        y = ff.reshape(f, (1, 34, 256)) @ ff.constant(w2) + ff.constant(b2) + h
        return {"attention_out": h,
                "output": ff.layer_normalization(y, ff.constant(scale), ff.constant(offset))}

    def feeds(rng):
        x = rng.standard_normal((34, 64)).astype(np.float32)
        x[3, 5] = np.nan
        return [x, rng.standard_normal((34, 64)).astype(np.float32)]
    return _case(build, [(34, 64), (34, 64)], rtol=1e-4, atol=1e-4, feeds=feeds)


def fetched_norm_rows():
    """LayerNorms fetched with no other reader, each one norm.rows kernel whose
    targets the readback reads and puts in order (FETCHED_ROWS): 37 rows of 128 (32
    texels: 4 targets, WebGL2's draw buffers), 13 of 44 (11 texels: one target), an
    RMSNorm over 3 x 7 rows of 24 (6 texels: 3 targets); NaN, inf, a row of zeros,
    negatives. Three runs: the first reads back through pixel-pack buffers and
    fences, the later ones directly (runtime.js _end)."""
    rng = np.random.default_rng(37)
    s1, b1 = rng.uniform(0.5, 1.5, 128).astype(np.float32), \
        rng.standard_normal(128).astype(np.float32)
    s2, b2 = rng.uniform(0.5, 1.5, 44).astype(np.float32), \
        rng.standard_normal(44).astype(np.float32)
    g3 = rng.uniform(0.5, 1.5, 24).astype(np.float32)

    def build(x1, x2, x3):
        ms = ff.reduce_mean(x3 * x3, axis=-1, keepdims=True)
        return {"wide": ff.layer_normalization(x1, ff.constant(s1), ff.constant(b1)),
                "one_target": ff.layer_normalization(x2, ff.constant(s2), ff.constant(b2)),
                "rms": x3 * ff.rsqrt(ms + 1e-6) * g3}

    def feeds(rng):
        x1, x2, x3 = (rng.standard_normal(s).astype(np.float32) * 3 - 1
                      for s in ((37, 128), (13, 44), (3, 7, 24)))
        x1[2] = 0.0                  # zero variance: the offset
        x1[5, 7] = np.nan
        x2[4, 0] = np.inf
        x3[1, 2] = 0.0
        return [x1, x2, x3]
    case = _case(build, [(37, 128), (13, 44), (3, 7, 24)], rtol=1e-4, atol=1e-4,
                 feeds=feeds)
    case.runs = 3
    case.tuning = FETCHED_ROWS
    return case


# cases of kernels reading another node's render targets, and of fetches reading them
BLOCKS_CASES = {"norm_reads_matmul_blocks": norm_reads_matmul_blocks,
                "fetched_norm_rows": fetched_norm_rows}


def case_id(strategy: str) -> str:
    """The browser case (and export folder) of a row: "row_matmul_packed"."""
    return "row_" + strategy.replace(".", "_")
