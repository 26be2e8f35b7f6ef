"""What a graph starts from and how its nodes are named: placeholder (fed at run
time), constant (baked in) and name_scope. Variables are in tensor.py (ff.Variable)."""
from __future__ import annotations

import contextlib

import numpy as np

from ..ir.errors import AttrError
from ..ir.graph import get_default_graph
from ..ir.ops import state as _state
from ..ir.types import DTYPES, as_dtype
from .tensor import wrap

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


_UNSET = object()


@_export
def placeholder(*args, shape=_UNSET, dtype=_UNSET, name=None):
    """A value fed at run time: sess.run(..., feed_dict={x: array}). None dims are
    fixed by the feed.

    placeholder(shape, dtype="float32", name=None), or TensorFlow 1's order,
    placeholder(dtype, shape, name) (a dtype first, such as ff.float32, is taken as
    TF1's): ff.placeholder(ff.float32, [None, 784]) and ff.placeholder((None, 784))
    are the same. fragflow has no tensors of unknown rank: TF1's shapeless
    ff.placeholder(ff.float32) is a scalar."""
    shape, dtype, name = _placeholder_args(args, shape, dtype, name)
    return wrap(_state.placeholder(get_default_graph(), shape, dtype, name))


def _is_dtype(x, dtypes) -> bool:
    """A dtype name ("float32", ff.float32) or a numpy dtype / scalar type (np.float32)."""
    if isinstance(x, str):          # "float32", and TF1's "float", "int32", "int", ...
        try:
            return as_dtype(x) in dtypes
        except Exception:               # a string that is no dtype: not TF1's order
            return False
    if isinstance(x, np.dtype) or (isinstance(x, type) and issubclass(x, np.generic)):
        return True
    return False


def _placeholder_args(args, shape, dtype, name):
    if len(args) > 3:
        raise AttrError(f"placeholder takes at most 3 positional arguments, got {len(args)}")
    tf1 = bool(args) and _is_dtype(args[0], DTYPES)
    keys = ("dtype", "shape", "name") if tf1 else ("shape", "dtype", "name")
    given = {"shape": shape, "dtype": dtype, "name": name}
    for key, value in zip(keys, args):
        if key == "name" and name is not None or key != "name" and given[key] is not _UNSET:
            raise AttrError(f"placeholder got {key} twice")
        given[key] = value
    if given["shape"] is _UNSET and tf1:
        given["shape"] = ()    # TF1's shapeless placeholder (keep_prob, a learning rate)
    if given["shape"] is _UNSET:
        raise AttrError("placeholder needs a shape, e.g. ff.placeholder(ff.float32, "
                        "[None, 784]) (fragflow has no tensors of unknown rank)")
    return (given["shape"], "float32" if given["dtype"] is _UNSET else given["dtype"],
            given["name"])


@_export
def constant(value, dtype=None, shape=None, name=None):
    """A value baked into the graph (float64 → float32, int64 → int32). With shape, a
    scalar value is repeated to fill it and other values are reshaped to it, as
    tf.constant(0.1, shape=[10])."""
    if shape is not None:
        value = np.asarray(value)
        value = np.full(tuple(shape), value) if value.ndim == 0 \
            else value.reshape(tuple(shape))
    return wrap(_state.constant(get_default_graph(), value, dtype, name))


@_export
def name_scope(name: str) -> contextlib.AbstractContextManager:
    """Prefix the names of the nodes made inside with 'name/'.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default(), ff.name_scope("dense"):
    ...     ff.constant(1.0).name
    'dense/constant'
    """
    return get_default_graph().name_scope(name)
