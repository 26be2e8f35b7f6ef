"""ir/ops/conv.py's attribute rules, written for the mutants that `make mutation` found
alive (tests/mutation/run.py): strides given as more ints than TensorFlow's full-rank
form, explicit padding of the batch or channel axis (negative too), padding with the
wrong number of pairs or of entries in a pair, an empty window, and the window
geometry's rank. Each against the message the rule promises."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.ops import conv as conv_op


def _conv(**attrs):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 6, 6, 4), name="x")
        w = ff.placeholder((3, 3, 4, 8), name="w")
        return ff.nn.conv2d(x, w, **attrs)


def test_strides_of_five_ints_are_refused_as_five():
    with pytest.raises(ff.AttrError, match=r"strides \[2, 2, 2, 2, 2\] must be an int, "
                                           r"2 ints or 4 ints"):
        _conv(strides=[2, 2, 2, 2, 2], padding="SAME")
    assert _conv(strides=[1, 2, 2, 1], padding="SAME").shape.as_list() == [1, 3, 3, 8]


@pytest.mark.parametrize("pads", [
    [[-1, 0], [1, 1], [1, 1], [0, 0]],     # the batch axis, negative
    [[0, 0], [1, 1], [1, 1], [0, -1]],     # the channel axis, negative
    [[0, 0], [1, 1], [1, 1], [2, 0]],
])
def test_explicit_padding_of_batch_or_channels_is_refused(pads):
    with pytest.raises(ff.AttrError, match="the batch and channel axes cannot be padded"):
        _conv(strides=1, padding=pads)


@pytest.mark.parametrize("pads", [[[1, 1], [1, 1], [1, 1]], [[1, 1], [1, 1, 1]]])
def test_explicit_padding_needs_one_pair_per_spatial_axis(pads):
    with pytest.raises(ff.AttrError, match=r"explicit padding needs 2 \(before, after\) "
                                           r"pairs \(or 4 in TensorFlow's full-rank form\)"):
        _conv(strides=1, padding=pads)


def test_explicit_padding_pads_each_side():
    y = _conv(strides=1, padding=[[0, 0], [1, 0], [2, 3], [0, 0]])
    assert y.shape.as_list() == [1, 5, 9, 8]   # 6 + 1 - 2, 6 + 5 - 2


def test_an_empty_window_is_refused():
    with pytest.raises(ff.ShapeError, match="has an empty dimension"):
        conv_op.window((5, 5), (0, 3), (1, 1), (1, 1), "VALID")


def test_window_geometry():
    w = conv_op.window((5, 6), (3, 2), (2, 1), (1, 1), "VALID")
    assert w.d == 2 and w.out_size == (2, 5) and w.pads == ((0, 0), (0, 0))
    w3 = conv_op.window((4, 4, 4), (1, 1, 1), (1, 1, 1), (1, 1, 1), "SAME")
    assert w3.d == 3 and w3.out_size == (4, 4, 4)
    assert np.array_equal(w3.pads, ((0, 0),) * 3)
