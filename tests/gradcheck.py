"""Gradient checks: analytic gradients (ff.gradients, run on GL or numpy) against
central finite differences computed in float64 on the numpy reference executor."""
from __future__ import annotations

import numpy as np

import fragflow as ff
from fragflow.ir.ops.state import RUN_COUNTER
from fragflow.runtime import NumpyPlan, NumpyVariables
from fragflow.runtime.driver import optimize


def evaluator64(graph, fetch, feeds: dict):
    """A function of {placeholder: array} giving fetch with every float32 computed in
    float64 (compiled once: finite differences evaluate it many times). Compiled by the
    compile driver with no optimizing pass (passes=[]: pruned, nothing fused or
    folded), so the reference is the graph as built, not the code under test."""
    types = {v.value: ff.TensorType(np.shape(a), v.dtype) for v, a in feeds.items()}
    compiled = optimize(graph, [fetch.value], types, passes=[])
    plan = NumpyPlan(compiled.graph, NumpyVariables(), float64=True)
    names = {v: compiled.feed_names[v.value] for v in feeds
             if v.value in compiled.feed_names}
    # random ops draw from the run counter: every evaluation is run 0
    return lambda values: plan.run({RUN_COUNTER: np.array(0, np.int32),
                                    **{names[v]: a for v, a in values.items()
                                       if v in names}})[0]


def numeric_gradient(graph, y, x, feeds: dict, eps: float = 1e-4) -> np.ndarray:
    """d y / d x by central differences (y a scalar tensor), in float64."""
    base = {k: np.asarray(v, np.float64 if k.dtype == "float32" else v.dtype)
            for k, v in feeds.items()}
    f = evaluator64(graph, y, base)
    point = base[x]
    grad = np.zeros(point.shape, np.float64)
    for index in np.ndindex(point.shape):
        plus, minus = point.copy(), point.copy()
        plus[index] += eps
        minus[index] -= eps
        grad[index] = (float(f({**base, x: plus})) - float(f({**base, x: minus}))) / (2 * eps)
    return grad


def check_gradients(build, inputs: dict, backend="gl", rtol=1e-3, atol=1e-4,
                    second_order=False, seed=0, tuning=None):
    """build(*placeholders) -> tensor f. Checks d sum(f * r)/dx (r random, so every
    output element matters) for every input against finite differences; with
    second_order, also d sum(grad * r2)/dx against differences of the gradient.
    tuning: the analytic side's ff.Tuning (None: the device's)."""
    rng = np.random.default_rng(seed)
    g = ff.Graph("gradcheck")
    with g.as_default():
        xs = {name: ff.placeholder(a.shape, "float32", name=name)
              for name, a in inputs.items()}
        f = build(*xs.values())
        r = ff.constant(rng.uniform(0.5, 1.5, f.shape).astype(np.float32), name="weights")
        y = ff.sum(f * r)
        grads = ff.gradients(y, list(xs.values()))
        if second_order:
            r2 = [ff.constant(rng.uniform(0.5, 1.5, a.shape).astype(np.float32))
                  for a in inputs.values()]
            terms = [ff.sum(gr * w) for gr, w in zip(grads, r2)]
            z = terms[0]
            for t in terms[1:]:
                z = z + t
            second = ff.gradients(z, list(xs.values()), unconnected="zero")
    feeds = {xs[k]: np.asarray(v, np.float32) for k, v in inputs.items()}
    with ff.Session(g, backend=backend, tuning=tuning) as sess:
        # one run: random ops (dropout) draw the same values for both orders, as in the
        # finite differences (run 0)
        fetched = sess.run(grads + (second if second_order else []), feeds)
    analytic, analytic2 = fetched[:len(grads)], fetched[len(grads):]
    for (name, x), got in zip(xs.items(), analytic):
        want = numeric_gradient(g, y, x, feeds)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol,
                                   err_msg=f"first-order gradient wrt {name}")
    for (name, x), got in zip(xs.items(), analytic2):
        want = numeric_gradient(g, z, x, feeds)
        np.testing.assert_allclose(got, want, rtol=rtol * 10, atol=atol * 10,
                                   err_msg=f"second-order gradient wrt {name}")
