"""passes/autodiff/autodiff_ops.py and passes/conv_lowering.py, written for the
mutants that `make mutation` found alive (tests/mutation/run.py): a custom gradient
may give None for an input (no gradient there, the others flow), and a stride-1
input gradient rewritten as a conv pads by k - 1 - before on each side, for a 5 x 5
SAME filter too (before = 2), and turns its filter with one gather. The numpy
executor with the default passes against the graph as built (passes=[]), and hand
values."""
import numpy as np

import fragflow as ff
from fragflow.runtime.driver import optimize
from tests.reference import assert_matches, normal, reference_session


def test_a_custom_gradient_of_none_for_one_input():
    @ff.custom_gradient
    def scaled(x, y):
        return x * y, lambda dy: [dy * 2.0, None]

    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3,), name="x")
        y = ff.placeholder((3,), name="y")
        (dx,) = ff.gradients(ff.reduce_sum(scaled(x, y)), [x])
    with reference_session(g) as sess:
        out = sess.run(dx, {x: np.ones(3, np.float32), y: np.full(3, 5.0, np.float32)})
    np.testing.assert_array_equal(out, [2.0, 2.0, 2.0])


def test_the_input_gradient_of_a_5x5_same_conv_after_the_passes():
    rng = np.random.default_rng(5)
    x_value, w_value = normal(rng, 1, 7, 6, 3), normal(rng, 5, 5, 3, 4)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(x_value.shape, name="x")
        w = ff.constant(w_value)
        y = ff.nn.conv2d(x, w, strides=1, padding="SAME")
        (dx,) = ff.gradients(ff.reduce_sum(y * y), [x])
    with reference_session(g) as ref, ff.Session(g, backend="numpy") as rewritten:
        expected, actual = ref.run(dx, {x: x_value}), rewritten.run(dx, {x: x_value})
    assert_matches(actual, expected, rtol=1e-4, scale=np.abs(expected).max())


def test_the_turned_filter_is_one_gather():
    """The default Tuning's conv.backprop_one_gather: a 3x3x8x16 filter (1152 elements,
    under conv.backprop_one_gather_max) is turned by one gather, not a strided_slice and
    a transpose."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 4, 4, 8), name="x")
        w = ff.placeholder((3, 3, 8, 16), name="w")
        y = ff.nn.conv2d(x, w, strides=1, padding="SAME")
        (dx,) = ff.gradients(ff.reduce_sum(y * y), [x])
    ops = {n.op for n in optimize(g, [dx.value], {x.value: x.value.type,
                                                  w.value: w.value.type}).graph.nodes}
    assert "gather" in ops and "transpose" not in ops and "strided_slice" not in ops, ops
