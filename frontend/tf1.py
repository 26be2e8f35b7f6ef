"""TensorFlow 1's graph idioms over fragflow's graphs: variable scopes and
get_variable, control dependencies and groups, assigns, tf.print / tf.Print,
tf.shape, ConfigProto and the compat names (docs/TENSORFLOW.md).

>>> import fragflow as tf
>>> g = tf.Graph()
>>> with g.as_default():
...     with tf.variable_scope("layer"):
...         w = tf.get_variable("w", [2, 3], initializer=tf.zeros_initializer())
...     with tf.variable_scope("layer", reuse=True):
...         same = tf.get_variable("w")
>>> w.name, same is w
('layer/w', True)
"""
from __future__ import annotations

import contextlib
import re
import sys
import threading

import numpy as np

from ..ir.errors import FragflowError, ShapeError
from ..ir.graph import get_default_graph
from . import initializers as _init, ops as _ops, side_effects as _effects
from .optim import with_dependencies
from .tensor import Tensor, TensorShape, Variable, wrap  # noqa: F401 (TensorShape: tf's)
from .variables import global_variables, initial_value_of, trainable_variables

__all__ = ["variable_scope", "get_variable", "get_variable_scope", "VariableScope",
           "AUTO_REUSE", "control_dependencies", "group", "no_op",
           "assign", "assign_add", "assign_sub", "Print", "print", "shape", "ConfigProto",
           "GPUOptions", "TensorShape", "set_random_seed", "disable_eager_execution",
           "disable_v2_behavior", "enable_eager_execution", "executing_eagerly",
           "VariableScopeError", "compat", "size", "rank", "count_nonzero",
           "GraphKeys", "get_collection", "get_collection_ref", "add_to_collection",
           "add_to_collections", "bool", "float32", "int32"]


class VariableScopeError(FragflowError, ValueError):
    """get_variable: a variable that should exist does not, or one that should not
    does (TensorFlow raises ValueError for both)."""


class _AutoReuse:
    def __repr__(self):
        return "tf.AUTO_REUSE"


AUTO_REUSE = _AutoReuse()


class VariableScope:
    """The scope get_variable names variables in: .name, .reuse, .initializer."""

    def __init__(self, name, reuse=None, initializer=None, regularizer=None):
        self.name, self.reuse, self.initializer = name, reuse, initializer
        self.regularizer = regularizer

    @property
    def original_name_scope(self) -> str:
        return self.name + "/" if self.name else ""

    def reuse_variables(self) -> None:
        """From now on get_variable in this scope returns existing variables."""
        self.reuse = True

    def __repr__(self):
        return f"<VariableScope '{self.name}' reuse={self.reuse}>"


class _Scopes(threading.local):
    def __init__(self):
        self.stacks: dict = {}           # {id(graph): [VariableScope, ...]}


_SCOPES = _Scopes()
_ROOT = VariableScope("")


def _stack(graph) -> list:
    return _SCOPES.stacks.setdefault(id(graph), [])


def get_variable_scope() -> VariableScope:
    """The innermost variable_scope of the default graph (the root scope outside any)."""
    stack = _stack(get_default_graph())
    return stack[-1] if stack else _ROOT


@contextlib.contextmanager
def variable_scope(name_or_scope=None, default_name=None, values=None, initializer=None,
                   regularizer=None, reuse=None, dtype=None, auxiliary_name_scope=True,
                   **ignored):
    """Names get_variable's variables '<scope>/<name>' and the ops made inside, as
    tf.variable_scope. reuse=True: get_variable returns existing variables (and fails
    for new ones); tf.AUTO_REUSE: existing ones, else new ones. Reuse is inherited by
    inner scopes; initializer (and regularizer) are get_variable's defaults inside."""
    graph = get_default_graph()
    stack = _stack(graph)
    parent = stack[-1] if stack else _ROOT
    if isinstance(name_or_scope, VariableScope):
        full = name_or_scope.name               # re-entering a scope object: absolute
        reuse = name_or_scope.reuse if reuse is None else reuse
        initializer = initializer or name_or_scope.initializer
    else:
        base = name_or_scope
        if base is None:
            if default_name is None:
                raise FragflowError("variable_scope needs a name or a default_name")
            base = _unique_scope(graph, parent, default_name)
        full = f"{parent.name}/{base}" if parent.name else str(base)
    if reuse is False or reuse is None:
        reuse = parent.reuse if parent.reuse in (True, AUTO_REUSE) else reuse
    scope = VariableScope(full, reuse, initializer or parent.initializer,
                          regularizer or parent.regularizer)
    stack.append(scope)
    try:
        with graph.name_scope(full + "/"):
            yield scope
    finally:
        stack.pop()


def _unique_scope(graph, parent, base) -> str:
    """default_name's scope: base, or base_1, ... if variables or ops use it already."""
    prefix = f"{parent.name}/" if parent.name else ""
    names = list(_effects.graph_table(graph, "get_variable")) + [n.name for n in graph.nodes]
    taken = {name[len(prefix):].split("/")[0] for name in names if name.startswith(prefix)}
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    return name


def get_variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
                 trainable=True, collections=None, caching_device=None, partitioner=None,
                 validate_shape=True, use_resource=None, custom_getter=None,
                 constraint=None, **ignored) -> Variable:
    """The variable '<variable scope>/name': made (from initializer: an ff.initializers
    / tf.*_initializer(), an array, a constant tensor; default glorot_uniform, as TF1),
    or, in a scope with reuse=True / tf.AUTO_REUSE, the one made before."""
    graph = get_default_graph()
    scope = get_variable_scope()
    full = f"{scope.name}/{name}" if scope.name else name
    made = _effects.graph_table(graph, 'get_variable')     # {full name: Variable}
    existing = made.get(full)
    if existing is not None:
        if scope.reuse is True or scope.reuse is AUTO_REUSE:
            if shape is not None and tuple(existing.shape) != tuple(shape):
                raise VariableScopeError(
                    f"get_variable: trying to share variable {full}, but the requested "
                    f"shape {list(shape)} is not the existing shape {list(existing.shape)}")
            return existing
        raise VariableScopeError(
            f"get_variable: variable {full} already exists, disallowed. Did you mean to "
            f"set reuse=True or reuse=tf.AUTO_REUSE in variable_scope?")
    if scope.reuse is True:
        raise VariableScopeError(
            f"get_variable: variable {full} does not exist, or was not created with "
            f"get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in variable_scope?")
    initializer = initializer if initializer is not None else scope.initializer
    value = _initial_value(full, initializer, shape, dtype, graph)
    with graph.as_default(), graph.name_scope(scope.original_name_scope or "/"):
        var = Variable(value, name=name, trainable=trainable)
    made[full] = var
    regularizer = regularizer if regularizer is not None else scope.regularizer
    if regularizer is not None:
        with graph.as_default(), graph.name_scope(full + "/Regularizer/"):
            penalty = regularizer(var)
        if penalty is not None:
            _effects.graph_table(graph, "regularization_losses", list).append(penalty)
    return var



def _initial_value(full, initializer, shape, dtype, graph):
    dtype = "float32" if dtype is None else (dtype if isinstance(dtype, str)
                                              else np.dtype(dtype).name)
    if isinstance(initializer, Tensor) or (isinstance(initializer, (np.ndarray, list,
                                                                    float, int))):
        if isinstance(initializer, Tensor):
            initializer = initial_value_of(initializer, graph)
        value = np.asarray(initializer)
        if shape is not None and validate_shape_mismatch(value.shape, shape):
            raise ShapeError(f"get_variable {full}: the initial value has shape "
                             f"{list(value.shape)}, not the shape {list(shape)} asked for")
        return value.astype(dtype) if dtype != "float32" or value.dtype.kind == "f" \
            else value.astype(np.float32)
    if shape is None:
        raise ShapeError(f"get_variable {full}: a new variable needs a shape (or an "
                         f"initial value as initializer=)")
    shape = tuple(int(d) for d in shape)
    if initializer is None:
        initializer = _init.GlorotUniform() if dtype == "float32" else _init.Zeros()
    try:
        value = _init.get(initializer)(shape, dtype=dtype)
    except TypeError:
        value = _init.get(initializer)(shape)
    return np.asarray(value, dtype=dtype)


def validate_shape_mismatch(got, shape) -> bool:
    return tuple(got) != tuple(int(d) for d in shape)


# -- control dependencies and groups ------------------------------------------------------
control_dependencies = _effects.control_dependencies


def no_op(name=None) -> Tensor:
    """An op that computes nothing (tf.no_op); made inside control_dependencies, running
    it runs the dependencies."""
    graph = get_default_graph()
    deps = _effects.open_dependencies(graph)
    op = wrap(_ops.constant(np.int32(0), name=name or "NoOp").value)
    if deps:       # its block records it too; the group makes the edge plain data
        return with_dependencies([wrap(d) for d in deps], op, name=name or "NoOp")
    return op


def group(*inputs, name=None) -> Tensor:
    """One op that runs every input (tensors, ops, lists of them), as tf.group; running
    it gives the first one's value (TensorFlow's gives None)."""
    values = _effects.as_values(inputs, "group")
    if not values:
        return no_op(name=name)
    if len(values) == 1:           # a node of its own: what a print or summary keys on
        return _ops.identity(wrap(values[0]), name=name or "group_deps")
    return with_dependencies([wrap(v) for v in values[1:]], wrap(values[0]),
                             name=name or "group_deps")


def assign(ref, value, validate_shape=None, use_locking=None, name=None) -> Tensor:
    """tf.assign(ref, value): ref.assign(value), applied when the run ends."""
    return _variable(ref, "assign").assign(value, name=name)


def assign_add(ref, value, use_locking=None, name=None) -> Tensor:
    """tf.assign_add(ref, value): ref.assign(ref + value)."""
    return _variable(ref, "assign_add").assign_add(value, name=name)


def assign_sub(ref, value, use_locking=None, name=None) -> Tensor:
    """tf.assign_sub(ref, value): ref.assign(ref - value)."""
    return _variable(ref, "assign_sub").assign_sub(value, name=name)


def _variable(ref, what) -> Variable:
    if not isinstance(ref, Variable):
        raise FragflowError(f"{what} needs a Variable as ref, got {ref!r}")
    return ref


# -- printing ------------------------------------------------------------------------------
def print(*inputs, output_stream=sys.stderr, summarize=3, sep=" ", end="\n",  # noqa: A001
          name=None) -> Tensor:
    """An op that prints inputs (tensors and strings) each time a run computes it:
    sess.run it, or make it a control dependency, as TF1's tf.print."""
    graph = get_default_graph()
    tensors = [x for x in inputs if isinstance(x, Tensor)]
    items, needs = [], []
    for x in inputs:
        if isinstance(x, Tensor):
            items.append(len(needs))
            needs.append(graph.capture(x.value))      # in a loop's body: seen inside
        else:
            items.append(str(x))
    with graph.as_default():
        op = group(*[wrap(n) for n in needs], name=name or "PrintV2") if tensors else \
            no_op(name or "PrintV2")
    _effects.register_effect(op.value, _effects.Effect(
        needs, _effects.printer(items, needs, output_stream, sep, end, summarize)))
    return op


def Print(input_, data, message=None, first_n=None, summarize=None, name=None):  # noqa: N802
    """input_ itself, printing message and data (to stderr) when a run computes it, as
    TF1's tf.Print (first_n: only the first n times)."""
    data = list(data) if isinstance(data, (list, tuple)) else [data]
    tensors = [d for d in data if isinstance(d, Tensor)]
    out = with_dependencies(tensors, input_, name=name or "Print") if tensors else \
        _ops.identity(input_, name=name or "Print")
    needs = [out.value.graph.capture(d.value) for d in tensors]
    count = [0]

    def finish(arrays):
        count[0] += 1
        if first_n is None or first_n < 0 or count[0] <= first_n:
            parts = [_effects.format_value(a, summarize or 3) for a in arrays]
            parts = [p if np.ndim(a) else f"[{p}]" for p, a in zip(parts, arrays)]   # TF's
            sys.stderr.write((message or "") + "".join(parts) + "\n")
        return None
    _effects.register_effect(out.value, _effects.Effect(needs, finish))
    return out


# -- shapes --------------------------------------------------------------------------------
def shape(input, out_type="int32", name=None):  # noqa: A002 (TF's name)
    """The shape of input as an int32 vector tensor, as tf.shape: the dimensions known
    when the graph is built are constants, those a feed decides (None) are counted when
    the graph runs (a reduction each)."""
    x = input if isinstance(input, Tensor) else _ops.constant(input)
    dims = []
    with _ops.name_scope(name or "Shape"):
        for axis, d in enumerate(x.shape):
            if d is not None:
                dims.append(_ops.constant(np.int32(d)))
                continue
            index = tuple(slice(None) if i == axis else 0 for i in range(len(x.shape)))
            line = x[index] if len(x.shape) > 1 else x
            dims.append(_ops.reduce_sum(_ops.ones_like(_ops.cast(line, "int32"))))
        if not dims:
            return _ops.constant(np.zeros(0, np.int32))
        return _ops.stack(dims)


def size(input, out_type="int32", name=None):  # noqa: A002 (TF's name)
    """The number of elements of input, an int32 scalar tensor (tf.size): a constant
    when the shape is known, else counted when the graph runs."""
    x = input if isinstance(input, Tensor) else _ops.constant(input)
    if all(d is not None for d in x.shape):
        return _ops.constant(np.int32(np.prod(x.shape, dtype=np.int64)), name=name or "Size")
    return _ops.reduce_prod(shape(x), name=name or "Size")


def rank(input, name=None):  # noqa: A002 (TF's name)
    """The number of dimensions of input, an int32 scalar tensor (always known)."""
    x = input if isinstance(input, Tensor) else _ops.constant(input)
    return _ops.constant(np.int32(x.ndim), name=name or "Rank")


def count_nonzero(input_tensor=None, axis=None, keepdims=None, dtype="int32", name=None,
                  reduction_indices=None, keep_dims=None, input=None):  # noqa: A002
    """How many elements are not zero (over axis), as int32 (tf.count_nonzero)."""
    x = input_tensor if input_tensor is not None else input
    x = x if isinstance(x, Tensor) else _ops.constant(x)
    axis = axis if axis is not None else reduction_indices
    keep = (keepdims if keepdims is not None else keep_dims) in (True, 1)
    nonzero = _ops.cast(_ops.not_equal(x, _ops.zeros_like(x)), "int32")
    return _ops.reduce_sum(nonzero, axis=axis, keepdims=keep, name=name)


def get_regularization_loss(scope=None, name="total_regularization_loss"):
    """The sum of every get_variable(regularizer=...) penalty of the default graph
    (0.0 without any), as tf.losses.get_regularization_loss."""
    found = get_regularization_losses(scope)
    if not found:
        return _ops.constant(np.float32(0.0), name=name)
    return _ops.add_n(found, name=name) if len(found) > 1 else found[0]


def get_regularization_losses(scope=None) -> list:
    found = _effects.graph_table(get_default_graph(), "regularization_losses", list)
    return [t for t in found if scope is None or t.name.startswith(scope)]


# -- collections ----------------------------------------------------------------------------
class GraphKeys:
    """TF1's collection names. GLOBAL_VARIABLES, TRAINABLE_VARIABLES,
    REGULARIZATION_LOSSES and SUMMARIES are read from the graph; UPDATE_OPS holds the
    moving-average assigns of tf.layers.batch_normalization(training=...); any other
    key holds what add_to_collection put there."""
    GLOBAL_VARIABLES = VARIABLES = "variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    LOCAL_VARIABLES = "local_variables"
    MODEL_VARIABLES = "model_variables"
    UPDATE_OPS = "update_ops"
    REGULARIZATION_LOSSES = "regularization_losses"
    LOSSES = "losses"
    SUMMARIES = "summaries"
    TRAIN_OP = "train_op"


def _collection(graph, key) -> list:
    if key == GraphKeys.GLOBAL_VARIABLES:
        return global_variables(graph)
    if key == GraphKeys.TRAINABLE_VARIABLES:
        return trainable_variables(graph=graph)
    added = list(_effects.graph_table(graph, "collections").get(key, []))
    if key == GraphKeys.REGULARIZATION_LOSSES:
        return list(_effects.graph_table(graph, "regularization_losses", list)) + added
    if key == GraphKeys.SUMMARIES:
        return list(_effects.graph_table(graph, "summaries", list)) + added
    return added


def get_collection(key, scope=None) -> list:
    """The items of collection key in the default graph (a new list); scope keeps those
    whose name starts with it (a regular expression, as TF1)."""
    items = _collection(get_default_graph(), key)
    if scope is None:
        return items
    pattern = re.compile(scope)
    return [x for x in items if pattern.match(getattr(x, "name", "") or "")]


def get_collection_ref(key) -> list:
    """The list that add_to_collection appends to (not the graph-derived collections)."""
    return _effects.graph_table(get_default_graph(), "collections").setdefault(key, [])


def add_to_collection(name, value) -> None:
    get_collection_ref(name).append(value)


def add_to_collections(names, value) -> None:
    for name in ([names] if isinstance(names, str) else names):
        add_to_collection(name, value)


# -- sessions and compat -------------------------------------------------------------------
class GPUOptions:
    """Accepted and ignored: fragflow's memory is the GL driver's (allow_growth,
    per_process_gpu_memory_fraction, ...)."""

    def __init__(self, **options):
        self.allow_growth = False
        self.__dict__.update(options)


class ConfigProto:
    """Accepted and ignored by ff.Session(config=...): placement, threads and GPU
    options are the GL driver's business (ff.Session(backend=, device=) choose)."""

    def __init__(self, **options):
        self.gpu_options = options.pop("gpu_options", None) or GPUOptions()
        self.allow_soft_placement = self.log_device_placement = False
        self.__dict__.update(options)


def set_random_seed(seed) -> None:
    """tf.set_random_seed: the seed of ff.initializers' draws (random ops take seed=;
    None is 0, so runs are reproducible anyway)."""
    _init.set_seed(seed)


class _Compat:
    """tf.compat.v1 (and v2): fragflow itself, for `import tensorflow.compat.v1 as tf`
    scripts that then call tf.compat.v1.disable_eager_execution()."""

    @property
    def v1(self):
        import fragflow  # fragflow imports this module
        return fragflow

    v2 = v1


compat = _Compat()


def disable_eager_execution() -> None:
    """Nothing to do: fragflow always builds a graph (tensor.numpy() still gives values)."""


disable_v2_behavior = disable_eager_execution


def enable_eager_execution(*args, **kwargs) -> None:
    """Nothing to do: fragflow builds a graph; tensor.numpy() evaluates one."""


def executing_eagerly() -> bool:
    return False


float32, int32 = "float32", "int32"
globals()["bool"] = "bool"          # tf.bool (a module attribute, not the builtin here)
