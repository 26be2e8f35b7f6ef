"""ir/ops/structure/concat.py's grouping, written for the mutants that `make mutation`
found alive (tests/mutation/run.py): more inputs than one kernel reads
(MAX_CONCAT_INPUTS) are concatenated in groups, the last group possibly of one
input; the result is numpy's concatenation of them all, in order."""
import numpy as np
import pytest

import fragflow as ff
from fragflow.ir.ops.structure.concat import MAX_CONCAT_INPUTS
from tests.reference import reference_session


@pytest.mark.parametrize("count", [MAX_CONCAT_INPUTS + 1, 2 * MAX_CONCAT_INPUTS + 3])
def test_concat_of_more_inputs_than_a_kernel_reads(count):
    arrays = [np.full((1, 2), i, np.float32) for i in range(count)]
    g = ff.Graph()
    with g.as_default():
        holders = [ff.placeholder((1, 2), name=f"in{i}") for i in range(count)]
        y = ff.concat(holders, axis=0)
    with reference_session(g) as sess:
        out = sess.run(y, dict(zip(holders, arrays)))
    np.testing.assert_array_equal(out, np.concatenate(arrays, axis=0))
