"""ir/ops/random.py's records, written for the mutants that `make mutation` found alive
(tests/mutation/run.py): a graph file that leaves out the optional attrs draws with
TensorFlow's defaults (normal: mean 0, stddev 1; uniform: [0, 1)), and a normal of
stddev 0 is its mean (on the numpy executor running the graph as built); the run
counter reaches Philox as its low and high 32-bit words."""
import json

import numpy as np

import fragflow as ff
from fragflow.ir.ops import random as random_ops
from tests.reference import reference_session


def test_a_graph_file_without_the_optional_attrs_draws_with_the_defaults(tmp_path):
    g = ff.Graph()
    with g.as_default():
        ff.random_normal((20000,), mean=3.0, stddev=5.0, seed=1, name="z")
        ff.random_uniform((20000,), minval=-4.0, maxval=9.0, seed=1, name="u")
    ff.save_graph(g, str(tmp_path / "g.json"))
    data = json.loads((tmp_path / "g.json").read_text())
    for node in data["nodes"]:
        for attr in ("mean", "stddev", "minval", "maxval"):
            node["attrs"].pop(attr, None)
    (tmp_path / "defaults.json").write_text(json.dumps(data))
    loaded = ff.load_graph(str(tmp_path / "defaults.json"))
    with reference_session(loaded) as sess:
        z, u = sess.run(["z", "u"])
    assert abs(z.mean()) < 0.05 and abs(z.std() - 1.0) < 0.05      # 20000 draws: 7 sigma
    assert u.min() >= 0.0 and u.max() < 1.0 and abs(u.mean() - 0.5) < 0.02


def test_a_normal_of_stddev_zero_is_its_mean():
    g = ff.Graph()
    with g.as_default():
        z = ff.random_normal((5,), mean=2.5, stddev=0.0, seed=3)
    with reference_session(g) as sess:
        np.testing.assert_array_equal(sess.run(z), np.full(5, 2.5, np.float32))


def test_the_run_counter_is_split_into_its_low_and_high_32_bits():
    # Philox's counter takes the session's run number as two 32-bit words
    assert random_ops._run_words(5) == (5, 0)
    assert random_ops._run_words(2 ** 31 + 5) == (2 ** 31 + 5, 0)
    assert random_ops._run_words(3 * 2 ** 32 + 7) == (7, 3)
    attrs = {"seed": 9, "stream": 1}
    assert not np.array_equal(random_ops.draw_bits(attrs, 8, 2 ** 31),
                              random_ops.draw_bits(attrs, 8, 2 ** 31 + 2 ** 32))
