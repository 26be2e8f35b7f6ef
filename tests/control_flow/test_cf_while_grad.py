"""Gradients through while_loop (passes/autodiff/control.py): the forward loop is
rewritten to also carry its trip count and a stack of its variables, and the backward
is a while_loop of exactly that many steps. Checked against float64 central
differences (numpy executor and GL) and torch's autograd on the awkward cases; spies
count the iterations each loop runs."""
from collections import Counter

import numpy as np
import pytest
import torch

import fragflow as tf
from fragflow.ir.ops import control
from fragflow.passes.autodiff import control as autodiff_control
from fragflow.runtime import control_flow as cf
from tests.gradcheck import check_gradients

RNG = np.random.default_rng(11)
W = RNG.uniform(0.5, 1.2, size=(3,)).astype(np.float32)
H = RNG.uniform(0.2, 1.0, size=(3,)).astype(np.float32)
LIMIT = 40


# each case: build(w, h) for fragflow and the same in torch (float64, Python control)
def _zero_trips(w, h):
    return tf.while_loop(lambda v: tf.reduce_sum(v) < -1.0, lambda v: v * w, h,
                         maximum_iterations=LIMIT) * w


def _zero_trips_t(w, h):
    v = h
    while v.sum() < -1.0:
        v = v * w
    return v * w


def _data_dependent(w, h):
    # grows until its squared norm passes 60: a few steps, far below LIMIT
    return tf.while_loop(lambda v: tf.reduce_sum(v * v) < 60.0, lambda v: v * 1.5 + w, h,
                         maximum_iterations=LIMIT)


def _data_dependent_t(w, h):
    v = h
    while (v * v).sum() < 60.0:
        v = v * 1.5 + w
    return v


def _nested(w, h):
    def outer(i, v):
        inner = tf.while_loop(lambda j, u: j < i + 1, lambda j, u: (j + 1, tf.sin(u) * w),
                              (0, v), maximum_iterations=6)[1]
        return i + 1, inner + 0.1
    return tf.while_loop(lambda i, v: i < 3, outer, (0, h), maximum_iterations=8)[1]


def _nested_t(w, h):
    v = h
    for i in range(3):
        u = v
        for _ in range(i + 1):
            u = torch.sin(u) * w
        v = u + 0.1
    return v


def _mixed_dtypes(w, h):
    # an int32 counter, a bool flag the body flips, a float32 pair
    def body(i, flag, a, b):
        a2 = tf.where(flag, a * w + a, a + b)
        return i + 1, tf.logical_not(flag), a2, b * 0.9 + tf.cast(i, tf.float32) * 0.01
    out = tf.while_loop(lambda i, flag, a, b: tf.reduce_sum(a) < 20.0, body,
                        (0, tf.constant(True), h, w), maximum_iterations=LIMIT)
    return out[2] + out[3]


def _mixed_dtypes_t(w, h):
    i, flag, a, b = 0, True, h, w
    while a.sum() < 20.0:
        a = a * w + a if flag else a + b
        b = b * 0.9 + i * 0.01
        i, flag = i + 1, not flag
    return a + b


def _cond_in_body(w, h):
    def body(v):
        return tf.cond(tf.reduce_sum(v) > 2.0, lambda: v * 1.3 + w, lambda: tf.exp(v) * w)
    return tf.while_loop(lambda v: tf.reduce_sum(v) < 12.0, body, h, maximum_iterations=LIMIT)


def _cond_in_body_t(w, h):
    v = h
    while v.sum() < 12.0:
        v = v * 1.3 + w if v.sum() > 2.0 else torch.exp(v) * w
    return v


CASES = {"zero iterations": (_zero_trips, _zero_trips_t),
         "data-dependent trips": (_data_dependent, _data_dependent_t),
         "nested": (_nested, _nested_t),
         "mixed dtypes": (_mixed_dtypes, _mixed_dtypes_t),
         "cond in the body": (_cond_in_body, _cond_in_body_t)}


def _analytic(build, backend):
    g = tf.Graph()
    with g.as_default():
        w = tf.placeholder(tf.float32, [3], name="w")
        h = tf.placeholder(tf.float32, [3], name="h")
        y = build(w, h)
        grads = tf.gradients(tf.reduce_sum(y * np.float32([1.0, 2.0, 3.0])), [w, h])
    with tf.Session(g, backend=backend) as sess:
        return sess.run([y] + grads, {w: W, h: H})


def _torch(build):
    w = torch.tensor(W, dtype=torch.float64, requires_grad=True)
    h = torch.tensor(H, dtype=torch.float64, requires_grad=True)
    y = build(w, h)
    (y * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)).sum().backward()
    return y.detach().numpy(), w.grad.numpy(), h.grad.numpy()


@pytest.mark.parametrize("case", list(CASES))
def test_gradients_equal_finite_differences_and_torch_on_numpy(case):
    build, build_t = CASES[case]
    check_gradients(build, {"w": W, "h": H}, backend="numpy")
    for got, want in zip(_analytic(build, "numpy"), _torch(build_t)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", list(CASES))
def test_gradients_equal_finite_differences_and_torch_on_gl(gl, case):
    build, build_t = CASES[case]
    check_gradients(build, {"w": W, "h": H}, backend="gl")
    for got, want in zip(_analytic(build, "gl"), _torch(build_t)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_the_backward_runs_the_forwards_trip_count_on_numpy(monkeypatch):
    ran = Counter()
    real = control.run_subgraph

    def spy(graph, args, fd=np.float32):
        ran[graph.name.rsplit(".", 1)[-1]] += 1
        return real(graph, args, fd)
    monkeypatch.setattr(control, "run_subgraph", spy)
    v, trips = H.astype(np.float64), 0
    while (v * v).sum() < 60.0:
        v, trips = v * 1.5 + W, trips + 1
    assert 1 < trips < LIMIT
    _analytic(_data_dependent, "numpy")
    # forward: its condition trips + 1 times, its body trips times; the backward alike
    assert ran == {"recording_cond": trips + 1, "recording": trips,
                   "backward_cond": trips + 1, "backward": trips}


def test_the_backward_runs_the_forwards_trip_count_on_gl(gl, monkeypatch):
    reads = []
    real = cf._Swapper.read
    monkeypatch.setattr(cf._Swapper, "read", lambda self, k: reads.append(k) or
                        real(self, k))
    v, trips = H.astype(np.float64), 0
    while (v * v).sum() < 60.0:
        v, trips = v * 1.5 + W, trips + 1
    _analytic(_data_dependent, "gl")
    # one predicate read back per iteration and one for the last check, in each loop:
    # not LIMIT of them in the backward
    assert len(reads) == 2 * (trips + 1)


def _loops(graph) -> list:
    return [n for n in graph.nodes if n.op == "while_loop"]


def test_the_forward_loop_runs_once_and_keeps_its_values():
    g = tf.Graph()
    with g.as_default():
        w = tf.placeholder(tf.float32, [3], name="w")
        h = tf.placeholder(tf.float32, [3], name="h")
        y = _data_dependent(w, h)
        with tf.Session(g, backend="numpy") as sess:
            before = sess.run(y, {w: W, h: H})
        (gw,) = tf.gradients(tf.reduce_sum(y), [w])
        (gw2,) = tf.gradients(tf.reduce_sum(y * 2.0), [w])    # reuses the recording
        forward, backward, backward2 = _loops(g)
        assert forward.attrs["num_vars"] == 3         # v, the trip count, v's stack
        assert forward.outputs[2].shape == (LIMIT, 3)
        assert backward.inputs[0] is forward.outputs[1]
        assert backward2.inputs[0] is forward.outputs[1]
        # creation order stays a topological order
        position = {n: k for k, n in enumerate(g.nodes)}
        assert all(position[v.node] < position[n] for n in g.nodes for v in n.inputs)
        with tf.Session(g, backend="numpy") as sess:
            after, a, b = sess.run([y, gw, gw2], {w: W, h: H})
    np.testing.assert_array_equal(after, before)
    np.testing.assert_allclose(b, 2 * a, rtol=1e-6)


def test_a_graph_with_a_recorded_loop_round_trips_through_json():
    g = tf.Graph()
    with g.as_default():
        w = tf.placeholder(tf.float32, [3], name="w")
        h = tf.placeholder(tf.float32, [3], name="h")
        (gw,) = tf.gradients(tf.reduce_sum(_mixed_dtypes(w, h)), [w])
    loaded = tf.load_graph(tf.dump(g, format="json"))
    feeds = {"w:0": W, "h:0": H}
    with tf.Session(g, backend="numpy") as a, tf.Session(loaded, backend="numpy") as b:
        np.testing.assert_array_equal(a.run(gw, {w: W, h: H}), b.run(gw.name, feeds))


@pytest.mark.parametrize("limit", [0, 1, 3])
def test_the_limit_stops_the_forward_and_the_backward_alike(limit):
    # the condition would run 5 iterations: the limit cuts it (0: the loop never runs)
    check_gradients(lambda w, h: tf.while_loop(
        lambda i, v: i < 5, lambda i, v: (i + 1, v * w + 0.1), (0, h),
        maximum_iterations=limit)[1], {"w": W, "h": H}, backend="numpy")


def test_second_order_with_a_data_dependent_trip_count():
    check_gradients(lambda w, h: tf.while_loop(
        lambda v: tf.reduce_sum(v) < 6.0, lambda v: tf.sin(v) * w + v, h,
        maximum_iterations=12), {"w": W, "h": H}, backend="numpy", second_order=True)


def test_a_loop_variable_of_unknown_shape_still_has_a_gradient():
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None], name="x")
        y = tf.while_loop(lambda v: tf.reduce_sum(v) < 10.0, lambda v: v * 2.0, x,
                          maximum_iterations=10)
        (gx,) = tf.gradients(tf.reduce_sum(y), [x])
    with tf.Session(g, backend="numpy") as sess:
        got = sess.run(gx, {x: np.float32([1.0, 2.0])})      # 3 -> 6 -> 12: two trips
    np.testing.assert_allclose(got, [4.0, 4.0])


def test_stacks_over_the_bound_take_the_masked_scan(monkeypatch):
    # each iteration writes its stacks whole: past MAX_STACK_ELEMENTS the loop is
    # differentiated as a scan of maximum_iterations steps (a row written per step)
    monkeypatch.setattr(autodiff_control, "MAX_STACK_ELEMENTS", 3 * LIMIT - 1)
    g = tf.Graph()
    with g.as_default():
        w = tf.placeholder(tf.float32, [3], name="w")
        h = tf.placeholder(tf.float32, [3], name="h")
        tf.gradients(tf.reduce_sum(_data_dependent(w, h)), [w])
    assert _loops(g)[0].attrs["num_vars"] == 1
    assert [n.op for n in g.nodes].count("scan") == 3
    check_gradients(_data_dependent, {"w": W, "h": H}, backend="numpy")
