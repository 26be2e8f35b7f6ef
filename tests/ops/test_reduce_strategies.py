"""Every strategy of the reduce family's table (codegen/reduce.py TABLE) that applies to
a node, preferred in turn by the tuning, against the numpy reference executor: texel
and element passes for sums, means, logsumexp and variance, column sums to a few
outputs split or not, softmax direct, from lane partials and as trees, cumsum's
blocks; the kernels name the strategy that made them."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen.reduce import TABLE
from tests.ops.test_reduce_tree import SHRUNK
from tests.reference import assert_matches, run_both

NAMES = [s.name for s in TABLE]
BUILDS = {
    "sum rows": (lambda x: ff.reduce_sum(x, axis=1), (6, 64)),
    "sum few columns": (lambda x: ff.reduce_sum(x, axis=0), (4096, 8)),
    "argmax few columns": (lambda x: ff.argmax(x, axis=0), (2049, 5)),
    "mean columns": (lambda x: ff.reduce_mean(x, axis=0, keepdims=True), (37, 32)),
    "logsumexp": (lambda x: ff.reduce_logsumexp(x, axis=1), (5, 40)),
    "variance": (lambda x: ff.reduce_variance(x, axis=-1), (3, 100)),
    "argmax": (lambda x: ff.argmax(x, axis=1), (4, 37)),
    "softmax rows": (lambda x: ff.softmax(x), (6, 64)),
    "log_softmax columns": (lambda x: ff.log_softmax(x, 0), (37, 6)),
    "cumsum": (lambda x: ff.cumsum(x, 1, reverse=True), (3, 37)),
    "empty sum": (lambda x: ff.reduce_sum(x, axis=1), (3, 0)),
}


def strategies_of(g, y, x, tuning):
    with ff.Session(g, tuning=tuning) as sess:
        return {k.strategy for k in sess.compile([y], feeds=[x]).kernels}


@pytest.mark.parametrize("label", list(BUILDS))
def test_every_strategy_that_applies_matches_the_reference(gl, label):
    build, shape = BUILDS[label]
    base = ff.Tuning() if "few" in label else SHRUNK      # SHRUNK's windows never split
    data = np.random.default_rng(50).standard_normal(shape).astype(np.float32)
    if data.size:
        data.flat[3] = np.nan if "cumsum" not in label else 4.0
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(shape, name="x")
        y = build(x)
    applied = []
    for name in NAMES:
        tuning = base.with_(prefer=(name,), reduce={"direct_softmax_work": 1 << 16})
        if name not in strategies_of(g, y, x, tuning):
            continue                        # does not apply: the next one took it
        applied.append(name)
        out, ref = run_both(g, {"y": y}, {x: data}, tuning=tuning)
        assert_matches(out["y"], ref["y"], rtol=1e-4, atol=1e-5, what=f"{label} {name}")
    assert applied, label
    if label in ("sum rows", "sum few columns", "argmax few columns", "logsumexp",
                 "variance", "softmax rows"):
        assert len(applied) >= 2, applied         # a choice: each one checked


def test_excluding_texel_passes_gives_element_passes(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((6, 64), name="x")
        y = ff.reduce_sum(x, axis=1)
    off = ff.Tuning().with_(exclude=("reduce.texel_passes",))
    assert strategies_of(g, y, x, ff.Tuning()) == {"reduce.texel_passes"}
    assert strategies_of(g, y, x, off) == {"reduce.element_passes"}


@pytest.mark.parametrize("profile", ["gpu", "webgl"])
def test_the_device_profiles_reduce_correctly(gl, profile):
    """The GPU and WebGL profiles' windows (64K first-pass fragments) on GL."""
    rng = np.random.default_rng(51)
    flat = rng.uniform(-1, 1, 1 << 19).astype(np.float32)
    cols = rng.standard_normal((3000, 40)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder(flat.shape, name="a")
        b = ff.placeholder(cols.shape, name="b")
        fetches = {"sum": ff.reduce_sum(a), "max": ff.reduce_max(a),
                   "columns": ff.reduce_mean(b, axis=0), "variance": ff.reduce_variance(b, 0),
                   "softmax": ff.softmax(b, 0)}
    out, ref = run_both(g, fetches, {a: flat, b: cols}, tuning=ff.Tuning.named(profile))
    for label in fetches:
        assert_matches(out[label], ref[label], rtol=1e-4, atol=1e-3 if label == "sum" else 1e-5,
                       what=f"{profile} {label}")
