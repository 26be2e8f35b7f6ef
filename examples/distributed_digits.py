"""Train train_digits.py's CNN data-parallel on 2 Ray workers, and compare it with
train_digits.py's single-process training.

Both see the same global batches (Sequential.fit's: a seeded shuffle per epoch, the
last batch padded), the same initial weights and the same Adam: the distributed run
splits each batch of 64 into 32 + 32, averages the two gradients and applies the same
update on both replicas, so it should reach the same weights (up to float32 rounding)
and the same test accuracy. Prints both accuracies, the weights' largest difference,
and per-step throughput lines.

    python examples/distributed_digits.py [--epochs 20] [--workers 2]

Needs the `examples` and `ray` extras: pip install -e ".[examples,ray]".
"""
import argparse
import os
import sys
import time

import numpy as np

import fragflow as ff

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import train_digits  # noqa: E402  (the model, the data, the single-process baseline)
from optional import require  # noqa: E402  (what to install)


def build():
    """The training graph of train_digits.build_model(), run in each Ray worker."""
    from fragflow.distributed import TrainGraph
    model = train_digits.build_model()
    model.build((None, 8, 8, 1))
    with model.graph.as_default():
        labels = ff.placeholder((None,), "int32", name="labels")
        loss = ff.mean(ff.keras.losses.sparse_categorical_crossentropy(labels, model.output))
    return TrainGraph(loss, [model.input, labels], model.optimizer,
                      var_list=model.trainable_weights)


def fit_batches(x, y, batch_size, epochs, seed=0):
    """The global batches Sequential.fit(x, y, batch_size, epochs, seed=seed) trains on."""
    rng, n = np.random.default_rng(seed), len(x)
    steps = -(-n // batch_size)
    batches = []
    for _ in range(epochs):
        order = rng.permutation(n)
        order = np.concatenate([order, order[:steps * batch_size - n]])
        batches += [(x[idx], y[idx]) for idx in
                    np.split(order, steps)]
    return batches


def main():
    require("examples/distributed_digits.py", {"ray": "ray[data]", "sklearn": "scikit-learn"},
            "examples,ray")
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--log-every", type=int, default=25, help="steps between lines")
    args = parser.parse_args()
    import ray
    from ray import cloudpickle

    from fragflow.distributed import DataParallelTrainer
    cloudpickle.register_pickle_by_value(train_digits)    # workers cannot import examples/
    (x_train, y_train), (x_test, y_test) = train_digits.load_digits()

    start = time.perf_counter()
    single = train_digits.build_model()
    single.fit(x_train, y_train, batch_size=args.batch_size, epochs=args.epochs, verbose=0,
               seed=0)
    single_seconds = time.perf_counter() - start
    _, single_accuracy = single.evaluate(x_test, y_test, verbose=0)

    ray.init(num_cpus=max(2, args.workers), include_dashboard=False, log_to_driver=False,
             object_store_memory=200 * 1024 * 1024)
    batches = fit_batches(x_train, y_train, args.batch_size, args.epochs)
    start = time.perf_counter()
    with DataParallelTrainer(build, num_workers=args.workers, checkpoint_every=100,
                             num_cpus_per_worker=0.5, log_every=args.log_every) as trainer:
        history = trainer.fit(batches)
        weights = trainer.get_weights()
    distributed_seconds = time.perf_counter() - start
    ray.shutdown()

    model = train_digits.build_model()
    model.build((None, 8, 8, 1))
    by_name = {w.name: w for w in model.trainable_weights}
    for name, value in weights.items():
        model.session.set(by_name[name], value)
    _, distributed_accuracy = model.evaluate(x_test, y_test, verbose=0)
    single_weights = {w.name: single.session.get(w) for w in single.trainable_weights}
    diff = max(float(np.max(np.abs(weights[k] - single_weights[k]))) for k in weights)

    steady = sorted(s.throughput for s in history[len(history) // 10:])
    print(f"\ndigits CNN, {args.epochs} epochs of batch {args.batch_size} "
          f"({len(batches)} steps) on {ff.gl_info()['renderer']}")
    print(f"  test accuracy, one process (train_digits.py)  {single_accuracy:.4f}  "
          f"({single_seconds:.1f} s)")
    print(f"  test accuracy, {args.workers} Ray workers, data-parallel {distributed_accuracy:.4f}  "
          f"({distributed_seconds:.1f} s, workers' start included)")
    print(f"  largest weight difference                     {diff:.2e} (float32 rounding, "
          f"grown over {len(batches)} Adam steps)")
    print(f"  median throughput {steady[len(steady) // 2]:.0f} examples/s over "
          f"{args.workers} workers")
    return single_accuracy, distributed_accuracy


if __name__ == "__main__":
    main()
