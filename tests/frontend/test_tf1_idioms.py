"""TensorFlow 1's graph idioms, written as TF1 scripts write them (issue 26): variable
scopes and get_variable, Saver, control dependencies, group / no_op, assigns, tf.bool,
static and dynamic shapes, ConfigProto, tf.print / tf.Print, tf.math.divide_no_nan.
Values are checked against numpy formulas; runs use the numpy executor (GL is not the
point here)."""
from __future__ import annotations

import os

import numpy as np
import pytest

import fragflow as tf


@pytest.fixture
def g():
    graph = tf.Graph()
    with graph.as_default():
        yield graph


def numpy_session(graph):
    return tf.Session(graph, backend="numpy")


# -- variable_scope and get_variable ---------------------------------------------------------
def test_get_variable_names_variables_by_scope_and_initializer(g):
    with tf.variable_scope("layer1"):
        w = tf.get_variable("w", [3, 4], initializer=tf.zeros_initializer())
        b = tf.get_variable("b", [4], initializer=tf.constant_initializer(0.5))
        with tf.variable_scope("inner"):
            u = tf.get_variable("u", initializer=np.arange(3, dtype=np.float32))
    assert (w.name, b.name, u.name) == ("layer1/w", "layer1/b", "layer1/inner/u")
    sess = numpy_session(g)
    np.testing.assert_array_equal(sess.run(w), np.zeros((3, 4), np.float32))
    np.testing.assert_array_equal(sess.run(b), np.full(4, 0.5, np.float32))
    np.testing.assert_array_equal(sess.run(u), [0, 1, 2])


def test_get_variable_default_initializer_is_glorot_uniform(g):
    w = tf.get_variable("w", [100, 300])
    value = numpy_session(g).run(w)
    limit = np.sqrt(6.0 / (100 + 300))
    assert np.abs(value).max() <= limit and np.abs(value).max() > 0.9 * limit


def test_reuse_true_returns_the_same_variable(g):
    def dense(x):
        w = tf.get_variable("w", [2, 2], initializer=tf.ones_initializer())
        return tf.matmul(x, w)
    x = tf.placeholder(tf.float32, [None, 2])
    with tf.variable_scope("net"):
        y1 = dense(x)
    with tf.variable_scope("net", reuse=True):
        y2 = dense(x * 2.0)
    assert len(tf.global_variables()) == 1
    out1, out2 = numpy_session(g).run([y1, y2], {x: np.ones((1, 2), np.float32)})
    np.testing.assert_array_equal(out1, [[2, 2]])
    np.testing.assert_array_equal(out2, [[4, 4]])


def test_reuse_variables_and_auto_reuse(g):
    with tf.variable_scope("a") as scope:
        v = tf.get_variable("v", [1])
        scope.reuse_variables()
        assert tf.get_variable("v", [1]) is v
    for _ in range(3):
        with tf.variable_scope("b", reuse=tf.AUTO_REUSE):
            shared = tf.get_variable("s", [2])
    assert [x.name for x in tf.global_variables()] == ["a/v", "b/s"]
    with tf.variable_scope("b", reuse=tf.AUTO_REUSE):
        assert tf.get_variable("s") is shared


def test_get_variable_errors_say_what_to_do(g):
    with tf.variable_scope("s"):
        tf.get_variable("w", [1])
    with pytest.raises(tf.FragflowError, match="s/w already exists.*reuse=True"):
        with tf.variable_scope("s"):
            tf.get_variable("w", [1])
    with pytest.raises(ValueError, match="s/nope does not exist.*AUTO_REUSE"):
        with tf.variable_scope("s", reuse=True):
            tf.get_variable("nope", [1])
    with pytest.raises(tf.FragflowError, match=r"requested shape \[2\].*existing shape \[1\]"):
        with tf.variable_scope("s", reuse=True):
            tf.get_variable("w", [2])


def test_ops_in_a_variable_scope_are_named_under_it(g):
    with tf.variable_scope("conv1"):
        y = tf.nn.relu(tf.constant([1.0]), name="act")
    assert y.name == "conv1/act"


# -- Saver ----------------------------------------------------------------------------------
def test_saver_save_restore_round_trip(g, tmp_path):
    w = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3), name="w")
    step = tf.Variable(0, name="step")
    train = tf.group(tf.assign(w, w * 2.0), tf.assign_add(step, 1))
    saver = tf.train.Saver()
    sess = numpy_session(g)
    sess.run(train)
    prefix = saver.save(sess, str(tmp_path / "model.ckpt"))
    assert prefix == str(tmp_path / "model.ckpt")
    sess.run(train)
    saver.restore(sess, prefix)
    np.testing.assert_array_equal(sess.run(w), np.arange(6).reshape(2, 3) * 2.0)
    assert int(sess.run(step)) == 1
    fresh = numpy_session(g)
    saver.restore(fresh, tf.train.latest_checkpoint(str(tmp_path)))
    np.testing.assert_array_equal(fresh.run(w), np.arange(6).reshape(2, 3) * 2.0)


def test_saver_files_are_npz_without_pickle(g, tmp_path):
    tf.Variable(np.ones(3, np.float32), name="layer/w")
    sess = numpy_session(g)
    prefix = tf.train.Saver().save(sess, str(tmp_path / "m"))
    with np.load(prefix + ".npz", allow_pickle=False) as data:
        assert data.files == ["layer/w"]
        np.testing.assert_array_equal(data["layer/w"], np.ones(3))
    leftovers = [p for p in os.listdir(tmp_path) if p.startswith(".tmp")]
    assert leftovers == []


def test_saver_max_to_keep_rotates_and_latest_checkpoint(g, tmp_path):
    v = tf.Variable(0.0, name="v")
    bump = tf.assign_add(v, 1.0)
    saver = tf.train.Saver(max_to_keep=2)
    sess = numpy_session(g)
    paths = []
    for step in range(4):
        sess.run(bump)
        paths.append(saver.save(sess, str(tmp_path / "model.ckpt"), global_step=step))
    assert paths[-1] == str(tmp_path / "model.ckpt-3")
    assert sorted(p for p in os.listdir(tmp_path) if p.endswith(".npz")) == \
        ["model.ckpt-2.npz", "model.ckpt-3.npz"]
    assert saver.last_checkpoints == paths[2:]
    assert tf.train.latest_checkpoint(str(tmp_path)) == paths[-1]
    saver.restore(sess, paths[2])
    assert float(sess.run(v)) == 3.0
    state = (tmp_path / "checkpoint").read_text()
    assert 'model_checkpoint_path: "model.ckpt-3"' in state


def test_latest_checkpoint_of_an_empty_directory_is_none(tmp_path):
    assert tf.train.latest_checkpoint(str(tmp_path)) is None


def test_saver_restore_of_a_different_model_fails_before_writing(g, tmp_path):
    w = tf.Variable(np.ones(3, np.float32), name="w")
    sess = numpy_session(g)
    prefix = tf.train.Saver().save(sess, str(tmp_path / "m"))
    other = tf.Graph()
    with other.as_default():
        w2 = tf.Variable(np.zeros(4, np.float32), name="w")
        saver2 = tf.train.Saver()
    sess2 = numpy_session(other)
    with pytest.raises(tf.SerializationError, match="'w' has shape"):
        saver2.restore(sess2, prefix)
    np.testing.assert_array_equal(sess2.run(w2), np.zeros(4))
    assert w is not w2


# -- control dependencies, group, no_op, assigns -------------------------------------------
def test_control_dependencies_run_with_the_ops_made_inside(g):
    counter = tf.Variable(0, name="counter")
    increment = tf.assign_add(counter, 1)
    x = tf.placeholder(tf.float32, [None])
    with tf.control_dependencies([increment]):
        y = tf.identity(x * 3.0)
    z = x + 1.0                                    # outside the block: no dependency
    sess = numpy_session(g)
    feed = {x: np.float32([1, 2])}
    np.testing.assert_array_equal(sess.run(y, feed), [3, 6])
    np.testing.assert_array_equal(sess.run(y + 1.0, feed), [4, 7])   # computed from y
    sess.run(z, feed)
    assert int(sess.run(counter)) == 2


def test_control_dependencies_nest_and_reach_train_ops(g):
    a, b = tf.Variable(0.0, name="a"), tf.Variable(0.0, name="b")
    w = tf.Variable(1.0, name="w")
    loss = tf.square(w - 3.0)
    with tf.control_dependencies([tf.assign_add(a, 1.0)]):
        with tf.control_dependencies([tf.assign_add(b, 10.0)]):
            train = tf.train.GradientDescentOptimizer(0.25).minimize(loss)
    sess = numpy_session(g)
    sess.run(train)
    assert sess.run([a, b, w]) == [1.0, 10.0, 2.0]     # w - 0.25 * 2 (w - 3)


def test_no_op_inside_control_dependencies_runs_them(g):
    v = tf.Variable(5.0, name="v")
    with tf.control_dependencies([tf.assign(v, 7.0)]):
        op = tf.no_op()
    sess = numpy_session(g)
    sess.run(op)
    assert float(sess.run(v)) == 7.0
    sess.run(tf.no_op())                               # alone: nothing


def test_group_runs_every_input(g):
    a, b = tf.Variable(1.0, name="a"), tf.Variable(2.0, name="b")
    both = tf.group(tf.assign_sub(a, 1.0), [tf.assign(b, 4.0)])
    sess = numpy_session(g)
    sess.run(both)
    assert sess.run([a, b]) == [0.0, 4.0]


def test_assign_needs_a_variable(g):
    with pytest.raises(tf.FragflowError, match="assign needs a Variable"):
        tf.assign(tf.constant(1.0), 2.0)


def test_control_dependency_from_another_graph_is_refused(g):
    other = tf.Graph()
    with other.as_default():
        c = tf.constant(1.0)
    with pytest.raises(tf.FragflowError, match="belongs to graph"):
        with tf.control_dependencies([c]):
            pass


# -- dtypes and shapes ----------------------------------------------------------------------
def test_tf_bool_placeholder(g):
    mask = tf.placeholder(tf.bool, [None])
    y = tf.where(mask, tf.ones_like(tf.cast(mask, tf.float32)), tf.zeros([3]))
    out = numpy_session(g).run(y, {mask: np.array([True, False, True])})
    np.testing.assert_array_equal(out, [1, 0, 1])
    assert tf.bool == "bool" and bool(1) is True       # the builtin is untouched here


def test_get_shape_and_as_list(g):
    x = tf.placeholder(tf.float32, [None, 28, 28, 1])
    assert x.get_shape().as_list() == [None, 28, 28, 1]
    assert x.shape.as_list() == [None, 28, 28, 1]
    assert x.shape == (None, 28, 28, 1) and x.shape.ndims == 4
    assert x.shape[1:].as_list() == [28, 28, 1] and x.shape[1] == 28
    assert not x.shape.is_fully_defined() and x.shape[1:].num_elements() == 784


def test_tf_shape_is_a_tensor_counted_at_run_time(g):
    x = tf.placeholder(tf.float32, [None, 3, None])
    s = tf.shape(x)
    batch = tf.cast(tf.shape(x)[0], tf.float32)
    mean_per_example = tf.reduce_sum(x) / batch
    assert s.dtype == "int32" and s.shape == (3,)
    data = np.arange(5 * 3 * 2, dtype=np.float32).reshape(5, 3, 2)
    shape, m = numpy_session(g).run([s, mean_per_example], {x: data})
    np.testing.assert_array_equal(shape, [5, 3, 2])
    np.testing.assert_allclose(m, data.sum() / 5)
    one = np.zeros((1, 3, 1), np.float32)
    np.testing.assert_array_equal(numpy_session(g).run(s, {x: one}), [1, 3, 1])


def test_tf_shape_of_a_static_tensor_is_constant(g):
    np.testing.assert_array_equal(numpy_session(g).run(tf.shape(tf.zeros([2, 7]))), [2, 7])


# -- sessions, printing ---------------------------------------------------------------------
def test_session_accepts_config_proto(g):
    config = tf.ConfigProto(allow_soft_placement=True, log_device_placement=False)
    config.gpu_options.allow_growth = True
    c = tf.constant(2.0) * 3.0
    with tf.Session(config=config) as sess:
        assert sess.graph is g and float(sess.run(c)) == 6.0
    opts = tf.GPUOptions(per_process_gpu_memory_fraction=0.5)
    with tf.Session(graph=g, config=tf.ConfigProto(gpu_options=opts)) as sess:
        assert float(c.eval()) == 6.0


def test_tf_print_prints_when_run(g, capsys):
    x = tf.placeholder(tf.float32, [3])
    p = tf.print("x is", x, output_stream="stdout")
    with tf.control_dependencies([p]):
        y = x * 2.0
    sess = numpy_session(g)
    out = sess.run(y, {x: np.float32([1, 2, 3])})
    np.testing.assert_array_equal(out, [2, 4, 6])
    assert capsys.readouterr().out == "x is [1 2 3]\n"       # TensorFlow 2.21's text
    sess.run(x * 1.0, {x: np.float32([1, 2, 3])})
    assert capsys.readouterr().out == ""


def test_tf_Print_is_an_identity_that_prints(g, capsys):  # noqa: N802
    x = tf.placeholder(tf.float32, [2])
    y = tf.Print(x, [x, tf.reduce_sum(x)], message="debug: ", first_n=1)
    z = y * 10.0
    sess = numpy_session(g)
    np.testing.assert_array_equal(sess.run(z, {x: np.float32([1, 2])}), [10, 20])
    np.testing.assert_array_equal(sess.run(z, {x: np.float32([3, 4])}), [30, 40])
    assert capsys.readouterr().err == "debug: [1 2][3]\n"    # TensorFlow 2.21's text


def test_tf_print_formats_as_tensorflow_does(g, capsys):
    # the expected lines are what TensorFlow 2.21 (tf.compat.v1) printed for this graph
    x = tf.placeholder(tf.float32, [None])
    sess = numpy_session(g)
    sess.run(tf.print("x is", x, [1, 2], output_stream="stdout"),
             {x: np.float32([1, 2.5, 3, 4, 5, 6, 7])})
    sess.run(tf.print(tf.constant(3), tf.constant([[1, 2], [3, 4]]), output_stream="stdout"))
    assert capsys.readouterr().out == "x is [1 2.5 3 ... 5 6 7] [1, 2]\n3 [[1 2]\n [3 4]]\n"


def test_math_divide_no_nan_is_zero_where_the_divisor_is(g):
    x = tf.placeholder(tf.float32, [4])
    y = tf.placeholder(tf.float32, [4])
    out = numpy_session(g).run(tf.math.divide_no_nan(x, y), {
        x: np.float32([1, -2, 0, np.inf]), y: np.float32([0, 4, 0, 2])})
    np.testing.assert_array_equal(out, [0, -0.5, 0, np.inf])


def test_compat_v1_is_fragflow():
    assert tf.compat.v1 is tf
    tf.compat.v1.disable_eager_execution()
    tf.disable_v2_behavior()


def test_size_rank_and_count_nonzero(g):
    x = tf.placeholder(tf.float32, [None, 3])
    data = np.float32([[0, 1, 2], [0, 0, -3]])
    size, rank, per_row, total = numpy_session(g).run(
        [tf.size(x), tf.rank(x), tf.count_nonzero(x, axis=1), tf.count_nonzero(x)],
        {x: data})
    assert (int(size), int(rank), int(total)) == (6, 2, np.count_nonzero(data))
    np.testing.assert_array_equal(per_row, np.count_nonzero(data, axis=1))


def test_get_variable_regularizer_reaches_get_regularization_loss(g):
    assert float(numpy_session(g).run(tf.losses.get_regularization_loss())) == 0.0
    with tf.variable_scope("layer", regularizer=lambda w: 0.01 * tf.reduce_sum(tf.square(w))):
        tf.get_variable("w", initializer=np.float32([1, 2]))
    tf.get_variable("v", initializer=np.float32([3]), regularizer=lambda v: tf.nn.l2_loss(v))
    total = numpy_session(g).run(tf.losses.get_regularization_loss())
    np.testing.assert_allclose(total, 0.01 * 5 + 9 / 2, rtol=1e-6)


def test_variable_scope_default_name_is_made_unique():
    graph = tf.Graph()
    with graph.as_default():
        for _ in range(2):
            with tf.variable_scope(None, default_name="block"):
                tf.get_variable("w", [1])
        assert [v.name for v in tf.global_variables()] == ["block/w", "block_1/w"]


def test_a_graph_with_tf1_state_is_freed_when_dropped():
    import gc
    import weakref
    graph = tf.Graph()
    with graph.as_default():
        with tf.variable_scope("s"):
            w = tf.get_variable("w", [2])
        with tf.control_dependencies([tf.assign_add(w, [1.0, 1.0])]):
            y = w * 2.0
        tf.summary.scalar("m", tf.reduce_mean(y))
        merged = tf.summary.merge_all()
    sess = numpy_session(graph)
    sess.run([y, merged])
    sess.close()
    ref = weakref.ref(graph)
    del graph, w, y, merged, sess
    gc.collect()
    assert ref() is None


# -- tf.layers in variable scopes (GAN-style sharing) ----------------------------------------
def test_tf_layers_share_variables_through_variable_scope_reuse(g):
    def discriminator(x, reuse=False):
        with tf.variable_scope("discriminator", reuse=reuse):
            h = tf.layers.dense(x, 8, activation=tf.nn.relu, name="h1")
            return tf.layers.dense(h, 1, name="out")

    def generator(z):
        with tf.variable_scope("generator"):
            h = tf.layers.dense(z, 8, activation=tf.nn.relu, name="h1")   # same layer name
            return tf.layers.dense(h, 4, name="out")

    real = tf.placeholder(tf.float32, [None, 4])
    z = tf.placeholder(tf.float32, [None, 2])
    d_real = discriminator(real)
    d_fake = discriminator(generator(z), reuse=True)
    names = sorted(v.name for v in tf.trainable_variables())
    assert names == ["discriminator/h1/bias", "discriminator/h1/kernel",
                     "discriminator/out/bias", "discriminator/out/kernel",
                     "generator/h1/bias", "generator/h1/kernel",
                     "generator/out/bias", "generator/out/kernel"]
    # the same discriminator: equal outputs for equal inputs
    sess = tf.Session(g, backend="numpy", passes=[])
    data = np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32)
    zs = np.random.default_rng(1).normal(size=(3, 2)).astype(np.float32)
    out_real, out_fake = sess.run([d_real, d_fake], {real: data, z: zs})
    w = {v.name: sess.run(v) for v in tf.trainable_variables()}

    def dense(x, scope, relu):
        y = x @ w[f"{scope}/kernel"] + w[f"{scope}/bias"]
        return np.maximum(y, 0) if relu else y
    gen = dense(dense(zs, "generator/h1", True), "generator/out", False)
    np.testing.assert_allclose(out_real, dense(dense(data, "discriminator/h1", True),
                                               "discriminator/out", False), rtol=1e-5)
    np.testing.assert_allclose(out_fake, dense(dense(gen, "discriminator/h1", True),
                                               "discriminator/out", False), rtol=1e-5)


def test_tf_layers_in_a_scope_without_reuse_refuse_a_second_layer_of_the_name(g):
    x = tf.placeholder(tf.float32, [None, 3])
    with tf.variable_scope("net"):
        tf.layers.dense(x, 2, name="fc")
    with pytest.raises(tf.FragflowError, match="net/fc already exists.*reuse=True"):
        with tf.variable_scope("net"):
            tf.layers.dense(x, 2, name="fc")
    with pytest.raises(ValueError, match="net/other does not exist"):
        with tf.variable_scope("net", reuse=True):
            tf.layers.dense(x, 2, name="other")
    with tf.variable_scope("net", reuse=tf.AUTO_REUSE):
        tf.layers.dense(x, 2, name="fc")
        tf.layers.dense(x, 2, name="new")
    assert sorted(v.name for v in tf.trainable_variables()) == [
        "net/fc/bias", "net/fc/kernel", "net/new/bias", "net/new/kernel"]
    tf.layers.dense(x, 2, name="fc")                      # outside the scope: its own
    y = tf.layers.dense(x, 2, name="fc", reuse=True)      # and reused by reuse=
    assert len(tf.trainable_variables()) == 6 and y.shape == (None, 2)


# -- collections ------------------------------------------------------------------------------
def test_update_ops_of_batch_normalization_run_through_control_dependencies(g):
    x = tf.placeholder(tf.float32, [None, 3])
    h = tf.layers.batch_normalization(x, training=True, name="bn")
    loss = tf.reduce_mean(tf.square(h))
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS)
    assert len(update_ops) == 2
    with tf.control_dependencies(update_ops):
        train = tf.train.GradientDescentOptimizer(0.1).minimize(loss)
    sess = numpy_session(g)
    data = np.random.default_rng(0).normal(2.0, 3.0, size=(16, 3)).astype(np.float32)
    sess.run(loss, {x: data})                                   # no step: no update
    moving = [v for v in tf.global_variables() if "moving_mean" in v.name][0]
    np.testing.assert_array_equal(sess.run(moving), np.zeros(3))
    sess.run(train, {x: data})
    np.testing.assert_allclose(sess.run(moving), 0.01 * data.astype(np.float64).mean(0),
                               rtol=1e-5)


def test_collections_of_variables_losses_and_user_items(g):
    with tf.variable_scope("a"):
        w = tf.get_variable("w", [1], regularizer=tf.nn.l2_loss)
    tf.Variable(0, name="step", trainable=False)
    assert [v.name for v in tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES)] == ["a/w"]
    assert len(tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES)) == 2
    assert len(tf.get_collection(tf.GraphKeys.REGULARIZATION_LOSSES)) == 1
    tf.add_to_collection("mine", w)
    tf.add_to_collections(["mine", "other"], 3)
    assert tf.get_collection("mine") == [w, 3] and tf.get_collection("other") == [3]
    assert tf.get_collection("nothing") == []
    assert [v.name for v in tf.get_collection(tf.GraphKeys.GLOBAL_VARIABLES, scope="a/")] == \
        ["a/w"]


def test_star_import_keeps_the_builtins_print_and_bool():
    namespace: dict = {}
    exec("from fragflow import *", namespace)
    assert "print" not in namespace and "bool" not in namespace
    assert callable(tf.print) and tf.bool == "bool"
