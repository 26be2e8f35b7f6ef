"""User-facing functions of the random op family (TensorFlow's names and arguments).

Values are counter-based (Philox-4x32-10, see fragflow/ir/ops/random.py): each run of
a session draws fresh values, and run k of any session (in any process, on GL or the
numpy backend) draws the same ones for a given seed; ops with one seed but different
names draw different streams. seed=None means
seed 0 (reproducible, unlike TensorFlow's). Shapes, bounds and rates are Python values,
not tensors."""
from __future__ import annotations

from ..ir.errors import DTypeError
from ..ir.graph import get_default_graph
from ..ir.ops import random as _random
from ..ir.types import as_dtype
from .operands import operands
from .tensor import wrap

__all__ = ["random_uniform", "random_normal", "truncated_normal", "multinomial",
           "categorical", "dropout"]


def random_uniform(shape, minval=0, maxval=None, dtype="float32", seed=None, name=None):
    """Uniform values in [minval, maxval) (maxval defaults to 1 for float32 and must be
    given for int32). float32: minval + u * (maxval - minval) with u in [0, 1) from 24
    random bits; int32: minval + bits % (maxval - minval), as TensorFlow.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     u = ff.random_uniform((2, 3), seed=7)
    >>> v = ff.Session(g, backend="numpy").run(u)
    >>> bool(((v >= 0) & (v < 1)).all())
    True
    """
    return wrap(_random.random_uniform(get_default_graph(), shape, minval, maxval, dtype,
                                        seed, name=name))


def random_normal(shape, mean=0.0, stddev=1.0, dtype="float32", seed=None, name=None):
    """Normal values (Box-Muller on Philox bits), float32 only.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     z = ff.random_normal((1000,), mean=2.0, stddev=0.5, seed=1)
    >>> round(float(ff.Session(g, backend="numpy").run(z).mean()), 1)
    2.0
    """
    _float_only(dtype)
    return wrap(_random.random_normal(get_default_graph(), "random_normal", shape, mean,
                                       stddev, seed, name=name))


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype="float32", seed=None, name=None):
    """Normal values re-drawn until within two standard deviations of the mean.

    >>> import fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     z = ff.truncated_normal((1000,), seed=1)
    >>> float(abs(ff.Session(g, backend="numpy").run(z)).max()) < 2
    True
    """
    _float_only(dtype)
    return wrap(_random.random_normal(get_default_graph(), "truncated_normal", shape, mean,
                                       stddev, seed, name=name))


def multinomial(logits, num_samples, seed=None, name=None, output_dtype="int32"):
    """num_samples class indices per row of logits [batch, classes], drawn with
    probabilities softmax(logits): int32 [batch, num_samples] (TF1's tf.multinomial;
    only int32 output).

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     s = ff.multinomial(np.array([[-np.inf, 0.0]], np.float32), 5, seed=3)
    >>> ff.Session(g, backend="numpy").run(s).tolist()
    [[1, 1, 1, 1, 1]]
    """
    if output_dtype not in ("int32", None):
        raise DTypeError(f"multinomial returns int32 indices, not {output_dtype}")
    return wrap(_random.multinomial(operands(logits)[0], num_samples, seed, name=name))


def categorical(logits, num_samples, dtype=None, seed=None, name=None):
    """tf.random.categorical: multinomial under TensorFlow 2's name (int32 output)."""
    return multinomial(logits, num_samples, seed, name, dtype or "int32")


def dropout(x, rate, noise_shape=None, seed=None, name=None):
    """Zero each element with probability rate and scale the others by 1 / (1 - rate)
    (tf.nn.dropout). noise_shape (x's rank; 1 to share one draw along an axis, None for
    x's size) broadcasts the mask. Dropped elements are exactly 0, even where x is inf
    or NaN. The gradient wrt x is the same mask times the same scale.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.dropout(np.ones((4, 1000), np.float32), rate=0.5, seed=2)
    >>> sorted(set(ff.Session(g, backend="numpy").run(y).ravel().tolist()))
    [0.0, 2.0]
    """
    return wrap(_random.dropout(operands(x)[0], rate, noise_shape, seed, name=name))


def _float_only(dtype):
    if as_dtype(dtype) != "float32":
        raise DTypeError(f"normal values are float32, not {dtype}")
