"""tf.summary and FileWriter write TensorBoard event files that the tensorboard
package's own reader (EventAccumulator) loads: scalars, histograms and the graph; the
Keras fit's TensorBoard callback writes epoch_loss / epoch_accuracy (issue 26). The
checksums are checked against a published CRC-32C value and tensorboard's own."""
from __future__ import annotations

import numpy as np
import pytest

import fragflow as tf
from fragflow.frontend import event_file

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator")


def load(logdir):
    acc = event_accumulator.EventAccumulator(str(logdir), size_guidance={
        "scalars": 0, "histograms": 0})
    acc.Reload()
    return acc


def test_crc32c_matches_the_published_check_value_and_tensorboards():
    assert event_file.crc32c(b"123456789") == 0xE3069283       # RFC 3720's check value
    from tensorboard.compat.tensorflow_stub import pywrap_tensorflow
    for data in (b"", b"a", bytes(range(256)) * 3):
        assert event_file.masked_crc32c(data) == pywrap_tensorflow.masked_crc32c(data)


def test_scalar_histogram_and_graph_load_in_tensorboard(tmp_path):
    g = tf.Graph()
    with g.as_default():
        x = tf.placeholder(tf.float32, [None])
        loss = tf.reduce_mean(tf.square(x))
        with tf.name_scope("train"):
            tf.summary.scalar("loss", loss)
        tf.summary.histogram("x", x)
        merged = tf.summary.merge_all()
    sess = tf.Session(g, backend="numpy")
    writer = tf.summary.FileWriter(str(tmp_path), sess.graph)
    batches = [np.float32([1, 2, 3]), np.float32([0, -4, 0.5, 2]), np.float32([7])]
    for step, batch in enumerate(batches):
        summary, value = sess.run([merged, loss], {x: batch})
        assert isinstance(summary, bytes)
        np.testing.assert_allclose(value, np.mean(batch.astype(np.float64) ** 2), rtol=1e-6)
        writer.add_summary(summary, step)
    writer.close()
    acc = load(tmp_path)
    assert acc.Tags()["scalars"] == ["train/loss"] and acc.Tags()["histograms"] == ["x"]
    scalars = acc.Scalars("train/loss")
    assert [e.step for e in scalars] == [0, 1, 2]
    np.testing.assert_allclose([e.value for e in scalars],
                               [np.mean(b.astype(np.float64) ** 2) for b in batches],
                               rtol=1e-6)
    histo = acc.Histograms("x")[1].histogram_value
    b = batches[1].astype(np.float64)
    assert (histo.min, histo.max, histo.num) == (b.min(), b.max(), len(b))
    np.testing.assert_allclose([histo.sum, histo.sum_squares], [b.sum(), (b * b).sum()])
    assert sum(histo.bucket) == len(b)
    names = {node.name: node for node in acc.Graph().node}
    assert names.keys() == {n.name for n in g.nodes}
    square = next(n for n in g.nodes if n.op == "square")
    assert list(names[square.name].input) == [square.inputs[0].node.name]


def test_summary_of_python_numbers_and_an_empty_merge(tmp_path):
    g = tf.Graph()
    with g.as_default():
        assert tf.summary.merge_all() is None
    with tf.summary.FileWriter(str(tmp_path)) as writer:
        writer.add_summary(tf.Summary(value=[tf.Summary.Value(tag="acc", simple_value=0.75)]),
                           global_step=4)
    scalars = load(tmp_path).Scalars("acc")
    assert [(e.step, e.value) for e in scalars] == [(4, 0.75)]


def test_summary_errors_name_what_is_wrong(tmp_path):
    g = tf.Graph()
    with g.as_default():
        with pytest.raises(tf.FragflowError, match="must be a scalar"):
            tf.summary.scalar("v", tf.zeros([3]))
        with pytest.raises(tf.FragflowError, match="not a summary op"):
            tf.summary.merge([tf.constant(1.0)])
    writer = tf.summary.FileWriter(str(tmp_path))
    with pytest.raises(tf.FragflowError, match="takes what sess.run of a summary op gives"):
        writer.add_summary(np.float32(1.0), 0)
    writer.close()


def test_keras_fit_tensorboard_callback_writes_epoch_metrics(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int32)
    model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu"),
                                 tf.keras.layers.Dense(2)], backend="numpy")
    model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    board = tf.keras.callbacks.TensorBoard(log_dir=str(tmp_path), histogram_freq=1)
    history = model.fit(x, y, epochs=3, verbose=0, validation_split=0.25,
                        callbacks=[board])
    train, val = load(tmp_path / "train"), load(tmp_path / "validation")
    np.testing.assert_allclose([e.value for e in train.Scalars("epoch_loss")],
                               history.history["loss"], rtol=1e-6)
    np.testing.assert_allclose([e.value for e in train.Scalars("epoch_accuracy")],
                               history.history["accuracy"], rtol=1e-6)
    np.testing.assert_allclose([e.value for e in val.Scalars("epoch_loss")],
                               history.history["val_loss"], rtol=1e-6)
    assert [e.step for e in val.Scalars("epoch_loss")] == [0, 1, 2]
    assert "dense/kernel" in train.Tags()["histograms"] and train.Tags()["graph"]


def test_early_stopping_stops_fit():
    model = tf.keras.Sequential([tf.keras.layers.Dense(1)], backend="numpy")
    model.compile(tf.keras.optimizers.SGD(0.0), "mse")          # never improves
    history = model.fit(np.ones((8, 2), np.float32), np.ones(8, np.float32), epochs=10,
                        verbose=0, callbacks=[tf.keras.callbacks.EarlyStopping(
                            monitor="loss", patience=1)])
    assert len(history.history["loss"]) == 3
