"""User-facing math functions beyond the spine's: inverse trigonometry, hyperbolics,
erf, expm1/log1p, the activations (softplus, elu, selu, relu6, leaky_relu, prelu,
step), clip_by_value, the float predicates, and the sequences range and linspace.

Names and arguments follow TensorFlow (tf.math, tf.nn), and TensorFlow.js for step and
prelu. All are elementwise kernels with numpy broadcasting; see ir/ops/elementwise.py
for the semantics chosen where TensorFlow leaves them open.

>>> import numpy as np, fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     y = ff.log1p(ff.constant(np.float32([1e-7, 1.0])))
>>> v = ff.Session(g).run(y)
>>> bool(abs(v[0] - 1e-7) < 1e-13)           # log(1 + x) would give 1.19e-07
True
"""
from __future__ import annotations

from ..ir.graph import get_default_graph
from ..ir.ops import elementwise as _ew
from .ops import _operands
from .tensor import _wrap

__all__: list = []


def _export(fn):
    __all__.append(fn.__name__)
    return fn


def _unary(op, arg, doc):
    """ff.<op>(x, name=None) or ff.<op>(features, name=None), as TensorFlow names it."""
    if arg == "x":
        def fn(x, name=None):
            return _wrap(_ew.unary(op, *_operands(x), name=name))
    else:
        def fn(features, name=None):
            return _wrap(_ew.unary(op, *_operands(features), name=name))
    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = doc
    return fn


_UNARY = {
    # name: (TensorFlow's argument name, doc)
    "acos": ("x", "Inverse cosine, in [0, pi]; NaN outside [-1, 1]."),
    "asin": ("x", "Inverse sine, in [-pi/2, pi/2]; NaN outside [-1, 1]."),
    "atan": ("x", "Inverse tangent, in (-pi/2, pi/2)."),
    "acosh": ("x", "Inverse hyperbolic cosine; NaN below 1."),
    "asinh": ("x", "Inverse hyperbolic sine."),
    "atanh": ("x", "Inverse hyperbolic tangent; +-inf at +-1, NaN beyond."),
    "sinh": ("x", "Hyperbolic sine."),
    "cosh": ("x", "Hyperbolic cosine."),
    "tan": ("x", "Tangent (accurate for |x| < 8192; beyond, sin / cos)."),
    "erf": ("x", "The error function, 2/sqrt(pi) * integral of exp(-t**2) from 0 to x."),
    "expm1": ("x", "exp(x) - 1, accurate next to 0."),
    "log1p": ("x", "log(1 + x), accurate next to 0."),
    "softplus": ("features", "log(1 + exp(features)), without overflow."),
    "elu": ("features", "features if > 0, else exp(features) - 1."),
    "selu": ("features", "scale * (features if > 0 else alpha * (exp(features) - 1)), "
                         "with scale = 1.0507... and alpha = 1.6732... "
                         "(Klambauer et al. 2017)."),
    "relu6": ("features", "min(max(features, 0), 6); NaN stays NaN. float32 or int32."),
    "is_nan": ("x", "True where x is NaN (bool; no gradient)."),
    "is_inf": ("x", "True where x is +inf or -inf (bool; no gradient)."),
    "is_finite": ("x", "True where x is neither NaN nor infinite (bool; no gradient)."),
}

for _op, (_arg, _doc) in _UNARY.items():
    globals()[_op] = _export(_unary(_op, _arg, _doc))


@_export
def atan2(y, x, name=None):
    """The angle of the point (x, y): atan(y / x) in the right quadrant, in [-pi, pi].
    C's special cases for zeros (signed) and infinities. Note the order: y first.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     a = ff.atan2(1.0, -1.0)
    >>> round(float(ff.Session(g, backend="numpy").run(a)), 6)
    2.356194
    """
    a, b = _operands(y, x)
    return _wrap(_ew.binary("atan2", a, b, name=name))


@_export
def squared_difference(x, y, name=None):
    """(x - y) ** 2, broadcasting; float32 or int32."""
    a, b = _operands(x, y)
    return _wrap(_ew.binary("squared_difference", a, b, name=name))


@_export
def leaky_relu(features, alpha=0.2, name=None):
    """features if > 0, else alpha * features (tf.nn.leaky_relu; alpha defaults to 0.2).

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.leaky_relu(ff.constant([-1.0, 2.0]), alpha=0.1)
    >>> ff.Session(g, backend="numpy").run(y).tolist()
    [-0.10000000149011612, 2.0]
    """
    x = _operands(features)[0]
    if x.dtype != "float32":            # TensorFlow casts integer features to float
        x = _ew.cast(x, "float32")
    return _wrap(_ew.unary("leaky_relu", x, name=name, attrs={"alpha": alpha}))


@_export
def prelu(x, alpha, name=None):
    """x if x > 0, else alpha * x, with alpha a tensor broadcast against x (learned, as
    in Keras' PReLU; TensorFlow.js's tf.prelu). Gradients flow to both."""
    a, b = _operands(x, alpha)
    return _wrap(_ew.binary("prelu", a, b, name=name))


@_export
def step(x, alpha=0.0, name=None):
    """1 where x > 0, alpha elsewhere; NaN stays NaN (TensorFlow.js's tf.step). Its
    gradient is zero."""
    return _wrap(_ew.unary("step", *_operands(x), name=name, attrs={"alpha": alpha}))


@_export
def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """t clipped to [clip_value_min, clip_value_max]; the bounds are tensors or scalars
    that broadcast to t's shape. Computed as TensorFlow does, maximum(minimum(t, max),
    min): NaN propagates, and min > max gives min. The gradient passes where
    min <= t <= max and goes to the bound elsewhere.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.clip_by_value(ff.constant([-3.0, 0.5, 9.0]), -1.0, 1.0)
    >>> ff.Session(g, backend="numpy").run(y).tolist()
    [-1.0, 0.5, 1.0]
    """
    x, lo, hi = _operands(t, clip_value_min, clip_value_max)
    return _wrap(_ew.clip_by_value(x, lo, hi, name=name))


@_export
def range(start, limit=None, delta=1, dtype=None, name=None):  # noqa: A001 (tf.range)
    """start, start + delta, ... up to but not including limit: ceil((limit - start) /
    delta) elements, as tf.range. With one argument, range(n) is 0 .. n-1. The dtype
    is float32 if any argument is a float, else int32. The arguments are Python
    numbers (the kernel computes start + i * delta; nothing is uploaded).

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     r = ff.range(3, 10, 3)
    >>> ff.Session(g, backend="numpy").run(r).tolist()
    [3, 6, 9]
    """
    if limit is None:
        start, limit = 0, start
    return _wrap(_ew.range_(get_default_graph(), start, limit, delta, dtype, name=name))


@_export
def linspace(start, stop, num, name=None):
    """num evenly spaced float32 values from start to stop, both included (num = 1
    gives start), as tf.linspace. start, stop and num are Python numbers.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     v = ff.linspace(0.0, 1.0, 5)
    >>> ff.Session(g, backend="numpy").run(v).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    """
    return _wrap(_ew.linspace(get_default_graph(), start, stop, num, name=name))
