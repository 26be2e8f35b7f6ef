"""The batch loops of fit, evaluate and predict, shared by ff.Sequential (one input,
one label array) and the Keras-file KerasModel (several of each): `arrays` are the
feeds of a compiled run in its feed order, all of the same length."""
from __future__ import annotations

import numpy as np

from .progress import History, ProgressBar


def _padded_batches(n, batch):
    """(indices, real count) covering range(n) in batches of exactly `batch`; the last
    is padded by repeating its first index."""
    for start in range(0, n, batch):
        idx = np.arange(start, min(start + batch, n))
        real = len(idx)
        if real < batch:
            idx = np.concatenate([idx, np.full(batch - real, idx[0])])
        yield idx, real


def fit_loop(model, run, arrays, names, batch_size, epochs, verbose, callbacks,
             validation_data, shuffle, initial_epoch, seed) -> History:
    """Keras's fit over arrays (at least one example) with run, the compiled train
    step (its values after the first are `names`' logs): epochs of shuffled, same-size
    batches, callbacks, progress and model.evaluate on validation_data. Sets and returns
    model.history."""
    n = len(arrays[0])
    batch = min(batch_size or 32, n)
    steps = -(-n // batch)
    rng = np.random.default_rng(seed)
    model.history = history = History({"batch_size": batch, "epochs": epochs,
                                       "steps": steps, "samples": n})
    callbacks = list(callbacks or [])
    for callback in callbacks:
        callback.set_model(model)
        callback.on_train_begin()
    model.stop_training = False
    for epoch in range(initial_epoch, epochs):
        if model.stop_training:
            break
        for callback in callbacks:
            callback.on_epoch_begin(epoch)
        progress = ProgressBar(verbose, steps, epoch, epochs)
        order = rng.permutation(n) if shuffle else np.arange(n)
        order = np.concatenate([order, order[:steps * batch - n]])
        totals = np.zeros(len(names))
        for step in range(steps):
            idx = order[step * batch:(step + 1) * batch]
            values = run(*[a[idx] for a in arrays])[1:]
            totals += [float(v) for v in values]
            progress.update(step + 1, dict(zip(names, totals / (step + 1))))
        logs = dict(zip(names, (totals / steps).tolist()))
        if validation_data is not None:
            val = model.evaluate(*validation_data, batch_size=batch, return_dict=True)
            logs.update({f"val_{k}": v for k, v in val.items()})
        history._append(epoch, logs)
        progress.end(logs)
        for callback in callbacks:
            callback.on_epoch_end(epoch, dict(logs))
    for callback in callbacks:
        callback.on_train_end()
    return history


def evaluate_means(run, arrays, batch_size, count) -> list:
    """The means over all examples of run's `count` per-example values, batch by batch
    (the padding left out)."""
    n = len(arrays[0])
    sums = np.zeros(count)
    for idx, real in _padded_batches(n, min(batch_size or 32, n)):
        for i, v in enumerate(run(*[a[idx] for a in arrays])):
            sums[i] += float(np.sum(v[:real], dtype=np.float64))
    return (sums / n).tolist()


def predict_batches(run, arrays, batch_size, count) -> list:
    """run's `count` outputs for all examples, batch by batch, each one array."""
    n = len(arrays[0])
    parts = [[] for _ in range(count)]
    for idx, real in _padded_batches(n, min(batch_size or 32, n)):
        for k, v in enumerate(run(*[a[idx] for a in arrays])):
            parts[k].append(v[:real])
    return [np.concatenate(p) for p in parts]
