"""Sessions used from several threads at once (issue 12).

A GL context is current on one thread at a time and GL calls on any other thread do
nothing: before the fix, 4 threads sharing a session got the previous run's output
(no error), and sessions made in their own threads failed with "framebuffer status
0x0". Every result here is compared exactly with the numpy reference executor; the
inputs are small integers, so float32 arithmetic is exact on both."""
import threading

import numpy as np
import pytest

import fragflow as ff

THREADS, RUNS = 4, 50


def small_graph():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5, 6), "float32", name="x")
        w = ff.Variable(np.arange(-9, 9, dtype=np.float32).reshape(6, 3), name="w")
        y = ff.relu(x @ w - 2.0) * 0.5 + 1.0
        s = ff.sum(y, axis=1)
    return g, x, y, s


def inputs(seed: int) -> list:
    """RUNS distinct inputs per thread: a stale result cannot pass for a fresh one."""
    rng = np.random.default_rng(seed)
    return [rng.integers(-4, 5, (5, 6)).astype(np.float32) for _ in range(RUNS)]


def in_threads(work, count=THREADS):
    """Run work(i) in `count` threads started together; re-raise the first error."""
    start = threading.Barrier(count)
    errors = []

    def body(i):
        try:
            start.wait(timeout=30)
            work(i)
        except BaseException as err:      # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]


def reference(g, fetches, xs, x):
    with ff.Session(g, backend="numpy", passes=[]) as ref:
        return [ref.run(fetches, {x: xb}) for xb in xs]


def every(per_thread: dict) -> list:
    return [r for i in sorted(per_thread) for r in per_thread[i]]


def assert_all_exact(got, expected):
    wrong = sum(not all(np.array_equal(a, b) for a, b in zip(g, e))
                for g, e in zip(got, expected))
    assert wrong == 0, f"{wrong} of {len(got)} results differ from the numpy reference"


def test_threads_sharing_one_session_get_their_own_results(gl):
    g, x, y, s = small_graph()
    feeds = {i: inputs(i) for i in range(THREADS)}
    results = {i: [] for i in range(THREADS)}
    with ff.Session(g) as sess:
        sess.run([y, s], {x: feeds[0][0]})         # compiled in the main thread

        def work(i):
            for xb in feeds[i]:
                results[i].append(sess.run([y, s], {x: xb}))
        in_threads(work)
        main = sess.run([y, s], {x: feeds[0][1]})  # still right in the main thread
    assert_all_exact(every(results), every({i: reference(g, [y, s], feeds[i], x)
                                            for i in feeds}))
    assert_all_exact([main], reference(g, [y, s], feeds[0][1:2], x))


def test_threads_with_sessions_of_their_own(gl):
    g, x, y, s = small_graph()
    feeds = {i: inputs(100 + i) for i in range(THREADS)}
    results = {i: [] for i in range(THREADS)}

    def work(i):
        with ff.Session(g) as sess:                # made, run and closed in the thread
            for xb in feeds[i]:
                results[i].append(sess.run([y, s], {x: xb}))
    in_threads(work)
    assert_all_exact(every(results), every({i: reference(g, [y, s], feeds[i], x)
                                            for i in feeds}))


def test_a_compiled_function_shared_by_threads(gl):
    g, x, y, s = small_graph()
    feeds = {i: inputs(200 + i) for i in range(THREADS)}
    results = {i: [] for i in range(THREADS)}
    with ff.Session(g) as sess:
        fn = sess.compile([y, s], feeds=[x])

        def work(i):
            for xb in feeds[i]:
                results[i].append(fn(xb))
        in_threads(work)
    assert_all_exact(every(results), every({i: reference(g, [y, s], feeds[i], x)
                                            for i in feeds}))


@pytest.mark.parametrize("backend", ["gl", "numpy"])
def test_runs_from_threads_are_atomic(backend, request):
    """Each run reads the counter and writes it back whole: no update is lost."""
    if backend == "gl":
        request.getfixturevalue("gl")
    g = ff.Graph()
    with g.as_default():
        count = ff.Variable(np.zeros(3, np.float32), name="count")
        step = count.assign(count + 1.0)
    with ff.Session(g, backend=backend) as sess:
        def work(i):
            for _ in range(RUNS):
                sess.run(step)
        in_threads(work)
        assert np.array_equal(sess.get(count), np.full(3, THREADS * RUNS, np.float32))


@pytest.mark.parametrize("backend", ["gl", "numpy"])
def test_a_plan_from_the_compile_driver_runs_from_threads_without_a_lock(backend, request):
    """runtime/driver.compile's plan, run from threads by a caller that holds no lock:
    each run is whole (the GL plan enters the context's section itself, the numpy plan
    takes its variable store's lock), so every result is right and no update is lost."""
    from fragflow.ir.ops.state import RUN_COUNTER
    from fragflow.runtime import driver
    from fragflow.runtime.backend import get_backend
    if backend == "gl":
        request.getfixturevalue("gl")
    g, x, y, s = small_graph()
    with g.as_default():
        count = ff.Variable(np.zeros(3, np.float32), name="count")
        step = count.assign(count + 1.0)
    chosen = get_backend(backend)
    compiled = driver.compile(g, [y.value, s.value, step.value], {x.value: x.value.type},
                              chosen)
    plan = compiled.plan
    feeds = {i: inputs(300 + i) for i in range(THREADS)}
    results = {i: [] for i in range(THREADS)}
    name = compiled.feed_names[x.value]

    def work(i):
        for xb in feeds[i]:
            results[i].append(plan.run({name: xb, RUN_COUNTER: np.array(0, np.int32)})[:2])
    try:
        in_threads(work)
        final = plan.run({name: feeds[0][0], RUN_COUNTER: np.array(0, np.int32)})[2]
    finally:
        with chosen.lock:
            chosen.release_plan(plan)
            compiled.variables.release()
    assert_all_exact(every(results), every({i: reference(g, [y, s], feeds[i], x)
                                            for i in feeds}))
    assert np.array_equal(final, np.full(3, THREADS * RUNS + 1, np.float32))


def test_variables_set_and_read_from_threads(gl):
    g = ff.Graph()
    with g.as_default():
        vs = [ff.Variable(np.zeros(7, np.float32), name=f"v{i}") for i in range(THREADS)]
    with ff.Session(g) as sess:
        def work(i):
            for k in range(RUNS):
                value = np.full(7, i * 1000 + k, np.float32)
                sess.set(vs[i], value)
                assert np.array_equal(sess.get(vs[i]), value)
        in_threads(work)
        for i in range(THREADS):
            assert np.array_equal(sess.get(vs[i]), np.full(7, i * 1000 + RUNS - 1))


def test_default_graphs_are_per_thread():
    """Two threads inside as_default() of two graphs, building in lockstep: each
    graph gets only its own thread's nodes. Outside as_default() every thread builds
    into the one global default graph, as in TensorFlow."""
    graphs = [ff.Graph(f"g{i}") for i in range(2)]
    step = threading.Barrier(2)
    seen_outside = [None, None]

    def work(i):
        seen_outside[i] = ff.get_default_graph()
        with graphs[i].as_default():
            for k in range(20):
                step.wait(timeout=10)             # both threads inside as_default()
                ff.constant(float(k), name=f"t{i}_c{k}")
                assert ff.get_default_graph() is graphs[i]
        assert ff.get_default_graph() is seen_outside[i]
    with ff.Graph("main").as_default() as mine:   # the main thread's stack is its own
        in_threads(work, count=2)
        assert ff.get_default_graph() is mine
    for i, graph in enumerate(graphs):
        names = [n.name for n in graph.nodes]
        assert names == [f"t{i}_c{k}" for k in range(20)], names
    assert seen_outside[0] is seen_outside[1] is ff.get_default_graph()


def test_sections_nest_and_leave_the_context_current_nowhere(gl):
    ctx = gl.context
    with ctx.section:
        assert ctx._owner == threading.get_ident()
        with ctx.section:                         # nested: no switch
            assert ctx._owner == threading.get_ident()
        assert ctx._owner == threading.get_ident()
    assert ctx._owner is None                     # any thread can take it now


def test_a_context_held_by_hand_on_another_thread_is_a_clear_error(gl):
    """make_current() outside a section (raw-GL scripts) pins the context to that
    thread; a session on another thread then says so instead of computing nothing."""
    g, x, y, s = small_graph()
    held, done = threading.Event(), threading.Event()

    def hold():
        gl.context.make_current()
        held.set()
        done.wait(timeout=30)
        gl.context.release_current()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(timeout=30)
        with ff.Session(g) as sess:
            with pytest.raises(ff.BackendError, match="current on another thread.*"
                                                      "release_current"):
                sess.run(s, {x: np.ones((5, 6), np.float32)})
            done.set()
            holder.join(timeout=30)
            xb = inputs(7)[0]
            assert_all_exact([sess.run([y, s], {x: xb})], reference(g, [y, s], [xb], x))
    finally:
        done.set()
        holder.join(timeout=30)
