"""ff.layers: output shapes, and outputs on GL against numpy formulas written here.

One graph holds every layer (so the file compiles each shader once); the weights come
from seeded initializers and the biases are non-zero. Sizes are odd and strides do not
divide them."""
import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches

L = ff.layers
RNG = np.random.default_rng(5)
X_IMG = RNG.normal(size=(2, 7, 7, 3)).astype(np.float32)
X_VEC = RNG.normal(size=(3, 5)).astype(np.float32)
X_SEQ = RNG.normal(size=(2, 3, 5)).astype(np.float32)
BIAS = ff.initializers.random_normal(stddev=0.5, seed=9)


# -- numpy formulas ----------------------------------------------------------------------
def pad_for(size, k, s, d, padding):
    """(out size, pad before, pad after) by TensorFlow's SAME / VALID rules."""
    ek = (k - 1) * d + 1
    if padding == "VALID":
        return (size - ek) // s + 1, 0, 0
    out = -(-size // s)
    total = max((out - 1) * s + ek - size, 0)
    return out, total // 2, total - total // 2


def windows(x, kh, kw, s, d, padding, fill=0.0):
    """(N, OH, OW, kh, kw, C): each output position's window, padding filled with fill."""
    n, h, w, c = x.shape
    oh, top, bottom = pad_for(h, kh, s[0], d[0], padding)
    ow, left, right = pad_for(w, kw, s[1], d[1], padding)
    xp = np.pad(x.astype(np.float64), ((0, 0), (top, bottom), (left, right), (0, 0)),
                constant_values=fill)
    out = np.empty((n, oh, ow, kh, kw, c))
    for i in range(oh):
        for j in range(ow):
            out[:, i, j] = xp[:, i * s[0]:i * s[0] + (kh - 1) * d[0] + 1:d[0],
                              j * s[1]:j * s[1] + (kw - 1) * d[1] + 1:d[1]]
    return out


def np_conv(x, w, s=(1, 1), d=(1, 1), padding="VALID"):
    return np.einsum("nijabc,abco->nijo", windows(x, *w.shape[:2], s, d, padding), w)


def np_depthwise(x, w, s=(1, 1), d=(1, 1), padding="VALID"):
    out = np.einsum("nijabc,abcm->nijcm", windows(x, *w.shape[:2], s, d, padding), w)
    return out.reshape(out.shape[:3] + (-1,))


def np_pool(x, k, s, padding, kind):
    if kind == "max":
        return windows(x, k, k, (s, s), (1, 1), padding, -np.inf).max(axis=(3, 4))
    total = windows(x, k, k, (s, s), (1, 1), padding).sum(axis=(3, 4))
    count = windows(np.ones_like(x), k, k, (s, s), (1, 1), padding).sum(axis=(3, 4))
    return total / count


def relu(v):
    return np.maximum(v, 0)


def np_softmax(v):
    e = np.exp(v - v.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# -- the graph ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def built():
    g = ff.Graph()
    layers, outs = {}, {}
    with g.as_default():
        img = ff.constant(X_IMG, name="img")
        vec = ff.constant(X_VEC, name="vec")
        seq = ff.constant(X_SEQ, name="seq")

        def add(key, layer, x, training=False):
            layers.setdefault(key, layer)
            outs[key] = layer(x, training=training)

        add("dense_relu", L.Dense(4, activation="relu", bias_initializer=BIAS), vec)
        add("dense_softmax", L.Dense(6, activation="softmax", bias_initializer=BIAS), vec)
        add("dense_seq", L.Dense(2, bias_initializer=BIAS, use_bias=True), seq)
        add("conv_same", L.Conv2D(4, 3, strides=2, padding="same", activation="relu",
                                  bias_initializer=BIAS), img)
        add("conv_dilated", L.Conv2D(2, (2, 3), dilation_rate=2, bias_initializer=BIAS),
            img)
        add("depthwise", L.DepthwiseConv2D(3, strides=2, padding="same",
                                           depth_multiplier=2, activation="tanh",
                                           bias_initializer=BIAS), img)
        add("separable", L.SeparableConv2D(5, 3, depth_multiplier=2, activation="relu",
                                           bias_initializer=BIAS), img)
        bn = L.BatchNormalization(momentum=0.9, beta_initializer=BIAS,
                                  gamma_initializer=ff.initializers.random_uniform(0.5, 2,
                                                                                   seed=4))
        add("bn_train", bn, img, training=True)
        add("bn_infer", bn, img, training=False)
        drop = L.Dropout(0.5, seed=3)
        add("dropout_train", drop, img, training=True)
        add("dropout_infer", drop, img)
        add("max_pool", L.MaxPool2D(3, strides=2, padding="same"), img)
        add("avg_pool", L.AveragePool2D(3, strides=2, padding="same"), img)
        add("avg_pool_valid", L.AveragePooling2D(), img)
        add("global_avg", L.GlobalAveragePool2D(), img)
        add("global_max", L.GlobalMaxPool2D(), img)
        add("flatten", L.Flatten(), img)
        add("activation", L.Activation("relu6"), img)
    return g, layers, outs


def run(built, backend):
    g, layers, outs = built
    bn = layers["bn_train"]
    keys = sorted(outs)
    with ff.Session(g, backend=backend) as sess:
        # before the run: the run's assigns (the moving statistics) apply when it ends
        weights = {k: [sess.get(w) for w in layer.weights] for k, layer in layers.items()}
        values = sess.run([outs[k] for k in keys] + bn.updates)
    return dict(zip(keys, values)), values[len(keys):], weights


@pytest.fixture(scope="module")
def gl_results(built, gl):
    return run(built, "gl")


@pytest.fixture(scope="module")
def numpy_results(built):
    return run(built, "numpy")


def expected_outputs(weights):
    w = weights
    x = X_IMG.astype(np.float64)
    bn_gamma, bn_beta, moving_mean, moving_var = w["bn_train"]
    mean, var = x.mean(axis=(0, 1, 2)), x.var(axis=(0, 1, 2))
    k, b = w["dense_seq"]
    dk, pk, pb = w["separable"]
    return {
        "dense_relu": relu(X_VEC @ w["dense_relu"][0] + w["dense_relu"][1]),
        "dense_softmax": np_softmax(X_VEC @ w["dense_softmax"][0] + w["dense_softmax"][1]),
        "dense_seq": X_SEQ.astype(np.float64) @ k + b,
        "conv_same": relu(np_conv(x, w["conv_same"][0], (2, 2), padding="SAME")
                          + w["conv_same"][1]),
        "conv_dilated": np_conv(x, w["conv_dilated"][0], d=(2, 2)) + w["conv_dilated"][1],
        "depthwise": np.tanh(np_depthwise(x, w["depthwise"][0], (2, 2), padding="SAME")
                             + w["depthwise"][1]),
        "separable": relu(np_conv(np_depthwise(x, dk), pk) + pb),
        "bn_train": (x - mean) / np.sqrt(var + 1e-3) * bn_gamma + bn_beta,
        "bn_infer": (x - moving_mean) / np.sqrt(moving_var + 1e-3) * bn_gamma + bn_beta,
        "dropout_infer": x,
        "max_pool": np_pool(x, 3, 2, "SAME", "max"),
        "avg_pool": np_pool(x, 3, 2, "SAME", "avg"),
        "avg_pool_valid": np_pool(x, 2, 2, "VALID", "avg"),
        "global_avg": x.mean(axis=(1, 2)),
        "global_max": x.max(axis=(1, 2)),
        "flatten": x.reshape(2, -1),
        "activation": np.clip(x, 0, 6),
    }, [moving_mean * 0.9 + mean * 0.1, moving_var * 0.9 + var * 0.1]


SHAPES = {"dense_relu": (3, 4), "dense_softmax": (3, 6), "dense_seq": (2, 3, 2),
          "conv_same": (2, 4, 4, 4), "conv_dilated": (2, 5, 3, 2),
          "depthwise": (2, 4, 4, 6), "separable": (2, 5, 5, 5), "bn_train": (2, 7, 7, 3),
          "bn_infer": (2, 7, 7, 3), "dropout_train": (2, 7, 7, 3),
          "dropout_infer": (2, 7, 7, 3), "max_pool": (2, 4, 4, 3), "avg_pool": (2, 4, 4, 3),
          "avg_pool_valid": (2, 3, 3, 3), "global_avg": (2, 3), "global_max": (2, 3),
          "flatten": (2, 147), "activation": (2, 7, 7, 3)}


def test_output_shapes(built):
    _, layers, outs = built
    assert {k: tuple(v.shape) for k, v in outs.items()} == SHAPES
    assert layers["conv_same"].compute_output_shape((None, 9, 9, 3)) == (None, 5, 5, 4)


def test_weights_shapes_and_names(built):
    _, layers, _ = built
    shapes = {k: [tuple(w.shape) for w in layer.weights] for k, layer in layers.items()}
    assert shapes["conv_same"] == [(3, 3, 3, 4), (4,)]
    assert shapes["depthwise"] == [(3, 3, 3, 2), (6,)]
    assert shapes["separable"] == [(3, 3, 3, 2), (1, 1, 6, 5), (5,)]
    assert shapes["bn_train"] == [(3,)] * 4
    assert [w.name for w in layers["bn_train"].trainable_weights] == \
        ["batch_normalization/gamma", "batch_normalization/beta"]
    assert len(layers["bn_train"].non_trainable_weights) == 2
    assert layers["conv_dilated"].name == "conv2d_1"       # unique in the graph


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_outputs_match_numpy_formulas(backend, request):
    got, updates, weights = request.getfixturevalue(f"{backend}_results")
    expected, expected_updates = expected_outputs(weights)
    for key, want in expected.items():
        scale = np.abs(want).max()
        assert_matches(got[key], want.astype(np.float32), rtol=1e-4, atol=1e-5 * scale,
                       what=f"{backend} {key}")
    for got_u, want_u in zip(updates, expected_updates):
        assert_matches(got_u, want_u.astype(np.float32), rtol=1e-5, what="moving stats")


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_dropout_in_training_drops_or_scales(backend, request):
    got, _, _ = request.getfixturevalue(f"{backend}_results")
    out = got["dropout_train"]
    kept = out != 0
    assert 0.3 < kept.mean() < 0.7
    np.testing.assert_allclose(out[kept], 2 * X_IMG[kept], rtol=1e-6)


def test_gl_matches_the_numpy_executor_for_dropout(gl_results, numpy_results):
    np.testing.assert_array_equal(gl_results[0]["dropout_train"] != 0,
                                  numpy_results[0]["dropout_train"] != 0)


def test_layer_errors():
    g = ff.Graph()
    with g.as_default():
        with pytest.raises(ff.ShapeError, match="NHWC"):
            L.Conv2D(2, 3)(ff.placeholder((None, 5, 3)))
        with pytest.raises(ff.AttrError, match="padding"):
            L.Conv2D(2, 3, padding="full")
        with pytest.raises(ff.AttrError, match="unknown activation"):
            L.Dense(2, activation="relu7")
        with pytest.raises(ff.AttrError, match="rate"):
            L.Dropout(1.0)
        L.Dense(2, name="head")(ff.placeholder((1, 3)))
        with pytest.raises(ff.FragflowError, match="already exists"):
            L.Dense(2, name="head")(ff.placeholder((1, 3)))
    other = ff.Graph()
    layer = L.Dense(2)
    with g.as_default():
        layer(ff.placeholder((1, 3)))
    with other.as_default(), pytest.raises(ff.FragflowError, match="cannot be called"):
        layer(ff.placeholder((1, 3)))
