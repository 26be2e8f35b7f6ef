"""norm.rows: a LayerNorm (or RMSNorm) read only by blocked matmuls as their A and by
matmuls' epilogues as a residual operand (post-LN BERT: the next layer's q, k, v
product and its residual add) runs as one kernel writing render targets; its readers
read its texels there through px_ (codegen/norm.py plan_blocks, templates/
layer_norm.glsl.j2 mode "rows", codegen/fused.py matmul_epilogue). On GL against the
float64 formula: rows not a multiple of 4, a batch, widths of 5 and 11 texels (targets
that divide them), NaN and inf rows, RMSNorm, the norm reading its own x from a
matmul's render targets (K split, a residual epilogue) as BERT's second norm does; and
where the norm keeps norm.stats: a reader of another kind, the knobs off, the strategy
excluded. A fetched norm (a model's output: BERT's last) stays in its targets too and
the readback puts its texels in order (runtime/gl_plan.py from_layers): rows not a
multiple of anything, 8 targets and fewer, fetched and read by the matmul at once,
the resident, observed and cached paths, a loop body's (whose plan keeps a texture)."""
import math

import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.ops.state import RUN_COUNTER
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
        build.y = y                      # the norm's result, for a fetch of it
        return ff.matmul(z, ff.constant(w2)) + ff.constant(b2) + y

    def reference(x, r, with_y=False):
        with np.errstate(invalid="ignore", over="ignore"):
            h = x.astype(np.float64)
            if pending_x:
                h = h @ w0 + b0 + r
            y = norm64(h, scale, offset if center else None, center=center)
            z = y @ w1 + b1
            return (z @ w2 + b2 + y, y) if with_y else z @ w2 + b2 + y
    return build, reference, x, r


def _run(build, x, r, tuning=None, fetch_y=False, both=False):
    """(o, kernels) of the layer; both: ([o, y], kernels) with y fetched too."""
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        rp = ff.placeholder(r.shape, name="r")
        o = build(xp, rp)
        fetches = [o, build.y] if fetch_y or both else [o]
    with ff.Session(g, tuning=tuning) as sess:
        fn = sess.compile(fetches, feeds=[xp, rp])
        out = fn(x, r)
        return (out if both else out[0]), fn.kernels


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
    ("fetched, reduce.norm_rows_fetched off",
     ff.Tuning().with_({"reduce.norm_rows_fetched": False}), True),
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


@pytest.mark.parametrize("fetch_y", [False, True])
def test_a_reader_of_another_kind_keeps_its_texture(gl, fetch_y):
    """y read by a relu too (and fetched): the elementwise kernel reads textures, so
    norm.stats."""
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
        fn = sess.compile([o, s] + ([y] if fetch_y else []), feeds=[xp])
        got_o, got_s, *got_y = fn(x)
    y64 = norm64(x)
    assert_matches(got_o, (y64 @ w1 + b1).astype(np.float32), rtol=1e-4, atol=1e-4)
    assert_matches(got_s, np.maximum(y64, 0).sum(-1).astype(np.float32), rtol=1e-4,
                   atol=1e-4)
    if fetch_y:
        assert_matches(got_y[0], y64.astype(np.float32), rtol=1e-4, atol=1e-4)
    assert {k.strategy for k in _norms(fn.kernels)} <= {"norm.stats", "norm.direct"}


def _fetched_norm(rng, rows_shape, width, center=True):
    """(build(x) -> y, the float64 reference of y, x): y = norm(x) * scale + offset
    (RMSNorm: no centre, no offset), fetched and read by nothing else; x with a row of
    NaN, an inf, a row of zeros (y = offset there) and negative values."""
    scale = rng.uniform(0.5, 1.5, width).astype(np.float32)
    offset = normal(rng, width)
    x = normal(rng, *rows_shape, width) * np.float32(3) - np.float32(1)
    first = (0,) * (len(rows_shape) - 1)
    x[first + (0,)] = np.nan                   # a row of NaN
    x[first + (1, 2)] = np.inf                 # a row of NaN (inf - inf)
    x[first + (2,)] = 0.0                      # variance 0: y = offset
    x[(-1,) * len(rows_shape)] *= np.float32(-1e4)

    def build(xp):
        if center:
            return ff.layer_normalization(xp, ff.constant(scale), ff.constant(offset),
                                          epsilon=1e-5)
        return xp * ff.rsqrt(ff.reduce_mean(ff.square(xp), axis=-1, keepdims=True) +
                             1e-5) * ff.constant(scale)
    return build, norm64(x, scale, offset if center else None, center=center), x


def _compiled(build, x, tuning=None):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y = build(xp)
    sess = ff.Session(g, tuning=tuning)
    return sess, xp, y, sess.compile([y], feeds=[xp])


@pytest.mark.parametrize("rows_shape, width, center, targets", [
    ((37,), 128, True, 8),        # 37 rows, 32 texels a row: 8 targets of 4
    ((3, 7), 24, True, 6),        # 6 texels: 6 targets
    ((1, 18), 20, True, 5),       # 5 texels: 5 targets
    ((13,), 44, True, 1),         # 11 texels: one target, 11 fragments a row
    ((5,), 8, True, 2),           # 2 texels
    ((21,), 64, False, 8),        # RMSNorm, 2 texels a target
])
def test_a_fetched_norm_is_one_kernel_read_back_from_its_targets(gl, rows_shape, width,
                                                                  center, targets):
    rng = np.random.default_rng(width + sum(rows_shape))
    build, want, x = _fetched_norm(rng, rows_shape, width, center)
    sess, _, _, fn = _compiled(build, x)
    with sess:
        got = fn(x)[0]
    assert np.isnan(want).any() and (want < 0).any() and np.isfinite(want).any()
    assert_matches(got, want.astype(np.float32), rtol=1e-4, atol=1e-4)
    assert [(k.op, k.strategy, k.output_layers) for k in fn.kernels] == \
        [("fused_layer_norm", "norm.rows", targets)]


@pytest.mark.parametrize("rows, width, tuning, rows_kernel", [
    (48, 128, None, True),        # 48 x 128 x (4 fragments a row - 3): 6144, the default
    (49, 128, None, False),       # 6272: past it
    (8, 256, None, False),        # 8 fragments a row: 8 x 256 x 5
    (8, 256, ff.Tuning().with_({"reduce.norm_rows_fetched_reads": 8 * 256 * 5}), True),
    (37, 128, ff.Tuning.named("webgl"), False),     # off in the webgl profile
    (37, 128, ff.Tuning().with_({"reduce.norm_rows_fetched": False}), False),
])
def test_a_fetched_norm_stays_in_targets_where_its_reads_pay(gl, rows, width, tuning,
                                                              rows_kernel):
    """reduce.norm_rows_fetched_reads bounds what norm.rows' fragments read beyond
    norm.stats' three reads of each element (rows x width x (fragments a row - 3));
    either way the result is the formula's."""
    rng = np.random.default_rng(rows + width)
    build, want, x = _fetched_norm(rng, (rows,), width)
    sess, _, _, fn = _compiled(build, x, tuning)
    with sess:
        assert_matches(fn(x)[0], want.astype(np.float32), rtol=1e-4, atol=1e-4)
    strategies = [k.strategy for k in fn.kernels]
    assert (strategies == ["norm.rows"]) == rows_kernel, strategies
    assert rows_kernel or "norm.rows" not in strategies


def test_a_fetched_norm_read_by_the_matmul_and_the_residual_too(gl):
    """y fetched and read by the next product (as A) and its residual add: one
    norm.rows kernel whose targets the readers and the readback read."""
    rng = np.random.default_rng(9)
    build, reference, x, r = _layer(rng, (29,), 128, 64)
    (got_o, got_y), kernels = _run(build, x, r, both=True)
    want_o, want_y = reference(x, r, with_y=True)
    assert_matches(got_o, want_o.astype(np.float32), rtol=1e-4, atol=1e-4)
    assert_matches(got_y, want_y.astype(np.float32), rtol=1e-4, atol=1e-4)
    assert np.isnan(want_y).any() and (want_y < 0).any()
    norm = _norms(kernels)
    assert [k.strategy for k in norm] == ["norm.rows"], [(k.op, k.strategy) for k in kernels]
    readers = [k for k in kernels if any(b.value == norm[0].output.value for b in k.inputs)]
    assert len(readers) == 2, [k.op for k in readers]


def test_the_fetched_norms_values_against_its_scale_and_offset(gl):
    """As above, y checked element for element: the layer's own norm (scale, offset)."""
    rng = np.random.default_rng(10)
    width, hidden = 128, 64
    w1, b1 = _weights(rng, width, hidden)
    scale = rng.uniform(0.5, 1.5, width).astype(np.float32)
    offset = normal(rng, width)
    x = normal(rng, 29, width) * np.float32(2)
    x[3] = 0.0
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y = ff.layer_normalization(xp, ff.constant(scale), ff.constant(offset), epsilon=1e-5)
        o = ff.matmul(y, ff.constant(w1)) + ff.constant(b1)
    with ff.Session(g) as sess:
        fn = sess.compile([y, o], feeds=[xp])
        got_y, got_o = fn(x)
    y64 = norm64(x, scale, offset)
    assert_matches(got_y, y64.astype(np.float32), rtol=1e-4, atol=1e-4)
    assert_matches(got_o, (y64 @ w1 + b1).astype(np.float32), rtol=1e-4, atol=1e-4)
    assert [k.strategy for k in _norms(fn.kernels)] == ["norm.rows"]


def test_resident_and_observed_runs_read_the_targets_back(gl):
    """GLPlan.run_resident hands a value in render targets back read (no Resident of
    it: no texture holds it); observed runs (Session.profile's) read it as a run does."""
    rng = np.random.default_rng(11)
    build, want, x = _fetched_norm(rng, (37,), 128)
    sess, xp, y, fn = _compiled(build, x)
    with sess:
        assert_matches(fn(x)[0], want.astype(np.float32), rtol=1e-4, atol=1e-4)
        compiled = fn._last
        feeds = {compiled.feed_names[xp.value]: x, RUN_COUNTER: np.array(0, np.int32)}
        got = compiled.plan.run_resident(feeds)[0]
        assert isinstance(got, np.ndarray)
        assert_matches(got, want.astype(np.float32), rtol=1e-4, atol=1e-4)
        heard = []
        observer = type("Observer", (), {
            "input": lambda self, name, read: None,
            "phase": lambda self, name, seconds: heard.append(name),
            "kernel": lambda self, kernel, seconds, read: heard.append(kernel.strategy)})()
        got = compiled.plan.run_observed(feeds, observer)[0]
        assert_matches(got, want.astype(np.float32), rtol=1e-4, atol=1e-4)
        assert heard == ["upload", "norm.rows", "readback"], heard
        profile = sess.profile([y], {xp: x}, runs=2)
        assert len(profile.kernel_rows) == 1, profile.kernel_rows
        assert_matches(sess.run(y, {xp: x}), want.astype(np.float32), rtol=1e-4, atol=1e-4)


def test_a_cached_plan_reads_the_targets_back(gl, tmp_path, monkeypatch):
    """The plan cache's entry keeps LoweredGraph.fetched_blocks."""
    monkeypatch.setenv("FRAGFLOW_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FRAGFLOW_PLAN_CACHE", "1")
    rng = np.random.default_rng(12)
    build, want, x = _fetched_norm(rng, (9,), 24)
    for _ in range(2):              # the first compile writes the entry, the second loads it
        sess, _, _, fn = _compiled(build, x)
        with sess:
            assert_matches(fn(x)[0], want.astype(np.float32), rtol=1e-4, atol=1e-4)
            assert [k.strategy for k in fn.kernels] == ["norm.rows"]
    assert list(tmp_path.rglob("*.json")), "no plan cache entry written"


def test_a_loop_bodys_norm_keeps_a_texture(gl):
    """A while_loop's body returning a LayerNorm: its plan hands the result on as a
    texture (swapped with the loop variable), so the sub-plan lowers it without
    reduce.norm_rows_fetched; the loop matches the numpy executor."""
    rng = np.random.default_rng(13)
    w = (normal(rng, 64, 64) / np.float32(8)).astype(np.float32)
    x = normal(rng, 12, 64)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        _, y = ff.while_loop(lambda i, v: i < 3,
                             lambda i, v: (i + 1, ff.layer_normalization(
                                 ff.matmul(v, ff.constant(w)), epsilon=1e-5)),
                             [ff.constant(np.int32(0)), xp])
        z = ff.layer_normalization(y * 2.0, epsilon=1e-5)
    with ff.Session(g, backend="numpy", passes=[]) as ref:
        want_y, want_z = ref.run([y, z], {xp: x})
    with ff.Session(g) as sess:
        got_y, got_z = sess.run([y, z], {xp: x})
    assert_matches(got_y, want_y, rtol=1e-4, atol=1e-4)
    assert_matches(got_z, want_z, rtol=1e-4, atol=1e-4)
