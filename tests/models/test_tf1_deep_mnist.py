"""TensorFlow 1's 'Deep MNIST for experts' CNN as TF1 scripts wrote it, with
variable_scope + get_variable, conv2d + max_pool, dropout with a keep_prob placeholder,
AdamOptimizer, tf.summary to a logdir, Saver save/restore and .eval / .run, on
scikit-learn's 8x8 digits (issue 26). The script runs unchanged with
`import fragflow as tf` (the logdir aside), on GL; TensorBoard's reader loads what it
wrote. Sizes are the tutorial's shrunk to 8x8 inputs (16 and 32 filters, 128 hidden)
and 120 steps of 50, so that the test takes seconds."""
from __future__ import annotations

import os

import numpy as np
import pytest

import fragflow

pytest.importorskip("sklearn.datasets")
event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator")

DEEP_MNIST = """import os
import numpy as np
import fragflow as tf
from sklearn.datasets import load_digits

logdir = LOGDIR    # the test's tmp_path
digits = load_digits()
images = (digits.images / 16.0).reshape(-1, 64).astype(np.float32)
labels = np.eye(10, dtype=np.float32)[digits.target]
order = np.random.RandomState(0).permutation(len(images))
images, labels = images[order], labels[order]
train_x, train_y = images[:1500], labels[:1500]
test_x, test_y = images[1500:], labels[1500:]


def weight_variable(name, shape):
    return tf.get_variable(name, shape,
                           initializer=tf.truncated_normal_initializer(stddev=0.1))


def bias_variable(name, shape):
    return tf.get_variable(name, shape, initializer=tf.constant_initializer(0.1))


def conv2d(x, W):
    return tf.nn.conv2d(x, W, strides=[1, 1, 1, 1], padding='SAME')


def max_pool_2x2(x):
    return tf.nn.max_pool(x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding='SAME')


x = tf.placeholder(tf.float32, [None, 64])
y_ = tf.placeholder(tf.float32, [None, 10])
x_image = tf.reshape(x, [-1, 8, 8, 1])

with tf.variable_scope("conv1"):
    W_conv1 = weight_variable("W", [3, 3, 1, 16])
    b_conv1 = bias_variable("b", [16])
    h_conv1 = tf.nn.relu(conv2d(x_image, W_conv1) + b_conv1)
    h_pool1 = max_pool_2x2(h_conv1)

with tf.variable_scope("conv2"):
    W_conv2 = weight_variable("W", [3, 3, 16, 32])
    b_conv2 = bias_variable("b", [32])
    h_conv2 = tf.nn.relu(conv2d(h_pool1, W_conv2) + b_conv2)
    h_pool2 = max_pool_2x2(h_conv2)

with tf.variable_scope("fc1"):
    W_fc1 = weight_variable("W", [2 * 2 * 32, 128])
    b_fc1 = bias_variable("b", [128])
    h_pool2_flat = tf.reshape(h_pool2, [-1, 2 * 2 * 32])
    h_fc1 = tf.nn.relu(tf.matmul(h_pool2_flat, W_fc1) + b_fc1)

keep_prob = tf.placeholder(tf.float32)
h_fc1_drop = tf.nn.dropout(h_fc1, keep_prob)

with tf.variable_scope("fc2"):
    W_fc2 = weight_variable("W", [128, 10])
    b_fc2 = bias_variable("b", [10])
    y_conv = tf.matmul(h_fc1_drop, W_fc2) + b_fc2

cross_entropy = tf.reduce_mean(
    tf.nn.softmax_cross_entropy_with_logits(labels=y_, logits=y_conv))
train_step = tf.train.AdamOptimizer(3e-3).minimize(cross_entropy)
correct_prediction = tf.equal(tf.argmax(y_conv, 1), tf.argmax(y_, 1))
accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
tf.summary.scalar("cross_entropy", cross_entropy)
tf.summary.scalar("accuracy", accuracy)
merged = tf.summary.merge_all()
saver = tf.train.Saver()

with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    writer = tf.summary.FileWriter(logdir, sess.graph)
    for i in range(120):
        start = (i * 50) % 1500
        batch = (train_x[start:start + 50], train_y[start:start + 50])
        if i % 40 == 0:
            summary, train_accuracy = sess.run([merged, accuracy], feed_dict={
                x: batch[0], y_: batch[1], keep_prob: 1.0})
            writer.add_summary(summary, i)
            print('step %d, training accuracy %g' % (i, train_accuracy))
        train_step.run(feed_dict={x: batch[0], y_: batch[1], keep_prob: 0.5})
    writer.close()
    test_accuracy = accuracy.eval(feed_dict={x: test_x, y_: test_y, keep_prob: 1.0})
    print('test accuracy %g' % test_accuracy)
    save_path = saver.save(sess, os.path.join(logdir, "model.ckpt"), global_step=120)

with tf.Session() as sess:
    saver.restore(sess, tf.train.latest_checkpoint(logdir))
    restored_accuracy = accuracy.eval(feed_dict={x: test_x, y_: test_y, keep_prob: 1.0})
    print('restored accuracy %g' % restored_accuracy)
"""
# TensorFlow 2.21 (CPU, tf.compat.v1 with disable_v2_behavior) on this script:
# test accuracy 0.966, 0.949, 0.956 (tf.set_random_seed 0, 1, 2). fragflow on GL
# (ff.initializers.set_seed 0, 1, 2): 0.953, 0.936, 0.956. The bound is TensorFlow's
# lowest less 0.03.
MIN_TEST_ACCURACY = 0.92


def test_tf1_deep_mnist_script_trains_saves_restores_and_logs(gl, tmp_path, capsys):
    fragflow.reset_default_graph()
    fragflow.initializers.set_seed(0)
    source = DEEP_MNIST.replace("LOGDIR", repr(str(tmp_path)))
    ns = {"__name__": "deep_mnist"}
    exec(compile(source, "<deep mnist>", "exec"), ns)
    out = capsys.readouterr().out
    assert "step 80, training accuracy" in out
    assert ns["test_accuracy"] >= MIN_TEST_ACCURACY
    assert ns["restored_accuracy"] == ns["test_accuracy"]

    names = sorted(v.name for v in fragflow.trainable_variables())
    assert names == ["conv1/W", "conv1/b", "conv2/W", "conv2/b", "fc1/W", "fc1/b",
                         "fc2/W", "fc2/b"]
    assert ns["save_path"] == os.path.join(str(tmp_path), "model.ckpt-120")
    with np.load(ns["save_path"] + ".npz", allow_pickle=False) as data:
        w = data["conv1/W"]
    assert w.shape == (3, 3, 1, 16)

    acc = event_accumulator.EventAccumulator(str(tmp_path))
    acc.Reload()
    assert sorted(acc.Tags()["scalars"]) == ["accuracy", "cross_entropy"]
    assert [e.step for e in acc.Scalars("accuracy")] == [0, 40, 80]
    assert acc.Tags()["graph"]
    logged = [e.value for e in acc.Scalars("accuracy")]
    assert logged[-1] > logged[0]
