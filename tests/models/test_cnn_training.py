"""A small CNN (convolution, batch normalization, depthwise convolution, pooling,
dropout, dense) trains on GL exactly as on the numpy executor: same losses and weights
to 1e-4 relative over 30 steps."""
import numpy as np

import fragflow as ff

L = ff.layers
RNG = np.random.default_rng(1)
IMAGES = RNG.normal(size=(24, 6, 6, 2)).astype(np.float32)
LABELS = (IMAGES[..., 0].mean((1, 2)) > IMAGES[..., 1].mean((1, 2))).astype(np.int32)


def cnn(backend):
    ff.initializers.set_seed(3)
    model = ff.Sequential([
        L.Conv2D(4, 3, padding="same", activation="relu"),
        L.BatchNormalization(),
        L.DepthwiseConv2D(3, padding="same", activation="relu"),
        L.MaxPool2D(),
        L.Flatten(),
        L.Dropout(0.25, seed=5),
        L.Dense(2, activation="softmax"),
    ], backend=backend)
    model.compile(ff.optim.SGD(0.1), "sparse_categorical_crossentropy", ["accuracy"])
    return model


def test_cnn_trains_on_gl_as_on_numpy(gl):
    results = {}
    for backend in ("numpy", "gl"):
        model = cnn(backend)
        batches = np.random.default_rng(7).integers(0, len(IMAGES), (30, 8))
        steps = [model.train_on_batch(IMAGES[i], LABELS[i]) for i in batches]
        results[backend] = (np.array(steps), model.get_weights(), model.predict(IMAGES))
    (np_steps, np_weights, np_pred), (gl_steps, gl_weights, gl_pred) = \
        results["numpy"], results["gl"]
    assert np_steps[-10:, 0].mean() < np_steps[:10, 0].mean()        # it learns
    np.testing.assert_allclose(gl_steps, np_steps, rtol=1e-4)        # losses, accuracies
    for a, b in zip(gl_weights, np_weights):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(gl_pred, np_pred, rtol=1e-4, atol=1e-6)
