"""Keras's callbacks for fit: Callback (the hooks), TensorBoard (the epoch's loss and
metrics, and optionally the weights' histograms, to TensorBoard event files in
log_dir/train and log_dir/validation, as Keras writes them), LambdaCallback and
EarlyStopping."""
from __future__ import annotations

import math
import os

import numpy as np

from ...ir.errors import AttrError
from .. import event_file as events
from ..namespaces.summary import FileWriter

__all__ = ["Callback", "TensorBoard", "LambdaCallback", "EarlyStopping"]


class Callback:
    """fit calls these with the epoch number and the logs ({"loss": ..., ...})."""

    def __init__(self):
        self.model = None

    def set_model(self, model) -> None:
        self.model = model

    def on_train_begin(self, logs=None): pass
    def on_train_end(self, logs=None): pass
    def on_epoch_begin(self, epoch, logs=None): pass
    def on_epoch_end(self, epoch, logs=None): pass
    def on_train_batch_begin(self, batch, logs=None): pass
    def on_train_batch_end(self, batch, logs=None): pass


class LambdaCallback(Callback):
    """A Callback from functions: on_epoch_end=lambda epoch, logs: ..., ..."""

    def __init__(self, on_epoch_begin=None, on_epoch_end=None, on_train_begin=None,
                 on_train_end=None, on_batch_begin=None, on_batch_end=None):
        super().__init__()
        for name, fn in [("on_epoch_begin", on_epoch_begin), ("on_epoch_end", on_epoch_end),
                         ("on_train_begin", on_train_begin), ("on_train_end", on_train_end),
                         ("on_train_batch_begin", on_batch_begin),
                         ("on_train_batch_end", on_batch_end)]:
            if fn is not None:
                setattr(self, name, fn)


class TensorBoard(Callback):
    """Writes 'epoch_<metric>' scalars each epoch to log_dir/train (and the val_ ones to
    log_dir/validation), the model's graph (write_graph) and, every histogram_freq
    epochs, a histogram of each weight."""

    def __init__(self, log_dir="logs", histogram_freq=0, write_graph=True,
                 write_images=False, update_freq="epoch", profile_batch=0, **ignored):
        super().__init__()
        if update_freq != "epoch":
            raise AttrError("TensorBoard(update_freq=...): fragflow writes once per epoch "
                            "(update_freq='epoch')")
        self.log_dir = os.fspath(log_dir)
        self.histogram_freq, self.write_graph = int(histogram_freq), write_graph
        self._writers: dict = {}

    def _writer(self, which):
        if which not in self._writers:
            self._writers[which] = FileWriter(os.path.join(self.log_dir, which))
        return self._writers[which]

    def on_train_begin(self, logs=None):
        if self.write_graph and self.model is not None:
            self._writer("train").add_graph(self.model.graph)

    def on_epoch_end(self, epoch, logs=None):
        for key, value in (logs or {}).items():
            which, name = ("validation", key[4:]) if key.startswith("val_") else ("train", key)
            self._writer(which).add_summary(events.scalar_summary(f"epoch_{name}", value),
                                            epoch)
        if self.histogram_freq and epoch % self.histogram_freq == 0 and self.model:
            for w, value in zip(self.model.weights, self.model.get_weights()):
                self._writer("train").add_summary(
                    events.histogram_summary(w.op.name, value), epoch)
        for writer in self._writers.values():
            writer.flush()

    def on_train_end(self, logs=None):
        for writer in self._writers.values():
            writer.close()
        self._writers = {}


class EarlyStopping(Callback):
    """Stops fit when monitor has not improved by min_delta for patience epochs."""

    def __init__(self, monitor="val_loss", min_delta=0.0, patience=0, mode="auto",
                 restore_best_weights=False, **ignored):
        super().__init__()
        self.monitor, self.min_delta, self.patience = monitor, abs(min_delta), patience
        maximize = mode == "max" or (mode == "auto" and ("acc" in monitor))
        self._sign = -1.0 if maximize else 1.0
        self.restore_best_weights = restore_best_weights

    def on_train_begin(self, logs=None):
        self._best, self._wait, self._weights = math.inf, 0, None
        self.stopped_epoch = 0

    def on_epoch_end(self, epoch, logs=None):
        value = (logs or {}).get(self.monitor)
        if value is None:
            return
        value = self._sign * float(value)
        if value < self._best - self.min_delta:
            self._best, self._wait = value, 0
            if self.restore_best_weights:
                self._weights = [np.copy(w) for w in self.model.get_weights()]
            return
        self._wait += 1
        if self._wait > self.patience:
            self.stopped_epoch = epoch
            self.model.stop_training = True
            if self._weights is not None:
                self.model.set_weights(self._weights)
