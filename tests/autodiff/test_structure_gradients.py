"""Gradients of the structure family on GL against float64 central finite differences.

Every op here is linear in its data, so each is checked as square(op(x)): the first
order runs the op's rule (concat -> slices, pad -> slice, mirror_pad ->
mirror_pad_grad, tile -> reshape + sum, reverse -> reverse, broadcast_to -> sum_like,
gather -> gather_grad, gather_nd -> gather_nd_grad, unsorted_segment_sum -> gather),
and the second order differentiates those adjoint ops again (mirror_pad_grad ->
mirror_pad, gather_grad -> gather, gather_nd_grad -> gather_nd). The adjoint ops are
also checked directly as functions of their first input.
"""
import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.ops import structure as st
from tests.gradcheck import check_gradients

rng = np.random.default_rng(3)


def normal(*shape):
    return rng.standard_normal(shape).astype(np.float32)


IDX = np.array([[0, 4, -1], [6, 2, 2]], np.int32)      # repeats and out-of-range indices

LINEAR = {
    "concat": (lambda x: ff.concat([x, x[:, :1] * 2.0, x], axis=-1), (3, 4)),
    "stack": (lambda x: ff.stack([x, x * 3.0], axis=1), (3, 4)),
    "unstack": (lambda x: ff.unstack(x, axis=1)[2] * 2.0 + ff.unstack(x, axis=1)[0], (3, 4)),
    "split": (lambda x: ff.concat(ff.split(x, [1, -1, 2], axis=1)[::-1], axis=1), (3, 5)),
    "slice": (lambda x: ff.slice(x, [1, 1], [-1, 2]), (3, 5)),
    "strided_slice": (lambda x: ff.strided_slice(x, [2, 4], [0, 0], [-1, -2],
                                                  end_mask=0b10), (3, 5)),
    "pad": (lambda x: ff.pad(x, [[1, 2], [0, 3]], constant_values=1.5), (3, 4)),
    "mirror_pad REFLECT": (lambda x: ff.mirror_pad(x, [[2, 1], [0, 3]], "REFLECT"), (3, 4)),
    "mirror_pad SYMMETRIC": (lambda x: ff.pad(x, [[3, 1], [2, 4]], mode="SYMMETRIC"), (3, 4)),
    "tile": (lambda x: ff.tile(x, [2, 1, 3]), (2, 3, 2)),
    "reverse": (lambda x: ff.reverse(x, [0, -1]), (3, 4)),
    "broadcast_to": (lambda x: ff.broadcast_to(x, (2, 3, 4)), (3, 1)),
    "gather": (lambda x: ff.gather(x, IDX, axis=1), (2, 5, 2)),
    "gather batch_dims": (lambda x: ff.gather(x, [[0, 0, 2], [3, -1, 1]], axis=1,
                                              batch_dims=1), (2, 4, 3)),
    "gather_nd": (lambda x: ff.gather_nd(x, [[0, 1], [2, 3], [0, 1], [5, 0]]), (3, 4, 2)),
    "unsorted_segment_sum": (lambda x: ff.unsorted_segment_sum(x, [[1, 0], [1, 7], [3, 1]], 4),
                             (3, 2, 2)),
    "space_to_batch_nd": (lambda x: ff.space_to_batch_nd(x, [2, 2], [[1, 0], [0, 1]]),
                          (1, 3, 3, 2)),
    "batch_to_space_nd": (lambda x: ff.batch_to_space_nd(x, [2], [[1, 2]]), (4, 3, 2)),
}


@pytest.mark.parametrize("op", sorted(LINEAR))
def test_linear_op_gradient_first_and_second_order(op, gl):
    fn, shape = LINEAR[op]
    check_gradients(lambda x: ff.square(fn(x)), {"x": normal(*shape)}, second_order=True)


def test_concat_gradient_reaches_each_input(gl):
    check_gradients(lambda a, b: ff.square(ff.concat([b, a, b], axis=0)),
                    {"a": normal(2, 3), "b": normal(1, 3)}, second_order=True)


def test_top_k_values_gradient_goes_to_the_chosen_indices(gl):
    x = rng.permutation(24).reshape(3, 8).astype(np.float32) * 0.5   # no near-ties
    check_gradients(lambda x: ff.square(ff.top_k(x, 3).values), {"x": x}, second_order=True)


ADJOINTS = {
    "gather_grad": (lambda dy: ff.Tensor(st.gather_grad(
        dy.value, ff.constant(IDX).value, ff.zeros((2, 5, 2)).value, axis=1)), (2, 2, 3, 2)),
    "gather_nd_grad": (lambda dy: ff.Tensor(st.gather_nd_grad(
        dy.value, ff.constant([[0, 1], [2, 3], [0, 1], [5, 0]]).value,
        ff.zeros((3, 4, 2)).value)), (4, 2)),
    "mirror_pad_grad": (lambda dy: ff.Tensor(st.mirror_pad_grad(
        dy.value, [[2, 1], [3, 2]], "SYMMETRIC")), (6, 9)),
}


@pytest.mark.parametrize("op", sorted(ADJOINTS))
def test_adjoint_op_gradient_is_the_forward_op(op, gl):
    fn, shape = ADJOINTS[op]
    check_gradients(lambda dy: ff.square(fn(dy)), {"dy": normal(*shape)}, second_order=True)


def test_one_hot_and_top_k_indices_are_not_differentiable(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4,), name="x")
        hot = ff.one_hot(ff.top_k(x, 2).indices, 4)
        dx, = ff.gradients(ff.sum(hot * x), [x])
    with ff.Session(g) as sess:
        got = sess.run(dx, {x: np.array([3.0, 1.0, 4.0, 1.5], np.float32)})
    np.testing.assert_array_equal(got, [1.0, 0.0, 1.0, 0.0])   # only the direct path
