"""Train a small CNN on scikit-learn's handwritten digits (8x8 images) on GL.

Writes, into --out (default out/digits): the training graph's dump (graph.txt), the
GLSL of every kernel of one training step (shaders/NN_name.frag), and the loss curve
(loss.png); prints test accuracy, wall time, and the time of one training step on GL
against the same step on the numpy executor.

    python examples/train_digits.py [--epochs 20] [--out out/digits]

Needs the `examples` extra: pip install -e ".[examples]" (scikit-learn, matplotlib).
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

import fragflow as ff

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from optional import require  # noqa: E402  (what to install)

L = ff.layers


def load_digits(seed=0):
    from sklearn.datasets import load_digits as sklearn_digits
    digits = sklearn_digits()
    x = (digits.images / 16.0).astype(np.float32)[..., None]      # (1797, 8, 8, 1)
    y = digits.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    split = int(0.8 * len(x))
    return (x[:split], y[:split]), (x[split:], y[split:])


def build_model(backend="gl"):
    ff.initializers.set_seed(0)
    model = ff.Sequential([
        L.Conv2D(8, 3, padding="same", activation="relu", input_shape=(8, 8, 1)),
        L.MaxPool2D(2),
        L.Conv2D(16, 3, padding="same", activation="relu"),
        L.Flatten(),
        L.Dense(32, activation="relu"),
        L.Dense(10, activation="softmax"),
    ], name="digits", backend=backend)
    model.compile(optimizer=ff.optim.Adam(learning_rate=0.01),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def step_time(model, xb, yb, runs=10):
    """Median seconds of one training step (compiled, after a warm-up)."""
    fn = model.session.compile([model.train_op, model.total_loss],
                               feeds=[model.input, model.labels])
    fn(xb, yb)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn(xb, yb)
        times.append(time.perf_counter() - start)
    return statistics.median(times), fn


def main():
    require("examples/train_digits.py", {"sklearn": "scikit-learn",
                                         "matplotlib": "matplotlib"}, "examples")
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--out", default=os.path.join("out", "digits"))
    args = parser.parse_args()
    (x_train, y_train), (x_test, y_test) = load_digits()

    start = time.perf_counter()
    model = build_model()
    history = model.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs,
                        validation_data=(x_test, y_test), verbose=2, seed=0)
    train_seconds = time.perf_counter() - start
    test_loss, test_accuracy = model.evaluate(x_test, y_test, verbose=0)

    # One step's kernels and the graph, for reading; the step's time on GL and numpy.
    xb, yb = x_train[:args.batch_size], y_train[:args.batch_size]
    gl_step, fn = step_time(model, xb, yb)
    numpy_model = build_model(backend="numpy")
    numpy_model.fit(xb, yb, batch_size=args.batch_size, epochs=1, verbose=0)
    numpy_step, _ = step_time(numpy_model, xb, yb)

    shader_dir = os.path.join(args.out, "shaders")
    os.makedirs(shader_dir, exist_ok=True)
    for i, kernel in enumerate(fn.kernels):
        with open(os.path.join(shader_dir, f"{i:03d}_{kernel.name}.frag"), "w") as f:
            f.write(kernel.source)
    with open(os.path.join(args.out, "graph.txt"), "w") as f:
        f.write(ff.dump(model.graph) + "\n")
    plot(history, os.path.join(args.out, "loss.png"))

    print(f"\ndigits CNN on {ff.gl_info()['renderer']}")
    print(f"  test accuracy      {test_accuracy:.4f} ({len(x_test)} images)")
    print(f"  training time      {train_seconds:.1f} s for {args.epochs} epochs "
          f"(compiling included)")
    print(f"  one training step  {gl_step * 1e3:.2f} ms on GL, {numpy_step * 1e3:.2f} ms "
          f"on the numpy executor (GL takes {gl_step / numpy_step:.2f}x its time), "
          f"batch {args.batch_size}, "
          f"{len(fn.kernels)} kernels")
    print(f"  wrote {args.out}/graph.txt, {args.out}/loss.png and {len(fn.kernels)} "
          f"shaders in {shader_dir}")
    return test_accuracy, train_seconds


def plot(history, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axis = plt.subplots(figsize=(6, 4))
    axis.plot(history.history["loss"], label="training loss")
    if "val_loss" in history.history:
        axis.plot(history.history["val_loss"], label="test loss")
    axis.set_xlabel("epoch")
    axis.set_ylabel("sparse categorical cross-entropy")
    axis.set_yscale("log")
    axis.legend()
    axis.set_title("fragflow: digits CNN on GL")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


if __name__ == "__main__":
    main()
