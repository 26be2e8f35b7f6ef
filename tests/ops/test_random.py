"""Random ops: the generator (Philox-4x32-10 known answers, and a scalar Python
Philox written here independently), GL against the numpy reference (the same bits:
uniform exactly, normals to 1e-5), reproducibility across sessions and processes, and
the distributions (100k draws: moments and Kolmogorov-Smirnov bounds, chi-square for
multinomial, dropout's kept fraction and scale).

Statistical bounds are at significance ~1e-3 or looser; the seeds are fixed, so a
test is deterministic (it cannot flake), but a biased generator would fail it."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.ops import get_op
from fragflow.ir.ops.random import philox4x32, stream_id
from tests.reference import assert_matches, run_both

N = 100_000
KS_BOUND = 1.95 / math.sqrt(N)         # Kolmogorov-Smirnov critical value, alpha = 0.001


# -- an independent scalar Philox-4x32-10 (Random123's definition) ----------------------
def philox_scalar(counter, key):
    c, (k0, k1) = list(counter), key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & 0xFFFFFFFF, (p0 >> 32) ^ c[3] ^ k1, p0 & 0xFFFFFFFF]
        k0, k1 = (k0 + 0x9E3779B9) & 0xFFFFFFFF, (k1 + 0xBB67AE85) & 0xFFFFFFFF
    return c


def fnv1a(name):
    h = 2166136261
    for b in name.encode():
        h = ((h ^ b) * 16777619) % 2 ** 32
    return h


def test_philox_known_answers():
    """Random123's kat_vectors for philox4x32 10, on the reference implementation."""
    vectors = [((0, 0, 0, 0), (0, 0), (0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8)),
               ((0xffffffff,) * 4, (0xffffffff,) * 2,
                (0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd)),
               ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xa4093822, 0x299f31d0),
                (0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1))]
    for counter, key, want in vectors:
        assert [int(w) for w in philox4x32(counter, key)] == list(want)
        assert philox_scalar(counter, key) == list(want)


def test_stream_is_fnv1a_of_the_node_name():
    assert stream_id("dropout") == fnv1a("dropout")
    assert stream_id("a/b/random_uniform_3") == fnv1a("a/b/random_uniform_3")
    g = ff.Graph()
    with g.as_default(), ff.name_scope("layer"):
        u = ff.random_uniform((3,), seed=1)
    assert u.op.attrs["stream"] == fnv1a("layer/random_uniform")


# -- GL against the reference -------------------------------------------------------------
def test_gl_draws_the_reference_bits(gl):
    logits = np.random.default_rng(0).standard_normal((3, 37)).astype(np.float32)
    logits[1, 5] = -np.inf
    g = ff.Graph()
    with g.as_default():
        fetches = {
            "uniform": ff.random_uniform((1001,), seed=5),
            "uniform [-3, 5.5)": ff.random_uniform((7, 13), -3.0, 5.5, seed=5),
            "int32 [-7, 2**31-1)": ff.random_uniform((1001,), -7, 2 ** 31 - 1, "int32", seed=9),
            "int32 [-2**31, 5)": ff.random_uniform((3, 5), -2 ** 31, 5, "int32", seed=9),
            "normal": ff.random_normal((2, 5003), 1.0, 2.0, seed=5),
            "truncated": ff.truncated_normal((5003,), -1.0, 0.5, seed=5),
            "multinomial": ff.multinomial(logits, 1000, seed=3),
            "seed 2**40": ff.random_uniform((10,), seed=2 ** 40 + 5),
        }
    out, ref = run_both(g, fetches)
    for label in ("uniform", "uniform [-3, 5.5)", "seed 2**40"):
        np.testing.assert_array_equal(out[label].view(np.uint32), ref[label].view(np.uint32),
                                      err_msg=label)
    for label in ("int32 [-7, 2**31-1)", "int32 [-2**31, 5)"):
        assert_matches(out[label], ref[label], what=label)
    for label in ("normal", "truncated"):
        assert_matches(out[label], ref[label], rtol=1e-5, atol=1e-5, what=label)
    # multinomial compares float32 running sums of exp: a draw within an ulp of a class
    # boundary may fall either way
    assert np.mean(out["multinomial"] != ref["multinomial"]) < 1e-3
    assert not np.any(out["multinomial"][1] == 5)      # a -inf logit is never drawn
    assert out["seed 2**40"].tolist() != out["uniform"][:10].tolist()


def test_reference_is_philox_of_seed_stream_and_index():
    """Element i of a float uniform is the top 24 bits of word i % 4 of
    philox((i // 4, 0, 0, 0), (seed, stream)), from the scalar Philox above."""
    g = ff.Graph()
    with g.as_default():
        u = ff.random_uniform((11,), seed=1234, name="u")
        k = ff.random_uniform((11,), 10, 20, "int32", seed=1234, name="k")
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        got_u, got_k = sess.run([u, k])
    for i in range(11):
        word = philox_scalar((i // 4, 0, 0, 0), (1234, fnv1a("u")))[i % 4]
        assert got_u[i] == np.float32((word >> 8) / 2 ** 24)
        word = philox_scalar((i // 4, 0, 0, 0), (1234, fnv1a("k")))[i % 4]
        assert got_k[i] == 10 + word % 10


# -- reproducibility ----------------------------------------------------------------------
def _draws(seed, name):
    g = ff.Graph()
    with g.as_default():
        u = ff.random_normal((6,), seed=seed, name=name)
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        return sess.run(u)


def test_seed_and_name_fix_the_values():
    np.testing.assert_array_equal(_draws(7, "a"), _draws(7, "a"))
    assert not np.array_equal(_draws(7, "a"), _draws(7, "b"))     # another stream
    assert not np.array_equal(_draws(7, "a"), _draws(8, "a"))     # another seed
    g = ff.Graph()
    with g.as_default():
        a = ff.random_uniform((5,), seed=1)
        b = ff.random_uniform((5,), seed=1)             # same seed, different node name
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        va, vb = sess.run([a, b])
        va2 = sess.run(a)                               # the next run draws fresh values
    assert not np.array_equal(va, vb)
    assert not np.array_equal(va, va2)
    with ff.Session(g, backend="numpy", passes=[]) as sess:        # run k of any session: the same
        np.testing.assert_array_equal(sess.run(a), va)
        np.testing.assert_array_equal(sess.run(a), va2)


def test_each_run_draws_fresh_values_on_gl_too(gl):
    """The GL kernels read the graph's run_counter (fed by the session each run)."""
    g = ff.Graph()
    with g.as_default():
        u = ff.random_uniform((6,), seed=3)
        d = ff.dropout(np.ones(64, np.float32), 0.5, seed=3)
    with ff.Session(g) as sess:
        runs = [sess.run([u, d]) for _ in range(3)]
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        ref = [sess.run([u, d]) for _ in range(3)]
    for (gu, gd), (ru, rd) in zip(runs, ref):
        np.testing.assert_array_equal(gu, ru)
        np.testing.assert_array_equal(gd, rd)
    assert len({r[0].tobytes() for r in runs}) == 3


def test_values_are_the_same_in_another_process():
    code = ("import fragflow as ff\ng = ff.Graph()\nwith g.as_default():\n"
            "    u = ff.random_normal((6,), seed=7, name='a')\n"
            "print(ff.Session(g, backend='numpy').run(u).tobytes().hex())")
    env = {"PYTHONHASHSEED": "12345"}                 # str hashes differ from ours
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={**os.environ, **env}, check=True)
    assert result.stdout.strip() == _draws(7, "a").tobytes().hex()


# -- distributions (GL, 100k draws each, one session) ----------------------------------------
def normal_cdf(x):
    return 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def ks_statistic(sample, cdf):
    x = np.sort(sample.astype(np.float64))
    f = cdf(x)
    n = len(x)
    return max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n))


@pytest.fixture(scope="module")
def draws(gl):
    logits = np.array([[0.0, 1.0, 2.0, -1.0, 0.5],
                       [3.0, -np.inf, 0.0, 0.0, 1.0]], np.float32)
    g = ff.Graph()
    with g.as_default():
        fetches = {
            "uniform": ff.random_uniform((N,), seed=11),
            "uniform range": ff.random_uniform((N,), -2.0, 6.0, seed=12),
            "int": ff.random_uniform((N,), -3, 4, "int32", seed=13),
            "normal": ff.random_normal((N,), seed=14),
            "normal scaled": ff.random_normal((N,), 3.0, 0.5, seed=15),
            "truncated": ff.truncated_normal((N,), seed=16),
            "truncated scaled": ff.truncated_normal((N,), -1.0, 3.0, seed=17),
            "multinomial": ff.multinomial(logits, N // 2, seed=18),
            "dropout": ff.dropout(np.full((N,), 2.0, np.float32), 0.3, seed=19),
            "dropout noise_shape": ff.dropout(np.ones((400, 250), np.float32), 0.6,
                                              noise_shape=(400, 1), seed=20),
        }
    with ff.Session(g) as sess:
        out = sess.run(fetches)
    out["logits"] = logits
    return out


def test_uniform_distribution(draws):
    u = draws["uniform"]
    assert u.min() >= 0 and u.max() < 1
    assert abs(u.mean() - 0.5) < 4 * math.sqrt(1 / 12 / N)
    assert abs(u.var() - 1 / 12) < 0.002
    assert ks_statistic(u, lambda x: x) < KS_BOUND
    v = draws["uniform range"]
    assert v.min() >= -2 and v.max() < 6
    assert ks_statistic(v, lambda x: (x + 2) / 8) < KS_BOUND


def test_int_uniform_distribution(draws):
    k = draws["int"]
    counts = np.bincount(k + 3, minlength=7)
    assert k.min() == -3 and k.max() == 3
    expected = N / 7
    assert np.sum((counts - expected) ** 2 / expected) < 22.46      # chi2(6), p = 0.001


def test_normal_distribution(draws):
    z = draws["normal"]
    assert abs(z.mean()) < 4 / math.sqrt(N)
    assert abs(z.var() - 1) < 0.015
    assert ks_statistic(z, normal_cdf) < KS_BOUND
    s = draws["normal scaled"]
    assert abs(s.mean() - 3) < 4 * 0.5 / math.sqrt(N)
    assert ks_statistic(s, lambda x: normal_cdf((x - 3) / 0.5)) < KS_BOUND


def test_truncated_normal_distribution(draws):
    z = draws["truncated"]
    assert np.abs(z).max() < 2
    phi2 = math.exp(-2) / math.sqrt(2 * math.pi)
    mass = math.erf(2 / math.sqrt(2))                 # P(|z| < 2)
    assert abs(z.mean()) < 4 / math.sqrt(N)
    assert abs(z.var() - (1 - 4 * phi2 / mass)) < 0.01
    cdf = lambda x: (normal_cdf(x) - normal_cdf(-2.0)) / mass    # noqa: E731
    assert ks_statistic(z, cdf) < KS_BOUND
    s = draws["truncated scaled"]
    assert s.min() > -7 and s.max() < 5
    assert ks_statistic((s + 1) / 3, cdf) < KS_BOUND


def test_multinomial_frequencies_follow_softmax(draws):
    samples, logits = draws["multinomial"], draws["logits"]
    assert samples.shape == (2, N // 2) and samples.dtype == np.int32
    for row in range(2):
        p = np.exp(logits[row] - logits[row].max())
        p /= p.sum()
        counts = np.bincount(samples[row], minlength=5)
        assert counts[p == 0].sum() == 0
        live = p > 0
        expected = p[live] * samples.shape[1]
        chi2 = np.sum((counts[live] - expected) ** 2 / expected)
        assert chi2 < 18.47                                         # chi2(4), p = 0.001


def test_dropout_keeps_and_scales(draws):
    y = draws["dropout"]
    kept = y != 0
    assert abs(kept.mean() - 0.7) < 4 * math.sqrt(0.21 / N)
    scale = np.float32(1) / (np.float32(1) - np.float32(0.3))
    np.testing.assert_array_equal(y[kept], np.float32(2.0) * scale)
    m = draws["dropout noise_shape"]
    assert (m == m[:, :1]).all()                      # one draw per row
    assert abs((m[:, 0] != 0).mean() - 0.4) < 0.1
    # the scale is 1 / (1 - rate) in float32, as TensorFlow computes it
    assert set(np.unique(m).tolist()) <= {0.0, np.float32(1) / (np.float32(1) - np.float32(0.6))}


# -- dropout: reference, gradient, noise_shape, edge values ----------------------------------
def test_dropout_matches_reference_and_zeroes_dropped_nan(gl):
    x = np.random.default_rng(1).standard_normal((5, 7, 3)).astype(np.float32)
    x[0, 0, :] = [np.nan, np.inf, -np.inf]
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder((None, 7, 3), name="x")
        fetches = {"plain": ff.dropout(xp, 0.5, seed=4),
                   "noise (None, 1, 3)": ff.dropout(xp, 0.25, noise_shape=(None, 1, 3), seed=4),
                   "rate 0": ff.dropout(xp, 0.0, seed=4)}
    out, ref = run_both(g, fetches, {xp: x})
    for label in fetches:
        assert_matches(out[label], ref[label], rtol=1e-6, what=label)
    np.testing.assert_array_equal(out["rate 0"], x)
    noise = out["noise (None, 1, 3)"] != 0
    assert (noise == noise[:, :1, :]).all() or np.isnan(x).any()


def test_other_random_ops_are_not_differentiable():
    g = ff.Graph()
    with g.as_default():
        logits = ff.placeholder((2, 3), name="logits")
        s = ff.cast(ff.multinomial(logits, 4, seed=1), "float32")
        assert ff.gradients(ff.sum(s), [logits]) == [None]
    for op in ("random_uniform", "random_normal", "truncated_normal", "multinomial"):
        assert not get_op(op).differentiable
    assert get_op("dropout").differentiable


# -- errors -------------------------------------------------------------------------------
def test_build_time_errors():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 5), name="x")
        with pytest.raises(ff.AttrError, match=r"random_uniform .*maxval must be given"):
            ff.random_uniform((3,), dtype="int32")
        with pytest.raises(ff.AttrError, match="minval < maxval"):
            ff.random_uniform((3,), 2.0, 1.0)
        with pytest.raises(ff.DTypeError, match="bool"):
            ff.random_uniform((3,), dtype="bool")
        with pytest.raises(ff.ShapeError, match="non-negative ints"):
            ff.random_normal((3, -1))
        with pytest.raises(ff.AttrError, match="stddev"):
            ff.truncated_normal((3,), stddev=-1.0)
        with pytest.raises(ff.DTypeError):
            ff.random_normal((3,), dtype="int32")
        with pytest.raises(ff.ShapeError, match=r"multinomial .*2-D"):
            ff.multinomial(ff.placeholder((2, 3, 4)), 5)
        with pytest.raises(ff.AttrError, match="num_samples"):
            ff.multinomial(x, -1)
        with pytest.raises(ff.AttrError, match=r"dropout .*rate"):
            ff.dropout(x, 1.0)
        with pytest.raises(ff.ShapeError, match="does not broadcast"):
            ff.dropout(x, 0.5, noise_shape=(4, 3))
        with pytest.raises(ff.ShapeError, match="rank"):
            ff.dropout(x, 0.5, noise_shape=(5,))
        with pytest.raises(ff.DTypeError, match="float32"):
            ff.dropout(ff.placeholder((3,), "int32"), 0.5)
