"""Column reductions to a small output down a long axis (the tuning's reduce.split_few:
at most few_outputs outputs, at least split_few_length rows) run as two
passes of windows instead of a few fragments walking every row: W13's conv1 bias
gradient, a sum over 4096 rows of 8. On GL against the numpy reference executor: sum,
mean, max, min, prod, argmax / argmin (ties: the first wins), logsumexp; rows that the
window does not divide; 1, 3, 5, 8 and 64 columns; NaN and inf; the gradient op
sum_like; which plans split."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen import reduce_tree
from fragflow.codegen.tuning.reduce import ReduceTuning
from tests.reference import assert_matches, run_both


def _run(build, x, tuning=None):
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(x.shape, x.dtype, name="x")
        y = build(xp)
    with ff.Session(g, tuning=tuning) as sess:
        kernels = sess.compile([y], feeds=[xp]).kernels
    out, ref = run_both(g, {"y": y}, {xp: x}, tuning=tuning)
    scale = float(np.max(np.abs(np.nan_to_num(ref["y"], posinf=0, neginf=0)), initial=0))
    assert_matches(out["y"], ref["y"], rtol=1e-4, atol=1e-4 * (1 + scale))
    return kernels


@pytest.mark.parametrize("rows, cols", [(4096, 8), (2048, 1 * 3), (3001, 5), (2500, 64),
                                        (2049, 8)])
@pytest.mark.parametrize("op", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min",
                                "reduce_logsumexp"])
def test_column_reductions_in_two_passes(gl, rows, cols, op):
    rng = np.random.default_rng(rows + cols)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    x[rows // 3, 0] = np.nan
    if cols > 1:
        x[rows - 1, 1] = np.inf
    kernels = _run(lambda xp: getattr(ff, op)(xp, axis=0), x)
    assert len(kernels) >= 2, [k.op for k in kernels]


def test_product(gl):
    rng = np.random.default_rng(3)
    x = rng.uniform(0.999, 1.001, (4096, 8)).astype(np.float32)
    _run(lambda xp: ff.reduce_prod(xp, axis=0), x)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_first_of_ties_across_windows(gl, op):
    x = np.zeros((4096, 8), np.float32)
    x[100, 0] = x[3000, 0] = 5 if op == "argmax" else -5       # tie: 100 wins
    x[4095, 1] = 7 if op == "argmax" else -7
    x[70, 2] = np.nan                                           # NaN counts as extreme
    x[64, 3] = x[63, 3] = 1 if op == "argmax" else -1           # either side of a window
    _run(lambda xp: getattr(ff, op)(xp, axis=0), x)


def test_bias_gradient_sum_like(gl):
    """W13's conv1 bias gradient: sum_like of a (64, 8, 8, 8) gradient to (8,)."""
    rng = np.random.default_rng(13)
    dy = rng.standard_normal((64, 8, 8, 8)).astype(np.float32)
    dy[5, 3, 2, 7] = np.nan

    def build(dyp):
        b = ff.constant(np.zeros(8, np.float32))
        x = ff.constant(np.ones((64, 8, 8, 8), np.float32))
        return ff.gradients([x + b], [b], grad_ys=[dyp])[0]
    kernels = _run(build, dy)
    assert len(kernels) == 2, [k.op for k in kernels]


@pytest.mark.parametrize("rows, cols, splits", [(4096, 8, True), (1024, 8, False),
                                                (4096, 1, False), (4096, 128, False)])
def test_which_plans_split(rows, cols, splits):
    window = ReduceTuning().split_few_window
    assert (reduce_tree.choose_window(1, rows, cols) == window) == splits


def test_off_keeps_one_pass(gl):
    off = ff.Tuning().with_({"reduce.split_few": False})
    x = np.random.default_rng(1).standard_normal((4096, 8)).astype(np.float32)
    assert len(_run(lambda xp: ff.reduce_sum(xp, axis=0), x, off)) == 1
