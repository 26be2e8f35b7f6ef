"""fuse_updates at its limits: a group reading exactly as many textures as the kernel
may bind is fused, one more is kept apart (with the reason); a group of 41 steps (more
than one elementwise group's 32, within the update's 64) is fused, one of 71 is not.
Values against the graph as built."""
import numpy as np

import fragflow as ff
from fragflow.runtime.driver import optimize


def _momentum_of_two():
    g = ff.Graph()
    with g.as_default():
        w1 = ff.Variable(np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2), name="w1")
        w2 = ff.Variable(np.float32([0.5, -2.0]), name="w2")
        loss = ff.reduce_sum(ff.square(w1)) + ff.reduce_sum(ff.square(w2))
        step = ff.optim.Momentum(0.1, 0.9).minimize(loss)
    return g, step, (w1, w2)


def _sin_chain(depth):
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(np.float32([0.3, -0.2, 0.0, 1.0, -1.5]), name="w")
        h = w
        for _ in range(depth):
            h = ff.sin(h) * 1.5
        step = ff.optim.Momentum(0.1, 0.9).minimize(ff.reduce_sum(h))
    return g, step, (w,)


def _fused_updates(g, step, **options):
    compiled = optimize(g, [step.value], {}, **options)
    return [n for n in compiled.graph.nodes if n.op == "fused_update"], compiled.fusion_report


def _trains_as_built(g, step, variables):
    """Two steps with the whole pipeline against two on the graph as built."""
    with ff.Session(g, backend="numpy", passes=[]) as ref, \
            ff.Session(g, backend="numpy") as full:
        for _ in range(2):
            ref.run(step)
            full.run(step)
        for v in variables:
            np.testing.assert_allclose(full.run(v), ref.run(v), rtol=1e-6, atol=1e-7)


def test_a_group_at_the_texture_limit_is_fused_and_one_past_it_kept_apart():
    g, step, _ = _momentum_of_two()
    fused, _ = _fused_updates(g, step, max_texture_units=5)
    assert [len(n.inputs) for n in fused] == [5, 5]
    fused, report = _fused_updates(g, step, max_texture_units=4)
    assert fused == []
    assert any("would read 5 textures, more than the 4 it may bind" in line
               for line in report), report


def test_an_update_group_of_41_steps_is_fused_and_one_of_71_kept_apart():
    g, step, variables = _sin_chain(8)
    fused, _ = _fused_updates(g, step)
    assert [len(n.attrs["steps"]) for n in fused] == [41]
    _trains_as_built(g, step, variables)
    g, step, variables = _sin_chain(14)
    fused, report = _fused_updates(g, step)
    assert fused == []
    assert any("would have 71 steps" in line for line in report), report
    _trains_as_built(g, step, variables)


def test_a_small_shared_value_is_recomputed_in_each_group_and_a_big_one_computed_once():
    """tanh(x) * 2 feeds both variables' updates: up to RECOMPUTED_UP_TO (16) elements
    each group's kernel recomputes it (6 ops a group), above it one kernel computes it
    for both (4 ops a group)."""
    for size, ops in ((16, 6), (17, 4), (20, 4)):
        g = ff.Graph()
        with g.as_default():
            x = ff.placeholder((size,), name="x")
            w1 = ff.Variable(np.linspace(-1, 1, size, dtype=np.float32), name="w1")
            w2 = ff.Variable(np.full(size, 0.5, np.float32), name="w2")
            common = ff.tanh(x) * 2.0
            loss = ff.reduce_sum(w1 * common) + ff.reduce_sum(w2 * common)
            step = ff.optim.Momentum(0.1, 0.9).minimize(loss)
        compiled = optimize(g, [step.value], {x.value: x.value.type})
        lines = [line for line in compiled.fusion_report if line.startswith("one kernel")]
        assert lines == [f"one kernel updates 'w1/Momentum/momentum', 'w1' ({ops} ops)",
                         f"one kernel updates 'w2/Momentum/momentum', 'w2' ({ops} ops)"], \
            (size, compiled.fusion_report)
        xb = np.linspace(-3, 3, size, dtype=np.float32)
        with ff.Session(g, backend="numpy", passes=[]) as ref, \
                ff.Session(g, backend="numpy") as full:
            for _ in range(2):
                ref.run(step, {x: xb})
                full.run(step, {x: xb})
            for v in (w1, w2):
                np.testing.assert_allclose(full.run(v), ref.run(v), rtol=1e-6, atol=1e-7)


def test_int32_updates_are_not_fused():
    """Only float32 updates share a kernel: two one-element int32 counters (which
    would group as one-element updates) stay two assigns, and count on GL as built."""
    g = ff.Graph()
    with g.as_default():
        a = ff.Variable(np.int32([3]), name="a")
        b = ff.Variable(np.int32([-7]), name="b")
        step = ff.group(ff.assign(a, a + 2), ff.assign(b, b * 3 - 1))
    fused, report = _fused_updates(g, step)
    assert fused == [] and not any(line.startswith("one kernel") for line in report), report
    with ff.Session(g) as sess:
        for _ in range(3):
            sess.run(step)
        assert sess.run(a).tolist() == [9] and sess.run(b).tolist() == [-7 * 27 - 13]


def test_a_reader_between_the_groups_ops_keeps_the_group_apart():
    """u = r1 + 1 reads w1's new value r1 and is made before r2 (the group's last op,
    which reads r1): fusing would compute r1 after u's 'add' needs it, so the updates
    are kept apart and u sees r1."""
    g = ff.Graph()
    with g.as_default():
        w1 = ff.Variable(np.float32([1, -2, 3, 0, 5]), name="w1")
        w2 = ff.Variable(np.float32([0.5, 0.5, -1, 2, 4]), name="w2")
        r1 = w1 * 0.9
        u = ff.identity(r1 + 1.0, name="u")
        r2 = w2 * r1
        step = ff.group(ff.assign(w1, r1), ff.assign(w2, r2))
    compiled = optimize(g, [step.value, u.value], {})
    fused = [n for n in compiled.graph.nodes if n.op == "fused_update"]
    assert fused == []
    assert "kept the updates of 'w1', 'w2' apart: 'add' reads a new value before the " \
        "group's last op" in compiled.fusion_report, compiled.fusion_report
    with ff.Session(g) as sess:
        got = sess.run([u, step])[0]
    np.testing.assert_allclose(got, np.float32([1, -2, 3, 0, 5]) * np.float32(0.9) + 1,
                               rtol=1e-6)
