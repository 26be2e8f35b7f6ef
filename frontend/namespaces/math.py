"""ff.math: tf.math's names over fragflow's elementwise functions and reductions.

>>> import fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     y = ff.math.log1p(ff.constant([0.0]))
>>> ff.Session(g, backend="numpy").run(y).tolist()
[0.0]
"""
from __future__ import annotations

from .. import ops as _ops
from ._missing import install as _install

_NAMES = [
    "abs", "add", "add_n", "argmax", "argmin", "ceil", "cos", "divide", "equal",
    "exp", "floor", "floordiv", "floormod", "greater", "greater_equal", "less",
    "less_equal", "log", "logical_and", "logical_not", "logical_or", "maximum",
    "minimum", "multiply", "negative", "not_equal", "pow", "reciprocal",
    "reduce_max", "reduce_mean", "reduce_min", "reduce_prod", "reduce_sum", "round",
    "rsqrt", "sigmoid", "sign", "sin", "sqrt", "square", "subtract", "tanh",
    "truediv",
    "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "cosh", "erf",
    "expm1", "is_finite", "is_inf", "is_nan", "log1p", "sinh", "softplus",
    "squared_difference", "tan",
    "divide_no_nan", "div_no_nan", "logical_xor", "reduce_all", "reduce_any", "log_sigmoid",
    "reduce_std", "reduce_variance", "l2_normalize", "cumprod", "in_top_k", "bincount",
    "cumsum", "reduce_logsumexp", "softmax", "log_softmax",
    "top_k", "unsorted_segment_sum",
]
for _name in _NAMES:
    globals()[_name] = getattr(_ops, _name)
mod = _ops.floormod

__all__ = sorted(_NAMES + ["mod"])
_install(globals(), "fragflow.math")
