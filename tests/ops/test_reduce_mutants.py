"""ir/ops/reduce.py's int32 references, written for the mutants that `make mutation`
found alive (tests/mutation/run.py): max and min of int32 are exact, and an int32
mean truncates toward zero (TensorFlow's integer division of the sum). Hand values
on the numpy executor running the graph as built."""
import numpy as np

import fragflow as ff
from tests.reference import reference_session


def test_int32_reductions():
    x = np.array([[3, -7, 5], [-2, -9, 1]], np.int32)
    g = ff.Graph()
    with g.as_default():
        p = ff.placeholder((2, 3), "int32", name="x")
        fetches = {"max": ff.reduce_max(p, axis=1), "min": ff.reduce_min(p, axis=1),
                   "mean": ff.reduce_mean(p, axis=1), "sum": ff.reduce_sum(p, axis=1)}
    with reference_session(g) as sess:
        out = sess.run(fetches, {p: x})
    np.testing.assert_array_equal(out["max"], [5, 1])
    np.testing.assert_array_equal(out["min"], [-7, -9])
    np.testing.assert_array_equal(out["mean"], [0, -3])     # 1 / 3 -> 0, -10 / 3 -> -3
    np.testing.assert_array_equal(out["sum"], [1, -10])
    assert all(v.dtype == np.int32 for v in out.values())
