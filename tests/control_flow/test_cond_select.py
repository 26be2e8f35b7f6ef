"""passes/cond_select.py: a cond of cheap branches runs as a select (no predicate
readback, fused with what is around it), a cond of a constant predicate as its taken
branch, and any other cond as a cond, with the reason; values as the graph as built."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, reference_session

X = np.float32([-1.5, 0.0, 1.0, 2.0, np.nan, np.inf, -np.inf])


def _graph(true_fn, false_fn, shape=(7,)):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(shape, name="x")
        p = ff.placeholder((), "bool", name="p")
        y = ff.cond(p, lambda: true_fn(x), lambda: false_fn(x))
    return g, x, p, y


def _check(g, x, p, y, xs):
    fn = ff.Session(g).compile([y], feeds=[x, p])
    with reference_session(g) as ref:
        for taken in (True, False):
            want = ref.run(y, {x: xs, p: taken})
            assert_matches(fn(xs, np.bool_(taken))[0], want, rtol=1e-5,
                           what=f"pred {taken}")
    return fn


def test_cheap_branches_run_as_one_fused_kernel_with_no_cond(gl):
    """log of a negative or NaN in the branch not taken does not reach the result."""
    g, x, p, y = _graph(lambda x: ff.log(x) * 2.0, lambda x: ff.exp(-x) + 1.0)
    fn = _check(g, x, p, y, X)
    assert "cond 'cond' as a select: both branches cheap (2 and 3 ops), no sync" in \
        fn.fusion_report, fn.fusion_report
    assert [k.op for k in fn.kernels] == ["fused(log,mul,neg,exp,add,where)"]
    assert not any(n.op == "cond" for n in fn.graph.nodes)


def test_a_branch_with_a_matmul_stays_a_cond(gl):
    g, x, p, y = _graph(lambda x: ff.reshape(ff.matmul(ff.reshape(x, (1, 7)),
                                                        ff.ones((7, 7))), (7,)),
                        lambda x: x + 1.0)
    fn = ff.Session(g).compile([y], feeds=[x, p])
    assert any(line.startswith("cond 'cond' runs the taken branch only: the true branch: "
                               "its matmul") for line in fn.fusion_report), fn.fusion_report
    finite = np.float32([1, -2, 3, 0, 5, 6, -7])
    with reference_session(g) as ref:
        for taken in (True, False):
            assert_matches(fn(finite, np.bool_(taken))[0],
                           ref.run(y, {x: finite, p: taken}), rtol=1e-5)


def test_more_than_16_ops_stays_a_cond():
    def long(x):
        for _ in range(17):
            x = x * 1.5
        return x
    g, x, p, y = _graph(long, lambda x: x - 1.0)
    fn = ff.Session(g, backend="numpy").compile([y], feeds=[x, p])
    assert "cond 'cond' runs the taken branch only: the true branch: 17 ops, more than 16" \
        in fn.fusion_report, fn.fusion_report
    assert fn(X, np.bool_(True))[0][3] == np.float32(2.0 * 1.5 ** 17)


def test_a_big_output_stays_a_cond():
    g, x, p, y = _graph(lambda x: x * 2.0, lambda x: x + 1.0, shape=(1025, 1024))
    fn = ff.Session(g, backend="numpy").compile([y], feeds=[x, p])
    assert "cond 'cond' runs the taken branch only: output 0 has 1049600 elements" in \
        fn.fusion_report, fn.fusion_report


@pytest.mark.parametrize("taken", [True, False])
def test_a_constant_predicate_computes_only_its_branch(gl, taken):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((7,), name="x")
        y = ff.cond(ff.constant(taken), lambda: ff.matmul(ff.reshape(x, (1, 7)),
                                                          ff.ones((7, 2))),
                    lambda: ff.zeros((1, 2)) - ff.reduce_sum(x))
    fn = ff.Session(g).compile([y], feeds=[x])
    label = "true" if taken else "false"
    assert f"cond 'cond': the predicate is constant, only its {label} branch is computed" \
        in fn.fusion_report, fn.fusion_report
    assert not any(n.op == "cond" for n in fn.graph.nodes)
    finite = np.float32([1, -2, 3, 0, 5, 6, -7])
    with reference_session(g) as ref:
        assert_matches(fn(finite)[0], ref.run(y, {x: finite}), rtol=1e-5)


def test_a_select_inside_a_loop_body_equals_the_loop_as_built(gl):
    """Collatz-like steps: a cond on the parity inside a while_loop."""
    g = ff.Graph()
    with g.as_default():
        n0 = ff.placeholder((), "int32", name="n")
        steps, _ = ff.while_loop(
            lambda i, n: n > 1,
            lambda i, n: (i + 1, ff.cond(ff.equal(n % 2, 0), lambda: n // 2,
                                          lambda: 3 * n + 1)),
            (ff.constant(0), n0), maximum_iterations=200)
    with ff.Session(g) as sess, reference_session(g) as ref:
        for start in (1, 6, 27):
            assert sess.run(steps, {n0: start}) == ref.run(steps, {n0: start})
        assert sess.run(steps, {n0: 27}) == 111
