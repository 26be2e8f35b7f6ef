"""Each pass on its own, on the numpy executor: the graph before a pass against the
graph after it, for every pass of the default pipeline in its place (the pipeline up to
it against the pipeline up to and with it), on random graphs around the patterns the
passes rewrite (tests/passes/test_random_head_graphs.py's generator: matmul, conv and
depthwise heads, losses, bias adds, reshape round trips with operands, casts, pools,
gradients of first and second order; tests/passes/test_properties.py's elementwise and
reduction graphs), and on the graph as built. No GL: a pass's error shows on the
executor that has no kernels to blame."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.passes import DEFAULT_PIPELINE
from tests.passes import test_random_head_graphs as heads
from tests.reference import assert_matches

STEPS = [name for name in DEFAULT_PIPELINE if name != "verify"]
SEEDS = range(24)


def _close(got, want, what):
    for k, (a, e) in enumerate(zip(got, want)):
        scale = 1 + float(np.max(np.abs(np.nan_to_num(e, posinf=0, neginf=0)), initial=0))
        assert_matches(a, e, rtol=1e-4, atol=1e-5 * scale, what=f"{what}, fetch {k}")


@pytest.fixture(scope="module")
def graphs():
    """(graph, fetches, feeds, results on the graph as built) per seed."""
    out = []
    for seed in SEEDS:
        g, fetches, feeds = heads.build(seed)
        with ff.Session(g, backend="numpy", passes=[]) as ref:
            out.append((g, fetches, feeds, ref.run(fetches, feeds)))
    return out


@pytest.mark.parametrize("step", STEPS)
def test_a_pass_in_its_place_keeps_the_results(graphs, step):
    k = STEPS.index(step)
    for seed, (g, fetches, feeds, _) in zip(SEEDS, graphs):
        with ff.Session(g, backend="numpy", passes=STEPS[:k]) as before, \
                ff.Session(g, backend="numpy", passes=STEPS[:k + 1]) as after:
            _close(after.run(fetches, feeds), before.run(fetches, feeds),
                   f"{step} on seed {seed}")


@pytest.mark.parametrize("step", STEPS)
def test_a_pass_alone_keeps_the_graph_as_built(graphs, step):
    for seed, (g, fetches, feeds, want) in zip(SEEDS, graphs):
        with ff.Session(g, backend="numpy", passes=[step]) as alone:
            _close(alone.run(fetches, feeds), want, f"{step} alone on seed {seed}")


def test_the_whole_pipeline_keeps_the_graph_as_built(graphs):
    for seed, (g, fetches, feeds, want) in zip(SEEDS, graphs):
        with ff.Session(g, backend="numpy") as full:
            _close(full.run(fetches, feeds), want, f"the pipeline on seed {seed}")
