"""Read scikit-learn's handwritten digits row by row, as 8 steps of 8 pixels, with a
recurrent network: a TF1 tutorial-style script (tf.nn.dynamic_rnn over a
BasicLSTMCell, placeholders, AdamOptimizer, a Session loop) and a Keras
Sequential([LSTM, Dense]) trained by fit. Prints each one's test accuracy.

    python examples/rnn_digits.py [--epochs 10] [--backend numpy|gl] [--which both]

The digits come from scikit-learn's own file (sklearn/datasets/data/digits.csv.gz),
read with numpy: scikit-learn need not be importable, only installed; the split is
train_digits.py's (seed 0, 80 / 20).
"""
import argparse
import gzip
import importlib.util
import os
import time

import numpy as np

import fragflow as tf

UNITS, LEARNING_RATE, BATCH = 32, 0.01, 64


def load_digits(seed=0):
    """((x_train, y_train), (x_test, y_test)): x (n, 8, 8) in [0, 1], rows as steps."""
    spec = importlib.util.find_spec("sklearn")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("examples/rnn_digits.py reads scikit-learn's digits file: "
                         "pip install scikit-learn (or pip install -e \".[examples]\")")
    path = os.path.join(spec.submodule_search_locations[0], "datasets", "data",
                        "digits.csv.gz")
    with gzip.open(path, "rt") as f:
        data = np.loadtxt(f, delimiter=",")
    x = (data[:, :64] / 16.0).astype(np.float32).reshape(-1, 8, 8)   # (1797, 8 steps, 8)
    y = data[:, 64].astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    split = int(0.8 * len(x))
    return (x[:split], y[:split]), (x[split:], y[split:])


def batches(n, batch_size, rng):
    order = rng.permutation(n)
    return [order[i:i + batch_size] for i in range(0, n, batch_size)]


def tf1_script(data, epochs, backend="numpy", seed=0):
    """The TF1 way: a graph of placeholders, dynamic_rnn and a dense layer on the last
    state, AdamOptimizer.minimize, a Session loop over shuffled batches. Returns the
    test accuracy."""
    (x_train, y_train), (x_test, y_test) = data
    tf.set_random_seed(seed)
    graph = tf.Graph()
    with graph.as_default():
        x = tf.placeholder(tf.float32, [None, 8, 8], name="x")
        y = tf.placeholder(tf.int32, [None], name="y")
        cell = tf.nn.rnn_cell.BasicLSTMCell(UNITS)
        outputs, state = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
        logits = tf.layers.dense(state.h, 10)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=logits))
        train_op = tf.train.AdamOptimizer(LEARNING_RATE).minimize(loss)
        correct = tf.equal(tf.cast(tf.argmax(logits, 1), tf.int32), y)
        accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    rng = np.random.default_rng(seed)
    with tf.Session(graph, backend=backend) as sess:
        for epoch in range(epochs):
            losses = [sess.run([train_op, loss], {x: x_train[b], y: y_train[b]})[1]
                      for b in batches(len(x_train), BATCH, rng)]
            print(f"  tf1 epoch {epoch + 1}: loss {np.mean(losses):.4f}")
        return float(sess.run(accuracy, {x: x_test, y: y_test}))


def keras_model(data, epochs, backend="numpy", seed=0):
    """The Keras way: Sequential([LSTM, Dense]) compiled with Adam, fit, evaluate."""
    (x_train, y_train), (x_test, y_test) = data
    tf.initializers.set_seed(seed)
    model = tf.keras.Sequential([tf.keras.layers.LSTM(UNITS, input_shape=(8, 8)),
                                 tf.keras.layers.Dense(10)], backend=backend)
    model.compile(optimizer=tf.keras.optimizers.Adam(LEARNING_RATE),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    model.fit(x_train, y_train, batch_size=BATCH, epochs=epochs, verbose=0, seed=seed)
    return float(model.evaluate(x_test, y_test, verbose=0)[1])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--backend", default="numpy", choices=["numpy", "gl"])
    parser.add_argument("--which", default="both", choices=["both", "tf1", "keras"])
    args = parser.parse_args()
    data = load_digits()
    print(f"digits read row by row: {len(data[0][0])} training and {len(data[1][0])} "
          f"test sequences of 8 steps x 8 pixels; LSTM of {UNITS} units, Adam "
          f"{LEARNING_RATE}, batch {BATCH}, {args.epochs} epochs, backend {args.backend}")
    if args.which in ("both", "tf1"):
        start = time.perf_counter()
        acc = tf1_script(data, args.epochs, args.backend)
        print(f"tf1 dynamic_rnn test accuracy {acc:.4f} "
              f"({time.perf_counter() - start:.1f} s)")
    if args.which in ("both", "keras"):
        start = time.perf_counter()
        acc = keras_model(data, args.epochs, args.backend)
        print(f"keras LSTM test accuracy {acc:.4f} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
