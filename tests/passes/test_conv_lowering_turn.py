"""passes/conv_lowering.py turns the filter of a stride-1 input gradient (spatially
reversed, in and out channels swapped) as one gather of the flat filter at constant
indices (the Tuning's conv.backprop_one_gather), or as strided_slice + transpose (off,
for filters over conv.backprop_one_gather_max elements, and for a PassManager given no
Tuning). GL against the numpy executor on the graph as built (conv2d_backprop_input's
reference): non-square filters, C != COUT, batches, explicit padding, NaN in dy; which
kernels run."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.passes import PassManager, prune
from tests.reference import assert_matches


@pytest.mark.parametrize("one_gather", [True, False])
@pytest.mark.parametrize("x_shape, w_shape, padding", [
    ((2, 6, 7, 3), (2, 3, 3, 5), "SAME"),
    ((1, 5, 5, 8), (3, 3, 8, 16), "SAME"),
    ((3, 6, 4, 2), (3, 2, 2, 1), ((1, 1), (0, 1))),
    ((2, 5, 6, 4), (1, 1, 4, 7), "VALID"),
])
def test_turned_filter(gl, one_gather, x_shape, w_shape, padding):
    tuning = ff.Tuning().with_({"conv.backprop_one_gather": one_gather})
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape))
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        xp, wp = ff.placeholder(x.shape, name="x"), ff.placeholder(w.shape, name="w")
        y = ff.conv2d(xp, wp, padding=padding)
        up = ff.placeholder(tuple(y.shape), name="up")
        (dx,) = ff.gradients([y], [xp], grad_ys=[up])
    dy = rng.standard_normal(tuple(y.shape)).astype(np.float32)
    dy[0, 1, 1, 0] = np.nan
    feeds = {xp: x, wp: w, up: dy}
    want = ff.Session(g, backend="numpy", passes=["verify"]).run(dx, feeds)
    with ff.Session(g, tuning=tuning) as sess:
        ops = [k.op for k in sess.compile([dx], feeds=list(feeds)).kernels]
        got = sess.run(dx, feeds)
    if one_gather:
        assert "gather" in ops and "transpose" not in ops, ops
    else:
        assert "strided_slice" in ops and "transpose" in ops, ops
    assert np.isnan(want).any() and np.isfinite(want).any()
    finite = np.abs(want[np.isfinite(want)])
    assert_matches(got, want, rtol=1e-5, atol=1e-5 * (1 + finite.max(initial=0)))


@pytest.mark.parametrize("most, turned_by, not_by", [(35, "transpose", "gather"),
                                                     (36, "gather", "transpose")])
def test_filters_over_the_most_elements_keep_slice_and_transpose(gl, most, turned_by, not_by):
    g = ff.Graph()
    with g.as_default():
        xp, wp = ff.placeholder((1, 4, 4, 2), name="x"), ff.placeholder((3, 3, 2, 2))
        (dx,) = ff.gradients([ff.conv2d(xp, wp, padding="SAME")], [xp])   # 36 elements
    tuning = ff.Tuning().with_({"conv.backprop_one_gather_max": most})
    with ff.Session(g, tuning=tuning) as sess:
        ops = [k.op for k in sess.compile([dx], feeds=[xp, wp]).kernels]
    assert turned_by in ops and not_by not in ops, ops


def _turn_ops(tuning) -> set:
    """The ops after conv_backprop_as_conv alone, with tuning (None: none given)."""
    g = ff.Graph()
    with g.as_default():
        xp, wp = ff.placeholder((1, 4, 4, 2), name="x"), ff.placeholder((3, 3, 2, 2))
        (dx,) = ff.gradients([ff.conv2d(xp, wp, padding="SAME")], [xp])
    compiled, _ = prune(g, [dx.value], {xp.value: xp.value.type, wp.value: wp.value.type})
    manager = PassManager(passes=["conv_backprop_as_conv"], tuning=tuning)
    return {n.op for n in manager.run(compiled).nodes}


def test_the_pass_reads_the_tuning_it_is_given_and_without_one_gathers_nothing():
    assert "gather" in _turn_ops(ff.Tuning())
    assert "gather" not in _turn_ops(ff.Tuning().with_({"conv.backprop_one_gather": False}))
    assert "gather" not in _turn_ops(ff.Tuning.named("gpu").with_(
        {"conv.backprop_one_gather_max": 35}))
    none = _turn_ops(None)
    assert "gather" not in none and {"strided_slice", "transpose"} <= none
