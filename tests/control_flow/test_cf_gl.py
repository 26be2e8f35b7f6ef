"""Control flow on the GL backend: until the GL runtime replays sub-graphs, a graph
holding while_loop, cond or scan is a clear FragflowError naming the op and the user's
line, never a raw traceback."""
import numpy as np
import pytest

import fragflow as tf


@pytest.mark.parametrize("make", [
    lambda x: tf.while_loop(lambda v: tf.reduce_sum(v) < 10.0, lambda v: v * 2.0, x),
    lambda x: tf.cond(tf.reduce_sum(x) > 0, lambda: x + 1.0, lambda: x - 1.0),
    lambda x: tf.scan(lambda a, e: a + e, x[None, :], initializer=tf.zeros([3])),
], ids=["while_loop", "cond", "scan"])
def test_the_gl_session_names_the_op_it_cannot_run(gl, make):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [3], name="x")
        y = make(x)
    op = y.op.op
    with pytest.raises(tf.FragflowError, match=rf"{op} '.*' \(.*test_cf_gl\.py:\d+\): "
                       rf"{op} runs on backend='numpy' only for now"):
        tf.Session(g).run(y, {x: np.ones(3, np.float32)})
