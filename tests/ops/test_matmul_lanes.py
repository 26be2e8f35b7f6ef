"""The one-kernel matmul for output texels that are not 4 columns of one B texel
(codegen/matmul.py lanes_path, templates/matmul_lanes.glsl.j2): N % 4 != 0 (path
"window": a k's 4 lanes read 4 consecutive floats of B's row, wrapped lanes one k
ahead) and B transposed (path "runs": rows and columns as runs along K, any
alignment). On GL against the numpy reference executor: N = 1, 3, 5, 10, 13; K not a
multiple of 4 (runs that start mid-texel, a masked last block) and K = 1; 1-row and
odd M; A transposed; NaN and inf next to the elements that a masked product reads
(B's first and last rows, A's row ends); a fused bias + relu; batched products (the
element loop's) and which kernel each shape takes."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen import matmul
from tests.reference import assert_matches, run_both


def _uses_lanes(kernels):
    return any("shifted(" in k.source for k in kernels)


def _run(a, b, ta, tb, bias=None):
    g = ff.Graph()
    with g.as_default():
        ap, bp = ff.placeholder(a.shape, name="a"), ff.placeholder(b.shape, name="b")
        feeds = {ap: a, bp: b}
        y = ff.matmul(ap, bp, transpose_a=ta, transpose_b=tb)
        if bias is not None:
            cp = ff.placeholder(bias.shape, name="c")
            feeds[cp] = bias
            y = ff.relu(y + cp)
    with ff.Session(g) as sess:
        kernels = sess.compile([y], feeds=list(feeds)).kernels
    out, ref = run_both(g, {"y": y}, feeds)
    finite = np.abs(ref["y"][np.isfinite(ref["y"])])
    scale = np.abs(a).max(initial=0) if np.isfinite(a).all() else 1.0
    assert_matches(out["y"], ref["y"], rtol=1e-5,
                   atol=1e-5 * (1 + finite.max(initial=0)) * (1 + scale))
    return kernels


def _operands(rng, m, n, k, ta, tb):
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(np.float32)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    return a, b


@pytest.mark.parametrize("m", [1, 7, 64])
@pytest.mark.parametrize("n", [3, 5, 10, 13])
@pytest.mark.parametrize("k", [1, 3, 8, 33])
@pytest.mark.parametrize("ta", [False, True])
def test_window_path(gl, m, n, k, ta):
    rng = np.random.default_rng(m * 100 + n * 10 + k + ta)
    a, b = _operands(rng, m, n, k, ta, False)
    kernels = _run(a, b, ta, False)
    assert _uses_lanes(kernels) and [kk.op for kk in kernels] == ["matmul"]


@pytest.mark.parametrize("m", [1, 3, 64])
@pytest.mark.parametrize("n", [3, 5, 10, 13, 32])
@pytest.mark.parametrize("k", [1, 5, 8, 10])
def test_runs_path(gl, m, n, k):
    rng = np.random.default_rng(m * 100 + n * 10 + k)
    a, b = _operands(rng, m, n, k, False, True)
    kernels = _run(a, b, False, True)
    assert _uses_lanes(kernels) and [kk.op for kk in kernels] == ["matmul"]


@pytest.mark.parametrize("ta, tb", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_values_stay_where_they_belong(gl, ta, tb, bad):
    """A wrapped lane reads B's next row and a masked block reads past a run's end:
    NaN / inf there must reach only the outputs the reference gives them to."""
    rng = np.random.default_rng(5)
    m, n, k = 9, 10 if not tb else 13, 10
    a, b = _operands(rng, m, n, k, ta, tb)
    bb = b.T if tb else b                    # [k, n] view
    bb[0, 0] = bad
    bb[k - 1, n - 1] = -bad if bad == np.inf else bad
    aa = a.T if ta else a                    # [m, k] view
    aa[3, k - 1] = bad
    aa[4, 0] = bad
    kernels = _run(a, b, ta, tb)
    assert _uses_lanes(kernels)


@pytest.mark.parametrize("n, tb", [(10, False), (13, True), (5, False)])
def test_fused_bias_and_relu(gl, n, tb):
    rng = np.random.default_rng(n)
    a, b = _operands(rng, 64, n, 32, False, tb)
    bias = rng.standard_normal(n).astype(np.float32)
    kernels = _run(a, b, False, tb, bias)
    assert _uses_lanes(kernels) and [kk.op for kk in kernels] == ["fused_matmul"]


@pytest.mark.parametrize("shape_a, shape_b, ta, tb", [
    ((64, 32), (32, 1), False, False),          # N = 1: the element loop
    ((2, 5, 8), (2, 8, 10), False, False),      # batched: the element loop
    ((5, 8), (2, 10, 8), False, True),          # broadcast batch
    ((8, 5), (10, 8), True, True),              # both transposed
])
def test_other_shapes_keep_the_element_loop(gl, shape_a, shape_b, ta, tb):
    rng = np.random.default_rng(len(shape_a) + shape_b[-1])
    a = rng.standard_normal(shape_a).astype(np.float32)
    b = rng.standard_normal(shape_b).astype(np.float32)
    kernels = _run(a, b, ta, tb)
    assert not _uses_lanes(kernels)


def test_w13_sizes_take_it_below_the_blocked_size(gl):
    assert matmul.lanes_path(False, False, (), 64, 10, 32, *_fake(2)) is not None
    rng = np.random.default_rng(13)
    for m, n, k, ta, tb in [(64, 10, 32, False, False), (64, 32, 10, False, True),
                            (32, 10, 64, True, False)]:
        a, b = _operands(rng, m, n, k, ta, tb)
        assert _uses_lanes(_run(a, b, ta, tb))


def _fake(count):
    class Layout:
        shape, dtype = (2, 2), "float32"

    class Operand:
        layout, dtype = Layout(), "float32"
    return [Operand()] * count + [Operand()]
