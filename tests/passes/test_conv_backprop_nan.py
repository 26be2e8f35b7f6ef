"""conv_backprop_as_conv (passes/conv_lowering.py) computes a stride-1 conv2d's input
gradient as a convolution of dy, padded, with the flipped filter. Since the conv kernels
multiply padding taps (63e7423: a padded zero times a NaN weight is NaN), a NaN or inf
weight makes that convolution NaN at every position, padding included, while the input
gradient itself (conv2d_backprop_input's reference, torch's autograd: 16 of 108) is NaN
only where that tap's products land. Fixed: the pass marks its conv2d padding_taps
"skip" (the reference and the kernels add nothing for a padding tap there). The numpy
executor runs the same rewritten graph,
so GL is compared with the numpy executor running the graph as built (no passes)."""
import numpy as np
import pytest

import fragflow as ff


@pytest.mark.parametrize("padding", ["VALID", "SAME"])
def test_nan_weight_stays_where_its_products_land(gl, padding):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 6, 6, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 8)).astype(np.float32)
    w[0, 0, 1, 5] = np.nan
    g = ff.Graph()
    with g.as_default():
        xp, wp = ff.placeholder(x.shape, name="x"), ff.placeholder(w.shape, name="w")
        up = ff.placeholder((1, 6, 6, 8) if padding == "SAME" else (1, 4, 4, 8), name="up")
        y = ff.conv2d(xp, wp, padding=padding)
        (dx,) = ff.gradients(ff.reduce_sum(y * up), [xp])
    feeds = {xp: x, wp: w, up: rng.standard_normal(up.shape).astype(np.float32)}
    want = ff.Session(g, backend="numpy", passes=["verify"]).run(dx, feeds)
    assert np.isnan(want).any() and not np.isnan(want).all()
    got = ff.Session(g).run(dx, feeds)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    finite = ~np.isnan(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)
