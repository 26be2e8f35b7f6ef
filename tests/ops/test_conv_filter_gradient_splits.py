"""The blocked conv2d filter gradient (codegen/conv.py conv.filter_blocked,
templates/conv_filter_blocked.glsl.j2) splitting its sum among fragments: by images,
and where one image a split still leaves few fragments (a small filter: W13's conv1,
64x8x8x1 -> 3x3x1x8), by output rows as well (Tuning.conv.split_rows); the stitch adds the splits.
On GL against the numpy reference executor: output heights that the row parts do not
divide, strides, C % 4 == 0 and not, batches of 1 and more, NaN in dy; which split
each takes."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, run_both

BLOCKED = ff.Tuning().with_({"matmul.blocked_min_macs": 1})


def _filter_gradient(x_shape, w_shape, strides, padding, nan=False, tuning=BLOCKED):
    rng = np.random.default_rng(sum(x_shape) + sum(w_shape) + strides)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        xp, wp = ff.placeholder(x_shape, name="x"), ff.placeholder(w_shape, name="w")
        y = ff.conv2d(xp, wp, strides=strides, padding=padding)
        dy = rng.standard_normal(tuple(y.shape)).astype(np.float32)
        if nan:
            dy[-1, -1, 0, 0] = np.nan
        dyp = ff.placeholder(dy.shape, name="dy")
        dw = ff.gradients([y], [wp], grad_ys=[dyp])[0]
    feeds = {xp: x, wp: w, dyp: dy}
    with ff.Session(g, tuning=tuning) as sess:
        kernels = sess.compile([dw], feeds=list(feeds)).kernels
    out, ref = run_both(g, {"dw": dw}, feeds, tuning=tuning)
    scale = float(np.max(np.abs(np.nan_to_num(ref["dw"])), initial=0.0))
    assert_matches(out["dw"], ref["dw"], rtol=1e-4, atol=1e-4 * (1 + scale))
    return kernels


@pytest.mark.parametrize("x_shape, w_shape, strides, padding", [
    ((64, 8, 8, 1), (3, 3, 1, 8), 1, "SAME"),      # W13's conv1
    ((8, 7, 5, 1), (3, 3, 1, 8), 1, "SAME"),       # 7 rows: parts that do not divide
    ((5, 9, 6, 3), (3, 2, 3, 5), 2, "SAME"),       # stride 2, C and COUT % 4 != 0
    ((3, 11, 4, 4), (2, 3, 4, 4), 1, "VALID"),     # C % 4 == 0 (texels of x)
    ((1, 13, 3, 2), (3, 3, 2, 4), 1, ((1, 2), (0, 1))),
])
def test_row_splits_match_numpy(gl, x_shape, w_shape, strides, padding):
    kernels = _filter_gradient(x_shape, w_shape, strides, padding, nan=True)
    assert [k.op for k in kernels] == ["conv2d_backprop_filter",
                                       "conv2d_backprop_filter_stitch"]
    assert "rsplit" in kernels[0].source, "expected a split by output rows"


def test_without_row_splits_the_same(gl):
    kernels = _filter_gradient((8, 7, 5, 1), (3, 3, 1, 8), 1, "SAME",
                               tuning=BLOCKED.with_({"conv.split_rows": False}))
    assert "rsplit" not in kernels[0].source


def test_a_big_filter_splits_images_only(gl):
    kernels = _filter_gradient((16, 6, 6, 16), (3, 3, 16, 32), 1, "SAME")
    assert "rsplit" not in kernels[0].source
