"""What the control-flow tests share: a numpy session over a graph built by a function,
graphs of placeholders, result checks and call counters."""
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


def graph_of(build, shapes, name="cf"):
    """(graph, {name: placeholder}, build(**placeholders)): shapes {name: (dtype, shape)}."""
    g = ff.Graph(name)
    with g.as_default():
        feeds = {n: ff.placeholder(dtype, shape, name=n) for n, (dtype, shape) in shapes.items()}
        fetches = build(**feeds)
    return g, feeds, fetches


def check_close(got, want, rtol=1e-5, atol=1e-5):
    """Each result of the shape and dtype of its reference, and close to it."""
    for a, b in zip(got, want):
        assert np.shape(a) == np.shape(b) and np.asarray(a).dtype == np.asarray(b).dtype
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)


def count_calls(monkeypatch, owner, method: str, counts: dict, key: str) -> None:
    """counts[key] += 1 at each call of owner.method (which still runs)."""
    real = getattr(owner, method)

    def counted(self, *args, **kw):
        counts[key] += 1
        return real(self, *args, **kw)
    monkeypatch.setattr(owner, method, counted)
