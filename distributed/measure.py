"""Measure where a data-parallel step's time goes (docs/SCALING.md's figures).

    python -m fragflow.distributed.measure [--workers 1 2] [--steps 30]
        [--allreduce object_store collective] [--models cnn mlp]
    python -m fragflow.distributed.measure --equality

For each model, averaging mode and worker count: a DataParallelTrainer on a local Ray
instance runs `steps` steps of one global batch; the medians (after the first steps,
which compile shaders) of compute, transfer, allreduce, apply and the whole step are
printed, with the gradient size and one process's step on a plain Session (no Ray)
for comparison, and the gradient run's time as a + n * b (fixed launch cost a, cost b per
example), the split a model of N workers needs (docs/SCALING.md). Models: "cnn", the
digits CNN (8x8x1 images, batch 64, 7k weights);
"mlp", a 784-512-512-10 perceptron (batch 256, 670k weights, 2.7 MB of gradients).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import fragflow as ff

from .training import ALLREDUCE, DataParallelTrainer, TrainGraph

MODELS = {"cnn": ((8, 8, 1), 64), "mlp": ((784,), 256)}


def build_cnn():
    L = ff.layers
    ff.initializers.set_seed(0)
    model = ff.Sequential([
        L.Conv2D(8, 3, padding="same", activation="relu", input_shape=(8, 8, 1)),
        L.MaxPool2D(2),
        L.Conv2D(16, 3, padding="same", activation="relu"),
        L.Flatten(),
        L.Dense(32, activation="relu"),
        L.Dense(10, activation="softmax"),
    ], name="digits")
    model.build((None, 8, 8, 1))
    with model.graph.as_default():
        labels = ff.placeholder((None,), "int32", name="labels")
        loss = ff.mean(ff.keras.losses.sparse_categorical_crossentropy(labels, model.output))
    return TrainGraph(loss, [model.input, labels], ff.optim.Adam(0.01),
                      var_list=model.trainable_weights)


def build_mlp():
    rng = np.random.default_rng(0)
    x = ff.placeholder((None, 784), "float32", name="x")
    labels = ff.placeholder((None,), "int32", name="labels")
    h = x
    for i, (n_in, n_out) in enumerate([(784, 512), (512, 512), (512, 10)]):
        w = ff.Variable((rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32),
                        name=f"w{i}")
        b = ff.Variable(np.zeros(n_out, np.float32), name=f"b{i}")
        h = h @ w + b
        if i < 2:
            h = ff.relu(h)
    loss = ff.mean(ff.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=h))
    return TrainGraph(loss, [x, labels], ff.optim.Adam(0.001))


BUILDERS = {"cnn": build_cnn, "mlp": build_mlp}


def batch(model: str, seed=0):
    shape, size = MODELS[model]
    rng = np.random.default_rng(seed)
    return (rng.random((size,) + shape, dtype=np.float32),
            rng.integers(0, 10, size).astype(np.int32))


def single_process_step(model: str, steps: int) -> float:
    """Median seconds of one training step on a plain Session (no Ray)."""
    with ff.Graph().as_default():
        spec = BUILDERS[model]()
    with spec.loss.graph.as_default():       # the CNN builds in its model's own graph
        step = spec.optimizer.minimize(spec.loss)
    xb, yb = batch(model)
    with ff.Session(spec.loss.graph) as sess:
        fn = sess.compile([step, spec.loss], feeds=spec.inputs)
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            fn(xb, yb)
            times.append(time.perf_counter() - start)
    return statistics.median(times[3:])


def compute_line(model: str, steps: int, sizes=(8, 32, 128)) -> tuple:
    """(a, b): one process's gradient run takes a + b * batch seconds (least squares over
    `sizes`); a is the fixed part (kernel launches), which more workers do not divide."""
    with ff.Graph().as_default():
        spec = BUILDERS[model]()
    with spec.loss.graph.as_default():
        grads = ff.gradients(spec.loss, ff.optim.trainable_variables(spec.loss))
    times = []
    with ff.Session(spec.loss.graph) as sess:
        fn = sess.compile([spec.loss, *grads], feeds=spec.inputs)
        for size in sizes:
            xb, yb = batch(model)
            xb, yb = xb[:size], yb[:size]
            runs = []
            for _ in range(max(5, steps // 3)):
                start = time.perf_counter()
                fn(xb, yb)
                runs.append(time.perf_counter() - start)
            times.append(statistics.median(runs[2:]))
    b, a = np.polyfit(np.array(sizes, float), np.array(times), 1)
    return float(a), float(b)


def measure(model: str, workers: int, allreduce: str, steps: int) -> dict:
    xb, yb = batch(model)
    with DataParallelTrainer(BUILDERS[model], num_workers=workers, allreduce=allreduce,
                             num_cpus_per_worker=0.5, verbose=0) as trainer:
        history = trainer.fit([(xb, yb)] * steps)
        size = sum(v.size for v in trainer.get_weights().values())
    steady = history[3:]
    med = lambda f: statistics.median(f(s) for s in steady) * 1e3   # noqa: E731
    return {"model": model, "workers": workers, "allreduce": allreduce,
            "gradient_bytes": 4 * size, "step_ms": med(lambda s: s.seconds),
            "compute_ms": med(lambda s: max(s.compute)), "transfer_ms": med(lambda s: s.transfer),
            "allreduce_ms": med(lambda s: s.allreduce), "apply_ms": med(lambda s: s.apply),
            "examples_per_s": statistics.median(s.throughput for s in steady)}


def build_small(optimizer: str):
    """docs/SCALING.md's equality network: 6-9-3, fixed initial weights."""
    def build():
        rng = np.random.default_rng(4)
        x = ff.placeholder((None, 6), "float32", name="x")
        t = ff.placeholder((None, 3), "float32", name="t")
        w1 = ff.Variable(rng.standard_normal((6, 9)).astype(np.float32) * 0.5, name="w1")
        b1 = ff.Variable(np.zeros(9, np.float32), name="b1")
        w2 = ff.Variable(rng.standard_normal((9, 3)).astype(np.float32) * 0.5, name="w2")
        loss = ff.mean(ff.square(ff.relu(x @ w1 + b1) @ w2 - t))
        opt = ff.optim.SGD(0.1) if optimizer == "sgd" else ff.optim.Adam(0.05)
        return TrainGraph(loss, [x, t], opt)
    return build


def equality(steps: int = 20, kill_after: int = 7, checkpoint_every: int = 5) -> None:
    """Print max |2 workers - one process| and across replicas, for SGD and Adam, both
    averaging modes, with and without worker 1 killed after step kill_after."""
    import ray  # optional (fragflow[ray]): importing this module does not need it
    rng = np.random.default_rng(5)
    batches = [(rng.standard_normal((n, 6)).astype(np.float32),
                rng.standard_normal((n, 3)).astype(np.float32))
               for n in [10, 9] + [10] * (steps - 2)]
    diff = lambda a, b: max(float(np.max(np.abs(a[k] - b[k]))) for k in a)   # noqa: E731
    for optimizer in ("sgd", "adam"):
        build = build_small(optimizer)
        with ff.Graph().as_default():
            spec = build()
            step = spec.optimizer.minimize(spec.loss)
        with ff.Session(spec.loss.graph) as sess:
            for xb, tb in batches:
                sess.run(step, {spec.inputs[0]: xb, spec.inputs[1]: tb})
            want = {v.name: sess.get(v) for v in ff.optim.trainable_variables(spec.loss)}
        for allreduce in ALLREDUCE:
            for kill in (False, True):
                def on_step(done, trainer, kill=kill):
                    if kill and done == kill_after and not trainer.recoveries:
                        ray.kill(trainer.workers[1], no_restart=True)
                with DataParallelTrainer(build, 2, allreduce=allreduce, verbose=0,
                                         checkpoint_every=checkpoint_every,
                                         num_cpus_per_worker=0.5) as trainer:
                    trainer.fit(batches, on_step=on_step)
                    got, replicas = trainer.get_weights(), trainer.replica_states()
                    recoveries = trainer.recoveries
                print(f"{optimizer:4}  {allreduce:12}  killed={kill!s:5}  vs one process "
                      f"{diff(got, want):.2e}  across replicas {diff(replicas[0], replicas[1]):.2e}"
                      f"  {recoveries}", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--allreduce", nargs="+", default=["object_store", "collective"])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--equality", action="store_true",
                        help="print the equality figures instead (2 workers vs one process)")
    args = parser.parse_args(argv)
    import ray  # optional (fragflow[ray]): importing this module does not need it
    ray.init(num_cpus=max(2, max(args.workers)), include_dashboard=False, log_to_driver=False,
             object_store_memory=200 * 1024 * 1024)
    if args.equality:
        try:
            equality()
        finally:
            ray.shutdown()
        return
    print("model  mode          workers  grad KB   step ms  compute  transfer  allreduce  "
          "apply   examples/s")
    try:
        for model in args.models:
            alone = single_process_step(model, args.steps)
            print(f"{model:5}  one Session   1        -        {alone * 1e3:8.2f}  (no Ray)")
            a, b = compute_line(model, args.steps)
            print(f"{model:5}  gradients of a batch of n on one Session: {a * 1e3:.2f} ms + "
                  f"n x {b * 1e3:.3f} ms")
            for allreduce in args.allreduce:
                for workers in args.workers:
                    try:
                        r = measure(model, workers, allreduce, args.steps)
                    except Exception as err:     # noqa: BLE001 -- e.g. no torch for gloo
                        print(f"{model:5}  {allreduce:12}  {workers}  failed: "
                              f"{type(err).__name__}: {str(err).splitlines()[0][:120]}")
                        continue
                    print(f"{model:5}  {allreduce:12}  {workers:<7}  "
                          f"{r['gradient_bytes'] / 1024:7.1f}  {r['step_ms']:8.2f}  "
                          f"{r['compute_ms']:7.2f}  {r['transfer_ms']:8.2f}  "
                          f"{r['allreduce_ms']:9.2f}  {r['apply_ms']:6.2f}  "
                          f"{r['examples_per_s']:9.0f}", flush=True)
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
