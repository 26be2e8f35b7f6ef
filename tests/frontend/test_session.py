"""Session: fetch structures, feeds, variables, memory, and the errors users meet."""
import os

import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, version_line

HERE = os.path.basename(__file__)


def small_graph():
    g = ff.Graph("small")
    with g.as_default():
        x = ff.placeholder((None, 3), "float32", name="x")
        y = ff.relu(x * 2.0 - 1.0)
        z = ff.sum(y, axis=1)
    return g, x, y, z


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_fetch_structures_come_back_in_kind(backend, request):
    if backend == "gl":
        request.getfixturevalue("gl")
    g, x, y, z = small_graph()
    xb = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    expected_y = np.maximum(xb * 2 - 1, 0)
    with ff.Session(g, backend=backend) as sess:
        single = sess.run(y, {x: xb})
        as_list = sess.run([y, z], {x: xb})
        as_tuple = sess.run((z, y), {x: xb})
        as_dict = sess.run({"y": y, "z": z}, {x: xb})
        by_name = sess.run("small/relu" if False else y.name, {"x": xb})
    assert_matches(single, expected_y)
    assert isinstance(as_list, list) and isinstance(as_tuple, tuple)
    assert_matches(as_list[1], expected_y.sum(1))
    assert_matches(as_tuple[1], expected_y)
    assert set(as_dict) == {"y", "z"}
    assert_matches(as_dict["z"], expected_y.sum(1))
    assert_matches(by_name, expected_y)


def test_tensors_key_feed_dicts_by_identity():
    g, x, y, _ = small_graph()
    assert (x == x) is True and (x == y) is False
    assert {x: 1}[x] == 1


def test_feed_with_wrong_shape_names_placeholder_and_both_shapes():
    g, x, y, _ = small_graph()
    with ff.Session(g, backend="numpy", passes=[]) as sess, pytest.raises(ff.FeedError) as err:
        sess.run(y, {x: np.zeros((2, 4), np.float32)})
    assert "'x'" in str(err.value) and "(2, 4)" in str(err.value) \
        and "(?, 3)" in str(err.value)


def test_feed_with_wrong_dtype_is_refused():
    g = ff.Graph()
    with g.as_default():
        i = ff.placeholder((2,), "int32", name="i")
        j = i + 1
    with ff.Session(g, backend="numpy", passes=[]) as sess, pytest.raises(ff.FeedError) as err:
        sess.run(j, {i: np.array([1.5, 2.5])})
    assert "'i'" in str(err.value) and "float64" in str(err.value)


def test_unfed_placeholder_names_itself_and_the_fetch():
    g, x, y, z = small_graph()
    with ff.Session(g, backend="numpy", passes=[]) as sess, pytest.raises(ff.FeedError) as err:
        sess.run(z)
    message = str(err.value)
    assert "placeholder 'x'" in message and f"'{z.name}'" in message and HERE in message


def test_feed_or_fetch_of_another_graph_is_refused():
    g, x, y, _ = small_graph()
    other, ox, oy, _ = small_graph()
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        with pytest.raises(ff.FeedError, match="another graph|not of this session"):
            sess.run(y, {ox: np.zeros((1, 3), np.float32)})
        with pytest.raises(ff.FetchError, match="not to this session's graph"):
            sess.run(oy, {x: np.zeros((1, 3), np.float32)})


def test_any_tensor_can_be_fed_and_cuts_off_what_is_above():
    g, x, y, z = small_graph()
    yb = np.ones((2, 3), np.float32)
    with ff.Session(g, backend="numpy", passes=[]) as sess:
        out = sess.run(z, {y: yb})          # x is not needed any more
    assert_matches(out, np.full(2, 3, np.float32))


def test_incompatible_shapes_at_build_time_name_op_shapes_and_line():
    g = ff.Graph()
    with g.as_default(), ff.name_scope("block"):
        a = ff.placeholder((2, 3), name="a")
        b = ff.placeholder((4,), name="b")
        with pytest.raises(ff.ShapeError) as err:
            a + b   # noqa: B018
    message = str(err.value)
    assert "add 'block/add'" in message and "(2, 3)" in message and "(4,)" in message
    assert f"{HERE}:" in message


def test_unknown_dtype_is_a_dtype_error():
    with pytest.raises(ff.DTypeError, match="unknown dtype 'complex64'"):
        ff.placeholder((2,), "complex64")
    with pytest.raises(ff.DTypeError):
        ff.constant(np.array(["a"]))


def test_tensor_larger_than_the_largest_texture_is_refused(gl):
    limit = gl.max_texture_size
    g = ff.Graph()
    with g.as_default():
        huge = ff.zeros((4 * limit * limit + 4,), name="huge")
        y = huge + 1.0
    with ff.Session(g) as sess, pytest.raises(ff.TensorTooLargeError) as err:
        sess.run(y)
    assert "huge" in str(err.value) and str(limit) in str(err.value)


def test_shader_that_fails_to_compile_shows_log_and_numbered_source(gl):
    from fragflow.codegen import Binding, Kernel, Layout
    out = Binding("ff_out", "broken", Layout((4,), "float32", 1, 1))
    source = "#version 330 core\nout vec4 ff_out;\nvoid main() { ff_out = vec4(undefined_name); }\n"
    kernel = Kernel("k0_broken", "broken", ("broken",), "", "", source, (), out)
    with pytest.raises(ff.ShaderCompileError) as err:
        gl.shaders.get(kernel)
    message = str(err.value)
    assert "k0_broken" in message and "undefined_name" in message and "   3  void main()" \
        in message


def test_names_are_unique_and_scoped():
    g = ff.Graph()
    with g.as_default():
        a = ff.constant(1.0)
        b = a + a
        c = a + a
        with ff.name_scope("outer"), ff.name_scope("inner"):
            d = b + c
    assert (b.name, c.name, d.name) == ("add", "add_1", "outer/inner/add")
    assert d.op.scope == "outer/inner" and f"{HERE}:" in d.op.source


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_variables_persist_and_assign_applies_when_the_run_ends(backend, request):
    if backend == "gl":
        request.getfixturevalue("gl")
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(np.array([1.0, 2.0, 3.0], np.float32), name="w")
        double = w.assign(w * 2.0)
        seen = w + 0.0
    with ff.Session(g, backend=backend) as sess:
        new, old = sess.run([double, seen])
        assert_matches(new, np.array([2, 4, 6], np.float32))
        assert_matches(old, np.array([1, 2, 3], np.float32))   # reads see the old value
        sess.run(double)
        assert_matches(sess.get(w), np.array([4, 8, 12], np.float32))
        sess.set(w, np.zeros(3, np.float32))
        assert_matches(sess.run(seen), np.zeros(3, np.float32))


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_save_and_restore_round_trip_variables(backend, request, tmp_path):
    if backend == "gl":
        request.getfixturevalue("gl")
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="dense/w")
        n = ff.Variable(np.array([7], np.int32), name="n")
        step = [w.assign(w + 1.0), n.assign(n * 2)]
    path = str(tmp_path / "weights.npz")
    with ff.Session(g, backend=backend) as sess:
        sess.run(step)
        sess.save(path)
        saved = sess.get(w), sess.get(n)
    with ff.Session(g, backend=backend) as fresh:
        fresh.restore(path)
        assert_matches(fresh.get(w), saved[0])
        assert_matches(fresh.get(n), saved[1])
    np.savez(str(tmp_path / "bad.npz"), other=np.zeros(1))
    with ff.Session(g, backend=backend) as sess, pytest.raises(ff.SerializationError):
        sess.restore(str(tmp_path / "bad.npz"))


def test_running_one_plan_many_times_holds_memory_steady(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((64, 32), name="x")
        w = ff.Variable(np.full((32, 16), 0.01, np.float32), name="w")
        y = ff.sigmoid(x @ w + 1.0)
        loss = ff.mean(y * y)
        update = w.assign(w - 0.001)
    xb = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    with ff.Session(g) as sess:
        fn = sess.compile([loss, update], feeds=[x])
        fn(xb)
        before = sess.memory()
        pool_before = gl.pool.stats()["live"]
        for _ in range(1000):
            fn(xb)
        assert sess.memory() == before and before["textures"] > 0
        assert gl.pool.stats()["live"] == pool_before
        assert_matches(sess.get(w), np.full((32, 16), 0.01 - 1001 * 0.001, np.float32),
                       rtol=1e-4)


def test_closing_a_session_gives_its_textures_back(gl):
    g, x, y, z = small_graph()
    live_before = gl.pool.stats()["live"]
    with ff.Session(g) as sess:
        sess.run(z, {x: np.ones((5, 3), np.float32)})
        assert sess.memory()["textures"] > 0
    assert gl.pool.stats()["live"] == live_before


def test_compiled_function_lists_its_kernels(gl):
    g, x, y, z = small_graph()
    with ff.Session(g) as sess:
        fn = sess.compile([z], feeds=[x])
        with pytest.raises(ff.FragflowError, match="call the function once"):
            fn.kernels  # noqa: B018
        (out,) = fn(np.ones((2, 3), np.float32))
        kernels = fn.kernels
    assert_matches(out, np.full(2, 3, np.float32))
    assert [k.op for k in kernels] == ["fused(mul,sub,relu)", "sum"]
    assert kernels[0].nodes == ("mul", "sub", "relu")
    assert all(k.source.startswith(version_line()) for k in kernels)
    assert kernels[-1].nodes == (z.name,) and HERE in kernels[-1].location
