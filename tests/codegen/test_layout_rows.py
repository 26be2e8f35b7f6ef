"""Texture rows (codegen/layout.py): square power-of-two rows of at least
MIN_ROW_TEXELS texels, at most ROW_TEXELS, so that small tensors are several rows tall
(llvmpipe shades 4x4 pixel blocks) and big ones keep their 2048-texel rows; the layout
depends only on the element count. GL results on sizes around the thresholds against
numpy."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.codegen import layout
from fragflow.ir.types import TensorType
from tests.reference import assert_matches, run_both

MAX = 16384


@pytest.mark.parametrize("size", [1, 3, 4, 5, 4 * 127, 4 * 128, 4 * 128 + 1, 4 * 512 + 3,
                                  4 * 2304, 32768, 4 * 16385, 1 << 22, (1 << 22) + 4,
                                  1 << 26, 3 << 26])
def test_rows_are_square_within_bounds(size):
    lay = layout.layout_for(TensorType((size,), "float32"), MAX)
    texels = -(-size // 4)
    assert lay.width * lay.height >= texels > lay.width * (lay.height - 1)   # no empty row
    if -(-texels // layout.ROW_TEXELS) <= MAX:       # else rows as long as the GPU's
        assert lay.width <= layout.ROW_TEXELS
    if texels >= 4 * layout.MIN_ROW_TEXELS:
        assert lay.height >= 4, "a small tensor one or two rows tall idles llvmpipe's lanes"
    if texels > layout.MIN_ROW_TEXELS:
        assert lay.width >= layout.MIN_ROW_TEXELS
    if layout.MIN_ROW_TEXELS < texels <= layout.ROW_TEXELS ** 2:
        assert lay.width == lay.width & -lay.width, "a power of two"
        assert lay.height <= lay.width
    # the layout depends only on the element count (reshapes are free)
    other = layout.layout_for(TensorType((1, size, 1), "int32"), MAX)
    assert (other.width, other.height) == (lay.width, lay.height)


@pytest.mark.parametrize("shape", [(127, 4), (129, 4), (3, 5, 41), (64, 4, 4, 16),
                                   (257, 255), (1, 2049, 9)])
def test_kernels_across_row_widths(gl, shape):
    """Elementwise, reshape, transpose, a reduction and a pool over tensors whose rows
    change width between producer and consumer."""
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[-1] = np.nan
    g = ff.Graph()
    with g.as_default():
        xp = ff.placeholder(shape, name="x")
        flat = ff.reshape(xp * 2.0 + 1.0, (-1,))
        fetches = {"chain": ff.relu(xp * xp - 1.0),
                   "reshape": ff.reshape(flat[:-1], (x.size - 1, 1)),
                   "transpose": ff.transpose(xp),
                   "sum": ff.reduce_sum(xp, axis=-1)}
        if len(shape) == 4:
            fetches["pool"] = ff.max_pool(xp, 2, 2, "VALID")
    out, ref = run_both(g, fetches, {xp: x})
    for label in fetches:
        assert_matches(out[label], ref[label], rtol=1e-5, atol=1e-5, what=label)
