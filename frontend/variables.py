"""TensorFlow 1's variable collections and initializers over fragflow's Variables.

A fragflow Variable holds its initial value (a numpy array) from the start, and a
Session gives it that value the first time a run reads it: nothing needs initialising
before a first run. `ff.global_variables_initializer()` is still an op, as in TF1: one
tensor that, run, sets every variable of the graph (those made so far) back to its
initial value, so `sess.run(init)` works as in a tutorial and re-initialises a trained
model.

>>> import fragflow as ff, numpy as np
>>> g = ff.Graph()
>>> with g.as_default():
...     w = ff.Variable(ff.zeros([2]), name="w")
...     step = w.assign(w + 1.0)
...     init = ff.global_variables_initializer()
>>> sess = ff.Session(g, backend="numpy")
>>> _ = sess.run(step); _ = sess.run(init); sess.get(w).tolist()
[0.0, 0.0]
"""
from __future__ import annotations

import weakref

import numpy as np

from ..ir.errors import FragflowError
from ..ir.graph import get_default_graph
from ..ir.ops import state as _state
from . import initializers
from .optim import group, trainable_variables as of_loss
from .session import Session
from .tensor import Tensor, Variable, wrap

__all__ = ["global_variables_initializer", "variables_initializer",
           "initialize_all_variables", "global_variables", "trainable_variables",
           "local_variables_initializer"]

# {graph: names of the variable nodes made with trainable=False}
_NOT_TRAINABLE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def initial_value_of(initializer, graph) -> np.ndarray:
    """The value of an initializer tensor (ff.zeros, ff.random_normal(...), an
    expression of constants) or a callable returning one, computed by the numpy
    executor. Feeds and variables are not allowed: the value is fixed when the Variable
    is made."""
    if callable(initializer) and not isinstance(initializer, Tensor):
        with graph.as_default():
            initializer = initializer()
        if not isinstance(initializer, Tensor):
            return initializer
    if initializer.graph is not graph:
        raise FragflowError(f"Variable: the initializer {initializer!r} belongs to graph "
                            f"'{initializer.graph.name}', not '{graph.name}'")
    sources = _sources(initializer)
    if sources:
        raise FragflowError(
            f"Variable: the initial value {initializer!r} depends on "
            f"{', '.join(repr(n.name) + ' (' + n.op + ')' for n in sources[:3])}; an "
            f"initial value is computed when the Variable is made, from constants and "
            f"random ops only (use var.assign(...) to set it from other tensors)")
    return Session(graph, backend="numpy").run(initializer)


def _sources(tensor) -> list:
    """The placeholder and variable nodes a tensor depends on."""
    seen, stack, found = set(), [tensor.value.node], []
    while stack:
        node = stack.pop()
        if node in seen:
            continue
        seen.add(node)
        if node.op in ("placeholder", "variable"):
            found.append(node)
        stack.extend(v.node for v in node.inputs)
    return found


def mark_not_trainable(var: Variable) -> None:
    _NOT_TRAINABLE.setdefault(var.graph, set()).add(var.op.name)


def is_trainable(var: Variable) -> bool:
    return var.dtype == "float32" and \
        var.op.name not in _NOT_TRAINABLE.get(var.graph, ())


def global_variables(graph=None) -> list:
    """Every Variable of graph (default: the default graph), in creation order."""
    graph = graph if graph is not None else get_default_graph()
    return [Variable(n.outputs[0]) for n in graph.nodes if n.op == "variable"]


def trainable_variables(loss=None, graph=None) -> list:
    """The trainable (float32, not made with trainable=False) Variables: of the default
    graph (or graph), as tf.trainable_variables(); or, given a loss, those it depends
    on (the default var_list of minimize)."""
    if loss is not None:
        return of_loss(loss)
    return [v for v in global_variables(graph) if is_trainable(v)]


def variables_initializer(var_list, name="init") -> Tensor:
    """An op that sets each variable of var_list to its initial value when run."""
    var_list = list(var_list)
    if not var_list:
        # TF returns a no-op; a fetch needs a tensor, so a constant of the graph
        return wrap(_state.constant(get_default_graph(), np.int32(0), name=name))
    graph = var_list[0].graph
    with graph.as_default():
        assigns = [v.assign(_state.constant(graph, v.initial_value)) for v in var_list]
        return group(*assigns, name=name)


def global_variables_initializer() -> Tensor:
    """An op that sets every variable of the default graph (made so far) to its initial
    value when run, as tf.global_variables_initializer(). Running it first is optional
    in fragflow: a variable starts at its initial value."""
    return variables_initializer(global_variables(), name="init")


initialize_all_variables = global_variables_initializer


def local_variables_initializer() -> Tensor:
    """TF1's local variables do not exist in fragflow: an op that does nothing."""
    return variables_initializer([], name="init_local")


# -- TF1's initializer functions (tf.zeros_initializer(), ...), over ff.initializers with
# TF1's defaults (stddev 1.0, not Keras's 0.05): kernel_initializer= of the layers, or
# ff.Variable(init(shape))
def zeros_initializer(dtype="float32"):
    """tf.zeros_initializer()."""
    return _initializers().Zeros()


def ones_initializer(dtype="float32"):
    """tf.ones_initializer()."""
    return _initializers().Ones()


def constant_initializer(value=0, dtype="float32"):
    """tf.constant_initializer(value)."""
    return _initializers().Constant(value)


def random_normal_initializer(mean=0.0, stddev=1.0, seed=None, dtype="float32"):
    """tf.random_normal_initializer (TF1's default stddev 1.0)."""
    return _initializers().RandomNormal(mean, stddev, seed)


def truncated_normal_initializer(mean=0.0, stddev=1.0, seed=None, dtype="float32"):
    """tf.truncated_normal_initializer (TF1's default stddev 1.0)."""
    return _initializers().TruncatedNormal(mean, stddev, seed)


def random_uniform_initializer(minval=0.0, maxval=1.0, seed=None, dtype="float32"):
    """tf.random_uniform_initializer (TF1's defaults [0, 1))."""
    return _initializers().RandomUniform(minval, maxval, seed)


def glorot_uniform_initializer(seed=None, dtype="float32"):
    """tf.glorot_uniform_initializer()."""
    return _initializers().GlorotUniform(seed=seed)


def glorot_normal_initializer(seed=None, dtype="float32"):
    """tf.glorot_normal_initializer()."""
    return _initializers().GlorotNormal(seed=seed)


def _initializers():
    return initializers


__all__ += ["zeros_initializer", "ones_initializer", "constant_initializer",
            "random_normal_initializer", "truncated_normal_initializer",
            "random_uniform_initializer", "glorot_uniform_initializer",
            "glorot_normal_initializer"]
