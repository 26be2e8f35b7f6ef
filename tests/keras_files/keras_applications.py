"""Keras 3 (torch backend) Keras Applications as the oracle of
test_keras_applications.py, run in a subprocess.

    python keras_applications.py make OUT NAME...   each model built with
        weights=None (seeded), its BatchNormalization statistics, normalization gammas
        and betas and LayerScale gammas set to seeded values far from their
        initial ones (so inference-mode BN and LayerScale are really checked), saved as
        OUT/NAME.keras and OUT/NAME.h5, with OUT/NAME.inputs.npz (x0) and
        OUT/NAME.keras.npz (Keras's predict, y0); NAME may also be one of EXTRA (small
        models of Keras's own application layers, a user's class, transfer learning's
        frozen base models; transfer.fit.npz and transfer.fit.json: data and Keras's
        per-epoch losses of a fit from the saved state)

Small inputs: each family's minimum size or near it (64 px where the minimum is 32);
10 classes, logits (no softmax, so the comparison sees the whole output).
"""
import json
import os
import sys

os.environ["KERAS_BACKEND"] = "torch"

import keras  # noqa: E402
import numpy as np  # noqa: E402

apps = keras.applications


def _nasnet_mobile(**kwargs):
    """NASNetMobile's model: keras.applications.NASNetMobile refuses the torch backend
    (a bug of its at 224 px, "outstanding"), so its builder with NASNetMobile's
    arguments, which builds and predicts at 64 px."""
    from keras.src.applications.nasnet import NASNet
    return NASNet(penultimate_filters=1056, num_blocks=4, stem_block_filters=32,
                  skip_reduction=False, filter_multiplier=2, default_size=224,
                  name="nasnet_mobile", **kwargs)

# name: (builder, input size, input range); the input range is what the model's own
# preprocessing expects (0..255 where it rescales, else about -1..1)
MODELS = {
    "MobileNet": (apps.MobileNet, 64, 1.0),
    "MobileNetV2": (apps.MobileNetV2, 64, 1.0),
    "MobileNetV3Small": (apps.MobileNetV3Small, 64, 255.0),
    "MobileNetV3Large": (apps.MobileNetV3Large, 64, 255.0),
    "EfficientNetB0": (apps.EfficientNetB0, 64, 255.0),
    "EfficientNetV2B0": (apps.EfficientNetV2B0, 64, 255.0),
    "ResNet50": (apps.ResNet50, 64, 1.0),
    "ResNet50V2": (apps.ResNet50V2, 64, 1.0),
    "DenseNet121": (apps.DenseNet121, 64, 1.0),
    "InceptionV3": (apps.InceptionV3, 75, 1.0),
    "Xception": (apps.Xception, 71, 1.0),
    "InceptionResNetV2": (apps.InceptionResNetV2, 75, 1.0),
    "NASNetMobile": (_nasnet_mobile, 64, 1.0),
    "ConvNeXtTiny": (apps.ConvNeXtTiny, 32, 255.0),
    "VGG16": (apps.VGG16, 32, 1.0),
}


def build(name):
    builder, size, scale = MODELS[name]
    keras.utils.set_random_seed(0)
    kwargs = dict(input_shape=(size, size, 3), weights=None, classes=10,
                  classifier_activation=None)
    model = builder(**kwargs)
    rng = np.random.default_rng(1)
    _set_statistics(model, rng)
    x = (rng.uniform(-1, 1, (2, size, size, 3)) * scale).astype(np.float32)
    if scale > 1:
        x = np.abs(x)
    return model, x


def _set_statistics(model, rng):
    """BatchNormalization's moving statistics, the normalizations' gammas and betas
    and LayerScale's gammas set to seeded values far from their initial ones."""
    for layer in _all_layers(model):
        kind = type(layer).__name__
        if kind in ("BatchNormalization", "LayerNormalization", "LayerScale"):
            values = []
            for w in layer.weights:
                short = w.path.rsplit("/", 1)[-1]
                shape = tuple(w.shape)
                if kind == "LayerScale":      # its weight is Keras's unnamed "variable"
                    v = rng.uniform(0.2, 1.0, shape)
                elif short == "gamma":
                    v = rng.uniform(0.5, 1.5, shape)
                elif short in ("beta", "moving_mean"):
                    v = rng.normal(0, 0.2, shape)
                elif short == "moving_variance":
                    v = rng.uniform(0.5, 2.0, shape)
                else:
                    v = w.numpy()
                values.append(np.asarray(v, np.float32))
            layer.set_weights(values)


def _all_layers(model):
    for layer in model.layers:
        yield layer
        if hasattr(layer, "layers"):
            yield from _all_layers(layer)


def internal():
    """Keras's own application layers in a small model: LayerScale, CustomScaleLayer,
    StochasticDepth (the identity in predict)."""
    from keras.src.applications.convnext import LayerScale, StochasticDepth
    from keras.src.applications.inception_resnet_v2 import CustomScaleLayer
    keras.utils.set_random_seed(0)
    i = keras.Input((6, 5, 4))
    h = keras.layers.Conv2D(4, 3, padding="same")(i)
    scaled = LayerScale(1e-6, 4)(h)
    h = CustomScaleLayer(0.17)([h, StochasticDepth(0.3)(scaled)])
    model = keras.Model(i, keras.layers.Dense(3)(keras.layers.Flatten()(h)),
                        name="internal")
    layer = next(la for la in model.layers if isinstance(la, LayerScale))
    layer.set_weights([np.linspace(-2, 3, 4).astype(np.float32)])
    return model, np.random.default_rng(2).normal(size=(3, 6, 5, 4)).astype(np.float32)


def user_class():
    """A user's own layer class that has the name of Keras's LayerScale (a registered
    custom class: its module is the user's)."""
    @keras.saving.register_keras_serializable(package="my_pkg")
    class LayerScale(keras.layers.Layer):
        def call(self, x):
            return x * 2.0

    i = keras.Input((4,))
    model = keras.Model(i, LayerScale()(keras.layers.Dense(3)(i)), name="user_class")
    return model, np.ones((2, 4), np.float32)


def transfer():
    """Transfer learning as Keras's guide writes it: a frozen application without its
    top (a nested Functional model) called with training=False between a Rescaling and
    a new head, compiled and fitted a step (its optimizer state saved; NAME.fit.json:
    Keras's per-epoch losses of a fit from the saved state, FIT_DATA's)."""
    keras.utils.set_random_seed(0)
    base = apps.MobileNetV3Small(input_shape=(48, 48, 3), include_top=False,
                                 weights=None, include_preprocessing=False)
    _set_statistics(base, np.random.default_rng(3))
    base.trainable = False
    i = keras.Input((48, 48, 3))
    h = base(keras.layers.Rescaling(1 / 127.5, offset=-1)(i), training=False)
    h = keras.layers.GlobalAveragePooling2D()(h)
    model = keras.Model(i, keras.layers.Dense(5)(h), name="transfer")
    model.compile(keras.optimizers.Adam(1e-3),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(*fit_data(), epochs=1, verbose=0)
    return model, fit_data()[0][:2]


def fit_data():
    """The transfer model's training data (4 images, labels 0..3)."""
    x = np.random.default_rng(4).uniform(0, 255, (4, 48, 48, 3)).astype(np.float32)
    return x, np.arange(4) % 5


def transfer_sequential():
    """The same in a Sequential: a frozen MobileNetV2 without its top (its .h5
    weights: the nested model's non-trainable ones only), pooling and a Dense."""
    keras.utils.set_random_seed(0)
    base = apps.MobileNetV2(input_shape=(32, 32, 3), include_top=False, weights=None,
                            pooling="avg")
    _set_statistics(base, np.random.default_rng(5))
    base.trainable = False
    model = keras.Sequential([keras.Input((32, 32, 3)), base, keras.layers.Dense(4)],
                             name="transfer_sequential")
    return model, np.random.default_rng(6).uniform(-1, 1, (2, 32, 32, 3)).astype(np.float32)


EXTRA = {"internal": internal, "user_class": user_class, "transfer": transfer,
         "transfer_sequential": transfer_sequential}


def make(out, names):
    for name in names:
        model, x = EXTRA[name]() if name in EXTRA else build(name)
        model.save(os.path.join(out, f"{name}.keras"))
        model.save(os.path.join(out, f"{name}.h5"))
        np.savez(os.path.join(out, f"{name}.inputs.npz"), x0=x)
        y = model.predict(x, verbose=0)
        np.savez(os.path.join(out, f"{name}.keras.npz"), y0=y)
        if name == "transfer":        # fit from the saved state, one batch an epoch
            history = model.fit(*fit_data(), batch_size=4, epochs=3, shuffle=False,
                                verbose=0).history
            with open(os.path.join(out, f"{name}.fit.json"), "w") as f:
                json.dump(history, f)
            np.savez(os.path.join(out, f"{name}.fit.npz"), x=fit_data()[0],
                     y=fit_data()[1])


if __name__ == "__main__":
    make(sys.argv[2], sys.argv[3:] or list(MODELS))
