"""What fit reports while it runs and returns: History (the per-epoch logs, as Keras's
History callback keeps them) and ProgressBar (Keras's verbose=1 bar, or one line per
epoch with verbose=2 or when stderr is not a terminal)."""
from __future__ import annotations

import sys
import time


class History:
    """What fit returns: history {"loss": [per epoch], "accuracy": [...],
    "val_loss": [...], ...}, epoch (the epoch numbers) and params."""

    def __init__(self, params):
        self.params = params
        self.epoch: list = []
        self.history: dict = {}

    def _append(self, epoch, logs):
        self.epoch.append(epoch)
        for k, v in logs.items():
            self.history.setdefault(k, []).append(v)

    def __repr__(self):
        return f"<ff.History epochs={len(self.epoch)} keys={list(self.history)}>"


class ProgressBar:
    """A Keras-style progress bar on stderr (verbose=1), or one line per epoch (2)."""
    WIDTH = 30

    def __init__(self, verbose, steps, epoch, epochs, stream=None):
        self.verbose, self.steps = verbose, steps
        self.stream = stream or sys.stderr
        self.start = self._last = time.perf_counter()
        self._width = 0
        if verbose == 1 and not _is_terminal(self.stream):
            self.verbose = 2        # a log file or a pipe: one line per epoch, no \r bar
        if verbose:
            self.stream.write(f"Epoch {epoch + 1}/{epochs}\n")

    @staticmethod
    def _format(logs):
        return " - ".join(f"{k}: {v:.4f}" for k, v in logs.items())

    def update(self, step, logs):
        now = time.perf_counter()
        if self.verbose != 1 or (now - self._last < 0.1 and step < self.steps):
            return
        self._last = now
        done = int(self.WIDTH * step / self.steps)
        bar = "=" * max(done - 1, 0) + (">" if done < self.WIDTH else "=") \
            + "." * (self.WIDTH - done)
        digits = len(str(self.steps))
        self._write(f"\r{step:>{digits}}/{self.steps} [{bar}] "
                    f"{now - self.start:.1f}s - {self._format(logs)}")
        self.stream.flush()

    def _write(self, line):
        """line, padded to cover the longer line it overwrites (after a \\r)."""
        self.stream.write(line.ljust(self._width))
        self._width = len(line)

    def end(self, logs):
        if not self.verbose:
            return
        elapsed = time.perf_counter() - self.start
        per_step = 1000 * elapsed / max(self.steps, 1)
        prefix = "\r" if self.verbose == 1 else ""
        self._write(f"{prefix}{self.steps}/{self.steps} - {elapsed:.1f}s "
                    f"{per_step:.0f}ms/step - {self._format(logs)}")
        self.stream.write("\n")
        self.stream.flush()


def _is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):       # no isatty, or a closed stream
        return False
