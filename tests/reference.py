"""Run a graph on GL (every pass, every kernel) and on the numpy executor running the
graph as built (no passes: the oracle), and compare the two."""
from __future__ import annotations

import numpy as np

import fragflow as ff


def reference_session(graph, **options):
    """The oracle: the numpy executor running the graph as built (no passes), so that a
    rewrite's error cannot cancel out against the same rewrite on the reference side."""
    return ff.Session(graph, backend="numpy", passes=[], **options)


def run_both(graph, fetches, feed_dict=None, tuning=None):
    """(GL results with every pass and kernel, the numpy executor's on the graph as
    built) for the same fetches and feeds. tuning: the GL side's ff.Tuning (a strategy
    preferred or left out, a knob changed); None: the device's."""
    with reference_session(graph) as ref_sess:
        ref = ref_sess.run(fetches, feed_dict)
    with ff.Session(graph, tuning=tuning) as gl_sess:
        out = gl_sess.run(fetches, feed_dict)
    return out, ref


def check_both(graph, fetches, feed_dict=None, tuning=None, rtol=1e-5):
    """run_both, then each fetch's GL result against the oracle's within rtol, with an
    absolute slack of rtol * (1 + the oracle's largest finite magnitude) for sums of
    products, where an element can be tiny by cancellation. Returns (out, ref)."""
    out, ref = run_both(graph, fetches, feed_dict, tuning)
    for name in fetches:
        scale = float(np.max(np.abs(np.nan_to_num(ref[name], posinf=0, neginf=0)),
                             initial=0.0))
        assert_matches(out[name], ref[name], rtol=rtol, atol=rtol * (1 + scale), what=name)
    return out, ref


def gl_kernels(graph, fetches, feeds, tuning=None):
    """The kernels a GL Session compiles for fetches from feeds (placeholders)."""
    with ff.Session(graph, tuning=tuning) as sess:
        return sess.compile(fetches, feeds=feeds).kernels


def assert_matches(actual, expected, rtol=1e-5, atol=None, scale=None, what=""):
    """Elementwise |a - e| <= atol + rtol * |e| with NaN matching NaN and infinities
    matching exactly; int and bool exactly. scale (an array broadcastable to the output)
    sets atol = rtol * scale for sums of products, where |e| can be tiny by cancellation."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    if actual.dtype != np.float32:
        bad = actual != expected
        assert not bad.any(), (f"{what}: {bad.sum()} of {bad.size} differ, first at "
                               f"{np.argwhere(bad)[0]}: {actual[bad][0]} vs {expected[bad][0]}")
        return
    if atol is None:
        atol = rtol * np.abs(scale) if scale is not None else 1e-6
    a64, e64 = actual.astype(np.float64), expected.astype(np.float64)
    with np.errstate(invalid="ignore"):       # inf - inf: handled by inf_ok below
        diff = np.abs(a64 - e64)
    nan_ok = np.isnan(a64) == np.isnan(e64)
    finite = np.isfinite(e64)
    inf_ok = np.where(np.isinf(e64), a64 == e64, True)
    with np.errstate(invalid="ignore"):       # 0 * inf where rtol is 0: masked anyway
        close = np.where(finite, diff <= atol + rtol * np.abs(e64), True)
    good = nan_ok & inf_ok & (close | np.isnan(e64))
    if not good.all():
        idx = tuple(np.argwhere(~good)[0])
        raise AssertionError(f"{what}: {np.sum(~good)} of {good.size} differ beyond "
                             f"rtol={rtol}; first at {idx}: got {actual[idx]!r}, "
                             f"expected {expected[idx]!r}")


def normal(rng, *shape):
    """float32 standard normal samples of the given shape."""
    return rng.standard_normal(shape).astype(np.float32)


def compiled_kernels(build, shapes):
    """The GL kernels of build(*placeholders) with placeholders of the given shapes,
    compiled with every pass."""
    g = ff.Graph()
    with g.as_default():
        feeds = [ff.placeholder(s, name=f"in{i}") for i, s in enumerate(shapes)]
        y = build(*feeds)
    with ff.Session(g) as sess:
        return sess.compile([y], feeds=feeds).kernels


def fed_placeholders(arrays):
    """(placeholders, feed_dict) standing for arrays (float kinds as float32, integers
    as int32, bools as bool): graphs of fed values, since constants would be folded on
    the GL side by the very numpy references the test compares with."""
    kinds = {"f": "float32", "i": "int32", "u": "int32", "b": "bool"}
    values = [np.asarray(a).astype(kinds[np.asarray(a).dtype.kind]) for a in arrays]
    holders = [ff.placeholder(v.shape, v.dtype.name, name=f"in{i}")
               for i, v in enumerate(values)]
    return holders, dict(zip(holders, values))


def version_line() -> str:
    """The first line of every generated shader on this process's GL context:
    '#version 330 core' on desktop GL, '#version 300 es' on OpenGL ES (make test-gles)."""
    from fragflow.runtime.device import Device
    return Device.get().limits.version_line
