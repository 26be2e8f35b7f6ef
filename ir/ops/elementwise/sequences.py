"""Elementwise ops without inputs, computed from the element's index: fill, range and
linspace (their kernels need no texture).

range and linspace compute each element from its index, start + i * delta (TensorFlow
accumulates delta, which rounds more); linspace's last element is stop exactly, as in
TensorFlow."""
from __future__ import annotations

import numpy as np

from ...errors import AttrError, DTypeError, ShapeError
from ...types import TensorType
from ..registry import REQUIRED, OpDef, register
from .type_rules import NUMERIC

_NO_INPUT = "no inputs"

def _number(value, what):
    if isinstance(value, (bool, np.bool_)) or \
            not isinstance(value, (int, float, np.integer, np.floating)):
        raise AttrError(f"{what} must be a Python number, got {value!r}")
    return value


def range_size(start, limit, delta) -> int:
    """TensorFlow's: ceil((limit - start) / delta) elements, erroring as it does."""
    if delta == 0:
        raise AttrError("delta must not be 0")
    if delta > 0 and start > limit:
        raise AttrError(f"start ({start}) must be <= limit ({limit}) when delta > 0")
    if delta < 0 and start < limit:
        raise AttrError(f"start ({start}) must be >= limit ({limit}) when delta < 0")
    if all(isinstance(v, (int, np.integer)) for v in (start, limit, delta)):
        return (abs(int(limit) - int(start)) + abs(int(delta)) - 1) // abs(int(delta))
    start, limit, delta = np.float32([start, limit, delta])     # as float32 computes it
    return int(np.ceil(np.abs((limit - start) / delta)))


def _range_type(types, attrs):
    dtype = attrs["dtype"]
    if dtype not in NUMERIC:
        raise DTypeError(f"makes float32 or int32 sequences, not {dtype}")
    values = [_number(attrs[k], k) for k in ("start", "limit", "delta")]
    if dtype == "int32" and not all(isinstance(v, (int, np.integer)) for v in values):
        raise AttrError(f"an int32 range needs integer start, limit and delta, got {values}")
    size = range_size(*values)
    if size > 2 ** 31 - 1:
        raise ShapeError(f"a range of {size} elements is too long")
    return TensorType((size,), dtype)


def _range_ref(arrays, attrs):
    start, limit, delta = (attrs[k] for k in ("start", "limit", "delta"))
    n = range_size(start, limit, delta)
    if attrs["dtype"] == "int32":
        values = int(start) + np.arange(n, dtype=np.int64) * int(delta)
        return values.astype(np.int32)          # wraps where int32 arithmetic would
    # the float32 arguments, exactly, then the value rounded once
    start, delta = (float(np.float32(v)) for v in (start, delta))
    return (start + np.arange(n, dtype=np.float64) * delta).astype(np.float32)


def _linspace_type(types, attrs):
    _number(attrs["start"], "start"), _number(attrs["stop"], "stop")
    num = attrs["num"]
    if isinstance(num, (bool, np.bool_)) or not isinstance(num, (int, np.integer)) or num < 1:
        raise AttrError(f"num must be a positive integer, got {num!r}")
    return TensorType((int(num),), "float32")


def linspace_step(start, stop, num) -> float:
    """(stop - start) / (num - 1) of the float32 start and stop, in float64."""
    start, stop = (float(np.float32(v)) for v in (start, stop))
    return 0.0 if num == 1 else (stop - start) / (num - 1)


def _linspace_ref(arrays, attrs):
    start, stop = (float(np.float32(attrs[k])) for k in ("start", "stop"))
    num = int(attrs["num"])
    values = start + np.arange(num, dtype=np.float64) * linspace_step(start, stop, num)
    if num > 1:
        values[-1] = stop
    return values.astype(np.float32)


register(OpDef("range", "elementwise", _range_type, _range_ref, tf="tf.range",
               attrs={"start": REQUIRED, "limit": REQUIRED, "delta": 1, "dtype": REQUIRED},
               num_inputs=0, no_gradient=_NO_INPUT,
               doc="start, start + delta, ... up to (not including) limit."))
register(OpDef("linspace", "elementwise", _linspace_type, _linspace_ref, tf="tf.linspace",
               attrs={"start": REQUIRED, "stop": REQUIRED, "num": REQUIRED},
               num_inputs=0, no_gradient=_NO_INPUT,
               doc="num evenly spaced values from start to stop, both included."))


register(OpDef("fill", "elementwise",
               lambda types, attrs: TensorType(attrs["shape"], attrs["dtype"]),
               lambda arrays, attrs: np.full(attrs["shape"], attrs["value"],
                                             np.dtype(attrs["dtype"])),
               attrs={"shape": REQUIRED, "value": REQUIRED, "dtype": REQUIRED},
               num_inputs=0, no_gradient=_NO_INPUT, tf="tf.fill",
               doc="A tensor of one value; no upload, the shader writes it."))
