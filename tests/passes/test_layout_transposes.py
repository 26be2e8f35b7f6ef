"""passes/layout_transposes.py: transposes cancel, merge, become reshapes, and move below
elementwise ops, reductions and concats -- the results unchanged (GL with the pass
against the numpy executor without it), kernels never added."""
import numpy as np
import pytest

import fragflow as ff

pytestmark = pytest.mark.usefixtures("gl")
rng = np.random.default_rng(11)
NCHW, NHWC = (0, 3, 1, 2), (0, 2, 3, 1)
WITHOUT = ["fold_constants", "cse", "simplify", "verify"]


def randn(*shape):
    a = rng.standard_normal(shape).astype(np.float32)
    a.reshape(-1)[0] = 0.0
    return a


def compare(g, fetches, feeds):
    """GL with the default pipeline equals numpy without the pass; returns the kernels'
    ops and the pass's report."""
    expected = ff.Session(g, backend="numpy", disable_passes=("layout_transposes",)) \
        .run(fetches, feeds)
    fn = ff.Session(g).compile(fetches, feeds=list(feeds))
    got = fn(*feeds.values())
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    return [k.op for k in fn.kernels], fn.fusion_report


def test_a_transpose_pair_around_elementwise_ops_cancels():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 5, 6, 3), name="x")
        bias = ff.constant(randn(3, 1, 1))              # NCHW per-channel constant
        h = ff.relu(ff.transpose(x, NCHW) * 2.0 + bias)
        y = ff.transpose(h, NHWC)
    ops, report = compare(g, [y], {x: randn(2, 5, 6, 3)})
    assert "transpose" not in ops
    assert any("cancelled transposes" in line for line in report)


def test_a_per_channel_tensor_is_reshaped_not_transposed():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 4, 4, 3), name="x")
        scale = ff.placeholder((3,), name="scale")
        h = ff.transpose(x, NCHW) * ff.reshape(scale, (3, 1, 1))
        y = ff.transpose(ff.sigmoid(h), NHWC)
    ops, _ = compare(g, [y], {x: randn(2, 4, 4, 3), scale: randn(3)})
    assert "transpose" not in ops


def test_a_transpose_moving_only_unit_axes_is_a_reshape():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 1, 1, 7), name="x")
        y = ff.transpose(x, NCHW) + 1.0                 # (2, 7, 1, 1): no data moves
    ops, report = compare(g, [y], {x: randn(2, 1, 1, 7)})
    assert "transpose" not in ops
    assert any("a reshape" in line for line in report)


@pytest.mark.parametrize("keepdims", [True, False])
def test_reductions_read_below_the_transpose(keepdims):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 5, 6, 3), name="x")
        m = ff.reduce_mean(ff.transpose(x, NCHW), axis=(2, 3), keepdims=keepdims)
        s = ff.reduce_sum(ff.transpose(x, NCHW), axis=1, keepdims=keepdims)
    ops, _ = compare(g, [m, s], {x: randn(2, 5, 6, 3)})
    assert ops.count("transpose") <= (0 if keepdims else 1), ops


def test_concat_of_transposed_inputs_concatenates_below():
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder((2, 4, 4, 3), name="a")
        b = ff.placeholder((2, 4, 4, 5), name="b")
        c = ff.concat([ff.transpose(a, NCHW), ff.transpose(b, NCHW)], axis=1)
        y = ff.transpose(ff.relu(c), NHWC)
    ops, _ = compare(g, [y], {a: randn(2, 4, 4, 3), b: randn(2, 4, 4, 5)})
    assert "transpose" not in ops


def test_a_transpose_also_read_elsewhere_stays_and_adds_no_kernel():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 4, 4, 3), name="x")
        t = ff.transpose(x, NCHW)
        y = ff.relu(t)
        z = ff.reshape(t, (2, -1))                      # a reader the pass cannot move
    ops, _ = compare(g, [y, z], {x: randn(2, 4, 4, 3)})
    assert ops.count("transpose") == 1, ops


def test_a_fetched_transpose_is_kept():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 3, 4), name="x")
        t = ff.transpose(x, (2, 0, 1))
        y = ff.exp(t)
    ops, _ = compare(g, [t, y], {x: randn(2, 3, 4)})
    assert ops.count("transpose") == 1, ops


def test_the_pass_stops_after_16_rounds(monkeypatch):
    """A round that rewrites something is followed by another; the pass stops after 16
    (its compile time is bounded whatever the graph). A round that always rewrites
    runs exactly 16 times."""
    from fragflow.passes import layout_transposes
    rounds = []

    def busy_round(graph, report):
        rounds.append(1)
        report.append("rewrote something")
        return graph
    monkeypatch.setattr(layout_transposes, "_one_round", busy_round)
    g = ff.Graph()
    layout_transposes.remove_layout_transposes(g, [])
    assert len(rounds) == 16


@pytest.mark.parametrize("op", ["pad", "mirror_pad"])
def test_a_pad_between_layout_transposes_pads_below_and_folds(op):
    """An ONNX model's NCHW pad between two convolutions (nanodet): the transpose moves
    below the pad (its paddings permuted), the pair cancels, and a zero pad folds into
    the next convolution's padding."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 5, 6, 3), name="x")
        h = ff.transpose(ff.nn.leaky_relu(x, 0.1), NCHW)             # NCHW
        paddings = [[0, 0], [0, 0], [1, 2], [2, 1]]
        p = ff.pad(h, paddings) if op == "pad" else \
            ff.pad(h, paddings, mode="REFLECT")
        w = ff.constant(randn(3, 3, 3, 4))
        y = ff.nn.conv2d(ff.transpose(p, NHWC), w, strides=1, padding="VALID")
    x_value = randn(2, 5, 6, 3)
    x_value[0, 1, 2, 0], x_value[1, 0, 0, 2] = np.nan, -np.inf
    ops, report = compare(g, [y], {x: x_value})
    assert "transpose" not in ops, ops
    assert any(f"below {op}" in line for line in report), report
    if op == "pad":
        assert "pad" not in ops, ops                    # folded into the conv's padding
