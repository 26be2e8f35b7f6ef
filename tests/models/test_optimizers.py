"""ff.optim against TensorFlow 1's update formulas, written out in numpy (float64) here.

Each optimizer runs 5 steps on two variables (sizes that are not multiples of 4) with
gradients that change every step; after each step the variables and every slot must
match the numpy formula to 1e-5 relative, on GL and on the numpy executor.
"""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches

STEPS = 5
RNG = np.random.default_rng(42)
W0 = RNG.uniform(-1.5, 1.5, (3, 5)).astype(np.float32)
T = RNG.uniform(-1.0, 1.0, (3, 5)).astype(np.float32)
C = RNG.uniform(0.5, 2.0, (3, 5)).astype(np.float32)
B0 = RNG.uniform(-1.2, 1.2, 7).astype(np.float32)


def numpy_gradients(w, b):
    """The gradients of loss = sum(C (w - T)^2 / 2) + sum(b^4) / 4."""
    return [C * (w - T), b ** 3]


# -- TensorFlow 1's formulas, one step on (var, grad, slots), in float64 -------------------
# Where TensorFlow's kernels hold a hyperparameter in float32 and compute 1 - beta in
# float32, so does the formula here (f32): for beta2 = 0.999 that differs from the
# float64 1 - beta2 by ~1e-5 relative. The beta powers are float32 running products,
# as TensorFlow's beta1_power / beta2_power variables are.
def f32(x):
    return float(np.float32(x))


def beta_power(beta, t):
    p = np.float32(beta)
    for _ in range(t - 1):
        p = np.float32(p * np.float32(beta))
    return float(p)


def sgd(lr):
    def step(var, g, s, t):
        return var - lr * g
    return step, {}


def momentum(lr, mu, nesterov):
    def step(var, g, s, t):
        s["momentum"] = s["momentum"] * mu + g
        if nesterov:
            return var - (lr * g + lr * mu * s["momentum"])
        return var - lr * s["momentum"]
    return step, {"momentum": 0.0}


def adagrad(lr, init):
    def step(var, g, s, t):
        s["accumulator"] = s["accumulator"] + g * g
        return var - lr * g / np.sqrt(s["accumulator"])
    return step, {"accumulator": init}


def adadelta(lr, rho, eps):
    rho = f32(rho)

    def step(var, g, s, t):
        s["accum"] = rho * s["accum"] + (1 - rho) * g * g
        update = np.sqrt(s["accum_update"] + eps) / np.sqrt(s["accum"] + eps) * g
        s["accum_update"] = rho * s["accum_update"] + (1 - rho) * update * update
        return var - lr * update
    return step, {"accum": 0.0, "accum_update": 0.0}


def adam(lr, b1, b2, eps):
    b1, b2 = f32(b1), f32(b2)

    def step(var, g, s, t):          # t = 1, 2, ...: beta powers b1**t, b2**t
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["v"] = b2 * s["v"] + (1 - b2) * g * g
        lr_t = lr * np.sqrt(1 - beta_power(b2, t)) / (1 - beta_power(b1, t))
        return var - lr_t * s["m"] / (np.sqrt(s["v"]) + eps)
    return step, {"m": 0.0, "v": 0.0}


def adamax(lr, b1, b2, eps):
    b1, b2 = f32(b1), f32(b2)

    def step(var, g, s, t):
        s["m"] = b1 * s["m"] + (1 - b1) * g
        s["v"] = np.maximum(b2 * s["v"], np.abs(g))
        return var - lr / (1 - beta_power(b1, t)) * s["m"] / (s["v"] + eps)
    return step, {"m": 0.0, "v": 0.0}


def rmsprop(lr, decay, mu, eps, centered):
    decay = f32(decay)

    def step(var, g, s, t):
        s["rms"] = decay * s["rms"] + (1 - decay) * g * g
        denom = s["rms"] + eps
        if centered:
            s["mg"] = decay * s["mg"] + (1 - decay) * g
            denom = s["rms"] - s["mg"] ** 2 + eps
        s["momentum"] = mu * s["momentum"] + lr * g / np.sqrt(denom)
        return var - s["momentum"]
    slots = {"rms": 1.0, "momentum": 0.0}          # TF 1 starts the mean square at ones
    if centered:
        slots["mg"] = 0.0
    return step, slots


CASES = {
    "sgd": (lambda: ff.optim.SGD(0.1), sgd(0.1)),
    "momentum": (lambda: ff.optim.Momentum(0.1, 0.9), momentum(0.1, 0.9, False)),
    "nesterov": (lambda: ff.optim.Momentum(0.1, 0.8, use_nesterov=True),
                 momentum(0.1, 0.8, True)),
    "adagrad": (lambda: ff.optim.Adagrad(0.3, initial_accumulator_value=0.2),
                adagrad(0.3, 0.2)),
    "adadelta": (lambda: ff.optim.Adadelta(1.0, rho=0.9, epsilon=1e-3),
                 adadelta(1.0, 0.9, 1e-3)),
    "adam": (lambda: ff.optim.Adam(0.1), adam(0.1, 0.9, 0.999, 1e-8)),
    "adam_args": (lambda: ff.optim.Adam(0.05, beta1=0.5, beta2=0.9, epsilon=1e-3),
                  adam(0.05, 0.5, 0.9, 1e-3)),
    "adamax": (lambda: ff.optim.Adamax(0.1), adamax(0.1, 0.9, 0.999, 1e-8)),
    "rmsprop": (lambda: ff.optim.RMSProp(0.05), rmsprop(0.05, 0.9, 0.0, 1e-10, False)),
    "rmsprop_centered": (lambda: ff.optim.RMSProp(0.05, decay=0.8, momentum=0.5,
                                                  epsilon=1e-4, centered=True),
                         rmsprop(0.05, 0.8, 0.5, 1e-4, True)),
}


def reference_trajectory(rule):
    """[(w, b, {slot: (w slot, b slot)})] after each of STEPS steps, in float64."""
    step, initial = rule
    values = [W0.astype(np.float64), B0.astype(np.float64)]
    slots = [{k: np.full(v.shape, init, np.float64) for k, init in initial.items()}
             for v in values]
    out = []
    for t in range(1, STEPS + 1):
        grads = numpy_gradients(*values)
        values = [step(v, g, s, t) for v, g, s in zip(values, grads, slots)]
        out.append((values, {k: (slots[0][k].copy(), slots[1][k].copy()) for k in slots[0]}))
    return out


def build(make_optimizer):
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(W0, name="w")
        b = ff.Variable(B0, name="b")
        loss = ff.sum(0.5 * C * ff.square(w - T)) + 0.25 * ff.sum(ff.square(ff.square(b)))
        opt = make_optimizer()
        step = opt.minimize(loss)
    return g, w, b, opt, step


@pytest.mark.parametrize("backend", ["numpy", "gl"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_updates_match_tensorflow_formula(case, backend, request):
    if backend == "gl":
        request.getfixturevalue("gl")
    make_optimizer, rule = CASES[case]
    g, w, b, opt, step = build(make_optimizer)
    names = opt.get_slot_names()
    assert sorted(names) == sorted(rule[1]), f"{case}: slots {names}"
    slot_vars = [(n, opt.get_slot(w, n), opt.get_slot(b, n)) for n in names]
    fetch = [w, b] + [v for _, sw, sb in slot_vars for v in (sw, sb)]
    with ff.Session(g, backend=backend) as sess:
        for t, (expected, expected_slots) in enumerate(reference_trajectory(rule), 1):
            count = sess.run(step)
            assert int(count) == t
            got = [sess.get(v) for v in fetch]
            want = list(expected) + [s for n, _, _ in slot_vars for s in expected_slots[n]]
            labels = ["w", "b"] + [f"{n}[{v}]" for n, _, _ in slot_vars for v in "wb"]
            for label, a, e in zip(labels, got, want):
                assert_matches(a, e.astype(np.float32), rtol=1e-5, atol=1e-6,
                               what=f"{case} {backend} step {t} {label}")


def test_fetching_the_step_with_the_loss_sees_values_before_the_update():
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(np.float32([3.0]), name="w")
        loss = ff.sum(ff.square(w))
        step = ff.optim.SGD(0.25).minimize(loss)
    sess = ff.Session(g, backend="numpy", passes=[])
    losses = [float(sess.run([loss, step])[0]) for _ in range(3)]
    np.testing.assert_allclose(losses, [9.0, 2.25, 0.5625])      # w: 3, 1.5, 0.75


def test_compute_and_apply_gradients_for_a_custom_loop():
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(np.float32([1.0, 2.0]), name="w")
        unused = ff.Variable(np.float32([5.0]), name="unused")
        loss = ff.sum(ff.square(w))
        opt = ff.optim.SGD(0.5)
        pairs = opt.compute_gradients(loss, var_list=[w, unused])
        assert pairs[1][0] is None and pairs[1][1] is unused
        clipped = [(ff.clip_by_value(gr, -1.0, 1.0), v) for gr, v in pairs[:1]] + pairs[1:]
        step = opt.apply_gradients(clipped)
    sess = ff.Session(g, backend="numpy", passes=[])
    sess.run(step)
    np.testing.assert_allclose(sess.get(w), [0.5, 1.5])          # gradients 2, 4 -> 1, 1
    np.testing.assert_allclose(sess.get(unused), [5.0])


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_apply_gradients_outside_the_graph_context_uses_the_variables_graph(backend):
    # TensorFlow 1 builds the update in the variables' graph; before, Adam's slots landed
    # in the default graph and the step raised "'sqrt' belongs to graph 'default'"
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(np.float32([1.0, -2.0, 3.0]), name="w")
        grad = ff.placeholder((3,), "float32", name="grad")
    opt = ff.optim.Adam(0.1)
    step = opt.apply_gradients([(grad, w)])
    assert step.graph is g and all(v.graph is g for v in opt.variables())
    sess = ff.Session(g, backend=backend)
    rule, slots = adam(0.1, 0.9, 0.999, 1e-8)
    expected, gb = np.float32([1.0, -2.0, 3.0]), np.float32([0.5, -1.0, 0.0])
    for t in (1, 2):
        sess.run(step, {grad: gb})
        expected = rule(expected, gb, slots, t)
    np.testing.assert_allclose(sess.get(w), expected, rtol=1e-6, atol=1e-7)


def test_default_var_list_is_the_float_variables_the_loss_depends_on():
    g = ff.Graph()
    with g.as_default():
        a = ff.Variable(np.float32([1.0]), name="a")
        ff.Variable(np.float32([1.0]), name="elsewhere")
        k = ff.Variable(np.int32([2]), name="k")
        loss = ff.sum(a * ff.cast(k, "float32"))
        assert [v.name for v in ff.optim.trainable_variables(loss)] == ["a"]
        assert [v.name for _, v in ff.optim.Adam().compute_gradients(loss)] == ["a"]


def test_learning_rate_can_be_a_fed_tensor():
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(np.float32([1.0]), name="w")
        lr = ff.placeholder((), name="lr")
        step = ff.optim.SGD(lr).minimize(ff.sum(w * 2.0))
    sess = ff.Session(g, backend="numpy", passes=[])
    sess.run(step, {lr: np.float32(0.1)})
    sess.run(step, {lr: np.float32(1.0)})
    np.testing.assert_allclose(sess.get(w), [1.0 - 0.2 - 2.0], rtol=1e-6)


def test_group_runs_every_tensor_and_has_the_first_ones_value():
    g = ff.Graph()
    with g.as_default():
        u = ff.Variable(np.float32([1.0]), name="u")
        v = ff.Variable(np.float32([1.0]), name="v")
        op = ff.optim.group(u.assign(u + 1.0), v.assign(v * 5.0))
    sess = ff.Session(g, backend="numpy", passes=[])
    np.testing.assert_allclose(sess.run(op), [2.0])
    np.testing.assert_allclose([sess.get(u)[0], sess.get(v)[0]], [2.0, 5.0])


def test_errors_say_what_is_wrong():
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(np.float32([1.0]), name="w")
        k = ff.Variable(np.int32([1]), name="k")
        x = ff.placeholder((1,), name="x")
        with pytest.raises(ff.GradientError, match="no variables to optimize"):
            ff.optim.SGD(0.1).minimize(ff.sum(x))
        with pytest.raises(ff.GradientError, match="only float32 variables"):
            ff.optim.SGD(0.1).minimize(ff.sum(w), var_list=[k])
        with pytest.raises(ff.GradientError, match="no gradients provided"):
            ff.optim.SGD(0.1).minimize(ff.sum(w), var_list=[ff.Variable(np.float32(1))])
        with pytest.raises(ff.AttrError, match="initial_accumulator_value"):
            ff.optim.Adagrad(0.1, initial_accumulator_value=0.0)
