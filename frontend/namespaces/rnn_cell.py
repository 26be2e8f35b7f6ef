"""ff.nn.rnn_cell (tf.nn.rnn_cell, tf.compat.v1.nn.rnn_cell): TF1's recurrent cells,
run over a sequence by ff.nn.dynamic_rnn (frontend/rnn.py).

>>> import fragflow as tf
>>> tf.nn.rnn_cell.BasicLSTMCell(8).state_size
LSTMStateTuple(c=8, h=8)
"""
from __future__ import annotations

from .. import rnn as _rnn
from ._missing import install as _install

RNNCell, BasicRNNCell, GRUCell = _rnn.RNNCell, _rnn.BasicRNNCell, _rnn.GRUCell
BasicLSTMCell, LSTMCell, MultiRNNCell = _rnn.BasicLSTMCell, _rnn.LSTMCell, _rnn.MultiRNNCell
LSTMStateTuple = _rnn.LSTMStateTuple

__all__ = ["RNNCell", "BasicRNNCell", "BasicLSTMCell", "LSTMCell", "GRUCell",
           "MultiRNNCell", "LSTMStateTuple"]
_install(globals(), "fragflow.nn.rnn_cell")
