"""Tensor: what users hold. A thin handle on an IR Value with numpy-style operators.

`==` and hash stay identity (as in TensorFlow 1) so tensors can key a feed_dict; use
ff.equal for elementwise equality."""
from __future__ import annotations

import numpy as np

from ..ir.errors import SymbolicTensorError
from ..ir.graph import Value, get_default_graph
from ..ir.ops import elementwise, matmul as _matmul, shape as _shape, state
from ..ir.ops.common import as_values
from .default_session import eager_value, session_for


class TensorShape(tuple):
    """A tensor's static shape: a tuple (None where the feed decides) with TensorFlow's
    TensorShape methods (as_list, ndims, is_fully_defined, num_elements)."""

    __slots__ = ()

    def as_list(self) -> list:
        return list(self)

    @property
    def ndims(self) -> int:
        return len(self)

    rank = ndims

    @property
    def dims(self) -> list:
        return list(self)

    def is_fully_defined(self) -> bool:
        return all(d is not None for d in self)

    def num_elements(self):
        return None if not self.is_fully_defined() else int(np.prod(self, dtype=np.int64))

    def __getitem__(self, key):
        out = tuple.__getitem__(self, key)
        return TensorShape(out) if isinstance(key, slice) else out


class Tensor:
    __slots__ = ("value",)
    __array_priority__ = 100          # numpy defers to our reflected operators

    def __init__(self, value: Value):
        self.value = value

    # -- what it is ---------------------------------------------------------------
    @property
    def shape(self) -> TensorShape:
        """The static shape: a tuple, None where the feed decides (as_list() too)."""
        return TensorShape(self.value.shape)

    def get_shape(self) -> TensorShape:
        """TF1's x.get_shape(): x.shape."""
        return TensorShape(self.value.shape)

    @property
    def dtype(self) -> str:
        return self.value.dtype

    @property
    def name(self) -> str:
        return self.value.name

    @property
    def op(self):
        """The IR node that computes this tensor (.op is its op name, .source its line)."""
        return self.value.node

    @property
    def graph(self):
        return self.value.graph

    @property
    def ndim(self) -> int:
        return len(self.value.shape)

    def __repr__(self):
        return f"<ff.Tensor '{self.name}' {self.value.type}>"

    def __bool__(self):
        raise SymbolicTensorError(f"{self!r} has no truth value until it runs; use "
                                  f"ff.where / ff.logical_* in the graph, or sess.run it")

    def __len__(self):
        if not self.shape or self.shape[0] is None:
            raise SymbolicTensorError(f"len() of {self!r}: the first dimension is not "
                                      f"known" if self.shape else f"len() of a scalar "
                                      f"{self!r}")
        return self.shape[0]

    def __iter__(self):
        raise SymbolicTensorError(f"{self!r} is not iterable; index it or use ff.unstack")

    # -- numpy: a Tensor has no value to give until a Session runs it -------------------
    def _symbolic(self, what: str) -> SymbolicTensorError:
        return SymbolicTensorError(
            f"{what} got {self!r}, a symbolic tensor: it has a value only when a Session "
            f"runs it (sess.run(t) gives a numpy array); inside a graph use the ff "
            f"function of the same name (ff.reduce_sum, ff.exp, ...)")

    def __array__(self, dtype=None, copy=None):
        raise self._symbolic("np.asarray/np.array")

    def __array_function__(self, func, types, args, kwargs):
        raise self._symbolic(f"np.{getattr(func, '__name__', func)}()")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        # array <op> tensor: numpy asks us first; give it the Tensor's operator
        if method == "__call__" and not kwargs and len(inputs) == 2:
            methods = _UFUNC_OPERATORS.get(ufunc.__name__)
            if methods is not None:
                a, b = inputs
                if isinstance(a, Tensor):
                    return getattr(a, methods[0])(b)
                return getattr(b, methods[1])(a)
        raise self._symbolic(f"np.{ufunc.__name__}" + ("" if method == "__call__"
                                                        else f".{method}") + "()")

    # -- operators ------------------------------------------------------------------
    def __add__(self, other): return wrap(elementwise.binary("add", self.value, _v(other)))
    def __radd__(self, other): return wrap(elementwise.binary("add", _v(other), self.value))
    def __sub__(self, other): return wrap(elementwise.binary("sub", self.value, _v(other)))
    def __rsub__(self, other): return wrap(elementwise.binary("sub", _v(other), self.value))
    def __mul__(self, other): return wrap(elementwise.binary("mul", self.value, _v(other)))
    def __rmul__(self, other): return wrap(elementwise.binary("mul", _v(other), self.value))
    def __truediv__(self, other): return wrap(elementwise.binary("div", self.value, _v(other)))
    def __rtruediv__(self, other): return wrap(elementwise.binary("div", _v(other), self.value))
    def __floordiv__(self, other):
        return wrap(elementwise.binary("floor_div", self.value, _v(other)))
    def __rfloordiv__(self, other):
        return wrap(elementwise.binary("floor_div", _v(other), self.value))
    def __mod__(self, other): return wrap(elementwise.binary("mod", self.value, _v(other)))
    def __rmod__(self, other): return wrap(elementwise.binary("mod", _v(other), self.value))
    def __pow__(self, other): return wrap(elementwise.binary("pow", self.value, _v(other)))
    def __rpow__(self, other): return wrap(elementwise.binary("pow", _v(other), self.value))
    def __matmul__(self, other): return wrap(matmul_promoting(self.value, _v(other)))
    def __rmatmul__(self, other): return wrap(matmul_promoting(_v(other), self.value))
    def __neg__(self): return wrap(elementwise.unary("neg", self.value))
    def __pos__(self): return self
    def __abs__(self): return wrap(elementwise.unary("abs", self.value))
    def __invert__(self): return wrap(elementwise.unary("logical_not", self.value))
    def __and__(self, other):
        return wrap(elementwise.binary("logical_and", self.value, _v(other)))
    def __or__(self, other): return wrap(elementwise.binary("logical_or", self.value, _v(other)))
    def __lt__(self, other): return wrap(elementwise.binary("less", self.value, _v(other)))
    def __le__(self, other): return wrap(elementwise.binary("less_equal", self.value, _v(other)))
    def __gt__(self, other): return wrap(elementwise.binary("greater", self.value, _v(other)))
    def __ge__(self, other):
        return wrap(elementwise.binary("greater_equal", self.value, _v(other)))

    __hash__ = object.__hash__      # identity: tensors key feed_dicts

    def __getitem__(self, key):
        return wrap(_shape.strided_slice(self.value, key))

    # -- conveniences -------------------------------------------------------------
    def reshape(self, *shape):
        shape = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        return wrap(_shape.reshape(self.value, shape))

    @property
    def T(self):
        return wrap(_shape.transpose(self.value))

    # -- TensorFlow 1's conveniences (see frontend/default_session.py) -----------------
    def eval(self, feed_dict=None, session=None):
        """This tensor's value (a numpy array), run in session or the default session
        (`with ff.Session() as sess:`, `sess.as_default()`), as TF1's Tensor.eval."""
        return session_for(self, session).run(self, feed_dict)

    def numpy(self):
        """This tensor's value, as an eager TensorFlow tensor's .numpy(): evaluated in
        the default session when one runs this graph (as .eval()), else by the numpy
        executor with the variables' initial values. Placeholders must be fed: use
        .eval(feed_dict=...) for those."""
        return eager_value(self)

    def run(self, feed_dict=None, session=None) -> None:
        """Run this tensor (an op: a training step, an assign, an initializer) in session
        or the default session, as TF1's Operation.run; returns None."""
        self.eval(feed_dict, session)


class Variable(Tensor):
    """State the Session keeps on the GPU across runs.

    >>> import fragflow as ff, numpy as np
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     w = ff.Variable(np.ones(3, np.float32), name="w")
    ...     step = w.assign(w * 2.0)
    >>> sess = ff.Session(g, backend="numpy")
    >>> sess.run(step)
    array([2., 2., 2.], dtype=float32)
    """
    __slots__ = ()

    def __init__(self, initial_value, dtype=None, name=None, graph=None, trainable=True):
        if isinstance(initial_value, Value):
            super().__init__(initial_value)        # wrapping an existing variable node
            return
        graph = graph or get_default_graph()
        if isinstance(initial_value, Tensor) or callable(initial_value):
            # TF1's Variable(ff.random_normal(...)) / Variable(ff.zeros(...)): the
            # initializer is computed once, here, by the numpy executor (random ops
            # draw the same values on every backend), and the Variable holds that value
            from .variables import initial_value_of  # variables.py imports this module
            initial_value = initial_value_of(initial_value, graph)
        super().__init__(state.variable(graph, initial_value, dtype, name))
        if not trainable:
            from .variables import mark_not_trainable  # variables.py imports this module
            mark_not_trainable(self)

    def assign(self, value, name=None) -> Tensor:
        """An op that sets the variable when a run ends; it evaluates to the new value."""
        return wrap(state.assign(self.value, _v(value, self.graph), name))

    def assign_add(self, delta, name=None) -> Tensor:
        return self.assign(self + delta, name)

    def assign_sub(self, delta, name=None) -> Tensor:
        return self.assign(self - delta, name)

    @property
    def initial_value(self) -> np.ndarray:
        return self.value.node.attrs["initial_value"]

    def __repr__(self):
        return f"<ff.Variable '{self.name}' {self.value.type}>"


# numpy ufuncs behind Python's binary operators -> the Tensor's method and its
# reflection, so that `array + tensor` and `array < tensor` build the graph op.
_UFUNC_OPERATORS = {
    name: (f"__{op}__", f"__r{op}__") for name, op in [
        ("add", "add"), ("subtract", "sub"), ("multiply", "mul"), ("true_divide", "truediv"),
        ("divide", "truediv"), ("floor_divide", "floordiv"), ("remainder", "mod"),
        ("power", "pow"), ("matmul", "matmul")]}
_UFUNC_OPERATORS.update({"less": ("__lt__", "__gt__"), "greater": ("__gt__", "__lt__"),
                         "less_equal": ("__le__", "__ge__"),
                         "greater_equal": ("__ge__", "__le__")})


def matmul_promoting(a, b):
    """a @ b with numpy's rule for vectors: a 1-D left operand is a row, a 1-D right
    operand a column, and the added axis is removed from the result."""
    a, b = as_values(a, b)
    row, column = a.type.rank == 1, b.type.rank == 1
    if row:
        a = _shape.expand_dims(a, 0)
    if column:
        b = _shape.expand_dims(b, -1)
    y = _matmul.matmul(a, b)
    if column:
        y = _shape.squeeze(y, -1)
    if row:
        y = _shape.squeeze(y, -2 if not column else -1)
    return y


def _v(x, graph=None):
    """A Tensor's value; other operands (scalars, arrays) pass through to the ir
    builders, which make constants of them."""
    if isinstance(x, Tensor):
        return x.value
    if isinstance(x, (list, tuple)) and any(isinstance(e, Tensor) for e in x):
        raise SymbolicTensorError("a list holding tensors is not a tensor: use ff.stack")
    if graph is not None and not isinstance(x, Value):
        return state.constant(graph, x)
    return x


def wrap(value):
    """The Tensor for an ir Value (a Variable for a variable's), or a tuple of them: how
    every op function hands its result back to the user."""
    if isinstance(value, tuple):
        return tuple(wrap(v) for v in value)
    if value.node.op == "variable":
        return Variable(value)
    return Tensor(value)


def as_tensor_value(x, dtype=None) -> Value:
    """A Value in the default graph for any tensor-like (Tensor, array, scalar)."""
    if isinstance(x, Tensor):
        return x.value
    if isinstance(x, Value):
        return x
    return state.constant(get_default_graph(), x, dtype)
