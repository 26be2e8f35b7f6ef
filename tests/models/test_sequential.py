"""ff.Sequential: fit lowers the loss, GL trains exactly as the numpy executor does,
evaluate / predict agree with numpy formulas on the predictions, and a saved model
restores to bit-identical predictions."""
import doctest
import importlib

import numpy as np
import pytest

import fragflow as ff

L = ff.layers
RNG = np.random.default_rng(0)
X = RNG.normal(size=(60, 4)).astype(np.float32)
Y = (X[:, 0] + 0.5 * X[:, 1] - X[:, 2] > 0).astype(np.int32)
IMAGES = RNG.normal(size=(16, 6, 6, 2)).astype(np.float32)
IMAGE_LABELS = (IMAGES[..., 0].mean((1, 2)) > IMAGES[..., 1].mean((1, 2))).astype(np.int32)


def dense_model(backend, seed=0):
    """The model of the GL tests: every one builds the same graph (same node names), so
    the shaders compiled for the first are reused by the others."""
    ff.initializers.set_seed(seed)
    model = ff.Sequential([L.Dense(8, activation="relu"), L.BatchNormalization(),
                           L.Dropout(0.2, seed=5), L.Dense(2, activation="softmax")],
                          name="mlp", backend=backend)
    model.compile(ff.optim.Adam(0.05), "sparse_categorical_crossentropy", ["accuracy"])
    return model


@pytest.fixture(scope="module")
def trained(gl):
    model = dense_model("gl")
    history = model.fit(X[:48], Y[:48], batch_size=10, epochs=6, verbose=0, seed=1,
                        validation_data=(X[48:], Y[48:]))
    return model, history


def test_fit_reduces_the_loss(trained):
    model, history = trained
    h = history.history
    assert set(h) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert history.epoch == list(range(6))
    assert h["loss"][-1] < 0.6 * h["loss"][0]
    assert h["accuracy"][-1] > 0.85
    assert history.params["steps"] == 5                  # 48 examples in batches of 10


def test_evaluate_and_predict_agree_with_numpy_formulas(trained):
    model, _ = trained
    probs = model.predict(X, batch_size=7)               # 60 = 8 * 7 + 4: a padded batch
    assert probs.shape == (60, 2)
    np.testing.assert_allclose(probs.sum(1), 1.0, rtol=1e-5)
    np.testing.assert_allclose(probs, model.predict(X, batch_size=60), rtol=1e-5, atol=1e-7)
    loss, accuracy = model.evaluate(X, Y, batch_size=16)
    expected_loss = -np.mean(np.log(probs[np.arange(60), Y].astype(np.float64)))
    np.testing.assert_allclose(loss, expected_loss, rtol=1e-4)
    assert accuracy == np.mean(probs.argmax(1) == Y)
    assert model.evaluate(X, Y, return_dict=True).keys() == {"loss", "accuracy"}


def test_gl_trains_like_the_numpy_executor(trained):
    """Same graph, same seeds (initial values, dropout masks): the losses of 50 steps
    (batch normalization and dropout in training mode) and the final weights, moving
    averages included, agree to 1e-4 relative."""
    losses, weights = {}, {}
    for backend in ("numpy", "gl"):
        model = dense_model(backend, seed=2)
        batches = np.random.default_rng(7).integers(0, 60, (50, 10))
        losses[backend] = np.array([model.train_on_batch(X[i], Y[i])[0] for i in batches])
        weights[backend] = model.get_weights()
    assert losses["numpy"][-10:].mean() < losses["numpy"][:10].mean()
    np.testing.assert_allclose(losses["gl"], losses["numpy"], rtol=1e-4)
    for a, b in zip(weights["gl"], weights["numpy"]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_saved_model_restores_bit_identical_predictions(trained, tmp_path):
    model, _ = trained
    expected = model.predict(X)
    model.save_weights(tmp_path / "weights.npz")
    ff.save_graph(model.graph, tmp_path / "graph.json")

    # the graph from JSON, the variables from the checkpoint, a fresh session
    graph = ff.load_graph(tmp_path / "graph.json")
    with ff.Session(graph) as sess:
        # save_weights leaves the optimizer's slots out: restore the rest of the graph's
        # variables as they are (a strict restore would name the missing ones)
        sess.restore(tmp_path / "weights.npz", strict=False)
        out = sess.run(model.output.name, {model.input.name: X})
    np.testing.assert_array_equal(out, expected)

    # the same model built again from code, then load_weights
    again = dense_model("gl", seed=123)          # other initial values
    again.build((None, 4))
    assert not np.array_equal(again.predict(X), expected)
    again.load_weights(tmp_path / "weights.npz")
    np.testing.assert_array_equal(again.predict(X), expected)


def test_progress_bar_goes_to_stderr(capsys, monkeypatch):
    # a terminal (off one, verbose=1 writes one line per epoch: test_namespaces.py)
    monkeypatch.setattr("fragflow.frontend.models.progress._is_terminal", lambda stream: True)
    model = dense_model("numpy")
    model.fit(X, Y, batch_size=32, epochs=2, verbose=1, seed=0)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "Epoch 1/2" in captured.err and "Epoch 2/2" in captured.err
    assert "[" in captured.err and "loss: " in captured.err and "accuracy: " in captured.err
    model.fit(X, Y, epochs=1, verbose=0)
    assert capsys.readouterr().err == ""


def test_fit_completes_a_partial_last_batch_and_shuffles_by_seed():
    a = dense_model("numpy").fit(X, Y, batch_size=25, epochs=3, verbose=0, seed=4)
    b = dense_model("numpy").fit(X, Y, batch_size=25, epochs=3, verbose=0, seed=4)
    assert a.params["steps"] == 3
    assert a.history == b.history


def test_other_losses_and_metrics():
    onehot = np.eye(2, dtype=np.float32)[Y]
    ff.initializers.set_seed(0)
    model = ff.Sequential([L.Dense(2, activation="softmax")], backend="numpy")
    model.compile("adam", "categorical_crossentropy", ["accuracy", "mse"])
    h = model.fit(X, onehot, epochs=2, verbose=0).history
    assert set(h) == {"loss", "accuracy", "mse"}
    probs = model.predict(X)
    loss, accuracy, mse = model.evaluate(X, onehot)
    np.testing.assert_allclose(loss, -np.mean(np.log(probs[onehot == 1])), rtol=1e-5)
    np.testing.assert_allclose(mse, np.mean((probs - onehot) ** 2), rtol=1e-5)

    binary = ff.Sequential([L.Dense(1, activation="sigmoid")], backend="numpy")
    binary.compile(ff.optim.SGD(0.5), "binary_crossentropy", ["accuracy"])
    h = binary.fit(X, Y, epochs=5, verbose=0).history
    assert h["loss"][-1] < h["loss"][0]
    p = binary.predict(X)[:, 0].astype(np.float64)
    expected = -np.mean(Y * np.log(p) + (1 - Y) * np.log(1 - p))
    np.testing.assert_allclose(binary.evaluate(X, Y)[0], expected, rtol=1e-4)


def test_model_errors():
    model = ff.Sequential([L.Dense(2)], backend="numpy")
    with pytest.raises(ff.FragflowError, match="not compiled"):
        model.fit(X, Y, verbose=0)
    with pytest.raises(ff.AttrError, match="unknown loss"):
        model.compile("adam", "hinge_loss")
    with pytest.raises(ff.AttrError, match="unknown optimizer"):
        model.compile("adamw", "mse")
    with pytest.raises(ff.ShapeError, match="examples"):
        model.compile("sgd", "mse")
        model.fit(X, Y[:3], verbose=0)


@pytest.mark.parametrize("module", ["models.sequential", "optim", "layers", "initializers"])
def test_docstring_examples(module):
    mod = importlib.import_module(f"fragflow.frontend.{module}")
    result = doctest.testmod(mod)
    assert result.failed == 0 and result.attempted > 0
