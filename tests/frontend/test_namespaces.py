"""TensorFlow's namespaces and habits (issue 15): ff.nn / math / image / losses / linalg /
random / train / keras / layers, TF1's placeholder order, default sessions and eval,
global_variables_initializer, trainable_variables, padding strings, tidy dir(), the
AttributeError for missing names, the Keras functional API, fit's log lines."""
from __future__ import annotations

import io
import pickle
import subprocess
import sys
import types

import numpy as np
import pytest

import fragflow as ff


def _run(tensors, backend="numpy", feed=None):
    graph = tensors[0].graph if isinstance(tensors, list) else tensors.graph
    passes = [] if backend == "numpy" else None      # the reference: the graph as built
    return ff.Session(graph, backend=backend, passes=passes).run(tensors, feed)


# -- the namespaces hold TensorFlow's names ------------------------------------------------
NAMES = {
    "nn": ["relu", "relu6", "elu", "selu", "softplus", "leaky_relu", "sigmoid", "tanh",
           "softmax", "log_softmax", "conv1d", "conv2d", "conv3d", "conv2d_transpose",
           "depthwise_conv2d", "separable_conv2d", "max_pool", "max_pool2d", "avg_pool",
           "avg_pool2d", "moments", "batch_normalization", "fused_batch_norm", "bias_add",
           "l2_normalize", "dropout", "softmax_cross_entropy_with_logits",
           "softmax_cross_entropy_with_logits_v2", "sparse_softmax_cross_entropy_with_logits",
           "sigmoid_cross_entropy_with_logits", "top_k", "l2_loss", "embedding_lookup",
           "depth_to_space", "space_to_depth", "swish", "log_sigmoid", "lrn", "in_top_k",
           "max_pool_with_argmax", "conv3d_transpose"],
    "math": ["log1p", "expm1", "divide_no_nan", "div_no_nan", "logical_xor", "reduce_all",
             "reduce_any",
             "reduce_std", "reduce_variance", "reduce_logsumexp", "cumsum", "erf", "atan2",
             "is_nan", "squared_difference", "l2_normalize", "log_sigmoid", "top_k",
             "reduce_sum", "argmax", "floormod", "mod"],
    "linalg": ["matmul", "eye", "diag", "diag_part", "band_part", "trace", "tensordot",
               "einsum", "norm", "l2_normalize", "matvec", "matrix_transpose"],
    "image": ["crop_and_resize", "resize", "resize_images", "resize_bilinear",
              "resize_nearest_neighbor",
              "flip_left_right", "flip_up_down", "per_image_standardization"],
    "losses": ["softmax_cross_entropy", "sparse_softmax_cross_entropy",
               "sigmoid_cross_entropy", "mean_squared_error", "absolute_difference",
               "huber_loss", "log_loss", "hinge_loss", "Reduction", "compute_weighted_loss"],
    "random": ["normal", "uniform", "truncated_normal", "categorical", "set_seed"],
    "train": ["GradientDescentOptimizer", "MomentumOptimizer", "AdamOptimizer",
              "AdagradOptimizer", "AdadeltaOptimizer", "RMSPropOptimizer", "Optimizer"],
    "keras": ["Input", "Model", "Sequential", "layers", "optimizers", "initializers"],
    "layers": ["dense", "conv2d", "max_pooling2d", "average_pooling2d", "flatten",
               "dropout", "batch_normalization", "Dense", "Conv2D"],
}


@pytest.mark.parametrize("namespace", sorted(NAMES))
def test_namespace_has_tensorflows_names_and_a_tidy_dir(namespace):
    module = getattr(ff, namespace)
    for name in NAMES[namespace]:
        assert callable(getattr(module, name)) or name in ("Reduction", "layers",
                                                           "optimizers", "initializers")
        assert name in dir(module)
    for junk in ("np", "annotations", "itertools", "importlib", "math", "weakref"):
        assert junk not in dir(module), (namespace, junk)


def test_train_optimizers_are_ff_optim_classes():
    assert ff.train.GradientDescentOptimizer is ff.optim.GradientDescent
    assert ff.train.AdamOptimizer is ff.optim.Adam
    assert ff.train.MomentumOptimizer is ff.optim.Momentum
    assert ff.train.RMSPropOptimizer is ff.optim.RMSProp


def test_dir_of_fragflow_and_its_modules_is_their_api():
    names = dir(ff)
    for junk in ("frontend", "ir", "passes", "graph_from_json", "_frontend_all"):
        assert junk not in names
    for name in ("nn", "math", "train", "keras", "Session", "placeholder", "einsum",
                 "global_variables_initializer", "float32", "__version__"):
        assert name in names
    assert len(names) == len(set(names))
    for module in (ff.optim, ff.layers, ff.initializers):
        assert not {"np", "annotations", "itertools", "importlib"} & set(dir(module))


@pytest.mark.parametrize("module, name, hint", [
    (ff, "TensorArray", "ff.stack"),           # get_variable exists since issue 26
    (ff, "reduce_meen", "fragflow.reduce_mean"),
    (ff, "int64", "ff.int32"),
    (ff.nn, "softmx", "fragflow.nn.softmax"),
    (ff, "py_func", "graphs run on the GPU"),    # while_loop/cond/case: issue 25
    (ff.train, "Savr", "fragflow.train.Saver"),     # tf.train.Saver exists (issue 26)
])
def test_a_missing_tensorflow_name_suggests_fragflows(module, name, hint):
    with pytest.raises(AttributeError, match="has no attribute") as err:
        getattr(module, name)
    assert hint in str(err.value)


def test_hasattr_still_answers_false_for_unknown_names():
    assert not hasattr(ff, "no_such_thing_at_all")
    assert not hasattr(ff.nn, "__wrapped__")


# -- TF1 habits --------------------------------------------------------------------------
def test_placeholder_takes_tensorflow_1s_argument_order():
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder(ff.float32, [None, 3], name="a")
        b = ff.placeholder(ff.int32, shape=[2])
        c = ff.placeholder((None, 3), "float32")
        d = ff.placeholder(ff.float32)                  # TF1: a scalar here
    assert (a.shape, a.dtype, a.name) == ((None, 3), "float32", "a")
    assert (b.shape, b.dtype) == ((2,), "int32")
    assert (c.shape, c.dtype) == ((None, 3), "float32")
    assert d.shape == ()
    with g.as_default(), pytest.raises(ff.AttrError, match="twice"):
        ff.placeholder(ff.float32, [2], shape=[3])


def test_constant_with_shape_fills_or_reshapes():
    g = ff.Graph()
    with g.as_default():
        a = ff.constant(0.1, shape=[2, 3])
        b = ff.constant([1, 2, 3, 4], shape=[2, 2])
    va, vb = _run([a, b])
    np.testing.assert_array_equal(va, np.full((2, 3), 0.1, np.float32))
    np.testing.assert_array_equal(vb, [[1, 2], [3, 4]])


def test_eval_and_run_use_the_default_session():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(ff.float32, [2])
        w = ff.Variable(ff.ones([2]))
        step = w.assign(w * x)
        y = w + 0.0
    sess = ff.Session(g, backend="numpy", passes=[])
    with pytest.raises(ff.FragflowError, match="no default session"):
        y.eval()
    with sess.as_default():
        assert ff.get_default_session() is sess
        step.run(feed_dict={x: np.float32([2, 3])})
        np.testing.assert_array_equal(y.eval(), [2, 3])
    assert ff.get_default_session() is None
    assert not sess._closed                      # as_default does not close
    with ff.Session(g, backend="numpy", passes=[]) as other:
        np.testing.assert_array_equal(y.eval(), [1, 1])   # a new session: initial value
        np.testing.assert_array_equal(y.eval(session=sess), [2, 3])
    with pytest.raises(ff.SessionClosedError):
        other.run(y)
    other_graph = ff.Graph()
    with ff.Session(other_graph, backend="numpy", passes=[]), pytest.raises(ff.FragflowError,
                                                                 match="graph"):
        y.eval()


def test_session_without_a_graph_runs_the_default_graph():
    ff.reset_default_graph()
    x = ff.constant([1.0, 2.0])
    with ff.Session(backend="numpy", passes=[]) as sess:
        np.testing.assert_array_equal(sess.run(x * 2.0), [2, 4])


def test_variable_from_initializer_ops_and_global_variables_initializer():
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(ff.random_normal([50, 4], stddev=2.0, seed=3), name="w")
        z = ff.Variable(ff.zeros([3]))
        k = ff.Variable(lambda: ff.ones([2]) * 3.0)
        count = ff.Variable(0, trainable=False)
        step = ff.optim.group(w.assign(w * 0.0), z.assign(z + 1.0), count.assign(count + 1))
        init = ff.global_variables_initializer()
        x = ff.placeholder(ff.float32, [2])
        with pytest.raises(ff.FragflowError, match="initial value"):
            ff.Variable(x * 2.0)
    # the initializer's draw is the numpy executor's, identical on every backend
    drawn = ff.Session(g, backend="numpy", passes=[]).run(w)
    assert abs(float(drawn.std()) - 2.0) < 0.4
    np.testing.assert_array_equal(w.initial_value, drawn)
    np.testing.assert_array_equal(k.initial_value, [3, 3])
    sess = ff.Session(g, backend="numpy", passes=[])
    sess.run(step)
    assert sess.get(count) == 1 and (sess.get(w) == 0).all()
    sess.run(init)
    np.testing.assert_array_equal(sess.get(w), drawn)
    np.testing.assert_array_equal(sess.get(z), [0, 0, 0])
    assert sess.get(count) == 0
    with g.as_default():
        names = [v.name for v in ff.trainable_variables()]
        every = [v.name for v in ff.global_variables()]
    assert "w" in names and count.name not in names and count.name in every


def test_trainable_variables_leave_out_optimizer_slots():
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(np.ones(3, np.float32), name="w")
        ff.train.AdamOptimizer(0.1).minimize(ff.reduce_sum(ff.square(w)))
        assert [v.name for v in ff.trainable_variables()] == ["w"]
        assert len(ff.global_variables()) > 3     # slots, beta powers, iterations


def test_padding_strings_in_any_case(gl):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 7, 7, 3)).astype(np.float32)
    w = rng.normal(size=(3, 3, 3, 5)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        same = ff.nn.conv2d(x, w, strides=2, padding="same")
        pooled = ff.nn.max_pool(x, ksize=3, strides=2, padding="Same")
        valid = ff.conv2d(x, w, strides=1, padding="valid")
    assert same.shape == (2, 4, 4, 5) and pooled.shape == (2, 4, 4, 3)
    assert valid.shape == (2, 5, 5, 5)
    torch = pytest.importorskip("torch", reason="torch is not installed (the test extra brings it)")
    ref = torch.nn.functional.conv2d(torch.from_numpy(x).permute(0, 3, 1, 2),
                                     torch.from_numpy(w).permute(3, 2, 0, 1))
    for backend in ("numpy", "gl"):
        out = _run([same, pooled, valid], backend)
        np.testing.assert_allclose(out[2], ref.permute(0, 2, 3, 1).numpy(), rtol=1e-4,
                                   atol=1e-4)


# -- losses ------------------------------------------------------------------------------
def _softmax_xent(labels, logits):
    z = logits - logits.max(-1, keepdims=True)
    return -(labels * (z - np.log(np.exp(z).sum(-1, keepdims=True)))).sum(-1)


@pytest.mark.parametrize("reduction", ["weighted_sum_by_nonzero_weights", "weighted_sum",
                                       "weighted_mean", "weighted_sum_over_batch_size",
                                       "none"])
def test_softmax_cross_entropy_weights_smoothing_reduction(gl, reduction):
    rng = np.random.default_rng(1)
    logits = rng.normal(size=(6, 5)).astype(np.float32)
    onehot = np.eye(5, dtype=np.float32)[rng.integers(0, 5, 6)]
    weights = np.float32([1, 0, 2, 0.5, 0, 1])
    smoothed = onehot * 0.9 + 0.1 / 5
    per = _softmax_xent(smoothed, logits) * weights
    expected = {"none": per, "weighted_sum": per.sum(),
                "weighted_mean": per.sum() / weights.sum(),
                "weighted_sum_over_batch_size": per.mean(),
                "weighted_sum_by_nonzero_weights": per.sum() / 4}[reduction]
    g = ff.Graph()
    with g.as_default():
        loss = ff.losses.softmax_cross_entropy(onehot, logits, weights=weights,
                                               label_smoothing=0.1, reduction=reduction)
    for backend in ("numpy", "gl"):
        np.testing.assert_allclose(_run(loss, backend), expected, rtol=1e-5, atol=1e-6)


def test_other_losses_against_numpy(gl):
    rng = np.random.default_rng(2)
    y = rng.normal(size=(4, 3)).astype(np.float32)
    p = rng.normal(size=(4, 3)).astype(np.float32)
    b = (rng.random((4, 3)) > 0.5).astype(np.float32)
    probs = 1 / (1 + np.exp(-p))
    e = np.abs(p - y)
    expected = [((p - y) ** 2).mean(), e.mean(),
                np.where(e <= 1, 0.5 * e ** 2, e - 0.5).mean(),
                (-b * np.log(probs + 1e-7) - (1 - b) * np.log(1 - probs + 1e-7)).mean(),
                np.maximum(0, 1 - (2 * b - 1) * p).mean(),
                (np.maximum(p, 0) - p * b + np.log1p(np.exp(-np.abs(p)))).mean(),
                _softmax_xent(np.eye(3)[[0, 2, 1, 1]], p).mean()]
    g = ff.Graph()
    with g.as_default():
        losses = [ff.losses.mean_squared_error(y, p), ff.losses.absolute_difference(y, p),
                  ff.losses.huber_loss(y, p), ff.losses.log_loss(b, probs),
                  ff.losses.hinge_loss(b, p), ff.losses.sigmoid_cross_entropy(b, p),
                  ff.losses.sparse_softmax_cross_entropy(np.int32([0, 2, 1, 1]), p)]
    for backend in ("numpy", "gl"):
        np.testing.assert_allclose(_run(losses, backend), expected, rtol=1e-4, atol=1e-6)


def test_image_resize_matches_torch(gl):
    torch = pytest.importorskip("torch", reason="torch is not installed (the test extra brings it)")
    x = np.random.default_rng(3).normal(size=(2, 5, 7, 3)).astype(np.float32)
    g = ff.Graph()
    with g.as_default():
        up = ff.image.resize(x, [9, 4])
        near = ff.image.resize(x, [10, 14], method="nearest")
        flipped = ff.image.flip_left_right(x)
    t = torch.from_numpy(x).permute(0, 3, 1, 2)
    ref_up = torch.nn.functional.interpolate(t, size=(9, 4), mode="bilinear",
                                             align_corners=False)
    ref_near = torch.nn.functional.interpolate(t, size=(10, 14), mode="nearest")
    for backend in ("numpy", "gl"):
        a, b, c = _run([up, near, flipped], backend)
        np.testing.assert_allclose(a, ref_up.permute(0, 2, 3, 1).numpy(), rtol=1e-4,
                                   atol=1e-5)
        np.testing.assert_allclose(b, ref_near.permute(0, 2, 3, 1).numpy())
        np.testing.assert_array_equal(c, x[:, :, ::-1])


def test_random_normal_alias_draws_normal_values():
    g = ff.Graph()
    with g.as_default():
        z = ff.random.normal([4000], mean=1.0, stddev=3.0, seed=5)
        u = ff.random.uniform([4000], minval=-2.0, maxval=2.0, seed=5)
    vz, vu = _run([z, u])
    assert abs(vz.mean() - 1.0) < 0.2 and abs(vz.std() - 3.0) < 0.2
    assert vu.min() >= -2 and vu.max() < 2 and abs(vu.mean()) < 0.1


def test_nn_dropout_takes_keep_prob_or_rate():
    x = np.ones((8, 500), np.float32)
    g = ff.Graph()
    with g.as_default():
        a = ff.nn.dropout(x, keep_prob=0.25, seed=1)
        b = ff.nn.dropout(x, rate=0.75, seed=1)
        with pytest.raises(ff.AttrError, match="exactly one"):
            ff.nn.dropout(x)
    for v in _run([a, b]):          # both keep a quarter, scaled by 4
        assert set(np.unique(v)) == {0.0, 4.0}
        assert abs(float((v == 0).mean()) - 0.75) < 0.05


# -- Keras functional API and TF1 functional layers ---------------------------------------
def test_keras_functional_model_trains(gl):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(64, 6)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int32)
    ff.initializers.set_seed(0)
    g = ff.Graph()
    with g.as_default():
        inputs = ff.keras.Input(shape=(6,))
        h = ff.keras.layers.Dense(16, activation="relu")(inputs)
        h = ff.keras.layers.Dropout(0.1, seed=1)(h)
        outputs = ff.keras.layers.Dense(2, activation="softmax")(h)
    model = ff.Model(inputs, outputs)
    assert len(model.layers) == 3 and model.count_params() == 6 * 16 + 16 + 16 * 2 + 2
    model.compile(ff.keras.optimizers.Adam(learning_rate=0.05),
                  "sparse_categorical_crossentropy", ["accuracy"])
    history = model.fit(x, y, batch_size=16, epochs=8, verbose=0, seed=0)
    assert history.history["loss"][-1] < 0.6 * history.history["loss"][0]
    probs = model.predict(x)
    assert probs.shape == (64, 2) and np.allclose(probs.sum(1), 1, atol=1e-5)
    lines = []
    model.summary(print_fn=lines.append)
    assert any("dense" in line for line in lines)


def test_keras_model_with_ops_between_layers_runs_without_training_layers():
    g = ff.Graph()
    with g.as_default():
        inputs = ff.keras.Input(shape=(3,))
        h = ff.nn.relu(ff.layers.Dense(4)(inputs))
        outputs = ff.layers.Dense(1)(h * 2.0)
    model = ff.Model(inputs, outputs, backend="numpy")
    model.compile("sgd", "mse")
    history = model.fit(np.ones((8, 3), np.float32), np.zeros(8, np.float32), verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_tf1_functional_layers_make_named_variables():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(ff.float32, [None, 8, 8, 3])
        h = ff.layers.conv2d(x, 4, 3, padding="SAME", activation=ff.nn.relu)
        h = ff.layers.max_pooling2d(h, 2, 2)
        h = ff.layers.flatten(h)
        h = ff.layers.dropout(h, rate=0.5, training=False)
        y = ff.layers.dense(h, 2)
        names = [v.name for v in ff.trainable_variables()]
    assert y.shape == (None, 2)
    assert len(names) == 4 and any("conv2d" in n for n in names) and \
        any("dense" in n for n in names)


def test_fit_verbose_1_writes_one_line_per_epoch_off_a_terminal(monkeypatch):
    stream = io.StringIO()
    monkeypatch.setattr("sys.stderr", stream)
    model = ff.Sequential([ff.layers.Dense(1)], backend="numpy")
    model.compile("sgd", "mse")
    model.fit(np.ones((40, 2), np.float32), np.ones(40, np.float32), batch_size=4,
              epochs=3, verbose=1)
    text = stream.getvalue()
    assert "\r" not in text
    assert text.count("Epoch ") == 3 and text.count("10/10") == 3
    assert len(text.strip().splitlines()) == 6


# -- small op extensions -----------------------------------------------------------------
def test_argmax_of_bool_and_leaky_relu_of_int(gl):
    b = np.array([[False, True, True], [False, False, False], [True, False, True]])
    i = np.int32([-3, 0, 5])
    g = ff.Graph()
    with g.as_default():
        am = ff.argmax(b, axis=1)
        an = ff.math.argmin(b, 0, output_type=ff.int32)
        lr = ff.nn.leaky_relu(i, alpha=0.5)
    for backend in ("numpy", "gl"):
        va, vn, vl = _run([am, an, lr], backend)
        np.testing.assert_array_equal(va, np.argmax(b, 1))
        np.testing.assert_array_equal(vn, np.argmin(b, 0))
        assert vl.dtype == np.float32
        np.testing.assert_array_equal(vl, [-1.5, 0, 5])


def test_tf1_initializer_functions_have_tf1_defaults():
    g = ff.Graph()
    with g.as_default():
        init = ff.truncated_normal_initializer(stddev=0.1, seed=1)
        w = ff.Variable(init([200, 50]))
        h = ff.layers.dense(ff.placeholder(ff.float32, [None, 3]), 400,
                            kernel_initializer=ff.random_normal_initializer(seed=2),
                            bias_initializer=ff.constant_initializer(0.5))
        kernel, bias = ff.trainable_variables()[1:]
    assert h.shape == (None, 400)
    assert np.abs(w.initial_value).max() <= 0.2 + 1e-6       # truncated at 2 stddev
    assert abs(float(kernel.initial_value.std()) - 1.0) < 0.05  # TF1's stddev 1.0
    np.testing.assert_array_equal(bias.initial_value, np.full(400, 0.5, np.float32))
    assert (ff.zeros_initializer()([2]) == 0).all() and (ff.ones_initializer()([2]) == 1).all()
    u = ff.random_uniform_initializer(seed=3)([1000])
    assert u.min() >= 0 and u.max() < 1


@pytest.mark.parametrize("build", [
    lambda a, b: ff.nn.softmax_cross_entropy_with_logits_v2(labels=a, logits=b),
    lambda a, b: ff.nn.sigmoid_cross_entropy_with_logits(labels=a, logits=b),
    lambda a, b: ff.losses.mean_squared_error(a, b),
    lambda a, b: ff.losses.softmax_cross_entropy(a, b),
], ids=["softmax_xent", "sigmoid_xent", "mse", "losses_softmax"])
def test_a_label_batch_that_does_not_fit_is_named_by_the_loss(build):
    g = ff.Graph()
    with g.as_default():
        labels = ff.placeholder(ff.float32, [8, 10])
        logits = ff.placeholder(ff.float32, [16, 10])
        with pytest.raises(ff.ShapeError, match=r"a batch of 8 labels for 16 examples") as err:
            build(labels, logits)
    assert "test_namespaces.py" in str(err.value) and "mul" not in str(err.value)


def test_keras_model_ops_point_at_the_layers_and_training_shares_the_forward_pass():
    model = ff.Sequential([ff.layers.Dense(4, activation="relu"),      # line A
                           ff.layers.Dense(2)], backend="numpy")       # line B
    line_a = test_keras_model_ops_point_at_the_layers_and_training_shares_the_forward_pass \
        .__code__.co_firstlineno + 1
    model.compile("sgd", "mse")
    model.fit(np.ones((8, 3), np.float32), np.zeros((8, 2), np.float32), verbose=0)
    forward = [n for n in model.graph.nodes if n.scope in ("dense", "dense_1")]
    for scope, line in (("dense", line_a), ("dense_1", line_a + 1)):
        sources = {n.source for n in forward if n.scope == scope}
        assert len(sources) == 1 and sources.pop().endswith(f"test_namespaces.py:{line}")
    # no Dropout / BatchNormalization: one forward matmul per layer, shared by
    # predict and fit (the other matmuls are the backward pass's)
    forward_matmuls = [n for n in forward if n.op == "matmul"]
    assert len(forward_matmuls) == 2


def test_layers_called_by_the_user_keep_the_call_line():
    g = ff.Graph()
    with g.as_default():
        layer = ff.layers.Dense(3)
        y = layer(ff.placeholder(ff.float32, [None, 2]))          # this line
    line = test_layers_called_by_the_user_keep_the_call_line.__code__.co_firstlineno + 4
    assert y.op.source.endswith(f":{line}")


def test_interactive_session_is_the_default_until_another_is_entered():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(np.float32, [None, 2])           # a numpy dtype first: TF1's
        y = x * 2.0
    assert x.dtype == "float32" and x.shape == (None, 2)
    sess = ff.InteractiveSession(g, backend="numpy", passes=[])
    try:
        np.testing.assert_array_equal(y.eval({x: np.ones((1, 2), np.float32)}), [[2, 2]])
        with ff.Session(g, backend="numpy", passes=[]) as inner:
            assert ff.get_default_session() is inner
        assert ff.get_default_session() is sess
    finally:
        sess.close()
        from fragflow.frontend import default_session
        default_session.pop(sess)


def test_nn_dropout_with_a_keep_prob_placeholder(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(ff.float32, [None, 1000])
        keep_prob = ff.placeholder(ff.float32)
        y = ff.nn.dropout(x, keep_prob)
        dx, = ff.gradients(ff.reduce_sum(y * 3.0), [x])
    data = np.ones((50, 1000), np.float32)
    results = {}
    for backend in ("numpy", "gl"):
        sess = ff.Session(g, backend=backend)
        for keep in (1.0, 0.5, 0.2):
            out, grad = sess.run([y, dx], {x: data, keep_prob: keep})
            assert set(np.unique(out)) <= {0.0, np.float32(1 / keep)}
            assert abs(float((out != 0).mean()) - keep) < 0.01
            np.testing.assert_array_equal(grad, out * 3.0)
            results[backend, keep] = out
    for keep in (1.0, 0.5, 0.2):
        np.testing.assert_array_equal(results["gl", keep], results["numpy", keep])


def test_tf1_spellings_of_the_first_mnist_tutorial():
    """TensorFlow 1.0's "MNIST for beginners": "float", reduction_indices, keep_dims,
    initialize_all_variables, a plain Session and sess.run."""
    rng = np.random.default_rng(5)
    xs = rng.random((20, 6)).astype(np.float32)
    ys = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 20)]
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder("float", [None, 6])
        y_ = ff.placeholder("float", [None, 3])
        W = ff.Variable(ff.zeros([6, 3]))
        b = ff.Variable(ff.zeros([3]))
        y = ff.nn.softmax(ff.matmul(x, W) + b)
        cross_entropy = -ff.reduce_sum(y_ * ff.log(y), reduction_indices=[1],
                                       keep_dims=True)
        total = ff.reduce_mean(cross_entropy)
        step = ff.train.GradientDescentOptimizer(0.1).minimize(total)
        init = ff.initialize_all_variables()
        accuracy = ff.reduce_mean(ff.cast(ff.equal(ff.argmax(y, 1), ff.argmax(y_, 1)),
                                          "float"))
        with pytest.raises(ff.AttrError, match="not both"):
            ff.reduce_sum(x, axis=1, reduction_indices=[1])
    assert x.dtype == "float32" and cross_entropy.shape == (None, 1)
    sess = ff.Session(g, backend="numpy", passes=[])
    sess.run(init)
    first = sess.run(total, {x: xs, y_: ys})
    np.testing.assert_allclose(first, np.log(3), rtol=1e-6)
    for _ in range(20):
        sess.run(step, {x: xs, y_: ys})
    assert sess.run(total, {x: xs, y_: ys}) < first
    assert 0 <= sess.run(accuracy, {x: xs, y_: ys}) <= 1


def test_tf1_functional_dropout_and_batch_norm_take_an_is_training_placeholder(gl):
    x = np.random.default_rng(6).normal(size=(16, 200)).astype(np.float32) + 3.0
    g = ff.Graph()
    with g.as_default():
        inputs = ff.placeholder(ff.float32, [None, 200])
        is_training = ff.placeholder(ff.bool_, [])
        dropped = ff.layers.dropout(inputs, rate=0.5, seed=1, training=is_training)
        normed = ff.layers.batch_normalization(inputs, training=is_training)
        with pytest.raises(ff.ShapeError, match="scalar bool"):
            ff.layers.dropout(inputs, training=ff.placeholder(ff.float32, []))
    for backend in ("numpy", "gl"):
        sess = ff.Session(g, backend=backend)
        d_train, n_train = sess.run([dropped, normed], {inputs: x, is_training: True})
        d_test, n_test = sess.run([dropped, normed], {inputs: x, is_training: False})
        np.testing.assert_array_equal(d_test, x)
        assert abs(float((d_train == 0).mean()) - 0.5) < 0.05
        np.testing.assert_allclose(n_train.mean(0), 0, atol=1e-4)   # batch statistics
        np.testing.assert_allclose(n_test, x / np.sqrt(1 + 1e-3), rtol=1e-5)  # moving: 0, 1


def test_minimize_leaves_variables_made_not_trainable_alone():
    g = ff.Graph()
    with g.as_default():
        w = ff.Variable(np.float32([1.0, 2.0]), name="w")
        frozen = ff.Variable(np.float32([3.0, 4.0]), name="frozen", trainable=False)
        x = ff.placeholder(ff.float32, [None, 2])
        h = ff.layers.batch_normalization(x * w * frozen, training=False)
        loss = ff.reduce_sum(ff.square(h))
        step = ff.train.GradientDescentOptimizer(0.1).minimize(loss)
        names = [v.name for v in ff.trainable_variables()]
    assert "frozen" not in names and not any("moving" in n for n in names)
    assert "w" in names and any("gamma" in n for n in names)
    sess = ff.Session(g, backend="numpy", passes=[])
    sess.run(step, {x: np.ones((3, 2), np.float32)})
    np.testing.assert_array_equal(sess.get(frozen), [3, 4])
    assert not np.array_equal(sess.get(w), [1, 2])


def test_global_step_and_exponential_decay():
    g = ff.Graph()
    with g.as_default():
        assert ff.train.get_global_step() is None
        step = ff.train.get_or_create_global_step()
        assert ff.train.get_or_create_global_step().name == step.name == "global_step"
        lr = ff.train.exponential_decay(0.5, step, decay_steps=2, decay_rate=0.5,
                                        staircase=True)
        w = ff.Variable(np.float32([1.0]), name="w")
        train_op = ff.train.GradientDescentOptimizer(lr).minimize(ff.reduce_sum(w),
                                                                  global_step=step)
        assert [v.name for v in ff.trainable_variables()] == ["w"]
    sess = ff.Session(g, backend="numpy", passes=[])
    rates = []
    for _ in range(5):
        rates.append(float(sess.run(lr)))
        sess.run(train_op)
    assert rates == [0.5, 0.5, 0.25, 0.25, 0.125]
    assert int(sess.get(step)) == 5
    np.testing.assert_allclose(sess.get(w), [1 - sum(rates)])


def test_namespaces_import_by_their_public_names():
    import importlib

    from fragflow.keras.layers import Dense
    from fragflow.train import AdamOptimizer
    assert Dense is ff.layers.Dense and AdamOptimizer is ff.optim.Adam
    for name in ("nn", "math", "image", "losses", "linalg", "random", "train", "keras",
                 "layers", "optim", "keras.layers", "keras.models"):
        assert importlib.import_module(f"fragflow.{name}") is \
            eval(f"ff.{name}")                               # noqa: S307 (a fixed name)
    import math
    import random
    assert math.pi > 3 and random.random() < 1                # the stdlib's, untouched


# -- the namespaces survive pickling (Ray ships functions that use them to its workers) ----
def _public_namespaces() -> dict:
    """{public name: object} for every namespace reachable from ff by public names: its
    modules (ff.nn, ff.layers, ff.onnx, ...), those of the TensorFlow namespaces in them
    (ff.keras.layers, ff.nn.rnn_cell) and the namespace objects (ff.keras.losses, ...)."""
    found, seen = {}, set()

    def visit(public, obj):
        for name in dir(obj):
            value = getattr(obj, name)
            is_module = isinstance(value, types.ModuleType) and \
                value.__name__.startswith("fragflow.")
            if name.startswith("_") or id(value) in seen or not (
                    is_module or isinstance(value, types.SimpleNamespace)):
                continue
            seen.add(id(value))
            found[f"{public}.{name}"] = value
            if not is_module or value.__name__.startswith("fragflow.frontend.namespaces."):
                visit(f"{public}.{name}", value)
    visit("fragflow", ff)
    return found


# A fresh process, as a Ray worker is: unpickles each namespace, checks that it is that
# process's own fragflow namespace of that name and that each of its names can be read.
_UNPICKLE_IN_A_FRESH_PROCESS = """
import functools, pickle, sys
payloads = pickle.loads(sys.stdin.buffer.read())
import fragflow
for public, payload in sorted(payloads.items()):
    restored = pickle.loads(payload)
    here = functools.reduce(getattr, public.split(".")[1:], fragflow)
    assert restored is here, (public, restored, here)
    for name in dir(restored):
        getattr(restored, name)
    print("ok", public)
"""


def _unpickled_in_a_fresh_process(payloads: dict) -> list:
    result = subprocess.run([sys.executable, "-c", _UNPICKLE_IN_A_FRESH_PROCESS],
                            input=pickle.dumps(payloads), capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr.decode()[-3000:]
    return [line.split()[1] for line in result.stdout.decode().splitlines()]


def test_every_namespace_survives_ray_s_pickling_into_a_fresh_process():
    cloudpickle = pytest.importorskip("ray.cloudpickle", reason="Ray is not installed")
    namespaces = _public_namespaces()
    assert {"fragflow.nn", "fragflow.keras.layers", "fragflow.keras.losses",
            "fragflow.keras.optimizers", "fragflow.keras.callbacks"} <= set(namespaces)
    payloads = {public: cloudpickle.dumps(obj) for public, obj in namespaces.items()}
    assert _unpickled_in_a_fresh_process(payloads) == sorted(namespaces)


def test_the_namespace_objects_survive_the_standard_pickle():
    objects = {public: obj for public, obj in _public_namespaces().items()
               if isinstance(obj, types.SimpleNamespace)}
    assert set(objects) == {"fragflow.keras.optimizers", "fragflow.keras.losses",
                            "fragflow.keras.models", "fragflow.keras.callbacks",
                            "fragflow.keras.utils"}
    payloads = {public: pickle.dumps(obj) for public, obj in objects.items()}
    assert _unpickled_in_a_fresh_process(payloads) == sorted(objects)


def test_a_namespace_not_found_under_its_name_says_it_cannot_be_pickled():
    from fragflow.frontend.namespaces.keras import _Namespace
    stray = _Namespace("fragflow.keras.scratch", f=len)
    with pytest.raises(ff.SerializationError, match="fragflow.keras.scratch cannot be pickled"):
        pickle.dumps(stray)


def test_a_pickled_namespace_this_fragflow_lacks_fails_to_load_clearly():
    payload = pickle.dumps(ff.keras.losses).replace(b"fragflow.keras.losses",
                                                    b"fragflow.keras.lossez")
    with pytest.raises(ff.SerializationError, match="no namespace fragflow.keras.lossez"):
        pickle.loads(payload)
