"""tf.train.Saver over fragflow's own checkpoint format: save(sess, prefix) writes
'<prefix>.npz' (numpy's zip of .npy arrays keyed by variable name: no pickle, read back
with allow_pickle=False after checking every entry's header) and a text file
'checkpoint' beside it naming the latest ones, as TensorFlow's does; restore(sess,
prefix) reads it. Each file is written to a temporary name and renamed into place, so a
crash leaves the previous checkpoint whole. max_to_keep rotates old checkpoints out.

>>> import fragflow as tf, numpy as np, tempfile, os
>>> g = tf.Graph()
>>> with g.as_default():
...     w = tf.Variable(np.ones(2, np.float32), name="w")
...     saver = tf.train.Saver()
>>> d = tempfile.mkdtemp()
>>> sess = tf.Session(g, backend="numpy")
>>> path = saver.save(sess, os.path.join(d, "model.ckpt"), global_step=3)
>>> tf.train.latest_checkpoint(d) == path
True
"""
from __future__ import annotations

import contextlib
import os
import tempfile

import numpy as np

from ..ir.errors import FragflowError, SerializationError
from ..ir.graph import get_default_graph
from .session import _feed_array, _read_checkpoint
from .tensor import Tensor, Variable
from .variables import global_variables

__all__ = ["Saver", "latest_checkpoint", "checkpoint_exists", "get_checkpoint_state",
           "CheckpointState"]

SUFFIX = ".npz"
STATE_FILE = "checkpoint"


class Saver:
    """Saves and restores variables (default: every variable of the graph made so far;
    var_list: a list of Variables or a dict {name in the file: Variable})."""

    def __init__(self, var_list=None, reshape=False, sharded=False, max_to_keep=5,
                 keep_checkpoint_every_n_hours=10000.0, name=None, restore_sequentially=False,
                 saver_def=None, builder=None, defer_build=False, allow_empty=False,
                 write_version=None, pad_step_number=False, save_relative_paths=False,
                 filename=None, **ignored):
        if var_list is None:
            var_list = global_variables(get_default_graph())
        if isinstance(var_list, dict):
            items = list(var_list.items())
        else:
            items = [(v.op.name, v) for v in var_list]
        for key, v in items:
            if not isinstance(v, Variable):
                raise FragflowError(f"Saver: {key!r} is {v!r}, not a Variable")
        if not items and not allow_empty:
            raise FragflowError("Saver: there are no variables to save (make the model "
                                "first, or pass allow_empty=True)")
        self._vars = dict(items)
        self.max_to_keep = max_to_keep
        self.pad_step_number = pad_step_number
        self._last: list = []                    # prefixes this saver wrote, oldest first

    @property
    def last_checkpoints(self) -> list:
        return list(self._last)

    def save(self, sess, save_path, global_step=None, latest_filename=None,
             meta_graph_suffix="meta", write_meta_graph=True, write_state=True,
             strip_default_attrs=False, save_debug_info=False) -> str:
        """Write the variables' values in sess to '<save_path>[-<step>].npz' and return
        that prefix (what restore and latest_checkpoint take)."""
        if global_step is not None:
            step = sess.run(global_step) if isinstance(global_step, Tensor) else global_step
            step = int(np.asarray(step))
            save_path = f"{save_path}-{step:08d}" if self.pad_step_number \
                else f"{save_path}-{step}"
        save_path = os.fspath(save_path)
        values = {key: sess.get(v) for key, v in self._vars.items()}
        _atomic_write(save_path + SUFFIX, lambda f: np.savez(f, **values))
        if save_path in self._last:
            self._last.remove(save_path)
        self._last.append(save_path)
        if self.max_to_keep:
            while len(self._last) > self.max_to_keep:
                old = self._last.pop(0)
                with contextlib.suppress(OSError):
                    os.remove(old + SUFFIX)
        if write_state:
            _write_state(os.path.dirname(save_path) or ".", save_path, self._last,
                         latest_filename or STATE_FILE)
        return save_path

    def restore(self, sess, save_path) -> None:
        """Set the variables in sess from the checkpoint save_path (a prefix save
        returned, or latest_checkpoint's). Every saved variable must be in the file;
        nothing is written unless every entry checks out."""
        if save_path is None:
            raise SerializationError("Saver.restore: save_path is None (latest_checkpoint "
                                     "found no checkpoint in that directory?)")
        path = os.fspath(save_path)
        if not os.path.exists(path) and os.path.exists(path + SUFFIX):
            path += SUFFIX
        nodes = {key: v.op for key, v in self._vars.items()}
        arrays = _read_checkpoint(path, nodes, sess.graph.name)
        missing = [key for key in nodes if key not in arrays]
        if missing:
            raise SerializationError(f"checkpoint {path!r} lacks variable(s) "
                                     f"{', '.join(map(repr, missing))}")
        checked = {}
        for key, v in self._vars.items():
            try:
                checked[key] = _feed_array(v.value, arrays[key])
            except FragflowError as err:
                raise SerializationError(f"checkpoint {path!r}: {err}") from None
        for key, v in self._vars.items():
            sess.set(v, checked[key])

    def recover_last_checkpoints(self, checkpoint_paths) -> None:
        self._last = [os.fspath(p) for p in checkpoint_paths]


class CheckpointState:
    """What the 'checkpoint' file says: model_checkpoint_path (the latest) and
    all_model_checkpoint_paths."""

    def __init__(self, latest, all_paths):
        self.model_checkpoint_path = latest
        self.all_model_checkpoint_paths = list(all_paths)


def get_checkpoint_state(checkpoint_dir, latest_filename=None):
    """The CheckpointState of a directory's 'checkpoint' file, or None without one."""
    path = os.path.join(os.fspath(checkpoint_dir), latest_filename or STATE_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(1 << 20)
    except OSError:
        return None
    latest, paths = None, []
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        rest = rest.strip()
        if len(rest) < 2 or rest[0] != '"' or rest[-1] != '"':
            continue
        value = rest[1:-1]
        if not os.path.isabs(value):
            value = os.path.join(os.fspath(checkpoint_dir), value)
        if key.strip() == "model_checkpoint_path":
            latest = value
        elif key.strip() == "all_model_checkpoint_paths":
            paths.append(value)
    return None if latest is None else CheckpointState(latest, paths)


def latest_checkpoint(checkpoint_dir, latest_filename=None):
    """The prefix of the newest checkpoint a Saver wrote in checkpoint_dir, or None."""
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None or not checkpoint_exists(state.model_checkpoint_path):
        return None
    return state.model_checkpoint_path


def checkpoint_exists(checkpoint_prefix) -> bool:
    prefix = os.fspath(checkpoint_prefix)
    return os.path.exists(prefix + SUFFIX) or (prefix.endswith(SUFFIX)
                                               and os.path.exists(prefix))


def _write_state(directory, latest, paths, filename) -> None:
    def rel(p):
        return os.path.relpath(p, directory) if not os.path.isabs(p) or \
            os.path.dirname(os.path.abspath(p)) == os.path.abspath(directory) else p
    lines = [f'model_checkpoint_path: "{rel(latest)}"']
    lines += [f'all_model_checkpoint_paths: "{rel(p)}"' for p in paths]
    text = "\n".join(lines) + "\n"
    _atomic_write(os.path.join(directory, filename), lambda f: f.write(text.encode()))


def _atomic_write(path, write) -> None:
    """write(file) into a temporary file beside path, then rename it to path."""
    directory = os.path.dirname(path) or "."
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-" + os.path.basename(path)[:40],
                                   dir=directory)
    except OSError as err:
        raise SerializationError(f"cannot write checkpoint {path!r}: "
                                 f"{err.strerror or err}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as err:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise SerializationError(f"cannot write checkpoint {path!r}: "
                                 f"{err.strerror or err}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
