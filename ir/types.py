"""Tensor types: a shape (ints, or None where unknown until feed time) and a dtype.

dtypes are float32, int32 and bool. Promotion (binary ops, where):
bool < int32 < float32, and the wider one wins. Python scalars are "weak", as in JAX:
an int scalar takes the tensor's dtype (int32 for a bool tensor); a float scalar
makes the result float32. int64/float64 numpy arrays given to constants are
narrowed to int32/float32 (the GPU has no 64-bit textures).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import DTypeError, ShapeError

DTYPES = ("float32", "int32", "bool")
_CANONICAL = frozenset(DTYPES)
SHORT_NAMES = {"float32": "f32", "int32": "i32", "bool": "bool"}
# float64 only appears inside the reference executor's float64 mode (gradient checks)
_RANK = {"bool": 0, "int32": 1, "float32": 2, "float64": 3}
_ALIASES = {
    "float32": "float32", "float": "float32", "f32": "float32", "float64": "float32",
    "int32": "int32", "int": "int32", "i32": "int32", "int64": "int32",
    "bool": "bool",
}


def as_dtype(dtype) -> str:
    """Normalise a dtype given as a string, numpy dtype or Python type."""
    if isinstance(dtype, str):
        key = dtype
    elif dtype in (float, int, bool):
        key = dtype.__name__
    else:
        try:
            key = np.dtype(dtype).name
        except TypeError:
            key = None
    if key in _ALIASES:
        return _ALIASES[key]
    raise DTypeError(f"unknown dtype {dtype!r}: fragflow supports {', '.join(DTYPES)}")


def promote(*dtypes: str) -> str:
    return max(dtypes, key=_RANK.__getitem__)


@dataclass(frozen=True)
class TensorType:
    shape: tuple
    dtype: str

    def __post_init__(self):
        shape, dtype = self.shape, self.dtype
        if (type(shape) is tuple and type(dtype) is str and dtype in _CANONICAL
                and all(d is None or type(d) is int and 0 <= d <= _MAX_DIM for d in shape)):
            return          # already canonical (most types: inference builds them so)
        try:
            shape = tuple(None if d is None else _dimension(d) for d in self.shape)
        except TypeError:
            raise ShapeError(f"a shape is a sequence of ints (or None), got "
                             f"{self.shape!r}") from None
        if any(d is not None and d < 0 for d in shape):
            raise ShapeError(f"negative dimension in shape {shape}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "dtype", as_dtype(self.dtype))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_static(self) -> bool:
        return all(d is not None for d in self.shape)

    @property
    def size(self):
        """Number of elements, or None while a dimension is unknown."""
        if not self.is_static:
            return None
        return int(np.prod(self.shape, dtype=np.int64))

    def __str__(self):
        dims = ",".join("?" if d is None else str(d) for d in self.shape)
        return f"{SHORT_NAMES[self.dtype]}[{dims}]"


_MAX_DIM = 2 ** 31 - 1


def _dimension(d) -> int:
    """One dimension: an int (integral floats pass, as numpy's arithmetic makes them);
    2.5 or "3" or True is a mistake, not 2, 3 or 1."""
    if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer, float,
                                                            np.floating)):
        raise ShapeError(f"dimension {d!r} is not an int (or None for unknown)")
    if isinstance(d, (float, np.floating)) and not float(d).is_integer():
        raise ShapeError(f"dimension {d!r} is not a whole number")
    if abs(d) > _MAX_DIM:
        raise ShapeError(f"dimension {int(d)} is larger than {_MAX_DIM}")
    return int(d)


def format_shape(shape) -> str:
    """(2, 3), (4,), (?, 3): Python's tuple form, with ? for unknown dimensions."""
    dims = ["?" if d is None else str(d) for d in shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"


def broadcast_shapes(*shapes) -> tuple:
    """numpy broadcasting, with None as "unknown" (assumed compatible until fed)."""
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        dims = [s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            raise ShapeError("shapes " + " and ".join(format_shape(s) for s in shapes)
                             + " cannot be broadcast together")
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def normalize_axes(axis, rank: int, op: str = "") -> tuple:
    """axis=None, an int or a sequence of ints (negative counts from the end)."""
    if axis is None:
        return tuple(range(rank))
    if isinstance(axis, (str, bytes, float)) or not isinstance(axis, (int, np.integer)) \
            and not hasattr(axis, "__iter__"):
        raise ShapeError(f"axis must be None, an int or a sequence of ints, got {axis!r}")
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if isinstance(a, (bool, np.bool_)) or not isinstance(a, (int, np.integer)):
            raise ShapeError(f"axis {axis!r}: {a!r} is not an int")
        a = int(a)
        if not -rank <= a < rank:
            raise ShapeError(f"axis {a} is out of range for a tensor of rank {rank}")
        out.append(a % rank)
    if len(set(out)) != len(out):
        raise ShapeError(f"repeated axis in {axis}")
    return tuple(sorted(out))
