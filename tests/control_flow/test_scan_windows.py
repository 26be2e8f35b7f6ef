"""A scan's slices and ys read and written in place (runtime/control_flow.py windows,
codegen/windows.py): results against the numpy executor running the graph as built;
no copy drawn per step where every kernel honours its windows (copies counted with a
spy, for two step counts); the fallbacks (sizes not a multiple of 4, kernels that
address a texture their own way, carries returned as they are or twice) still right;
the same bits as the copying path."""
import numpy as np
import pytest

import fragflow as tf
from fragflow.codegen.kernel import Binding
from fragflow.codegen.layout import Layout
from fragflow.codegen.windows import unsafe_windows
from fragflow.runtime import control_flow as cf
from tests.control_flow.helpers import check_close, count_calls, graph_of

RNG = np.random.default_rng(2025)


@pytest.fixture
def copies(gl, monkeypatch):
    """Copy draws and merges control flow makes, counted."""
    counts = {"copies": 0, "merges": 0}
    count_calls(monkeypatch, cf._GPUCopy, "_draw", counts, "copies")
    count_calls(monkeypatch, cf._GPUCopy, "merge", counts, "merges")
    return counts


def _graph(build, shapes):
    return graph_of(build, shapes, "windows")


def _run(copies, build, shapes, values, tuning=None):
    """(GL results of the second run, its counts, numpy's results, the scans' windows)."""
    g, feeds, fetches = _graph(build, shapes)
    feed = {feeds[k]: v for k, v in values.items()}
    want = tf.Session(g, backend="numpy", passes=[]).run(fetches, feed)
    with tf.Session(g, tuning=tuning) as sess:
        sess.run(fetches, feed)
        copies.update(copies=0, merges=0)
        got = sess.run(fetches, feed)
        counts = dict(copies)
        used = _windows_of(sess)
    return got, counts, want, used


def _windows_of(sess):
    """The windows every scan sub-plan of the session's plans kept."""
    found = []
    for compiled in list(sess._plans.values()):
        plan = getattr(compiled, "plan", None)
        for key, sub in getattr(plan, "_plans", {}).items():
            if key[0] == "scan":
                found.append(dict(sub.windows))
    return found


_check = check_close


def _rnn(x, w, u):
    """h = tanh(x_t w + h u): h is the carry and the ys (read by the next step inside
    the stacked result's pair), x_t read inside x."""
    hs = tf.scan(lambda h, xt: tf.tanh(tf.matmul(xt, w) + tf.matmul(h, u)), x,
                 initializer=tf.zeros((4, 8)))
    return [hs, hs[-1] * 1.0]


def _rnn_feeds(steps):
    return ({"x": (tf.float32, (steps, 4, 8)), "w": (tf.float32, (8, 8)),
             "u": (tf.float32, (8, 8))},
            {"x": RNG.normal(size=(steps, 4, 8)).astype(np.float32),
             "w": (RNG.normal(size=(8, 8)) * 0.5).astype(np.float32),
             "u": (RNG.normal(size=(8, 8)) * 0.5).astype(np.float32)})


@pytest.mark.parametrize("steps", [1, 2, 7, 8])
def test_an_rnn_scan_copies_nothing_per_step(copies, steps):
    shapes, values = _rnn_feeds(steps)
    got, counts, want, used = _run(copies, _rnn, shapes, values)
    _check(got, want)
    assert used and set(used[0]) == {("param", 0), ("param", 1), ("output", 1)}
    # the initial carry in, the last carry out: two copies and one merge, any steps
    assert counts == {"copies": 2, "merges": 1}


def test_the_copies_do_not_grow_with_the_steps(copies):
    seen = []
    for steps in (3, 30):
        shapes, values = _rnn_feeds(steps)
        got, counts, want, _ = _run(copies, _rnn, shapes, values)
        _check(got, want)
        seen.append(counts)
    assert seen[0] == seen[1]


def _reverse_and_more(x, k, w):
    """A reverse scan with two elems (one int32), three ys (one int32, one not carried,
    one a view of a kernel's output), and a capture."""
    def step(acc, e):
        h, n = acc[0], acc[1]
        xt, kt = e
        h2 = tf.tanh(tf.matmul(xt, w) + h * 0.5)
        n2 = n + kt
        return (h2, n2, n2 * 2, tf.reshape(h2 * 3.0, (8, 2)))
    out = tf.scan(step, (x, k), initializer=(tf.zeros((4, 4)), tf.zeros((4, 4), tf.int32),
                                             tf.zeros((4, 4), tf.int32), tf.zeros((8, 2))),
                  reverse=True)
    return list(out)


@pytest.mark.parametrize("steps", [5, 6])
def test_a_reverse_scan_with_int_and_view_outputs(copies, steps):
    shapes = {"x": (tf.float32, (steps, 4, 4)), "k": (tf.int32, (steps, 4, 4)),
              "w": (tf.float32, (4, 4))}
    values = {"x": RNG.normal(size=(steps, 4, 4)).astype(np.float32),
              "k": RNG.integers(-5, 6, size=(steps, 4, 4)).astype(np.int32),
              "w": RNG.normal(size=(4, 4)).astype(np.float32)}
    got, counts, want, used = _run(copies, _reverse_and_more, shapes, values)
    _check(got, want)
    assert used and ("param", 4) in used[0] and ("param", 5) in used[0]


def _odd_sizes(x):
    """Slices and ys of 15 elements: steps share texels, so they are copied."""
    return [tf.scan(lambda a, xt: a * 0.5 + tf.exp(xt), x)]


def test_sizes_not_a_multiple_of_four_are_copied(copies):
    counts = []
    for steps in (3, 9):
        x = RNG.normal(size=(steps, 3, 5)).astype(np.float32)
        got, c, want, used = _run(copies, _odd_sizes, {"x": (tf.float32, (steps, 3, 5))},
                                  {"x": x})
        _check(got, want)
        assert not any(used)
        counts.append(c["copies"])
    assert counts[1] - counts[0] == 6 * 2       # a slice and a y per step


def _reduced_slice(x):
    """The slice read by a reduction (its kernels address textures their own way) and
    by an elementwise op: the window is dropped, the slice copied, the result right."""
    return [tf.scan(lambda a, xt: a + tf.reduce_sum(xt, axis=1) + xt[:, 0], x,
                    initializer=tf.zeros((4,)))]


def test_a_kernel_that_cannot_read_a_window_gets_a_copy(copies):
    x = RNG.normal(size=(6, 4, 8)).astype(np.float32)
    got, counts, want, used = _run(copies, _reduced_slice,
                                   {"x": (tf.float32, (6, 4, 8))}, {"x": x})
    _check(got, want)
    assert used and ("param", 1) not in used[0]
    assert counts["copies"] >= 6                # one slice per step at least


def _carry_kinds(x):
    """Carries returned as they are, returned twice, unused by the body, and carried
    without being a y."""
    def body(acc, xt):
        keep, twice_a, twice_b, unused, swapped = acc
        new = tf.tanh(xt + swapped)
        return (keep, new, new, xt * 2.0, swapped * 0.5 + xt)
    init = tuple(tf.ones((4, 4)) * float(i) for i in range(5))
    return list(tf.scan(body, x, initializer=init))


def test_carries_of_every_kind(copies):
    x = RNG.normal(size=(5, 4, 4)).astype(np.float32)
    got, counts, want, used = _run(copies, _carry_kinds,
                                   {"x": (tf.float32, (5, 4, 4))}, {"x": x})
    _check(got, want)
    assert used


def test_windows_give_the_bits_of_the_copying_path(copies):
    shapes, values = _rnn_feeds(9)
    windowed = _run(copies, _rnn, shapes, values)
    copied = _run(copies, _rnn, shapes, values, tf.Tuning().with_(scan_windows=False))
    assert any(windowed[3]) and not any(copied[3])
    for a, b in zip(windowed[0], copied[0]):
        np.testing.assert_array_equal(a, b)
    assert copied[1]["copies"] > windowed[1]["copies"]


def test_memory_stays_flat_over_runs(gl):
    shapes, values = _rnn_feeds(12)
    g, feeds, fetches = _graph(_rnn, shapes)
    feed = {feeds[k]: v for k, v in values.items()}
    with tf.Session(g) as sess:
        sess.run(fetches, feed)
        before = sess.memory()["textures"]
        for _ in range(5):
            sess.run(fetches, feed)
        assert sess.memory()["textures"] == before


class _Kernel:
    """The parts of a Kernel unsafe_windows reads."""

    def __init__(self, source, inputs, output, output_layers=0):
        self.compiled_source = source
        self.inputs, self.output_layers = inputs, output_layers
        self.outputs = (output,)


def _binding(name, window=""):
    return Binding(name, name, Layout((16,), "float32", 4, 1, window=window))


def test_unsafe_windows_reads_the_source():
    x, out = _binding("x0", "ff_window0"), _binding("ff_out", "ff_window1")
    safe = ("uniform sampler2D x0;   // x: f32[16]\n"
            "uniform int ff_window0;\n"
            "vec4 texel_x0(int t) { return texelFetch(x0, ivec2((t + ff_window0) % 4, 0), 0); }\n"
            "int texel = int(gl_FragCoord.y) * 4 + int(gl_FragCoord.x) - ff_window1;\n")
    assert unsafe_windows(_Kernel(safe, (x,), out)) == set()
    uv = safe + "vec4 v = textureLod(x0, ff_uv, 0.0);\n"
    assert unsafe_windows(_Kernel(uv, (x,), out)) == {"ff_window0"}
    coord = safe + "ivec2 xy = ivec2(gl_FragCoord.xy);\n"
    assert unsafe_windows(_Kernel(coord, (x,), out)) == {"ff_window1"}
    assert unsafe_windows(_Kernel(safe, (x,), out, output_layers=2)) == {"ff_window1"}
    no_main = safe.replace("gl_FragCoord", "p")
    assert unsafe_windows(_Kernel(no_main, (x,), out)) == {"ff_window1"}
    plain = _binding("x0")
    assert unsafe_windows(_Kernel(uv, (plain,), _binding("ff_out"))) == set()


def test_ten_thousand_steps_hold_as_many_textures_as_ten(gl):
    """Windows allocate nothing per step: the same textures (the stacked results grow
    with the steps, their number does not)."""
    held = []
    for steps in (10, 10_000):
        g, feeds, fetches = _graph(
            lambda x: [tf.scan(lambda h, xt: tf.tanh(h * 0.5 + xt), x)[-1]],
            {"x": (tf.float32, (steps, 8))})
        x = RNG.normal(size=(steps, 8)).astype(np.float32)
        want = tf.Session(g, backend="numpy", passes=[]).run(fetches, {feeds["x"]: x})
        with tf.Session(g) as sess:
            sess.run(fetches, {feeds["x"]: x})
            held.append(sess.memory()["textures"])
            got = sess.run(fetches, {feeds["x"]: x})
            held.append(sess.memory()["textures"])
            assert any(_windows_of(sess))
        _check(got, want)
    assert held == [held[0]] * 4


def test_the_tuning_turns_windows_off():
    assert tf.Tuning().scan_windows is True
    assert tf.Tuning().from_env("scan_windows=false").scan_windows is False
    with pytest.raises(tf.TuningError, match="scan_windows must be True or False"):
        tf.Tuning(scan_windows=1)


def test_unsafe_windows_refuses_a_windowed_output_among_several():
    """A kernel drawing two outputs (draw buffers) writes them at one texel: a window
    on either is not honoured, even where main() names it."""
    x, out = _binding("x0", "ff_window0"), _binding("ff_out", "ff_window1")
    safe = ("uniform sampler2D x0;\n"
            "vec4 texel_x0(int t) { return texelFetch(x0, ivec2((t + ff_window0) % 4, 0), 0); }\n"
            "int texel = int(gl_FragCoord.y) * 4 + int(gl_FragCoord.x) - ff_window1;\n")
    assert unsafe_windows(_Kernel(safe, (x,), out)) == set()
    two = _Kernel(safe, (x,), out)
    two.outputs = (out, _binding("ff_out1"))
    assert unsafe_windows(two) == {"ff_window1"}


def _viewed_slice(x, c):
    """The slice read through a view (a reshape: the view's window is its source's) and
    a capture of the ys' shape added elementwise (read by texel index inside the y's
    window, not at the fragment's texel)."""
    return [tf.scan(lambda a, xt: tf.tanh(a * c + tf.reshape(xt, (8, 4)) * 2.0), x,
                    initializer=tf.zeros((8, 4)))]


@pytest.mark.parametrize("steps", [3, 6])
def test_a_viewed_slice_and_a_capture_keep_their_windows(copies, steps):
    x = RNG.normal(size=(steps, 4, 8)).astype(np.float32)
    c = RNG.normal(size=(8, 4)).astype(np.float32)
    got, counts, want, used = _run(copies, _viewed_slice, {"x": (tf.float32, (steps, 4, 8)),
                                                           "c": (tf.float32, (8, 4))},
                                   {"x": x, "c": c})
    _check(got, want)
    assert used and {("param", 0), ("param", 1), ("output", 1)} <= set(used[0])
    assert counts["copies"] <= 2, counts


def _wide_rnn(x, w, u):
    """Steps of 12 texels in stacked textures 128 texels wide: windows that straddle
    two rows (a draw's rows, a fetch's row)."""
    hs = tf.scan(lambda h, xt: tf.tanh(tf.matmul(xt, w) + tf.matmul(h, u)), x,
                 initializer=tf.zeros((4, 12)))
    return [hs]


@pytest.mark.parametrize("steps", [11, 23])
def test_windows_straddling_rows(copies, steps):
    shapes = {"x": (tf.float32, (steps, 4, 12)), "w": (tf.float32, (12, 12)),
              "u": (tf.float32, (12, 12))}
    values = {"x": RNG.normal(size=(steps, 4, 12)).astype(np.float32),
              "w": (RNG.normal(size=(12, 12)) * 0.4).astype(np.float32),
              "u": (RNG.normal(size=(12, 12)) * 0.4).astype(np.float32)}
    got, counts, want, used = _run(copies, _wide_rnn, shapes, values)
    _check(got, want)
    assert used and {("param", 0), ("param", 1), ("output", 1)} <= set(used[0])


def _matmul_chain(x, w, u):
    """Kernels' intermediates whose textures the plan shares out (memory planning): the
    windowed ys' slots must be their own."""
    def body(h, xt):
        a = tf.matmul(xt, w)
        b = tf.matmul(a, u)
        c = tf.matmul(b, w)
        return tf.tanh(tf.matmul(c, u) * 0.1 + h)
    return [tf.scan(body, x, initializer=tf.zeros((4, 8)))]


def test_windowed_values_do_not_share_the_plans_textures(copies):
    shapes, values = _rnn_feeds(6)
    got, counts, want, used = _run(copies, _matmul_chain, shapes, values)
    _check(got, want, rtol=1e-4, atol=1e-4)
    assert used and ("output", 1) in used[0]


def _slice_as_y(x):
    """A y that is the element slice itself: read in place, the y copied out of it."""
    return list(tf.scan(lambda acc, xt: (acc[0] + xt, xt), x,
                        initializer=(tf.zeros((4, 8)), tf.zeros((4, 8)))))


def test_a_y_that_is_its_slice(copies):
    x = RNG.normal(size=(5, 4, 8)).astype(np.float32)
    got, counts, want, used = _run(copies, _slice_as_y, {"x": (tf.float32, (5, 4, 8))},
                                   {"x": x})
    _check(got, want)
    assert used and ("param", 2) in used[0]


def _carry_read_by_a_reduction(x):
    """The carry (also the ys) read by a reduction, which cannot read a window: its
    window is dropped, the y's kept, the carry copied out of the stacked result."""
    return [tf.scan(lambda h, xt: tf.tanh(xt + tf.reduce_sum(h, axis=0, keepdims=True)),
                    x, initializer=tf.zeros((4, 8)))]


def test_a_carry_read_by_a_reduction(copies):
    x = (RNG.normal(size=(6, 4, 8)) * 0.3).astype(np.float32)
    got, counts, want, used = _run(copies, _carry_read_by_a_reduction,
                                   {"x": (tf.float32, (6, 4, 8))}, {"x": x})
    _check(got, want)
    assert used


def _y_of_a_reduction(x):
    """The ys (also the carry) written by a reduction over the slice and the carry."""
    return [tf.scan(lambda a, xt: tf.reduce_sum(xt + a, axis=0), x,
                    initializer=tf.zeros((8,)))]


def test_a_y_written_by_a_reduction(copies):
    x = (RNG.normal(size=(6, 4, 8)) * 0.3).astype(np.float32)
    got, counts, want, used = _run(copies, _y_of_a_reduction,
                                   {"x": (tf.float32, (6, 4, 8))}, {"x": x})
    _check(got, want, rtol=1e-4, atol=1e-4)
    assert used


def _gpu_initializer(x, h0):
    """An initializer a kernel makes (resident on the GPU) and fetched too: the scan
    must not draw into its texture."""
    init = tf.tanh(h0) * 2.0
    hs = tf.scan(lambda h, xt: h * 0.5 + xt, x, initializer=init)
    return [hs, init]


def test_a_resident_initializer_is_left_as_it_is(copies):
    x = RNG.normal(size=(5, 4, 8)).astype(np.float32)
    h0 = RNG.normal(size=(4, 8)).astype(np.float32)
    got, counts, want, used = _run(copies, _gpu_initializer,
                                   {"x": (tf.float32, (5, 4, 8)), "h0": (tf.float32, (4, 8))},
                                   {"x": x, "h0": h0})
    _check(got, want)


def test_a_profile_after_a_windowed_run(gl):
    """A profile runs the body's plan whole (an observer): its windows back at texel 0."""
    shapes, values = _rnn_feeds(5)
    g, feeds, fetches = _graph(_rnn, shapes)
    feed = {feeds[k]: v for k, v in values.items()}
    want = tf.Session(g, backend="numpy", passes=[]).run(fetches, feed)
    with tf.Session(g) as sess:
        sess.run(fetches, feed)
        assert any(_windows_of(sess))
        sess.profile(fetches, feed, runs=1)
        _check(sess.run(fetches, feed), want)
    with tf.Session(g, debug=True) as sess:
        sess.run(fetches, feed)
        _check(sess.run(fetches, feed), want)


def _odd_resident_initializer(x, h0):
    """A resident initializer of 15 elements (its carry swaps textures with the body's
    result, no window) and fetched too: the scan must not draw into its texture."""
    init = tf.tanh(h0) * 2.0
    out = tf.scan(lambda acc, xt: (acc[0] * 0.5 + 1.0, tf.tanh(xt + acc[1])), x,
                  initializer=(init, tf.zeros((4, 8))))
    return list(out) + [init]


def test_an_odd_resident_initializer_is_left_as_it_is(copies):
    x = RNG.normal(size=(5, 4, 8)).astype(np.float32)
    h0 = RNG.normal(size=(3, 5)).astype(np.float32)
    got, counts, want, used = _run(copies, _odd_resident_initializer,
                                   {"x": (tf.float32, (5, 4, 8)), "h0": (tf.float32, (3, 5))},
                                   {"x": x, "h0": h0})
    _check(got, want)
    assert used and ("param", 2) in used[0]


def _slice_through_elementwise(x, w, u):
    """The slice read by an elementwise kernel whose output is not windowed (it goes
    on to a matmul): read by texel index, the slice's window kept."""
    return [tf.scan(lambda h, xt: tf.tanh(tf.matmul(tf.exp(xt) - 1.0, w) + tf.matmul(h, u)),
                    x, initializer=tf.zeros((4, 8)))]


def test_a_slice_read_by_an_elementwise_kernel_keeps_its_window(copies):
    shapes, values = _rnn_feeds(5)
    values["x"] = values["x"] * 0.3
    got, counts, want, used = _run(copies, _slice_through_elementwise, shapes, values)
    _check(got, want, rtol=1e-4, atol=1e-4)
    assert used and ("param", 1) in used[0]
