"""The loss family (ir/ops/loss.py): sparse_softmax_cross_entropy and
sparse_softmax_cross_entropy_grad on GL against the numpy executor, and the numpy
references against float64 formulas written here, on awkward shapes and edge values.
Both kernel paths run: short rows walked by each fragment, and rows long enough that
their max and sum come from reduction passes first (codegen/loss.py)."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as ff
from fragflow.frontend.tensor import wrap
from fragflow.ir.ops.loss import sparse_softmax_cross_entropy_grad
from tests.reference import assert_matches, run_both

inf, nan = np.inf, np.nan


def expected(logits, labels, dy):
    """(loss, gradient) in float64: logsumexp - picked and (softmax - one_hot) * dy,
    NaN in rows holding NaN or +inf, or only -inf, or with a label out of range."""
    x = logits.astype(np.float64)
    classes = x.shape[-1]
    loss = np.full(labels.shape, nan)
    grad = np.full(x.shape, nan)
    for index in np.ndindex(labels.shape):
        row, label = x[index], int(labels[index])
        if (not 0 <= label < classes or np.isnan(row).any() or np.isposinf(row).any()
                or np.isneginf(row).all()):
            continue
        top = row.max()
        e = np.exp(row - top)
        loss[index] = np.log(e.sum()) + top - row[label]
        one_hot = np.arange(classes) == label
        grad[index] = (e / e.sum() - one_hot) * dy[index]
    return loss, grad


def with_edges(rng, shape, classes):
    """Logits and labels with every edge the rows can have, where there are rows."""
    logits = (rng.standard_normal(shape + (classes,)) * 3).astype(np.float32)
    labels = rng.integers(0, classes, shape).astype(np.int32)
    flat_x, flat_y = logits.reshape(-1, classes), labels.reshape(-1)
    edges = [
        lambda r: r.__setitem__(slice(None), np.resize(np.float32([1e4, -1e4, 0, 3]),
                                                       classes)),      # huge spread
        lambda r: r.__setitem__(0, nan),                       # NaN: row NaN
        lambda r: r.__setitem__(classes - 1, inf),             # +inf: row NaN
        lambda r: r.__setitem__(slice(None), -inf),            # only -inf: row NaN
        lambda r: r.__setitem__(slice(None), 0.0),             # zeros (ties)
    ]
    for row, edit in zip(flat_x, edges):
        edit(row)
    n = len(flat_y)
    if n > 5 and classes > 1:
        flat_x[5, (flat_y[5] + 1) % classes] = -inf         # another class's -inf: harmless
    if n > 6:
        flat_x[6, flat_y[6]] = -inf                         # the label's class -inf: +inf loss
    if n > 7:
        flat_y[7] = classes                                 # out of range: NaN
    if n > 8:
        flat_y[8] = -1
    return logits, labels


@pytest.mark.parametrize("shape, classes", [
    ((64,), 10),          # W13's logits
    ((9,), 5),            # classes not a multiple of 4, rows not either
    ((11,), 3),           # fewer classes than a texel: up to four rows per texel
    ((13,), 1),           # one class
    ((1,), 7),            # batch 1
    ((), 6),              # one example, labels a scalar
    ((3, 5), 4),          # labels of rank 2
    ((37,), 130),         # long rows: max and sum by reduction passes first
    ((300,), 33),         # many rows: the same
])
def test_loss_and_its_gradient_match_the_reference(gl, shape, classes):
    rng = np.random.default_rng(classes * 100 + len(shape))
    logits, labels = with_edges(rng, shape, classes)
    dy = rng.uniform(-2, 2, shape).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        z = ff.placeholder(logits.shape, name="logits")
        y = ff.placeholder(labels.shape, "int32", name="labels")
        d = ff.placeholder(dy.shape, name="dy")
        loss = ff.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z)
        grad = wrap(sparse_softmax_cross_entropy_grad(z.value, y.value, d.value))
    out, ref = run_both(g, [loss, grad], {z: logits, y: labels, d: dy})
    want_loss, want_grad = expected(logits, labels, dy)
    # the numpy references against the formulas, GL against the numpy references
    assert_matches(ref[0], want_loss.astype(np.float32), rtol=1e-5, what="loss reference")
    assert_matches(ref[1], want_grad.astype(np.float32), rtol=1e-5, atol=1e-6,
                   what="gradient reference")
    assert_matches(out[0], ref[0], rtol=1e-5, what="loss on GL")
    assert_matches(out[1], ref[1], rtol=1e-5, atol=1e-6, what="gradient on GL")
    if labels.size > 6 and classes > 1:           # the edges are there
        flat = out[0].reshape(-1)
        assert np.isposinf(flat[6]) and np.isnan(flat[1:4]).all()


def test_training_graph_runs_the_loss_as_two_kernels(gl):
    """The loss and its gradient are a kernel each (the composite they replace took 13)."""
    rng = np.random.default_rng(1)
    g = ff.Graph()
    with g.as_default():
        z = ff.Variable(rng.standard_normal((64, 10)).astype(np.float32), name="z")
        y = ff.placeholder((64,), "int32", name="y")
        loss = ff.reduce_mean(ff.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z))
        (dz,) = ff.gradients(loss, [z])
    labels = rng.integers(0, 10, 64).astype(np.int32)
    fn = ff.Session(g).compile([loss, dz], feeds=[y])
    out = fn(labels)
    ops = [k.op for k in fn.kernels]
    assert ops.count("sparse_softmax_cross_entropy") == 1, ops
    assert ops.count("sparse_softmax_cross_entropy_grad") == 1, ops
    ref = ff.Session(g, backend="numpy", passes=[]).run([loss, dz], {y: labels})
    assert_matches(out[0], ref[0], rtol=1e-5)
    assert_matches(out[1], ref[1], rtol=1e-5, atol=1e-7)


def test_bad_inputs_name_the_op():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 3), name="x")
        yi = ff.placeholder((4,), "int32", name="yi")
        with pytest.raises(ff.ShapeError, match="dy must be float32"):
            sparse_softmax_cross_entropy_grad(x.value, yi.value, x.value)
        with pytest.raises(ff.DTypeError, match="int32 class indices"):
            ff.sparse_softmax_cross_entropy_with_logits(labels=x, logits=x)
        with pytest.raises(ff.ShapeError, match="must be known"):
            ff.sparse_softmax_cross_entropy_with_logits(
                labels=yi, logits=ff.placeholder((4, None), name="open"))


def test_gradient_op_refuses_a_dy_of_another_shape():
    """dy is one number per example: a dy of the labels' rank but another shape (here one
    element, which numpy's reference would broadcast) was accepted, and the GL kernel
    read past its end (rows 1..5 got dy = 0). Unknown dimensions still pass."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((6, 5), name="x")
        yi = ff.placeholder((6,), "int32", name="yi")
        with pytest.raises(ff.ShapeError, match=r"dy must be float32 of the labels' shape"):
            sparse_softmax_cross_entropy_grad(x.value, yi.value,
                                              ff.placeholder((1,), name="one").value)
        with pytest.raises(ff.ShapeError, match=r"dy must be float32 of the labels' shape"):
            sparse_softmax_cross_entropy_grad(x.value, yi.value,
                                              ff.placeholder((7,), name="seven").value)
        open_dy = ff.placeholder((None,), name="open_dy")
        grad = sparse_softmax_cross_entropy_grad(x.value, yi.value, open_dy.value)
    assert grad.type.shape == (6, 5)
