"""ff.summary: TensorFlow 1's tf.summary. scalar / histogram make summary ops;
sess.run of one (or of merge_all()) gives the bytes of a Summary protocol buffer, which
FileWriter(logdir, sess.graph).add_summary(bytes, step) writes to a TensorBoard event
file (frontend/event_file.py: TFRecords of Event messages, no TensorFlow needed).

>>> import fragflow as tf, tempfile
>>> g = tf.Graph()
>>> with g.as_default():
...     loss = tf.constant(0.25)
...     _ = tf.summary.scalar("loss", loss)
...     merged = tf.summary.merge_all()
>>> sess = tf.Session(g, backend="numpy")
>>> summary = sess.run(merged)
>>> type(summary).__name__
'bytes'
>>> writer = tf.summary.FileWriter(tempfile.mkdtemp(), sess.graph)
>>> writer.add_summary(summary, global_step=1); writer.close()
"""
from __future__ import annotations

import os
import time

from ...ir.errors import FragflowError
from ...ir.graph import Graph, get_default_graph
from .. import event_file as _events, ops as _ops, side_effects as _effects
from ..tensor import Tensor
from ..tf1 import group as _group
from ._missing import install as _install

# per graph: "summaries" [summary ops, in creation order] (what merge_all merges) and
# "summary_parts" {summary value: [(needs, finish)]}


def _tag(name) -> str:
    scope = get_default_graph().scope
    return f"{scope}/{name}" if scope else str(name)


def _summary_op(kind, name, tensor, encode) -> Tensor:
    if not isinstance(tensor, Tensor):
        tensor = _ops.constant(tensor)
    graph = tensor.graph
    tag = _tag(name)
    with graph.as_default(), _ops.name_scope(f"{kind}_summary"):
        op = _ops.identity(tensor, name=str(name).replace(" ", "_") or kind)

    def finish(arrays):
        return encode(tag, arrays[0])
    parts = [((tensor.value,), finish)]
    _register(graph, op, parts)
    _effects.graph_table(graph, "summaries", list).append(op)
    return op


def _register(graph, op, parts) -> None:
    _effects.graph_table(graph, "summary_parts")[op.value] = parts
    needs = [need for part_needs, _ in parts for need in part_needs]

    def finish(arrays):
        out, start = b"", 0
        for part_needs, fn in parts:
            out += fn(arrays[start:start + len(part_needs)])
            start += len(part_needs)
        return out
    _effects.register_effect(op.value, _effects.Effect(needs, finish))


def scalar(name, tensor, collections=None, family=None, description=None) -> Tensor:
    """A summary op of one number: run it to get Summary bytes with tag name (under the
    name scope, as TF1)."""
    if isinstance(tensor, Tensor) and tensor.ndim != 0 and tensor.shape != (1,):
        raise FragflowError(f"summary.scalar {name!r}: the tensor must be a scalar, got "
                            f"shape {list(tensor.shape)}")
    return _summary_op("scalar", name, tensor, _events.scalar_summary)


def histogram(name, values, collections=None, family=None, description=None) -> Tensor:
    """A summary op of the distribution of values (a histogram of 30 buckets)."""
    return _summary_op("histogram", name, values, _events.histogram_summary)


def merge(inputs, collections=None, name=None) -> Tensor:
    """One summary op holding every summary of inputs."""
    inputs = [t for t in inputs if t is not None]
    if not inputs:
        raise FragflowError("summary.merge needs at least one summary op")
    graph = inputs[0].graph
    parts = []
    for t in inputs:
        found = _effects.graph_table(graph, "summary_parts").get(t.value)
        if found is None:
            raise FragflowError(f"summary.merge: {t!r} is not a summary op (summary.scalar, "
                                f"histogram or merge)")
        parts.extend(found)
    with graph.as_default():
        op = _group(*inputs, name=name or "Merge/MergeSummary")
    _register(graph, op, parts)
    return op


def merge_all(key=None, scope=None, name=None):
    """Every summary op of the default graph made so far, merged (None if there is
    none, as TF1)."""
    made = list(_effects.graph_table(get_default_graph(), "summaries", list))
    if scope:
        made = [t for t in made if t.name.startswith(scope)]
    return merge(made, name=name) if made else None


class Summary:
    """tf.Summary(value=[tf.Summary.Value(tag=..., simple_value=...)]): a summary of
    Python numbers, for FileWriter.add_summary."""

    class Value:
        def __init__(self, tag="", simple_value=None, **unsupported):
            if unsupported:
                raise FragflowError(f"Summary.Value: only tag and simple_value are "
                                    f"supported, got {', '.join(unsupported)}")
            self.tag, self.simple_value = tag, simple_value

    def __init__(self, value=()):
        self.value = list(value)

    def SerializeToString(self) -> bytes:  # noqa: N802 (protobuf's name)
        return b"".join(_events.scalar_summary(v.tag, v.simple_value) for v in self.value)


class FileWriter:
    """Writes summaries (and the graph) to a TensorBoard event file in logdir."""

    def __init__(self, logdir, graph=None, max_queue=10, flush_secs=120, graph_def=None,
                 filename_suffix=None, session=None):
        self._logdir = os.fspath(logdir)
        self._writer = _events.EventFileWriter(self._logdir, filename_suffix or "")
        if graph is not None:
            self.add_graph(graph)

    def get_logdir(self) -> str:
        return self._logdir

    def add_summary(self, summary, global_step=None) -> None:
        """summary: what sess.run of a summary op gave (bytes), or a tf.Summary."""
        if isinstance(summary, Summary):
            summary = summary.SerializeToString()
        if not isinstance(summary, (bytes, bytearray)):
            raise FragflowError(f"FileWriter.add_summary takes what sess.run of a summary "
                                f"op gives (bytes) or a tf.Summary, got {type(summary).__name__}")
        step = int(global_step) if global_step is not None else 0
        self._writer.write(_events.event(time.time(), step, summary=bytes(summary)))

    def add_graph(self, graph, global_step=None) -> None:
        if not isinstance(graph, Graph):
            raise FragflowError(f"FileWriter.add_graph takes a graph (sess.graph), got "
                                f"{graph!r}")
        self._writer.write(_events.event(time.time(), int(global_step or 0),
                                         graph=_events.graph_def(graph)))

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def reopen(self) -> None:
        if self._writer._file is None:
            self._writer = _events.EventFileWriter(self._logdir)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


__all__ = ["scalar", "histogram", "merge", "merge_all", "FileWriter", "Summary"]
_install(globals(), "fragflow.summary")
