"""What the control-flow tests share: a numpy session over a graph built by a function."""
from __future__ import annotations

import numpy as np

import fragflow as ff


def run(build, feeds=None, passes=None):
    """build() -> fetches, built in a fresh graph; feeds: {placeholder name: array}.
    Runs on the numpy executor, with the default pipeline (passes=None) or as built
    (passes=[])."""
    g = ff.Graph("cf")
    with g.as_default():
        fetches = build()
    sess = ff.Session(g, backend="numpy", passes=passes)
    feed = {g.value(k): np.asarray(v) for k, v in (feeds or {}).items()}
    return sess.run(fetches, feed)


def both(build, feeds=None):
    """The fetches on the numpy executor as built (passes=[]) and after the default
    pipeline, which must agree exactly."""
    a = run(build, feeds, passes=[])
    b = run(build, feeds)
    for x, y in zip(_flat(a), _flat(b)):
        np.testing.assert_array_equal(x, y)
    return a


def _flat(x):
    if isinstance(x, dict):
        return [v for k in sorted(x) for v in _flat(x[k])]
    if isinstance(x, (list, tuple)):
        return [v for item in x for v in _flat(item)]
    return [x]
