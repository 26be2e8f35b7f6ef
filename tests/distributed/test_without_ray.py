"""fragflow.distributed's pieces that need no Ray: importing it, the error without Ray,
how a global batch is split, and the progress line."""
import sys

import numpy as np
import pytest

import fragflow as ff
from fragflow.distributed import RayNotInstalledError, StepStats, predict
from fragflow.distributed.training import _split


def test_without_ray_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)          # import ray -> ImportError
    with pytest.raises(RayNotInstalledError, match=r"pip install 'fragflow\[ray\]'") as err:
        predict(None, None)
    assert isinstance(err.value, ff.FragflowError)


@pytest.mark.parametrize("size, workers, want", [
    (10, 2, [5, 5]), (9, 2, [4, 5]), (7, 3, [2, 3, 2]), (1, 2, [0, 1]), (0, 2, [0, 0])])
def test_a_global_batch_splits_into_contiguous_slices(size, workers, want):
    x = np.arange(size * 2, dtype=np.float32).reshape(size, 2)
    y = np.arange(size, dtype=np.int32)
    shards = _split((x, y), workers)
    assert [len(s[0]) for s in shards] == want
    np.testing.assert_array_equal(np.concatenate([s[0] for s in shards]), x)
    np.testing.assert_array_equal(np.concatenate([s[1] for s in shards]), y)


def test_a_batch_of_unequal_arrays_is_refused():
    with pytest.raises(ff.FeedError, match="differ in length"):
        _split((np.zeros((4, 2)), np.zeros(3)), 2)


def test_the_progress_line_gives_examples_per_second_per_worker_and_in_total():
    stats = StepStats(step=3, loss=0.5, examples=[32, 32], seconds=0.1, compute=[0.05, 0.06],
                      apply=0.01, allreduce=0.002, transfer=0.028)
    line = stats.line(10)
    assert line.startswith("step 3/10  loss 0.50000  640 ex/s (w0 320, w1 320)")
    assert "compute 60.0 ms" in line and "allreduce 2.0 ms" in line
