"""TensorFlow 1 tutorial scripts, written as a TF1 user writes them, run with
`import fragflow as tf` and nothing else changed (issue 15's yardstick).

Each script is run as source text twice: with fragflow itself (tf.Session() is a GL
session) and with a copy of the module whose Session is the numpy reference executor.
The loss must fall on GL, and GL's results must equal the reference's."""
from __future__ import annotations

import textwrap
import types

import numpy as np
import pytest

import fragflow

SOFTMAX_REGRESSION = """
import numpy as np
import fragflow as tf

rng = np.random.RandomState(0)
images = rng.rand(200, 784).astype(np.float32) / 28.0       # MNIST-like: 28x28 in [0, 1)
teacher = rng.randn(784, 10).astype(np.float32)
labels = np.eye(10, dtype=np.float32)[np.argmax(images @ teacher, 1)]

x = tf.placeholder(tf.float32, [None, 784])
W = tf.Variable(tf.zeros([784, 10]))
b = tf.Variable(tf.zeros([10]))
y = tf.nn.softmax(tf.matmul(x, W) + b)
y_ = tf.placeholder(tf.float32, [None, 10])
cross_entropy = tf.reduce_mean(
    tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_, logits=tf.matmul(x, W) + b))
train_step = tf.train.GradientDescentOptimizer(0.5).minimize(cross_entropy)
correct_prediction = tf.equal(tf.argmax(y, 1), tf.argmax(y_, 1))
accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))

init = tf.global_variables_initializer()
losses = []
with tf.Session() as sess:
    sess.run(init)
    for i in range(30):
        batch = slice(i * 50 % 200, i * 50 % 200 + 50)
        _, l = sess.run([train_step, cross_entropy],
                        feed_dict={x: images[batch], y_: labels[batch]})
        losses.append(l)
    final_loss = cross_entropy.eval(feed_dict={x: images, y_: labels})
    acc = accuracy.eval(feed_dict={x: images, y_: labels})
    weights = sess.run(W)
"""

MLP_DENSE_ADAM = """
import numpy as np
import fragflow as tf

rng = np.random.RandomState(1)
data = rng.randn(128, 20).astype(np.float32)
targets = (data[:, :5].sum(1) > 0).astype(np.int32) + 2 * (data[:, 5] > 0)

inputs = tf.placeholder(tf.float32, shape=[None, 20], name="inputs")
labels = tf.placeholder(tf.int32, shape=[None], name="labels")
hidden = tf.layers.dense(inputs, 32, activation=tf.nn.relu)
hidden = tf.layers.dense(hidden, 32, activation=tf.nn.relu)
logits = tf.layers.dense(hidden, 4)
loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
optimizer = tf.train.AdamOptimizer(learning_rate=0.01)
train_op = optimizer.minimize(loss)
predictions = tf.argmax(logits, axis=1, output_type=tf.int32)
accuracy = tf.reduce_mean(tf.cast(tf.equal(predictions, labels), tf.float32))

losses = []
sess = tf.Session()
with sess.as_default():
    tf.global_variables_initializer().run()
    for step in range(40):
        train_op.run(feed_dict={inputs: data, labels: targets})
        losses.append(loss.eval(feed_dict={inputs: data, labels: targets}))
    acc = accuracy.eval({inputs: data, labels: targets})
    n_trainable = len(tf.trainable_variables())
sess.close()
"""

CONV_NET = """
import numpy as np
import fragflow as tf

def weight_variable(shape):
    return tf.Variable(tf.truncated_normal(shape, stddev=0.1))

def bias_variable(shape):
    return tf.Variable(tf.constant(0.1, shape=shape))

def conv2d(x, W):
    return tf.nn.conv2d(x, W, strides=[1, 1, 1, 1], padding="SAME")

def max_pool_2x2(x):
    return tf.nn.max_pool(x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")

rng = np.random.RandomState(2)
classes = rng.randint(0, 2, 32)
images = rng.rand(32, 64).astype(np.float32)
images[classes == 1, :32] += 1.0              # class 1: a bright top half
onehot = np.eye(2, dtype=np.float32)[classes]

x = tf.placeholder(tf.float32, [None, 64])
y_ = tf.placeholder(tf.float32, [None, 2])
x_image = tf.reshape(x, [-1, 8, 8, 1])
W_conv1 = weight_variable([3, 3, 1, 8])
b_conv1 = bias_variable([8])
h_conv1 = tf.nn.relu(conv2d(x_image, W_conv1) + b_conv1)
h_pool1 = max_pool_2x2(h_conv1)
W_conv2 = weight_variable([3, 3, 8, 8])
b_conv2 = bias_variable([8])
h_pool2 = max_pool_2x2(tf.nn.relu(conv2d(h_pool1, W_conv2) + b_conv2))
h_flat = tf.reshape(h_pool2, [-1, 2 * 2 * 8])
keep_prob = tf.placeholder(tf.float32)
h_drop = tf.nn.dropout(h_flat, keep_prob)
W_fc = weight_variable([32, 2])
b_fc = bias_variable([2])
y_conv = tf.matmul(h_drop, W_fc) + b_fc
cross_entropy = tf.reduce_mean(
    tf.nn.softmax_cross_entropy_with_logits_v2(labels=y_, logits=y_conv))
train_step = tf.train.MomentumOptimizer(0.1, 0.9).minimize(cross_entropy)
correct = tf.equal(tf.argmax(y_conv, 1), tf.argmax(y_, 1))
accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))

losses = []
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    for i in range(25):
        train_step.run(feed_dict={x: images, y_: onehot, keep_prob: 0.9})
        losses.append(cross_entropy.eval(feed_dict={x: images, y_: onehot, keep_prob: 1.0}))
    acc = accuracy.eval(feed_dict={x: images, y_: onehot, keep_prob: 1.0})
    first_filter = W_conv1.eval()
"""


def _numpy_fragflow() -> types.ModuleType:
    """fragflow with Session on the numpy reference executor (the rest unchanged)."""
    clone = types.ModuleType("fragflow_numpy")
    clone.__dict__.update({k: getattr(fragflow, k) for k in dir(fragflow)})

    def session(graph=None, **kwargs):
        return fragflow.Session(graph, backend="numpy", passes=[], **kwargs)
    clone.Session = session
    return clone


def run_script(source: str, backend: str) -> dict:
    """Run source in a fresh default graph; its variables afterwards."""
    fragflow.reset_default_graph()
    fragflow.initializers.set_seed(0)
    module = fragflow if backend == "gl" else _numpy_fragflow()
    code = textwrap.dedent(source).replace("import fragflow as tf", "")
    namespace = {"tf": module, "__name__": "tf1_script"}
    exec(compile(code, f"<tf1 script on {backend}>", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("script, loss_key, compare", [
    (SOFTMAX_REGRESSION, "losses", ["losses", "final_loss", "acc", "weights"]),
    (MLP_DENSE_ADAM, "losses", ["losses", "acc"]),
    (CONV_NET, "losses", ["losses", "acc", "first_filter"]),
], ids=["softmax_regression", "mlp_dense_adam", "conv_net_same_padding"])
def test_tf1_script_trains_on_gl_as_on_numpy(gl, script, loss_key, compare):
    on_gl = run_script(script, "gl")
    on_numpy = run_script(script, "numpy")
    losses = np.asarray(on_gl[loss_key])
    assert np.all(np.isfinite(losses))
    assert losses[-1] < 0.7 * losses[0], losses
    for key in compare:
        np.testing.assert_allclose(np.asarray(on_gl[key], np.float64),
                                   np.asarray(on_numpy[key], np.float64),
                                   rtol=2e-3, atol=2e-4, err_msg=key)


def test_mlp_script_lists_its_trainable_variables(gl):
    namespace = run_script(MLP_DENSE_ADAM, "numpy")
    assert namespace["n_trainable"] == 6           # three dense layers: kernel and bias
    assert namespace["acc"] > 0.5


KERAS_BEGINNER = """
import numpy as np
import fragflow as tf

rng = np.random.RandomState(3)
x_train = rng.rand(96, 8, 8).astype(np.float32)
y_train = (x_train[:, :4].mean((1, 2)) > x_train[:, 4:].mean((1, 2))).astype(np.int32) \\
    + 2 * (x_train[:, :, :4].mean((1, 2)) > x_train[:, :, 4:].mean((1, 2)))
x_train[y_train == 1, :4] += 0.5
x_train[y_train == 2, :, :4] += 0.5

tf.initializers.set_seed(0)
model = tf.keras.models.Sequential([
    tf.keras.layers.Flatten(input_shape=(8, 8)),
    tf.keras.layers.Dense(32, activation="relu"),
    tf.keras.layers.Dropout(0.2, seed=1),
    tf.keras.layers.Dense(4),
])
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
model.compile(optimizer="adam", loss=loss_fn, metrics=["accuracy"])
history = model.fit(x_train, y_train, epochs=10, batch_size=8, verbose=0, seed=0)
losses = history.history["loss"]
loss, acc = model.evaluate(x_train, y_train, verbose=0)
probabilities = model.predict(x_train[:5])
"""


def _keras_on(backend):
    """The Keras tutorial's model, on backend (Sequential takes backend=)."""
    source = KERAS_BEGINNER.replace("Sequential([", f"Sequential(backend={backend!r}, "
                                                     f"layers=[")
    fragflow.reset_default_graph()
    namespace = {"__name__": "keras_script"}
    exec(compile(source, f"<keras script on {backend}>", "exec"), namespace)
    return namespace


def test_tf2_keras_beginner_script_trains_on_gl_as_on_numpy(gl):
    on_gl, on_numpy = _keras_on("gl"), _keras_on("numpy")
    assert on_gl["losses"][-1] < 0.7 * on_gl["losses"][0]
    assert on_gl["acc"] > 0.5
    for key in ("losses", "loss", "acc", "probabilities"):
        np.testing.assert_allclose(np.asarray(on_gl[key], np.float64),
                                   np.asarray(on_numpy[key], np.float64),
                                   rtol=2e-3, atol=2e-4, err_msg=key)
