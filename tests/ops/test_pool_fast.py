"""Pools and their gradients four channels at a time (codegen/pool.py,
templates/pool_vec4.glsl.j2: C % 4 == 0, a texel of 4 channels per fragment, windows
unrolled, border checks only where a window can leave the image, input gradients
visiting only the windows that hold their pixel) on GL against the numpy reference
executor, on awkward shapes: VALID / SAME / explicit padding, strides 1-3 (overlapping
and gapped windows), non-square windows, 1-pixel images, 3-D pools, ties, NaN, inf and
windows of -inf only; the C % 4 != 0 shapes that take the generic path beside them;
gradients against finite differences."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen import pool as pool_codegen
from fragflow.frontend.tensor import wrap
from fragflow.ir.ops import conv as _conv
from tests.gradcheck import check_gradients
from tests.reference import assert_matches, run_both

CASES = [
    # (x shape, ksize, strides, padding)
    ((64, 8, 8, 8), 2, 2, "VALID"),            # W13's pool: tiles
    ((2, 9, 7, 8), 3, 2, "SAME"),              # overlapping windows, padding both ends
    ((3, 7, 6, 12), 3, 1, "SAME"),
    ((2, 10, 9, 4), 2, 3, "VALID"),            # gaps between windows: pixels in none
    ((1, 5, 6, 4), (2, 3), (1, 2), "VALID"),   # non-square window and strides
    ((2, 6, 7, 4), 3, 2, [(1, 1), (0, 2)]),    # explicit padding
    ((1, 1, 1, 8), 1, 1, "VALID"),             # a 1-pixel image
    ((1, 1, 3, 4), 3, 1, "SAME"),              # windows mostly padding
    ((2, 5, 5, 3), 3, 2, "SAME"),              # C % 4 != 0: templates/pool_lanes
    ((1, 4, 6, 6), 2, 2, "VALID"),             # C % 4 != 0
    ((2, 7, 5, 1), (3, 2), (2, 1), [(1, 1), (0, 1)]),    # C = 1, explicit padding
]


def _ids(case):
    shape, k, s, p = case
    return f"{'x'.join(map(str, shape))}-k{k}-s{s}-{p}".replace(" ", "")


@pytest.fixture
def vec4_spy(monkeypatch):
    """The ops of the pool kernels codegen/pool.py made, a kernel each."""
    taken = []
    original = pool_codegen.kernels

    def spy(*args, **kwargs):
        kernels = original(*args, **kwargs)
        if kernels is not None:
            taken.extend(k.op for k in (kernels if isinstance(kernels, list) else [kernels]))
        return kernels
    monkeypatch.setattr(pool_codegen, "kernels", spy)
    return taken


def awkward_image(shape, seed):
    """Rounded values (many ties), NaN in neighbouring pixels, +inf, and a patch of
    -inf."""
    rng = np.random.default_rng(seed)
    x = (np.round(rng.standard_normal(shape) * 2) / 2).astype(np.float32)
    flat = x.reshape(-1)
    flat[min(5, flat.size - 1)] = np.nan
    if flat.size > 5 + shape[-1]:
        flat[5 + shape[-1]] = np.nan       # two NaN in a window: the first one wins
    if flat.size > 40:
        flat[37] = np.inf
        x[-1, -2:, -2:, :] = -np.inf        # windows of -inf only: the first tap wins
    return x


def _pool_ops(xp, dyp, gp, ksize, strides, padding):
    """Every kind on one image: the pools, their input gradients (dy fed), and
    max/min_pool_grad_grad (g fed, x-shaped)."""
    out = {}
    for op in ("max_pool", "min_pool", "avg_pool"):
        y = _conv.pool(op, xp.value, ksize, strides, padding)
        out[op] = wrap(y)
        if op == "avg_pool":
            out[op + "_grad"] = wrap(_conv.avg_pool_grad(
                "avg_pool_grad", dyp.value, xp.shape[1:-1], ksize, strides, padding))
        else:
            out[op + "_grad"] = wrap(_conv.pool_grad(
                op + "_grad", xp.value, y, dyp.value, ksize, strides, padding))
            out[op + "_grad_grad"] = wrap(_conv.pool_grad(
                op + "_grad_grad", xp.value, y, gp.value, ksize, strides, padding))
    return out


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_pools_and_gradients_match_numpy(gl, vec4_spy, case):
    shape, ksize, strides, padding = case
    x = awkward_image(shape, seed=sum(shape))
    win = _conv.pool_window(shape, {"ksize": ksize, "strides": strides,
                                    "padding": padding}, 2)
    rng = np.random.default_rng(1)
    dy = rng.standard_normal((shape[0],) + win.out_size + (shape[-1],)).astype(np.float32)
    dy.reshape(-1)[-1] = np.nan          # NaN in dy reaches only the element it routes to
    gx = rng.standard_normal(shape).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        xp, dyp, gp = (ff.placeholder(a.shape, name=n) for a, n in
                       ((x, "x"), (dy, "dy"), (gx, "g")))
        fetches = _pool_ops(xp, dyp, gp, ksize, strides, padding)
    out, ref = run_both(g, fetches, {xp: x, dyp: dy, gp: gx})
    for label in fetches:
        assert_matches(out[label], ref[label], rtol=1e-5, atol=1e-6, what=label)
    if shape[-1] % 4 == 0:
        assert len(set(vec4_spy)) == 8, vec4_spy
        # overlapping windows: a max/min gradient finds the argmaxes first, then routes
        overlap = any(s < k for s, k in zip(np.broadcast_to(strides, 2),
                                            np.broadcast_to(ksize, 2)))
        assert vec4_spy.count("max_pool_grad") == (2 if overlap else 1), vec4_spy
    else:       # four elements a fragment: only the max/min gradients, in two kernels
        assert sorted(vec4_spy) == ["max_pool_grad"] * 2 + ["min_pool_grad"] * 2


def test_pool3d_four_channels_at_a_time(gl, vec4_spy):
    shape = (2, 4, 5, 6, 8)
    x = awkward_image(shape, seed=3)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(shape, name="x")
        fetches = {}
        for k, s, p in ((2, 2, "SAME"), (3, (1, 2, 2), "SAME"), (2, 1, "VALID")):
            label = f"k{k} s{s} {p}"
            m = ff.max_pool3d(xp, ksize=k, strides=s, padding=p)
            a = ff.avg_pool3d(xp, ksize=k, strides=s, padding=p)
            fetches[f"max {label}"], fetches[f"avg {label}"] = m, a
            fetches[f"max grad {label}"] = ff.gradients(ff.sum(m * ff.sin(m)), [xp])[0]
            fetches[f"avg grad {label}"] = ff.gradients(ff.sum(a * a), [xp])[0]
    out, ref = run_both(g, fetches, {xp: x})
    for label in fetches:
        assert_matches(out[label], ref[label], rtol=1e-5, atol=1e-6, what=label)
    assert {"max_pool3d", "avg_pool3d", "max_pool3d_grad", "avg_pool3d_grad"} <= \
        set(vec4_spy)


@pytest.mark.parametrize("pool, ksize, strides, padding, channels", [
    ("max_pool", 2, 2, "VALID", 8),
    ("max_pool", 3, 2, "SAME", 8),
    ("avg_pool", 3, 2, "SAME", 8),
    ("min_pool", (2, 3), 1, "SAME", 8),
    ("max_pool", 3, 2, "SAME", 3),
])
def test_pool_gradients_against_finite_differences(gl, vec4_spy, pool, ksize, strides,
                                                   padding, channels):
    # distinct values 0.1 apart: finite differences never cross a tie
    rng = np.random.default_rng(7)
    x = (rng.permutation(2 * 5 * 6 * channels) * 0.1).reshape(2, 5, 6, channels) \
        .astype(np.float32)
    def build(xp):          # squared, so that no gradient is a constant (folded)
        y = getattr(ff, pool)(xp, ksize, strides, padding)
        return y * y
    check_gradients(build, {"x": x}, second_order=True)
    assert vec4_spy, "codegen/pool.py made no kernel"


def test_big_windows_take_the_generic_path(gl, vec4_spy):
    """Windows past pool_max_taps would make long unrolled shaders: the generic kernel."""
    x = np.random.default_rng(0).standard_normal((1, 9, 9, 4)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, name="x")
        y = ff.max_pool(xp, 9, 1, "SAME")
        (dx,) = ff.gradients(ff.sum(y * y), [xp])
    out, ref = run_both(g, {"y": y, "dx": dx}, {xp: x})
    for label in out:
        assert_matches(out[label], ref[label], rtol=1e-5, what=label)
    assert vec4_spy == []
