"""ff.random: tf.random's names (normal, uniform, truncated_normal, categorical).
Values are counter-based and reproducible: seed=None is seed 0 (see ff.random_normal).

>>> import fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     z = ff.random.normal([2, 3], seed=1)
>>> ff.Session(g, backend="numpy").run(z).shape
(2, 3)
"""
from __future__ import annotations

from .. import initializers as _initializers, ops_random as _random
from ._missing import install as _install

normal, uniform = _random.random_normal, _random.random_uniform
truncated_normal, categorical = _random.truncated_normal, _random.categorical
multinomial = _random.multinomial


def set_seed(seed) -> None:
    """The seed of ff.initializers' numpy draws (ops take seed= each; None is 0)."""
    _initializers.set_seed(seed)


__all__ = ["normal", "uniform", "truncated_normal", "categorical", "multinomial", "set_seed"]
_install(globals(), "fragflow.random")
