"""ff.train: TensorFlow 1's optimizer classes (tf.train.*Optimizer) as aliases of
ff.optim's (same arguments, same update formulas).

>>> import fragflow as ff
>>> ff.train.AdamOptimizer is ff.optim.Adam
True
"""
from __future__ import annotations

from .. import optim as _optim
from ._missing import install as _install

Optimizer = _optim.Optimizer
GradientDescentOptimizer = _optim.GradientDescent
MomentumOptimizer = _optim.Momentum
AdamOptimizer = _optim.Adam
AdamaxOptimizer = _optim.Adamax
AdagradOptimizer = _optim.Adagrad
AdadeltaOptimizer = _optim.Adadelta
RMSPropOptimizer = _optim.RMSProp

__all__ = ["Optimizer", "GradientDescentOptimizer", "MomentumOptimizer", "AdamOptimizer",
           "AdamaxOptimizer", "AdagradOptimizer", "AdadeltaOptimizer", "RMSPropOptimizer"]
_install(globals(), "fragflow.train")
