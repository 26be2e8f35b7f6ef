"""Keras 3 (torch backend) as the oracle of the Keras file tests, run in a subprocess.

    python keras_models.py make OUT      the models below saved as OUT/NAME.keras and
                                         OUT/NAME.h5, with OUT/NAME.inputs.npz (the
                                         inputs, x0, x1, ...), OUT/NAME.keras.npz
                                         (Keras's outputs, y0, y1, ...)
    python keras_models.py predict F...  Keras's load_model of each file F (made by
                                         fragflow) and its outputs on the inputs of the
                                         model it came from: F.pred.npz
    (NAME.fit.json for cnn, adam and momentum: Keras's per-epoch losses of a fit from
    the saved state, optimizer state included)

Weights are seeded; every model is small.
"""
import json
import os
import sys

os.environ["KERAS_BACKEND"] = "torch"

import keras  # noqa: E402
import numpy as np  # noqa: E402

layers = keras.layers


def cnn():
    """A Sequential CNN with BatchNormalization (statistics moved by one fit step)."""
    model = keras.Sequential([
        keras.Input((8, 8, 3)),
        layers.Conv2D(4, 3, activation="relu", padding="same"),
        layers.BatchNormalization(),
        layers.MaxPooling2D(),
        layers.DepthwiseConv2D(3, padding="same"),
        layers.Flatten(),
        layers.Dense(3, activation="softmax"),
    ], name="cnn")
    model.compile(keras.optimizers.SGD(0.05), "sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    rng = np.random.default_rng(1)
    x = rng.random((16, 8, 8, 3), np.float32)
    model.fit(x, np.arange(16) % 3, batch_size=8, epochs=1, verbose=0)
    return model, [x]


def two_io():
    """Two inputs, two outputs, a layer shared by both branches and a nested
    Sequential on one of them."""
    a, b = keras.Input((4,), name="a"), keras.Input((4,), name="b")
    shared = layers.Dense(5, activation="tanh", name="shared")
    inner = keras.Sequential([keras.Input((5,)), layers.Dense(6, activation="relu"),
                              layers.Dense(3)], name="inner")
    out1 = layers.Dense(2, activation="softmax", name="out1")(shared(a))
    out2 = inner(shared(b))
    model = keras.Model([a, b], [out1, out2], name="two_io")
    model.compile("sgd", ["sparse_categorical_crossentropy", "mse"])
    rng = np.random.default_rng(2)
    return model, [rng.random((6, 4), np.float32), rng.random((6, 4), np.float32)]


def nested():
    """A functional model inside a functional model inside a Sequential (and a Dropout,
    which predict passes by)."""
    i = keras.Input((4,))
    core = keras.Model(i, layers.Dense(3, activation="relu", name="core_dense")(i),
                       name="core")
    j = keras.Input((4,))
    mid = keras.Model(j, layers.Dense(2, name="mid_out")(core(layers.Dense(4)(j))),
                      name="mid")
    model = keras.Sequential([keras.Input((4,)), mid, layers.Dropout(0.5), layers.Softmax()],
                             name="nested")
    return model, [np.random.default_rng(3).random((5, 4), np.float32)]


def text():
    """A masked Bidirectional LSTM text classifier (Embedding(mask_zero=True))."""
    tokens = keras.Input((7,), dtype="int32")
    h = layers.Embedding(30, 6, mask_zero=True)(tokens)
    h = layers.Bidirectional(layers.LSTM(5))(h)
    model = keras.Model(tokens, layers.Dense(2, activation="softmax")(h), name="text")
    ids = np.random.default_rng(4).integers(1, 30, (5, 7)).astype(np.int32)
    ids[:, 5:] = 0
    ids[0, 3:] = 0
    return model, [ids]


def unet():
    """A small U-Net: convolutions down, a transposed convolution and an upsampling up,
    skips joined by Concatenate and Add."""
    i = keras.Input((8, 8, 3))
    c1 = layers.Conv2D(4, 3, padding="same", activation="relu")(i)
    p = layers.MaxPooling2D()(c1)
    c2 = layers.LeakyReLU(0.1)(layers.Conv2D(8, 3, padding="same")(p))
    up = layers.Concatenate()([c1, layers.Conv2DTranspose(4, 2, strides=2)(c2),
                               layers.UpSampling2D()(p)])
    h = layers.Add()([layers.Conv2D(4, 1)(up), c1])
    model = keras.Model(i, layers.Conv2D(2, 1, activation="sigmoid")(h), name="unet")
    return model, [np.random.default_rng(6).random((2, 8, 8, 3), np.float32)]


def transformer():
    """A transformer block (MultiHeadAttention, LayerNormalization, a residual written
    as x + y, an op node) with a TimeDistributed head as a second output."""
    t = keras.Input((6, 8))
    h = layers.LayerNormalization()(layers.Add()([t, layers.MultiHeadAttention(2, 4)(t, t)]))
    ffn = layers.Dense(8)(layers.Dense(16, activation="gelu")(h))
    out = layers.LayerNormalization()(h + ffn)
    model = keras.Model(t, [out, layers.TimeDistributed(layers.Dense(3))(h)],
                        name="transformer")
    return model, [np.random.default_rng(7).random((2, 6, 8), np.float32)]


def _regression(name, optimizer):
    rng = np.random.default_rng(5)
    x, y = rng.random((16, 3), np.float32), rng.random((16, 2), np.float32)
    model = keras.Sequential([keras.Input((3,)), layers.Dense(4, activation="tanh"),
                              layers.Dense(2)], name=name)
    model.compile(optimizer, "mse")
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    return model, [x]


def adam():
    """A small regression trained one epoch with Adam (its moments saved)."""
    return _regression("adam", keras.optimizers.Adam(0.01))


def momentum():
    """The same with SGD and Nesterov momentum."""
    return _regression("momentum", keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True))


def regularized():
    """A regression whose Dense layers carry L2, L1 and L1L2 weight regularizers and an
    activity regularizer: Keras adds their penalties to the loss fit reports."""
    rng = np.random.default_rng(5)
    x, y = rng.random((16, 3), np.float32), rng.random((16, 2), np.float32)
    reg = keras.regularizers
    model = keras.Sequential([
        keras.Input((3,)),
        layers.Dense(4, activation="tanh", kernel_regularizer=reg.L2(0.05),
                     bias_regularizer=reg.L1(0.01), activity_regularizer=reg.L2(0.02)),
        layers.Dense(2, kernel_regularizer=reg.L1L2(0.01, 0.03))], name="regularized")
    model.compile(keras.optimizers.SGD(0.1), "mse")
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    return model, [x]


MODELS = {"cnn": cnn, "two_io": two_io, "nested": nested, "text": text, "adam": adam,
          "momentum": momentum, "unet": unet, "transformer": transformer,
          "regularized": regularized}
# the data each model's fit from its saved state uses
FIT = {"cnn": lambda x: np.arange(16) % 3,
       "adam": lambda x: np.random.default_rng(5).random((16, 3, 2), np.float32)[:, 1],
       "momentum": lambda x: np.random.default_rng(5).random((16, 3, 2), np.float32)[:, 1],
       "regularized": lambda x: np.random.default_rng(5).random((16, 3, 2), np.float32)[:, 1]}


def outputs(model, xs):
    y = model.predict(xs if len(xs) > 1 else xs[0], verbose=0)
    return {f"y{i}": v for i, v in enumerate(y if isinstance(y, list) else [y])}


def make(out):
    for name, build in MODELS.items():
        keras.utils.set_random_seed(0)
        model, xs = build()
        model.save(os.path.join(out, f"{name}.keras"))
        model.save(os.path.join(out, f"{name}.h5"))
        np.savez(os.path.join(out, f"{name}.inputs.npz"),
                 **{f"x{i}": x for i, x in enumerate(xs)})
        np.savez(os.path.join(out, f"{name}.keras.npz"), **outputs(model, xs))
        if name in FIT:               # fit from the saved state, in fixed batches
            x = xs[0]
            history = model.fit(x, FIT[name](x), batch_size=4, epochs=3, shuffle=False,
                                verbose=0).history
            with open(os.path.join(out, f"{name}.fit.json"), "w") as f:
                json.dump(history, f)


def predict(paths):
    for path in paths:
        model = keras.models.load_model(path)
        stem = os.path.basename(path).split(".")[0].split("-")[0]
        inputs = np.load(os.path.join(os.path.dirname(path), f"{stem}.inputs.npz"))
        xs = [inputs[f"x{i}"] for i in range(len(inputs.files))]
        np.savez(path + ".pred.npz", **outputs(model, xs))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2])
    else:
        predict(sys.argv[2:])
