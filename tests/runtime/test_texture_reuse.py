"""GLPlan follows its memory plan (runtime/memory_plan.py): results against the numpy
executor where textures are reused, and one texture per planned entry."""
import numpy as np
import pytest

import fragflow as ff


def _double_binding_graph():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((8, 8), "float32", name="x")
        m = ff.matmul(ff.exp(x), ff.exp(x))      # one kernel binding one texture twice
        r = ff.exp(m * 0.001) + ff.square(m)     # two values alive at once after it
    return g, x, r


# without fuse_epilogues, or the matmul takes the whole elementwise tail after it
UNFUSED = ("fuse_elementwise", "fuse_epilogues")


@pytest.mark.parametrize("options", [{}, {"disable_passes": UNFUSED},
                                     {"debug": True}])
def test_a_texture_bound_twice_is_reused_once(options):
    # the texture of exp(x) was freed twice after matmul(e, e), and exp(m) and
    # square(m) were both written into it (debug mode ran it so): wrong sums
    g, x, r = _double_binding_graph()
    xb = np.random.RandomState(0).randn(8, 8).astype(np.float32) * 0.1
    expected = ff.Session(g, backend="numpy", passes=[]).run(r, {x: xb})
    with ff.Session(g, **options) as sess:
        np.testing.assert_allclose(sess.run(r, {x: xb}), expected, rtol=1e-5, atol=1e-5)


def test_the_plan_holds_one_texture_per_planned_entry():
    g, x, r = _double_binding_graph()
    with ff.Session(g, disable_passes=UNFUSED) as sess:
        fn = sess.compile(r, feeds=[x])
        plan = fn._last.plan
        memory = plan.memory
        feeds_and_constants = len(plan.lowered_graph.feeds) + len(plan.lowered_graph.constants)
        assert len(plan.textures()) == feeds_and_constants + len(memory.textures)
        assert len(memory.textures) < len(memory.texture_of)     # something is reused
