"""ff.keras.layers against Keras 3 (its torch backend) layer by layer.

Each case makes a Keras layer, builds it on seeded inputs (sizes not multiples of 4,
zeros and ties among the values), sets seeded weights (biases non-zero), and then
builds fragflow's layer from the Keras layer's get_config() with set_weights(Keras's
get_weights()). The checks: the weights' names and order are Keras's; the outputs on
the numpy executor and on GL match Keras's; fragflow's get_config() makes the same
Keras layer again; gradients with respect to the inputs match finite differences.
One graph holds every case, so each backend compiles once."""
import os
import re

import numpy as np
import pytest

os.environ.setdefault("KERAS_BACKEND", "torch")
keras = pytest.importorskip("keras")

import fragflow as ff  # noqa: E402
from fragflow.frontend.layers_applications import APPLICATION_LAYERS  # noqa: E402
from tests.gradcheck import check_gradients  # noqa: E402

K = keras.layers
_convnext = keras.src.applications.convnext            # Keras's own, not exported
_inception_resnet = keras.src.applications.inception_resnet_v2
# Keras's torch backend warns of numpy 2's __array__ copy keyword on every conversion
# (and of its rms_scaling, which the layer_norm_rms case checks)
pytestmark = [pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:You passed `rms_scaling=True`:UserWarning")]


def _pair_call(layer, xs):
    return layer(xs)


def _positional(layer, xs):
    return layer(*xs)


# id: (Keras layer factory, input shapes, how it is called on the inputs)
CASES = {
    # the layers fragflow had, from Keras 3's configs
    "dense": (lambda: K.Dense(5, activation="relu"), [(3, 7)], None),
    "dense_seq": (lambda: K.Dense(3, use_bias=False), [(2, 3, 7)], None),
    "conv2d": (lambda: K.Conv2D(3, 3, strides=2, padding="same", activation="sigmoid"),
               [(2, 7, 5, 2)], None),
    "max_pool2d": (lambda: K.MaxPooling2D(3, strides=2, padding="same"), [(2, 7, 5, 3)],
                   None),
    "avg_pool2d": (lambda: K.AveragePooling2D((2, 3)), [(2, 7, 5, 3)], None),
    "global_avg2d": (lambda: K.GlobalAveragePooling2D(keepdims=True), [(2, 3, 5, 3)],
                     None),
    "flatten": (lambda: K.Flatten(), [(2, 3, 5, 3)], None),
    "reshape": (lambda: K.Reshape((5, -1)), [(2, 3, 5)], None),
    "activation": (lambda: K.Activation("gelu"), [(3, 7)], None),
    **{f"activation_{name}": (lambda name=name: K.Activation(name), [(3, 7)], None)
       for name in ("softsign", "hard_sigmoid", "hard_silu", "mish", "log_sigmoid",
                    "selu", "elu", "softplus", "swish", "relu6", "exponential",
                    "leaky_relu", "log_softmax")},
    "dropout": (lambda: K.Dropout(0.3), [(3, 7)], None),
    # channels_first
    "conv2d_cf": (lambda: K.Conv2D(3, (3, 2), strides=2, padding="same",
                                   data_format="channels_first"), [(2, 2, 7, 5)], None),
    "conv1d_cf": (lambda: K.Conv1D(3, 3, data_format="channels_first"), [(2, 2, 7)], None),
    "conv2d_transpose_cf": (lambda: K.Conv2DTranspose(2, 3, strides=2,
                                                      data_format="channels_first"),
                            [(1, 3, 3, 5)], None),
    "separable2d_cf": (lambda: K.SeparableConv2D(2, 3, data_format="channels_first"),
                       [(1, 3, 5, 6)], None),
    "max_pool2d_cf": (lambda: K.MaxPooling2D(2, data_format="channels_first"),
                      [(2, 3, 5, 7)], None),
    "avg_pool1d_cf": (lambda: K.AveragePooling1D(2, data_format="channels_first"),
                      [(2, 3, 7)], None),
    "global_avg2d_cf": (lambda: K.GlobalAveragePooling2D(data_format="channels_first",
                                                         keepdims=True),
                        [(2, 3, 5, 7)], None),
    "global_max1d_cf": (lambda: K.GlobalMaxPooling1D(data_format="channels_first"),
                        [(2, 3, 7)], None),
    "flatten_cf": (lambda: K.Flatten(data_format="channels_first"), [(2, 3, 5, 2)], None),
    "upsampling2d_cf": (lambda: K.UpSampling2D(2, data_format="channels_first",
                                               interpolation="bilinear"),
                        [(2, 3, 3, 5)], None),
    "zero_padding2d_cf": (lambda: K.ZeroPadding2D((1, 2), data_format="channels_first"),
                          [(2, 3, 3, 5)], None),
    "cropping2d_cf": (lambda: K.Cropping2D(((1, 0), (0, 2)), data_format="channels_first"),
                      [(2, 3, 5, 5)], None),
    # merging
    "add": (lambda: K.Add(), [(2, 3, 5)] * 3, _pair_call),
    "add_broadcast": (lambda: K.Add(), [(2, 3, 5), (2, 1, 5)], _pair_call),
    "subtract": (lambda: K.Subtract(), [(2, 7), (2, 7)], _pair_call),
    "multiply": (lambda: K.Multiply(), [(2, 3, 5)] * 3, _pair_call),
    "average": (lambda: K.Average(), [(2, 3, 5)] * 3, _pair_call),
    "maximum": (lambda: K.Maximum(), [(2, 7), (2, 7)], _pair_call),
    "minimum": (lambda: K.Minimum(), [(2, 7), (2, 7), (2, 7)], _pair_call),
    "concatenate": (lambda: K.Concatenate(), [(2, 3, 5), (2, 3, 2)], _pair_call),
    "concatenate_axis1": (lambda: K.Concatenate(axis=1), [(2, 3, 5), (2, 1, 5)],
                          _pair_call),
    "dot_rank2": (lambda: K.Dot(axes=1), [(3, 7), (3, 7)], _pair_call),
    "dot_cosine": (lambda: K.Dot(axes=-1, normalize=True), [(3, 7), (3, 7)], _pair_call),
    "dot_rank3": (lambda: K.Dot(axes=(2, 2)), [(2, 3, 5), (2, 6, 5)], _pair_call),
    "dot_rank3_12": (lambda: K.Dot(axes=(1, 2)), [(2, 5, 3), (2, 6, 5)], _pair_call),
    # convolutions
    "conv1d": (lambda: K.Conv1D(4, 3, strides=2, padding="same", activation="relu"),
               [(2, 9, 3)], None),
    "conv1d_causal": (lambda: K.Conv1D(3, 3, padding="causal", dilation_rate=2),
                      [(2, 9, 2)], None),
    "conv1d_groups": (lambda: K.Conv1D(6, 2, groups=3), [(2, 7, 3)], None),
    "conv2d_groups": (lambda: K.Conv2D(4, (3, 2), groups=2, padding="same"),
                      [(2, 7, 6, 4)], None),
    # one input channel per group: run as a depthwise convolution (ConvNeXt's 7x7)
    "conv2d_groups_depthwise": (lambda: K.Conv2D(6, 3, strides=2, groups=3,
                                                 padding="same"), [(2, 7, 6, 3)], None),
    "conv2d_groups_convnext": (lambda: K.Conv2D(5, 7, groups=5, padding="same"),
                               [(2, 9, 8, 5)], None),
    "conv2d_groups_depthwise_dilated": (lambda: K.Conv2D(4, (3, 2), groups=4,
                                                         dilation_rate=2),
                                        [(1, 9, 7, 4)], None),
    "conv1d_groups_causal": (lambda: K.Conv1D(4, 3, groups=4, padding="causal",
                                              dilation_rate=2), [(2, 9, 4)], None),
    "conv2d_dilated": (lambda: K.Conv2D(3, 3, dilation_rate=(2, 1), use_bias=False),
                       [(1, 9, 7, 2)], None),
    "conv3d": (lambda: K.Conv3D(3, (2, 3, 2), strides=(1, 2, 1), padding="same"),
               [(1, 5, 7, 3, 2)], None),
    "conv1d_transpose": (lambda: K.Conv1DTranspose(3, 3, strides=2), [(2, 5, 2)], None),
    "conv1d_transpose_same": (lambda: K.Conv1DTranspose(2, 4, strides=3, padding="same"),
                              [(2, 5, 3)], None),
    "conv2d_transpose": (lambda: K.Conv2DTranspose(3, 3, strides=2, padding="same",
                                                   activation="tanh"),
                         [(2, 5, 3, 2)], None),
    "conv2d_transpose_valid": (lambda: K.Conv2DTranspose(2, (2, 3), strides=(3, 2)),
                               [(1, 3, 4, 3)], None),
    "conv2d_transpose_output_padding": (
        lambda: K.Conv2DTranspose(2, 3, strides=2, padding="same", output_padding=1),
        [(1, 3, 5, 2)], None),
    "conv2d_transpose_output_padding_even": (
        lambda: K.Conv2DTranspose(2, (4, 5), strides=(2, 3), padding="same",
                                  output_padding=(1, 2)), [(1, 3, 4, 2)], None),
    "conv1d_transpose_valid_output_padding": (
        lambda: K.Conv1DTranspose(2, 2, strides=3, output_padding=1), [(2, 4, 3)], None),
    "conv2d_transpose_dilated": (lambda: K.Conv2DTranspose(2, 3, dilation_rate=2),
                                 [(1, 3, 5, 2)], None),
    "conv3d_transpose": (lambda: K.Conv3DTranspose(2, 2, strides=(2, 1, 2)),
                         [(1, 3, 2, 3, 2)], None),
    "depthwise1d": (lambda: K.DepthwiseConv1D(3, depth_multiplier=2, padding="same"),
                    [(2, 7, 3)], None),
    "depthwise2d_dilated": (lambda: K.DepthwiseConv2D(3, dilation_rate=2,
                                                      depth_multiplier=2),
                            [(1, 7, 6, 3)], None),
    "separable1d": (lambda: K.SeparableConv1D(4, 3, strides=2, depth_multiplier=2),
                    [(2, 9, 3)], None),
    "separable2d": (lambda: K.SeparableConv2D(3, 3, padding="same", activation="relu"),
                    [(1, 5, 7, 2)], None),
    # pooling
    "max_pool1d": (lambda: K.MaxPooling1D(3, strides=2, padding="same"), [(2, 9, 3)],
                   None),
    "avg_pool1d": (lambda: K.AveragePooling1D(3, strides=2, padding="same"), [(2, 9, 3)],
                   None),
    "avg_pool1d_valid": (lambda: K.AveragePooling1D(2), [(2, 7, 3)], None),
    "max_pool3d": (lambda: K.MaxPooling3D(2, padding="same"), [(1, 3, 5, 4, 2)], None),
    "avg_pool3d": (lambda: K.AveragePooling3D((2, 2, 1)), [(1, 4, 5, 3, 2)], None),
    "global_avg1d": (lambda: K.GlobalAveragePooling1D(), [(2, 7, 3)], None),
    "global_max1d": (lambda: K.GlobalMaxPooling1D(keepdims=True), [(2, 7, 3)], None),
    "global_avg3d": (lambda: K.GlobalAveragePooling3D(), [(1, 3, 5, 2, 3)], None),
    "global_max3d": (lambda: K.GlobalMaxPooling3D(), [(1, 3, 5, 2, 3)], None),
    # reshaping
    "upsampling1d": (lambda: K.UpSampling1D(3), [(2, 5, 3)], None),
    "upsampling2d": (lambda: K.UpSampling2D((2, 3)), [(2, 3, 5, 2)], None),
    "upsampling2d_bilinear": (lambda: K.UpSampling2D((3, 2), interpolation="bilinear"),
                              [(2, 3, 5, 2)], None),
    "upsampling3d": (lambda: K.UpSampling3D((1, 2, 3)), [(1, 3, 2, 3, 2)], None),
    "zero_padding1d": (lambda: K.ZeroPadding1D((2, 1)), [(2, 5, 3)], None),
    "zero_padding2d": (lambda: K.ZeroPadding2D(((1, 0), (2, 3))), [(2, 3, 5, 2)], None),
    "zero_padding3d": (lambda: K.ZeroPadding3D((1, 0, 2)), [(1, 3, 2, 3, 2)], None),
    "cropping1d": (lambda: K.Cropping1D((2, 1)), [(2, 7, 3)], None),
    "cropping2d": (lambda: K.Cropping2D(((1, 0), (2, 1))), [(2, 5, 7, 2)], None),
    "cropping3d": (lambda: K.Cropping3D(((1, 0), (0, 1), (1, 1))), [(1, 3, 5, 3, 2)],
                   None),
    "permute": (lambda: K.Permute((3, 1, 2)), [(2, 3, 5, 7)], None),
    "repeat_vector": (lambda: K.RepeatVector(3), [(2, 5)], None),
    "time_distributed_dense": (lambda: K.TimeDistributed(K.Dense(3, activation="tanh")),
                               [(2, 5, 7)], None),
    "time_distributed_conv": (lambda: K.TimeDistributed(K.Conv2D(2, 3, padding="same")),
                              [(2, 3, 5, 5, 2)], None),
    # normalization
    "layer_norm": (lambda: K.LayerNormalization(), [(2, 3, 7)], None),
    "layer_norm_axes": (lambda: K.LayerNormalization(axis=(2, 3), epsilon=1e-5),
                        [(2, 3, 5, 3)], None),
    "layer_norm_rms": (lambda: K.LayerNormalization(rms_scaling=True), [(2, 7)], None),
    "group_norm": (lambda: K.GroupNormalization(groups=3), [(2, 5, 5, 6)], None),
    "group_norm_seq": (lambda: K.GroupNormalization(groups=2, center=False), [(2, 7, 4)],
                       None),
    "unit_norm": (lambda: K.UnitNormalization(), [(3, 7)], None),
    "rms_norm": (lambda: K.RMSNormalization(), [(2, 3, 7)], None),
    "rms_norm_axes": (lambda: K.RMSNormalization(axis=(1, 2), epsilon=1e-3), [(2, 3, 5)],
                      None),
    "identity": (lambda: K.Identity(), [(3, 7)], None),
    "batch_norm": (lambda: K.BatchNormalization(), [(2, 5, 3)], None),
    # activations
    "leaky_relu": (lambda: K.LeakyReLU(negative_slope=0.2), [(3, 7)], None),
    "prelu": (lambda: K.PReLU(), [(2, 3, 5)], None),
    "prelu_shared": (lambda: K.PReLU(shared_axes=[1, 2]), [(2, 3, 5, 3)], None),
    "elu": (lambda: K.ELU(alpha=0.5), [(3, 7)], None),
    "relu_args": (lambda: K.ReLU(max_value=1.5, negative_slope=0.1, threshold=0.5),
                  [(3, 7)], None),
    "relu_max": (lambda: K.ReLU(max_value=0.7), [(3, 7)], None),
    "softmax_axis": (lambda: K.Softmax(axis=1), [(2, 5, 3)], None),
    # regularization (inference: the identity)
    "spatial_dropout2d": (lambda: K.SpatialDropout2D(0.5), [(2, 3, 5, 2)], None),
    "gaussian_noise": (lambda: K.GaussianNoise(0.3), [(3, 7)], None),
    "gaussian_dropout": (lambda: K.GaussianDropout(0.3), [(3, 7)], None),
    "activity_regularization": (lambda: K.ActivityRegularization(l1=0.1, l2=0.2),
                                [(3, 7)], None),
    # preprocessing
    "rescaling": (lambda: K.Rescaling(1 / 127.5, offset=-1), [(2, 3, 5, 3)], None),
    "resizing": (lambda: K.Resizing(5, 7), [(2, 3, 5, 2)], None),
    "resizing_down": (lambda: K.Resizing(3, 2), [(2, 7, 5, 2)], None),
    "resizing_nearest": (lambda: K.Resizing(7, 3, interpolation="nearest"),
                         [(2, 3, 5, 2)], None),
    "center_crop": (lambda: K.CenterCrop(3, 4), [(2, 6, 7, 2)], None),
    "normalization": (lambda: K.Normalization(mean=[0.5, -1.0, 2.0],
                                              variance=[1.0, 4.0, 0.25]),
                      [(2, 5, 3)], None),
    "normalization_adapted": (lambda: _adapted(K.Normalization(axis=(1, 2))),
                              [(2, 3, 5)], None),
    "normalization_invert": (lambda: K.Normalization(mean=2.0, variance=9.0, invert=True),
                             [(2, 5)], None),
    # attention
    "attention": (lambda: K.Attention(), [(2, 3, 5), (2, 4, 5)], _pair_call),
    "attention_scaled_key": (lambda: K.Attention(use_scale=True),
                             [(2, 3, 5), (2, 4, 2), (2, 4, 5)], _pair_call),
    "attention_concat_causal": (lambda: K.Attention(use_scale=True, score_mode="concat"),
                                [(2, 4, 5), (2, 4, 5)],
                                lambda layer, xs: layer(xs, use_causal_mask=True)),
    "additive_attention": (lambda: K.AdditiveAttention(), [(2, 3, 5), (2, 4, 5)],
                           _pair_call),
    "mha_self": (lambda: K.MultiHeadAttention(2, 3), [(2, 5, 6)],
                 lambda layer, xs: layer(xs[0], xs[0])),
    "mha_cross_key": (lambda: K.MultiHeadAttention(3, 2, value_dim=4, output_shape=5),
                      [(2, 3, 6), (2, 4, 5), (2, 4, 7)], _positional),
    "mha_causal": (lambda: K.MultiHeadAttention(2, 3, use_bias=False), [(2, 5, 6)],
                   lambda layer, xs: layer(xs[0], xs[0], use_causal_mask=True)),
    # Keras's own classes inside keras.applications (frontend/layers_applications.py)
    "layer_scale": (lambda: _convnext.LayerScale(0.5, 5), [(2, 3, 4, 5)], None),
    "stochastic_depth": (lambda: _convnext.StochasticDepth(0.4), [(2, 3, 5)], None),
    "custom_scale_layer": (lambda: _inception_resnet.CustomScaleLayer(0.17),
                           [(2, 3, 5), (2, 3, 5)], _pair_call),
}
IDS = sorted(CASES)


def _adapted(layer):
    layer.adapt(np.random.default_rng(3).normal(2.0, 3.0, size=(10, 3, 5)).astype(np.float32))
    return layer


def _seed(text) -> int:
    return sum(ord(c) * 31 ** i for i, c in enumerate(text)) % 2**32


def _inputs(case_id, shapes, edges=True):
    """Seeded normal inputs, with zeros and ties among them where edges (not for
    finite differences: a tie or a kink has no derivative)."""
    rng = np.random.default_rng(_seed(case_id))
    xs = []
    for shape in shapes:
        x = rng.normal(size=shape).astype(np.float32)
        if edges:
            x.flat[::7] = 0.0
            x.flat[3::11] = 1.0
        xs.append(x)
    return xs


def _weights(case_id, layer):
    """Seeded weights: normal, positive where they are variances or counts."""
    rng = np.random.default_rng(_seed(case_id + "w"))
    out = []
    for w in layer.weights:
        value = rng.normal(scale=0.5, size=tuple(w.shape))
        if any(k in w.path for k in ("variance", "count")):
            value = np.abs(value) + 0.5
        out.append(value.astype(np.float32))
    return out


def _call(case_id, layer, xs):
    call = CASES[case_id][2]
    if call is None:
        return layer(xs[0])
    return call(layer, xs)


def _numpy(t):
    return np.asarray(keras.ops.convert_to_numpy(t), np.float32)


@pytest.fixture(scope="module")
def keras_cases():
    """{id: (Keras layer, inputs, Keras's outputs)}."""
    out = {}
    for case_id in IDS:
        make, shapes, _ = CASES[case_id]
        layer = make()
        xs = _inputs(case_id, shapes)
        _call(case_id, layer, xs)              # builds the weights
        layer.set_weights(_weights(case_id, layer))
        out[case_id] = (layer, xs, _numpy(_call(case_id, layer, xs)))
    return out


def fragflow_layer(klayer):
    """fragflow's layer from the Keras layer's config, with its weights."""
    cls = APPLICATION_LAYERS.get((type(klayer).__module__, type(klayer).__name__)) or \
        getattr(ff.keras.layers, type(klayer).__name__)
    layer = cls.from_config(klayer.get_config())
    layer.set_weights(klayer.get_weights())     # the values its Variables start from
    return layer


@pytest.fixture(scope="module")
def built(keras_cases):
    """One graph: every case's fragflow layer on placeholders."""
    g = ff.Graph()
    layers, fetches, feeds = {}, {}, {}
    with g.as_default():
        for case_id in IDS:
            klayer, xs, _ = keras_cases[case_id]
            layer = fragflow_layer(klayer)
            with ff.name_scope(case_id):
                ps = [ff.placeholder(x.shape, name=f"x{i}") for i, x in enumerate(xs)]
            fetches[case_id] = _call(case_id, layer, ps)
            feeds.update(zip(ps, xs))
            layers[case_id] = layer
    return g, layers, fetches, feeds


@pytest.fixture(scope="module", params=["numpy", "gl"])
def results(request, built):
    if request.param == "gl":
        request.getfixturevalue("gl")
    g, _, fetches, feeds = built
    with ff.Session(g, backend=request.param) as sess:
        values = sess.run([fetches[k] for k in IDS], feeds)
    return request.param, dict(zip(IDS, values))


def max_error(got, want) -> float:
    """max |got - want| relative to want's largest magnitude."""
    return float(np.abs(got.astype(np.float64) - want).max() / max(np.abs(want).max(), 1e-30))


@pytest.mark.parametrize("case_id", IDS)
def test_outputs_match_keras(case_id, keras_cases, results):
    backend, values = results
    want = keras_cases[case_id][2]
    got = values[case_id]
    assert got.shape == want.shape, f"{backend} {case_id}: shape"
    assert max_error(got, want) < 2e-6, f"{backend} {case_id}: {max_error(got, want):.2e}"


@pytest.mark.parametrize("case_id", IDS)
def test_weights_are_named_and_ordered_as_keras(case_id, keras_cases, built):
    klayer = keras_cases[case_id][0]
    layer = built[1][case_id]
    assert [w.name for w in layer.weights] == [w.path for w in klayer.weights]
    assert [tuple(w.shape) for w in layer.weights] == \
        [tuple(w.shape) for w in klayer.weights]


# Keras 3.15's own SpatialDropout2D.from_config(layer.get_config()) fails: its
# __init__ takes no trainable=
KERAS_CANNOT_REBUILD = {"spatial_dropout2d"}


@pytest.mark.parametrize("case_id", sorted(set(IDS) - KERAS_CANNOT_REBUILD))
def test_config_makes_the_same_keras_layer(case_id, keras_cases, built):
    klayer, xs, want = keras_cases[case_id]
    config = built[1][case_id].get_config()
    again = type(klayer).from_config(config)
    _call(case_id, again, xs)
    again.set_weights(klayer.get_weights())
    np.testing.assert_allclose(_numpy(_call(case_id, again, xs)), want, rtol=1e-6,
                               atol=1e-6)


# the activations by name are ops whose gradients tests/ops checks; the identities at
# inference have nothing to differentiate
NO_GRADIENT_CHECK = {k for k in IDS if k.startswith("activation_")} | {
    "dropout", "spatial_dropout2d", "gaussian_noise", "gaussian_dropout", "identity",
    "stochastic_depth"}


@pytest.mark.parametrize("case_id", sorted(set(IDS) - NO_GRADIENT_CHECK))
def test_gradients_match_finite_differences(case_id, keras_cases, gl):
    klayer, xs, _ = keras_cases[case_id]
    layer = fragflow_layer(klayer)
    xs = _inputs(case_id + "grad", [x.shape for x in xs], edges=False)
    check_gradients(lambda *ps: _call(case_id, layer, list(ps)),
                    {f"x{i}": x for i, x in enumerate(xs)}, rtol=2e-3, atol=2e-4)


# -- what the cases above cannot show ------------------------------------------------
@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_noise_layers_in_training(backend, request):
    if backend == "gl":
        request.getfixturevalue("gl")
    L = ff.keras.layers
    g = ff.Graph()
    with g.as_default():
        img = ff.placeholder((8, 3, 5, 7))
        big = ff.placeholder((300, 100))
        spatial = L.SpatialDropout2D(0.5, seed=1)(img, training=True)
        noise = L.GaussianNoise(0.3, seed=2)(big, training=True)
        dropped = L.GaussianDropout(0.2, seed=3)(big, training=True)
    ones = np.ones((300, 100), np.float32)
    with ff.Session(g, backend=backend) as sess:
        s, n, d = sess.run([spatial, noise, dropped],
                           {img: np.ones((8, 3, 5, 7), np.float32), big: ones})
    per_channel = s.reshape(8, 15, 7)
    assert set(np.unique(s)) <= {0.0, 2.0}
    assert (per_channel.min(axis=1) == per_channel.max(axis=1)).all()   # whole channels
    assert 0.3 < (per_channel[:, 0] > 0).mean() < 0.7
    assert abs((n - 1).std() - 0.3) < 0.01 and abs((n - 1).mean()) < 0.01
    assert abs(d.std() - np.sqrt(0.2 / 0.8)) < 0.01 and abs(d.mean() - 1) < 0.01


@pytest.mark.parametrize("backend", ["gl", "numpy"])
def test_upsampling2d_on_a_free_height_and_width_matches_keras(backend, request):
    """Built with the height and width unknown (a model taking any image size), each
    fed size gives Keras's result: 1-pixel, odd and uneven sides, both interpolations."""
    if backend == "gl":
        request.getfixturevalue("gl")
    L = ff.keras.layers
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((None, None, None, 2))
        ys = {kind: L.UpSampling2D((3, 2), interpolation=kind)(x)
              for kind in ("nearest", "bilinear")}
    assert {y.shape for y in ys.values()} == {(None, None, None, 2)}
    rng = np.random.default_rng(7)
    with ff.Session(g, backend=backend) as sess:
        for hw in [(1, 1), (5, 3), (2, 7)]:
            value = rng.standard_normal((2, *hw, 2)).astype(np.float32)
            got = sess.run(ys, {x: value})
            for kind, y in got.items():
                want = keras.ops.convert_to_numpy(
                    K.UpSampling2D((3, 2), interpolation=kind)(value))
                np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6,
                                           err_msg=f"{kind} {hw}")


def test_a_custom_layer_whose_call_takes_no_training_is_called_as_keras_calls_it():
    class Twice(ff.keras.layers.Layer):
        def call(self, inputs):                     # no training: Keras passes none
            return inputs * 2.0

    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 3))
        y = Twice()(x, training=True)
    value = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(ff.Session(g, backend="numpy").run(y, {x: value}),
                                  value * 2)


def test_activity_regularization_gives_keras_penalty():
    x = _inputs("activity", [(3, 7)])[0]
    klayer = K.ActivityRegularization(l1=0.1, l2=0.2)
    klayer(x)
    layer = fragflow_layer(klayer)
    g = ff.Graph()
    with g.as_default():
        layer(ff.constant(x))
    with ff.Session(g, backend="numpy") as sess:
        got = sess.run(layer.activity_loss)
    np.testing.assert_allclose(got, float(klayer.losses[0]), rtol=1e-6)


@pytest.mark.parametrize("trainable", [True, False])
def test_batch_normalization_in_training_as_keras_frozen_or_not(trainable):
    """Keras 3: a BatchNormalization with trainable=False (a frozen base model's) runs
    as at inference when called with training=True, and updates nothing; TF1's
    tf.layers.batch_normalization(trainable=False) keeps the batch's statistics."""
    rng = np.random.default_rng(8)
    x = rng.normal(2.0, 3.0, size=(6, 3, 5)).astype(np.float32)
    klayer = K.BatchNormalization(trainable=trainable)
    klayer.build(x.shape)
    klayer.set_weights([rng.uniform(0.5, 1.5, 5), rng.normal(size=5),
                        rng.normal(size=5), rng.uniform(0.5, 2.0, 5)])
    want = _numpy(klayer(x, training=True))
    layer = fragflow_layer(klayer)
    g = ff.Graph()
    with g.as_default():
        p = ff.placeholder(x.shape)
        got = layer(p, training=True)
        tf1 = ff.layers.batch_normalization(p, training=True, trainable=False,
                                            epsilon=1e-3)
    assert len(layer.updates) == (2 if trainable else 0)
    with ff.Session(g, backend="numpy") as sess:
        got, tf1 = sess.run([got, tf1], {p: x})
    assert max_error(got, want) < 2e-6
    batch = (x - x.mean((0, 1), dtype=np.float64)) / np.sqrt(x.var((0, 1), dtype=np.float64)
                                                              + 1e-3)
    np.testing.assert_allclose(tf1, batch, rtol=1e-5, atol=1e-5)


def test_normalization_adapts_as_keras():
    data = np.random.default_rng(4).normal(1.0, 2.0, size=(20, 3, 5)).astype(np.float32)
    klayer = K.Normalization(axis=-1)
    klayer.adapt(data)
    layer = ff.keras.layers.Normalization(axis=-1)
    layer.adapt(data)
    g = ff.Graph()
    with g.as_default():
        layer(ff.placeholder((None, 3, 5)))
    names = [w.name.split("/")[-1] for w in layer.weights]
    assert names == ["mean", "variance", "count"]       # count: Keras's adapt leaves 0
    for got, want in zip(layer.get_weights()[:2], klayer.get_weights()[:2]):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_regularizers_and_constraints_are_kept_in_the_config():
    klayer = K.Dense(3, kernel_regularizer=keras.regularizers.L2(0.01),
                     bias_constraint="non_neg")
    layer = fragflow_layer(klayer)
    config = layer.get_config()
    assert config["kernel_regularizer"] == klayer.get_config()["kernel_regularizer"]
    again = K.Dense.from_config(config)
    assert again.kernel_regularizer.l2 == pytest.approx(0.01)


def test_keras2_and_keras3_input_configs_are_read():
    L = ff.keras.layers
    dense = L.Dense.from_config({"name": "d", "units": 3, "input_dim": 4, "dtype": "float32",
                                 "batch_input_shape": None, "kernel_initializer":
                                 {"class_name": "VarianceScaling", "config":
                                  {"scale": 2.0, "mode": "fan_in",
                                   "distribution": "uniform", "seed": None}}})
    assert dense.input_shape == (4,) and dense.kernel_initializer.scale == 2.0
    bn = L.BatchNormalization.from_config({"axis": [3], "momentum": 0.9})
    assert bn.axis == 3
    leaky = L.LeakyReLU.from_config({"alpha": 0.1})
    assert leaky.negative_slope == pytest.approx(0.1)
    inputs = K.InputLayer(shape=(5, 3), dtype="int32")
    layer = L.InputLayer.from_config(inputs.get_config())
    assert layer.input_shape == (5, 3) and layer.get_config() == inputs.get_config()
    assert L.InputLayer.from_config({"batch_input_shape": [None, 4]}).input_shape == (4,)


def test_errors_name_the_layer():
    L = ff.keras.layers
    with pytest.raises(ff.AttrError, match="BatchNormalization 'bn': renorm=True is not"):
        L.BatchNormalization(name="bn", renorm=True)
    with pytest.raises(ff.AttrError, match="Conv2D: data_format must be"):
        L.Conv2D(2, 3, data_format="NCHW")
    with pytest.raises(TypeError, match="did you mean 'dilation_rate'"):
        L.Conv1D.from_config({"filters": 2, "kernel_size": 3, "dilation": 2})
    with pytest.raises(ff.AttrError, match="'Lambda' is not one fragflow has"):
        L.TimeDistributed({"class_name": "Lambda", "config": {}})
    g = ff.Graph()
    with g.as_default():
        with pytest.raises(ff.ShapeError, match="Add 'add' needs a list of at least 2"):
            L.Add()([ff.placeholder((2, 3))])
        with pytest.raises(ff.ShapeError, match="Conv1D 'conv1d' needs an NWC sequence"):
            L.Conv1D(2, 3)(ff.placeholder((2, 5, 5, 3)))
        with pytest.raises(ff.ShapeError, match="GroupNormalization .* 5 channels"):
            L.GroupNormalization(2)(ff.placeholder((2, 4, 5)))
        layer = L.Dense(3)
        layer.set_weights([np.zeros((4, 3), np.float32)])
        with pytest.raises(ff.ShapeError, match="Dense 'dense'.*set_weights gave 1"):
            layer(ff.placeholder((2, 4)))


def test_merging_layers_in_a_functional_model():
    L = ff.keras.layers
    g = ff.Graph()
    with g.as_default():
        x = ff.keras.Input((6,))
        a, b = L.Dense(4, name="a")(x), L.Dense(4, activation="tanh", name="b")(x)
        y = L.Dense(2)(L.concatenate([L.add([a, b]), L.Multiply()([a, b])]))
    model = ff.Model(x, y, backend="numpy")
    assert [type(la).__name__ for la in model.layers] == \
        ["Dense", "Dense", "Add", "Multiply", "Concatenate", "Dense"]
    model.compile("sgd", "mse")
    data = np.random.default_rng(0).normal(size=(16, 6)).astype(np.float32)
    history = model.fit(data, np.zeros((16, 2), np.float32), epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert model.layers[2].compute_output_shape([(None, 4), (None, 4)]) == (None, 4)


@pytest.mark.parametrize("recurrent", ["LSTM", "GRU", "SimpleRNN", "Bidirectional"])
def test_embedding_and_recurrent_layers_from_keras_configs(recurrent):
    """Keras's Embedding(mask_zero=True) then a recurrent layer, rebuilt from their
    configs with Keras's weights: the same outputs (the padding masked), and configs
    that Keras reads back to the same config."""
    ids = np.array([[3, 1, 4, 1, 5], [2, 6, 5, 0, 0], [1, 0, 0, 0, 0]], np.int32)
    embed = K.Embedding(7, 4, mask_zero=True)
    inner = K.GRU(3, return_sequences=True) if recurrent == "Bidirectional" else None
    rnn = K.Bidirectional(inner) if inner is not None else getattr(K, recurrent)(3)
    want = _numpy(rnn(embed(ids)))
    for layer in (embed, rnn):
        layer.set_weights(_weights(recurrent + layer.name, layer))
    want = _numpy(rnn(embed(ids)))
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(ids.shape, "int32")
        ours = [fragflow_layer(layer) for layer in (embed, rnn)]
        y = ours[1](ours[0](x))
    with ff.Session(g, backend="numpy") as sess:
        got = sess.run(y, {x: ids})
    assert max_error(got, want) < 2e-6
    for layer, klayer in zip(ours, (embed, rnn)):
        assert type(klayer).from_config(layer.get_config()).get_config() == \
            _unbuilt(klayer.get_config())


def _unbuilt(config):
    """A Keras config without the build_config that a built layer's adds."""
    if isinstance(config, dict):
        return {k: _unbuilt(v) for k, v in config.items() if k != "build_config"}
    return config


def test_docs_keras_md_lists_every_layer():
    """docs/KERAS.md names each layer of ff.keras.layers (by one of its names;
    'MaxPooling1D/2D/3D' names three)."""
    from fragflow.frontend.layers import Layer
    path = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "KERAS.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    named = set(re.findall(r"[A-Za-z0-9]+", text))
    for stem, first, more in re.findall(r"([A-Za-z]+)(\dD)((?:/\dD)+)", text):
        named.update(stem + d for d in [first, *more.strip("/").split("/")])
    L = ff.keras.layers
    classes = {}
    for name in L.__all__:
        obj = getattr(L, name)
        if isinstance(obj, type) and issubclass(obj, Layer) and obj is not Layer:
            classes.setdefault(obj, set()).add(name)
    missing = sorted(min(names) for names in classes.values() if not names & named)
    assert not missing, f"docs/KERAS.md does not list {missing}"


# -- gradients with respect to the weights, against Keras's (torch autograd) ----------
WEIGHTED = [k for k in IDS if k not in NO_GRADIENT_CHECK
            and not k.startswith(("normalization", "batch_norm"))]


@pytest.fixture(scope="module")
def keras_weight_gradients(keras_cases):
    """{id: (r, [d sum(out * r) / d w for Keras's trainable weights])}."""
    import torch
    out = {}
    for case_id in WEIGHTED:
        klayer, xs, _ = keras_cases[case_id]
        if not klayer.trainable_weights:
            continue
        for w in klayer.trainable_weights:
            w.value.grad = None
        y = _call(case_id, klayer, [torch.tensor(x) for x in xs])
        r = np.random.default_rng(_seed(case_id + "r")).uniform(0.5, 1.5, tuple(y.shape))
        (y * torch.tensor(r.astype(np.float32))).sum().backward()
        out[case_id] = (r.astype(np.float32),
                        [w.value.grad.numpy().copy() for w in klayer.trainable_weights])
    return out


@pytest.mark.parametrize("backend", ["numpy", "gl"])
def test_weight_gradients_match_keras(backend, keras_cases, keras_weight_gradients,
                                      request):
    if backend == "gl":
        request.getfixturevalue("gl")
    g = ff.Graph()
    fetches, feeds = {}, {}
    with g.as_default():
        for case_id, (r, _) in keras_weight_gradients.items():
            klayer, xs, _ = keras_cases[case_id]
            layer = fragflow_layer(klayer)
            ps = [ff.placeholder(x.shape) for x in xs]
            y = _call(case_id, layer, ps)
            fetches[case_id] = ff.gradients(ff.reduce_sum(y * ff.constant(r)),
                                            layer.trainable_weights)
            feeds.update(zip(ps, xs))
    with ff.Session(g, backend=backend) as sess:
        got = sess.run(fetches, feeds)
    for case_id, (_, want) in keras_weight_gradients.items():
        assert len(got[case_id]) == len(want), case_id
        # relative to the case's largest gradient: MultiHeadAttention's key bias has a
        # gradient of 0 (the softmax does not see it), rounding noise on both sides
        scale = max(np.abs(b).max() for b in want)
        for i, (a, b) in enumerate(zip(got[case_id], want)):
            error = np.abs(a.astype(np.float64) - b).max() / scale
            assert error < 1e-5, f"{backend} {case_id} weight {i}: {error:.2e}"


@pytest.mark.parametrize("model", ["mha", "attention", "add_pool"])
def test_keras_masks_as_keras_reads_them(model):
    """A Keras mask (Embedding(mask_zero=True)) read by MultiHeadAttention (the padding
    neither attended to nor attending: a row with nothing to see attends to every step
    alike), by Attention (the padded queries give zeros), and passed on by Add (the AND
    of its inputs' masks) to GlobalAveragePooling1D (the mean of the real steps)."""
    ids = np.array([[3, 1, 4, 1, 5, 2], [2, 6, 5, 0, 0, 0], [1, 0, 0, 0, 0, 0]], np.int32)
    embed = K.Embedding(7, 6, mask_zero=True)
    last = {"mha": [K.MultiHeadAttention(2, 3)], "attention": [K.Attention(use_scale=True)],
            "add_pool": [K.Dense(6), K.Add(), K.GlobalAveragePooling1D()]}[model]

    def run(layers, x):
        h = layers[0](x)
        if model == "mha":
            return layers[1](h, h)
        if model == "attention":
            return layers[1]([h, h])
        return layers[3](layers[2]([h, layers[1](h)]))

    keras_layers = [embed] + last
    run(keras_layers, ids)
    for layer in keras_layers:
        layer.set_weights(_weights(model + layer.name, layer))
    want = _numpy(run(keras_layers, ids))
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(ids.shape, "int32")
        y = run([fragflow_layer(layer) for layer in keras_layers], x)
    for backend in ("numpy", "gl"):
        with ff.Session(g, backend=backend) as sess:
            got = sess.run(y, {x: ids})
        assert max_error(got, want) < 2e-6, backend


def test_regularizers_add_keras_penalties_to_fit():
    """Weight and activity regularizers from Keras configs: the same penalties as
    Keras's layer.losses, and fit's per-epoch losses (SGD, one batch, no shuffling)
    those of Keras's fit."""
    x = np.random.default_rng(6).normal(size=(8, 4)).astype(np.float32)
    y = np.random.default_rng(7).normal(size=(8, 3)).astype(np.float32)

    regularized = K.Dense(5, activation="tanh", kernel_regularizer="l2",
                          bias_regularizer=keras.regularizers.L1(0.05),
                          activity_regularizer=keras.regularizers.L1L2(0.01, 0.02))
    kmodel = keras.Sequential([keras.Input((4,)), regularized,
                               K.Dense(3, kernel_regularizer=keras.regularizers.L1(0.1))])
    kmodel.set_weights(_weights("regularized", kmodel))
    kmodel.compile(keras.optimizers.SGD(0.1), "mse")
    ours = ff.Sequential([fragflow_layer(layer) for layer in kmodel.layers], backend="numpy")
    ours.compile(ff.keras.optimizers.SGD(0.1), "mse")
    want = kmodel.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    got = ours.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0)
    np.testing.assert_allclose(got.history["loss"], want.history["loss"], rtol=1e-5)
    plain = float(np.mean((kmodel.predict(x, verbose=0) - y) ** 2))
    assert ours.evaluate(x, y) > plain + 0.01          # the penalties are in the loss
