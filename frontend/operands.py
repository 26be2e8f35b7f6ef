"""What the op families share: turning what users pass (Tensors, numpy arrays, Python
numbers) into ir values and Tensors, and the checks and wrappers every family needs.
Nothing here is an op users call; the families (ops_math, ops_nn, ...) are."""
from __future__ import annotations

import difflib
import functools
import inspect

import numpy as np

from ..ir.errors import FragflowError, ShapeError
from ..ir.graph import get_default_graph
from ..ir.ops import elementwise as _ew
from ..ir.ops.common import as_value, graph_of
from ..ir.ops.registry import get_op
from ..ir.source import user_location
from .tensor import Tensor, as_tensor_value, wrap


def operands(*xs):
    """Tensors to values; arrays and lists become constants of the tensors' graph.
    Python scalars stay as they are (the ir builders type them weakly, as JAX does),
    unless no operand is a tensor: then the first becomes a constant of the default
    graph so that the builders know the graph."""
    tensors = [x for x in xs if isinstance(x, Tensor)]
    graph = tensors[0].graph if tensors else None
    values = []
    for x in xs:
        if isinstance(x, Tensor):
            values.append(x.value)
        elif graph is not None and x is not None and not np.isscalar(x):
            values.append(as_value(graph, x))
        else:
            values.append(x)
    if not tensors:
        values[0] = as_tensor_value(values[0])
    return values


def graph_operands(*xs):
    """Tensors to values; numpy arrays (filters, say) become constants of their graph."""
    values = operands(*xs)
    graph = graph_of(*values)
    return [as_value(graph, v) for v in values]


def as_tensor(x, dtype=None) -> Tensor:
    """x itself if a Tensor, else a constant of the operands' graph (cast to dtype)."""
    if isinstance(x, Tensor):
        return x
    return wrap(operands(x if dtype is None else np.asarray(x, dtype))[0])


def static_shape(x, what) -> tuple:
    if any(d is None for d in x.shape):
        raise ShapeError(f"{what} needs a static shape, got {list(x.shape)} (feed a "
                         f"placeholder of known shape)")
    return tuple(x.shape)


def scoped(name, default):
    """The name scope of a composite op: the user's name, else the op's."""
    return get_default_graph().name_scope(name or default)


def check_same_shape(what, labels, logits, names=("labels", "logits")) -> None:
    """A ShapeError naming the user's op (not the mul inside it) where labels and
    logits cannot have one shape, as TensorFlow's losses require."""
    a, b = tuple(labels.shape), tuple(logits.shape)
    if len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b)):
        return
    hint = ""
    if len(a) == len(b) and a and a[0] != b[0] and a[1:] == b[1:]:
        hint = f" (a batch of {a[0]} {names[0]} for {b[0]} examples?)"
    raise ShapeError(f"{what} at {user_location()}: {names[0]} of shape "
                     f"{list(a)} and {names[1]} of shape {list(b)} must have the same "
                     f"shape{hint}")


def unary_function(op, doc=None, arg=None):
    """ff.<op>(x, name=None) (or ff.<op>(features, name=None): TensorFlow's argument
    name for the activations) over the elementwise op of that name; the docstring and
    the argument name are the op record's (OpDef.doc, OpDef.wrapper_arg) unless given."""
    opdef = get_op(op)
    doc = opdef.doc if doc is None else doc
    arg = (opdef.wrapper_arg or "x") if arg is None else arg
    if arg == "x":
        def fn(x, name=None):
            return wrap(_ew.unary(op, *operands(x), name=name))
    else:
        def fn(features, name=None):
            return wrap(_ew.unary(op, *operands(features), name=name))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return fn


class KeywordArgumentError(FragflowError, TypeError):
    """A keyword argument the function does not take (a TypeError, as Python's own)."""


def check_keywords(fn, public_name: str):
    """fn, checking that every keyword argument is one of its parameters before it
    runs: 'reduce_mean() got an unexpected keyword 'axsi'; did you mean 'axis'?'.
    Functions taking **kwargs are returned as they are."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return fn
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return fn
    names = tuple(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD,
                                                      p.KEYWORD_ONLY))
    known = frozenset(names)

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        for key in kwargs:
            if key not in known:
                raise _unexpected(public_name, key, names)
        return fn(*args, **kwargs)
    checked.__name__ = checked.__qualname__ = public_name
    return checked


def _unexpected(function: str, key: str, names) -> KeywordArgumentError:

    close = difflib.get_close_matches(key, names, n=2, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else \
        f"; it takes {', '.join(names)}"
    return KeywordArgumentError(f"{function}() got an unexpected keyword {key!r}{hint} "
                                f"({user_location()})")
