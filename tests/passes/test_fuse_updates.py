"""fuse_updates: an optimizer's update of a variable and its slots is one fused_update
kernel writing several render targets, and training gives what the numpy executor
gives (the numpy executor runs the same fused graph through the ops' references, and
the unfused graph, where nothing is fused, too)."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.errors import AttrError
from fragflow.ir.ops.common import apply
from fragflow.passes import fuse_updates as fu

# awkward shapes: a scalar, sizes not a multiple of 4, a 1-element axis, and one past
# Tuning.elementwise.uniform_constants_from (65,536) elements, where scalar constants
# become uniforms
SHAPES = [(), (5,), (2, 1, 5), (257, 259)]
OPTIMIZERS = {
    "SGD": lambda: ff.optim.SGD(0.1),
    "Momentum": lambda: ff.optim.Momentum(0.1, 0.9),
    "Nesterov": lambda: ff.optim.Momentum(0.05, 0.9, use_nesterov=True),
    "Adagrad": lambda: ff.optim.Adagrad(0.1),
    "Adadelta": lambda: ff.optim.Adadelta(1.0),
    "Adam": lambda: ff.optim.Adam(0.01),
    "Adamax": lambda: ff.optim.Adamax(0.01),
    "RMSProp": lambda: ff.optim.RMSProp(0.01, momentum=0.5),
    "RMSPropCentered": lambda: ff.optim.RMSProp(0.01, momentum=0.5, centered=True),
}
SLOTS = {"SGD": 0, "Momentum": 1, "Nesterov": 1, "Adagrad": 1, "Adadelta": 2, "Adam": 2,
         "Adamax": 2, "RMSProp": 2, "RMSPropCentered": 3}


def _training_graph(opt_name, shapes=SHAPES, seed=0):
    rng = np.random.default_rng(seed)
    g = ff.Graph()
    with g.as_default():
        t = ff.placeholder((), name="t")
        variables, terms = [], []
        for k, shape in enumerate(shapes):
            start = rng.standard_normal(shape).astype(np.float32)
            flat = start.reshape(-1)
            if flat.size > 2:             # edge values: zero and a negative zero
                flat[0], flat[1] = 0.0, -0.0
            v = ff.Variable(start, name=f"v{k}")
            target = ff.constant(rng.standard_normal(shape).astype(np.float32))
            # gradients of different signs and sizes, zero where v == target * t
            terms.append(ff.sum(ff.square(v - target * t)) * (0.5 + k))
            variables.append(v)
        loss = ff.add_n(terms)
        step = OPTIMIZERS[opt_name]().minimize(loss)
    return g, t, loss, step, variables


def _state(sess, g):
    return {n.name: sess.get(n.outputs[0]) for n in g.nodes if n.op == "variable"}


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_training_equals_the_numpy_executor(opt_name):
    g, t, loss, step, _ = _training_graph(opt_name)
    gl, ref = ff.Session(g), ff.Session(g, backend="numpy", passes=[])
    fn_gl = gl.compile([step, loss], feeds=[t])
    fn_np = ref.compile([step, loss], feeds=[t])
    for i in range(4):          # several runs: the swapped textures alternate
        t_value = np.float32(0.5 * i)
        loss_gl, loss_np = fn_gl(t_value)[1], fn_np(t_value)[1]
        np.testing.assert_allclose(loss_gl, loss_np, rtol=1e-4, atol=1e-5)
    want = _state(ref, g)
    for name, value in _state(gl, g).items():
        np.testing.assert_allclose(value, want[name], rtol=1e-4, atol=1e-5,
                                   err_msg=f"{opt_name}: variable {name}")
    updates = [k for k in fn_gl.kernels if k.op == "fused_update"]
    if SLOTS[opt_name]:
        # one kernel per variable writes it and its slots; the beta powers share one
        # (or the scalar variable's: one type); besides, only the step counter's add
        powers = {"Adam": 2, "Adamax": 1}.get(opt_name, 0)
        assert sum(len(k.outputs) for k in updates) == \
            len(SHAPES) * (SLOTS[opt_name] + 1) + powers
        assert len(SHAPES) <= len(updates) <= len(SHAPES) + 1
        scope = OPTIMIZERS[opt_name]().get_name()
        others = [k.op for k in fn_gl.kernels
                  if k.scope.startswith(scope) and k.op != "fused_update"]
        assert others == ["add"], others
    else:
        assert not updates
    gl.close()


def test_fused_graph_equals_the_unfused_graph_on_numpy():
    g, t, loss, step, _ = _training_graph("Adam", seed=3)
    fused, plain = ff.Session(g, backend="numpy"), ff.Session(g, backend="numpy")
    fn_fused = fused.compile([step, loss], feeds=[t])
    fn_plain = plain.compile([step, loss], feeds=[t],
                             passes=["fold_constants", "cse", "simplify", "verify"])
    for i in range(3):
        np.testing.assert_array_equal(fn_fused(np.float32(i))[1], fn_plain(np.float32(i))[1])
    want = _state(plain, g)
    for name, value in _state(fused, g).items():
        np.testing.assert_allclose(value, want[name], rtol=1e-6, atol=1e-7)


def test_two_plans_assigning_the_same_variables_alternate():
    """Each plan's framebuffer follows the textures its slots hold after the other
    plan's swaps (runtime/slot_targets.py)."""
    g, t, loss, step, _ = _training_graph("Adam", shapes=[(3, 5), (7,)], seed=1)
    gl, ref = ff.Session(g), ff.Session(g, backend="numpy", passes=[])
    fns = [(gl.compile([step], feeds=[t]), ref.compile([step], feeds=[t])),
           (gl.compile([step, loss], feeds=[t]), ref.compile([step, loss], feeds=[t]))]
    for i in range(7):
        fn_gl, fn_np = fns[i % 3 % 2]
        fn_gl(np.float32(i)), fn_np(np.float32(i))
    want = _state(ref, g)
    for name, value in _state(gl, g).items():
        np.testing.assert_allclose(value, want[name], rtol=1e-4, atol=1e-6)
    gl.close()


def test_nan_in_a_variable_propagates_as_in_numpy():
    g = ff.Graph()
    with g.as_default():
        v = ff.Variable(np.float32([1.0, np.nan, -2.0, 0.0, 3.0]), name="v")
        step = ff.optim.Adam(0.1).minimize(ff.sum(ff.square(v)))
    gl, ref = ff.Session(g), ff.Session(g, backend="numpy", passes=[])
    for _ in range(2):
        gl.run(step), ref.run(step)
    for name, value in _state(gl, g).items():
        np.testing.assert_allclose(value, _state(ref, g)[name], rtol=1e-5, equal_nan=True)
    gl.close()


def test_the_report_says_which_updates_share_a_kernel():
    g, t, _, step, _ = _training_graph("Momentum", shapes=[(4,)])
    sess = ff.Session(g, backend="numpy")
    fn = sess.compile([step], feeds=[t])
    assert any("one kernel updates 'v0/Momentum/momentum', 'v0'" in line
               for line in fn.fusion_report)


def test_a_fused_update_with_results_of_two_types_is_refused():
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder((3,), name="a")
        b = ff.placeholder((2, 3), name="b")
        steps = (("neg", (), (("in", 0),)), ("neg", (), (("in", 1),)))
        with pytest.raises(AttrError, match="one type"):
            apply("fused_update", [a.value, b.value], {"steps": steps, "results": (0, 1)})
        with pytest.raises(AttrError, match="not a step index"):
            apply("fused_update", [a.value], {"steps": steps[:1], "results": (3,)})


def test_small_shared_results_are_recomputed_not_read():
    """Adam's bias correction (from the beta powers) feeds every variable's update: it
    is computed in each kernel, so no kernel of its own runs for it."""
    g, t, _, step, _ = _training_graph("Adam", shapes=[(6,), (2, 3)])
    sess = ff.Session(g)
    fn = sess.compile([step], feeds=[t])
    adam_kernels = [k for k in fn.kernels if k.scope.startswith("Adam")]
    assert sorted(k.op for k in adam_kernels) == ["add"] + ["fused_update"] * 3, \
        [k.op for k in adam_kernels]
    assert fu.RECOMPUTED_UP_TO >= 1
    sess.close()


def test_debug_mode_keeps_every_update_a_kernel_of_its_own():
    """Session(debug=True) runs one kernel per node, so a NaN is pinned on the node that
    made it: no fused_update there, and the same values."""
    g, t, loss, step, _ = _training_graph("Adam", shapes=[(3, 5)], seed=2)
    debug, ref = ff.Session(g, debug=True), ff.Session(g, backend="numpy", passes=[])
    fn = debug.compile([step, loss], feeds=[t])
    assert not [k for k in fn.kernels if k.op == "fused_update"]
    fn_np = ref.compile([step, loss], feeds=[t])
    for i in range(2):
        np.testing.assert_allclose(fn(np.float32(i))[1], fn_np(np.float32(i))[1], rtol=1e-5)
    debug.close()
