"""TensorBoard event files, written without TensorFlow or tensorboard installed.

An event file is a sequence of TFRecords (length, masked CRC-32C of the length, the
bytes, masked CRC-32C of the bytes), each holding one serialized `Event` protocol
buffer: the first names the file version, then summaries (scalars, histograms) and
graphs. The few messages needed (Event, Summary, Summary.Value, HistogramProto,
GraphDef, NodeDef) are encoded here by hand, field numbers as in TensorFlow's
event.proto, summary.proto and graph.proto; the tensorboard package's reader
(EventAccumulator) loads what this writes (tests/frontend/test_summary.py). Writing
them by hand keeps tensorboard an optional, test-only dependency.

>>> summary = scalar_summary("loss", 0.5)
>>> summary[:8]
b'\\n\\x0b\\n\\x04loss'
"""
from __future__ import annotations

import os
import socket
import struct
import time

import numpy as np

from ..ir.errors import FragflowError

# -- protocol buffer encoding ----------------------------------------------------------------


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1               # int64 fields: two's complement, as protobuf does
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint((field << 3) | wire)


def _bytes(field: int, data: bytes) -> bytes:
    return _key(field, 2) + _varint(len(data)) + data


def _string(field: int, text: str) -> bytes:
    return _bytes(field, text.encode("utf-8"))


def _double(field: int, x: float) -> bytes:
    return _key(field, 1) + struct.pack("<d", float(x))


def _float(field: int, x: float) -> bytes:
    return _key(field, 5) + struct.pack("<f", float(x))


def _int(field: int, n: int) -> bytes:
    return _key(field, 0) + _varint(int(n))


def _packed_doubles(field: int, xs) -> bytes:
    return _bytes(field, np.asarray(xs, "<f8").tobytes())


# -- Summary ------------------------------------------------------------------------------
def scalar_summary(tag: str, value) -> bytes:
    """A serialized Summary with one simple_value."""
    return _bytes(1, _string(1, tag) + _float(2, float(np.asarray(value, np.float64))))


def histogram_summary(tag: str, values, bins: int = 30) -> bytes:
    """A serialized Summary with one HistogramProto of values (bins equal-width buckets
    between their min and max; NaN and infinities are left out, as TensorBoard would)."""
    data = np.asarray(values, np.float64).ravel()
    data = data[np.isfinite(data)]
    if data.size == 0:
        histo = b""
    else:
        lo, hi = float(data.min()), float(data.max())
        if lo == hi:
            counts, limits = np.array([data.size], np.float64), np.array([hi])
        else:
            counts, edges = np.histogram(data, bins=bins, range=(lo, hi))
            limits = edges[1:]
        histo = (_double(1, lo) + _double(2, hi) + _double(3, data.size) +
                 _double(4, data.sum()) + _double(5, np.dot(data, data)) +
                 _packed_doubles(6, limits) + _packed_doubles(7, counts))
    return _bytes(1, _string(1, tag) + _bytes(5, histo))


def graph_def(graph) -> bytes:
    """A serialized GraphDef of a fragflow graph: one NodeDef (name, op, inputs) per
    node, for TensorBoard's graph view."""
    nodes = []
    for node in graph.nodes:
        body = _string(1, node.name) + _string(2, node.op)
        for value in node.inputs:
            body += _string(3, value.node.name if value.index == 0
                            else f"{value.node.name}:{value.index}")
        nodes.append(_bytes(1, body))
    return b"".join(nodes) + _bytes(4, _int(1, 1))          # versions { producer: 1 }


def event(wall_time: float, step: int = 0, *, file_version: str | None = None,
          summary: bytes | None = None, graph: bytes | None = None) -> bytes:
    out = _double(1, wall_time)
    if step:
        out += _int(2, step)
    if file_version is not None:
        out += _string(3, file_version)
    if graph is not None:
        out += _bytes(4, graph)
    if summary is not None:
        out += _bytes(5, summary)
    return out


# -- TFRecord framing -----------------------------------------------------------------------
def _crc32c_table() -> list:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), the checksum TFRecords use."""
    crc = 0xFFFFFFFF
    table = _TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def masked_crc32c(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """data framed as one TFRecord."""
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", masked_crc32c(length)) + data +
            struct.pack("<I", masked_crc32c(data)))


class EventFileWriter:
    """Appends events to 'events.out.tfevents.<time>.<host><suffix>' in logdir; the
    first record is the file version, as TensorFlow's writer does."""

    def __init__(self, logdir: str, filename_suffix: str = ""):
        os.makedirs(logdir, exist_ok=True)
        name = (f"events.out.tfevents.{int(time.time()):010d}."
                f"{socket.gethostname()}{filename_suffix or ''}")
        self.path = os.path.join(logdir, name)
        self._file = open(self.path, "ab")          # noqa: SIM115 (closed by close())
        self.write(event(time.time(), file_version="brain.Event:2"))
        self.flush()

    def write(self, event_bytes: bytes) -> None:
        if self._file is None:
            raise FragflowError(f"the event file {self.path!r} is closed")
        self._file.write(record(event_bytes))

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
