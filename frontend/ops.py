"""Every op function users call, in one place: ff.<name> is fragflow.frontend.ops.<name>.
Each is defined in the module of its family (named after TensorFlow's namespaces):

    ops_graph      placeholder, constant, name_scope
    ops_math       tf.math: arithmetic, comparisons, elementwise functions, cast, where,
                   reductions, scans, clipping
    ops_nn         tf.nn: activations, softmax, normalisation, cross-entropy losses
    ops_conv       convolutions and pooling
    ops_structure  shapes (reshape, transpose, ...), joining and cutting, padding,
                   gathers and scatters
    ops_image      resizing and crops
    ops_random     random values and dropout
    ops_linalg     matmul, eye, diag, band_part, einsum, tensordot, norm
    ops_nn_extra   gelu, hard_swish, layer and instance normalization (ONNX's, composed)

Arguments are Tensors, numpy arrays or Python scalars; names and meanings follow
TensorFlow, with numpy-style short names as well (ff.sum is ff.reduce_sum)."""
from __future__ import annotations

from . import (
    ops_conv,
    ops_graph,
    ops_image,
    ops_linalg,
    ops_math,
    ops_nn,
    ops_nn_extra,
    ops_random,
    ops_structure,
)
from .operands import check_keywords
from .ops_conv import *  # noqa: F403
from .ops_graph import *  # noqa: F403
from .ops_image import *  # noqa: F403
from .ops_linalg import *  # noqa: F403
from .ops_math import *  # noqa: F403
from .ops_nn import *  # noqa: F403
from .ops_nn_extra import *  # noqa: F403
from .ops_random import *  # noqa: F403
from .ops_structure import *  # noqa: F403
from .tensor import Tensor, Variable

FAMILIES = (ops_graph, ops_math, ops_nn, ops_conv, ops_structure, ops_image, ops_random,
            ops_linalg, ops_nn_extra)
__all__ = [name for family in FAMILIES for name in family.__all__] + ["Tensor", "Variable"]


def _install_keyword_checks() -> None:
    """Each op function, as ff.<name>, checks its keywords first: a misspelt one is a
    KeywordArgumentError naming the function the user called (ff.reduce_mean, not the
    mean it is an alias of) with the close ones, instead of Python's TypeError from
    wherever the call lands."""
    for name in __all__:
        fn = globals()[name]
        if callable(fn) and not isinstance(fn, type):
            globals()[name] = check_keywords(fn, name)


_install_keyword_checks()
