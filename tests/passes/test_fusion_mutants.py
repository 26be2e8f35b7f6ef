"""passes/fusion.py's step limit, written for the mutants that `make mutation` found
alive (tests/mutation/run.py): a chain of 70 elementwise ops fuses into kernels of
at most MAX_STEPS (32) ops, full ones where the chain is long enough, and a matmul's
epilogue takes MAX_STEPS ops of a longer chain; both compute what the graph as built
computes."""
import re

import numpy as np

import fragflow as ff
from fragflow.passes import fusion
from tests.reference import assert_matches, reference_session


def test_a_long_chain_fuses_in_kernels_of_at_most_max_steps_ops():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5,), name="x")
        y = x
        for i in range(70):
            y = y * 0.5 + 0.25 if i % 2 else ff.sin(y)
    value = np.linspace(-2, 2, 5).astype(np.float32)
    with ff.Session(g, backend="numpy") as sess:
        report = sess.compile([y], feeds=[x]).fusion_report
        out = sess.run(y, {x: value})
    sizes = [int(m.group(1)) for line in report
             for m in [re.match(r"fused (\d+) ops into one kernel", line)] if m]
    assert max(sizes) == fusion.MAX_STEPS == 32 and sum(sizes) >= 70, report
    with reference_session(g) as ref:
        assert_matches(out, ref.run(y, {x: value}), rtol=1e-6)


def test_a_matmul_epilogue_takes_max_steps_ops():
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder((4, 3), name="a")
        b = ff.placeholder((3, 5), name="b")
        y = ff.matmul(a, b)
        for i in range(40):
            y = y * 0.5 + 0.25 if i % 2 else ff.sin(y)
    rng = np.random.default_rng(1)
    feeds = {a: rng.standard_normal((4, 3)).astype(np.float32),
             b: rng.standard_normal((3, 5)).astype(np.float32)}
    with ff.Session(g, backend="numpy") as sess:
        report = sess.compile([y], feeds=[a, b]).fusion_report
        out = sess.run(y, feeds)
    (epilogue,) = [line for line in report if line.startswith("fused matmul 'matmul' with")]
    assert epilogue.count(", ") + 1 == fusion.MAX_STEPS, epilogue
    with reference_session(g) as ref:
        assert_matches(out, ref.run(y, feeds), rtol=1e-5)
