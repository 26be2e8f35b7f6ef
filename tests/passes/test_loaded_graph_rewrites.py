"""A graph loaded from a file compiles as the graph built in Python does: the passes
compare op names by value, and a loaded graph's names are strings of the file's (not the
interned literals of the code that built it)."""
import numpy as np

import fragflow as ff


def _compiled(graph, fetches, feeds):
    """The compiled graph's text: ops, steps, attrs, names."""
    fn = ff.Session(graph, backend="numpy").compile(fetches, feeds=feeds)
    return ff.dump(fn.graph)


def test_simplify_and_fusion_rewrite_a_loaded_graph_as_the_built_one():
    g = ff.Graph("built")
    with g.as_default():
        x = ff.placeholder((4, 3), name="x")
        b = ff.placeholder((3,), name="b")
        y = ff.tanh(x - ff.constant(np.zeros((4, 3), np.float32)) + b)   # x - 0: simplify
        db, = ff.gradients(ff.reduce_sum(y * y), [b])
        z = ff.tanh(db * 2.0)                      # sum_like + epilogue: fused_sum_like
    loaded = ff.load_graph(ff.dump(g, format="json"))
    names = [y.name, z.name]
    want = _compiled(g, [y, z], [x, b])
    got = _compiled(loaded, [loaded.value(n) for n in names],
                    [loaded.value(x.name), loaded.value(b.name)])
    assert "fused_sum_like" in want and "constant 0" not in want, want
    assert got == want
    xb = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    bb = np.float32([0.5, -0.5, 0.0])
    with ff.Session(loaded, backend="numpy", passes=[]) as ref, \
            ff.Session(loaded, backend="numpy") as full:
        fetches = [loaded.value(n) for n in names]
        feed = {loaded.value(x.name): xb, loaded.value(b.name): bb}
        for a, e in zip(full.run(fetches, feed), ref.run(fetches, feed)):
            np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-7)


def test_simplify_alone_cancels_or_merges_a_transpose_pair():
    """simplify on its own (layout_transposes, earlier in the pipeline, would take the
    pair first): an identity composition leaves no transpose, another one transpose
    with the composed permutation; both against the graph as built."""
    xb = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for inner, outer, left in (((1, 2, 0), (2, 0, 1), 0), ((1, 0, 2), (0, 2, 1), 1)):
        g = ff.Graph()
        with g.as_default():
            x = ff.placeholder((2, 3, 4), name="x")
            y = ff.transpose(ff.transpose(x, inner), outer)
        fn = ff.Session(g, backend="numpy").compile([y], feeds=[x], passes=["simplify"])
        (got,) = fn(xb)
        assert [n.op for n in fn.graph.nodes].count("transpose") == left
        want = ff.Session(g, backend="numpy", passes=[]).run(y, {x: xb})
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got, xb.transpose(inner).transpose(outer))
