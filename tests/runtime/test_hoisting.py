"""Hoisting (runtime/memory_plan.py hoisted_values, GLPlan.ready): kernels whose inputs
are constants, variables the plan never assigns, or other such kernels' outputs (a
packed matmul's panel of its weight) run once, not every run, into textures nothing
else reuses; Session.set, restore or another plan's assign of such a variable runs them
again. Oracles: float64 products, the numpy executor, and the plan's counters."""
import threading

import numpy as np
import pytest

import fragflow as ff
from fragflow.runtime.device import Device
from fragflow.runtime.memory_plan import hoisted_values, plan_memory
from tests.runtime.test_memory_plan import hand_lowered, kernel

RNG = np.random.default_rng(34)
# 64 x 256 @ 256 x 256: over matmul.packed_min_macs and packed_min_rows (llvmpipe's
# profile): B is packed into a panel by a kernel of its own
X = RNG.standard_normal((64, 256)).astype(np.float32)
X[0, :5] = [0.0, -0.0, np.inf, -np.inf, np.nan]
W = RNG.standard_normal((256, 256)).astype(np.float32)
C = RNG.standard_normal((256, 256)).astype(np.float32)


def _want(x, w):
    with np.errstate(invalid="ignore", over="ignore"):
        return x.astype(np.float64) @ w.astype(np.float64)


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-3)


def _graph(w_dtype=np.float32):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((64, 256), "float32", name="x")
        w = ff.Variable(W.astype(w_dtype), name="w")
        y = ff.matmul(x, w)
        z = ff.matmul(x, ff.constant(C))
        step = w.assign(w * 0.5)
    return g, x, w, y, z, step


def _plan(sess, fetches, x):
    return sess.compile(fetches, feeds=[x])._last.plan


# -- the rule, without GL ---------------------------------------------------------------
def test_hoisted_values_follow_constants_and_unassigned_variables():
    steps = [kernel("a", "c"), kernel("b", "a", "v"), ("alias", "b2", "b"),
             kernel("d", "b2", "x"), kernel("e", "u"), kernel("f", "b2"),
             kernel("g"), kernel("h", "c")]
    lowered = hand_lowered(steps, outputs=["d", "f", "h"], feeds=("x",),
                           variables={"v": "v", "u": "u"}, assigns=[("u", "d")])
    lowered.constants["c"] = np.zeros((4, 4), np.float32)
    # a: of a constant; b: of a and an unassigned variable; d reads a feed; e reads an
    # assigned variable; f, h are fetched (their textures may be handed on); g reads nothing
    assert hoisted_values(lowered) == {"a", "b"}
    memory = plan_memory(lowered, hoisted_values(lowered))
    others = [memory.texture_of[v] for v in ("d", "e", "f", "g", "h")]
    for v in ("a", "b"):                         # textures of their own, never reused
        assert memory.texture_of[v] not in others
    assert memory.texture_of["a"] != memory.texture_of["b"]


# -- on GL --------------------------------------------------------------------------------
@pytest.mark.usefixtures("gl")
def test_a_packed_weight_is_packed_once_and_every_run_is_right():
    g, x, w, y, z, _ = _graph()
    with ff.Session(g) as sess:
        plan = _plan(sess, [y, z], x)
        packs = [k for k in plan.kernels if k.op == "matmul_pack"]
        assert len(packs) == 2, [k.op for k in plan.kernels]
        assert {k.output.value for k in packs} <= plan.hoisted
        assert len(plan._launches) == len(plan.kernels) - 2
        for _ in range(4):
            got_y, got_z = sess.run([y, z], {x: X})
            _close(got_y, _want(X, W))
            _close(got_z, _want(X, C))
        assert plan.hoisted_runs == 1
        profile = sess.profile([y, z], {x: X}, runs=2)
        assert "matmul_pack" not in str(profile)     # steady state: no pack kernel
        assert plan.hoisted_runs == 1


@pytest.mark.usefixtures("gl")
def test_set_restore_and_another_plans_assign_pack_the_weight_again(tmp_path):
    g, x, w, y, z, step = _graph()
    with ff.Session(g) as sess:
        plan = _plan(sess, [y], x)
        _close(sess.run(y, {x: X}), _want(X, W))
        sess.save(str(tmp_path / "w"))
        w2 = np.flipud(W).copy()
        sess.set(w, w2)
        _close(sess.run(y, {x: X}), _want(X, w2))
        assert plan.hoisted_runs == 2
        sess.run(step)                               # another plan: w *= 0.5
        _close(sess.run(y, {x: X}), _want(X, w2 * 0.5))
        assert plan.hoisted_runs == 3
        sess.restore(str(tmp_path / "w"))
        _close(sess.run(y, {x: X}), _want(X, W))
        _close(sess.run(y, {x: X}), _want(X, W))
        assert plan.hoisted_runs == 4


@pytest.mark.usefixtures("gl")
def test_a_plan_that_assigns_the_weight_packs_it_every_run():
    g, x, w, y, z, step = _graph()
    gl, ref = ff.Session(g), ff.Session(g, backend="numpy", passes=[])
    with gl, ref:
        plan = _plan(gl, [y, z, step], x)
        hoisted = {k.op for k in plan.kernels if k.output.value in plan.hoisted}
        assert hoisted == {"matmul_pack"} and len(plan.hoisted) == 1     # C's, not w's
        for _ in range(3):
            for got, want in zip(gl.run([y, z], {x: X}), ref.run([y, z], {x: X})):
                _close(got, want)
            gl.run([y, z, step], {x: X})
            ref.run([y, z, step], {x: X})
        np.testing.assert_allclose(gl.get(w), ref.get(w), rtol=1e-6)
        assert plan.hoisted_runs == 1


@pytest.mark.usefixtures("gl")
@pytest.mark.parametrize("half", [True, False])
def test_a_float16_weight_texture_is_packed_once(monkeypatch, half):
    device = Device.get()
    monkeypatch.setattr(device, "tuning", device.tuning.with_(half_weight_textures=half))
    g, x, w, y, z, _ = _graph(np.float16)
    with ff.Session(g) as sess:
        plan = _plan(sess, [y], x)
        for _ in range(3):
            _close(sess.run(y, {x: X}), _want(X, W.astype(np.float16)))
        assert sess._variables._slots["w"].texture.format == ("rgba16f" if half else "rgba32f")
        assert plan.hoisted_runs == 1


@pytest.mark.usefixtures("gl")
def test_a_loop_body_reading_a_constant_weight():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((64, 256), "float32", name="x")
        # made in the body: a constant of the body's plan, packed at its first run
        # (one captured from outside is a feed of the body's plan: not hoisted)
        _, out = ff.while_loop(lambda i, v: i < 3,
                               lambda i, v: (i + 1, ff.tanh(ff.matmul(v, ff.constant(C * 0.05)))),
                               (ff.constant(np.int32(0)), x))
    want = X.astype(np.float64)
    for _ in range(3):
        with np.errstate(invalid="ignore"):
            want = np.tanh(want @ (C * 0.05).astype(np.float64))
    with ff.Session(g) as sess:
        for _ in range(3):
            _close(sess.run(out, {x: X}), want)


@pytest.mark.usefixtures("gl")
def test_runs_from_threads_after_a_set():
    g, x, w, y, z, _ = _graph()
    with ff.Session(g) as sess:
        sess.run(y, {x: X})
        sess.set(w, -W)
        results, errors = [], []

        def work():
            try:
                results.append(sess.run([y, z], {x: X}))
            except Exception as e:                      # pragma: no cover: reported
                errors.append(e)
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        for got_y, got_z in results:
            _close(got_y, _want(X, -W))
            _close(got_z, _want(X, C))
        assert _plan(sess, [y, z], x).hoisted_runs == 1
