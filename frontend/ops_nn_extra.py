"""Activations and normalizations that common imported models need (ONNX's Gelu,
HardSwish, LayerNormalization, InstanceNormalization), as first-class fragflow
functions: ff.gelu, ff.hard_swish, ff.layer_normalization, ff.instance_normalization.

Each is a composition of existing ops, not a new IR op. The activations are
elementwise chains that fusion turns into one kernel (or into the epilogue of the
convolution or matmul before them), so a dedicated kernel would run no faster; the
normalizations are two reductions (mean, then the mean of the squared deviations:
two-pass, not E[x^2] - E[x]^2, which cancels badly) and one fused elementwise kernel.
Their numpy reference is that of the ops they are made of, and their gradients
(first and second order) follow from those ops' rules. tests/ops/test_nn_extra.py
checks them on GL against float64 formulas written independently, and their
gradients against finite differences.

>>> import numpy as np, fragflow as ff
>>> g = ff.Graph()
>>> with g.as_default():
...     y = ff.layer_normalization(ff.constant(np.float32([[1.0, 3.0]])), epsilon=0.0)
>>> ff.Session(g, backend="numpy").run(y).tolist()
[[-1.0, 1.0]]
"""
from __future__ import annotations

import math

import numpy as np

from ..ir.errors import AttrError, ShapeError

__all__ = ["gelu", "hard_swish", "layer_normalization", "instance_normalization"]


def _ff():
    # The public functions, looked up when called: this module is imported by
    # fragflow.frontend after every op module, whichever module each op lives in.
    from .. import frontend
    return frontend


def _tensor(x):
    F = _ff()
    return x if isinstance(x, F.Tensor) else F.constant(np.asarray(x, np.float32))


def _float_input(x, what):
    t = _tensor(x)
    if t.dtype != "float32":
        raise AttrError(f"{what} needs a float32 input, got {t.dtype} (cast first)")
    return t


def gelu(features, approximate=False, name=None):
    """The Gaussian error linear unit, x * Phi(x) (tf.nn.gelu, torch's gelu, ONNX's
    Gelu): 0.5 * x * (1 + erf(x / sqrt(2))), or with approximate=True (ONNX's
    approximate="tanh") 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))).
    NaN stays NaN; -inf gives NaN (-inf * 0), as the formula does in IEEE arithmetic.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.gelu(ff.constant(np.float32([-1.0, 0.0, 1.0])))
    >>> [round(float(v), 4) for v in ff.Session(g, backend="numpy").run(y)]
    [-0.1587, 0.0, 0.8413]
    """
    F = _ff()
    if approximate not in (True, False):
        raise AttrError(f"gelu: approximate must be True or False, got {approximate!r}")
    with F.name_scope(name or "gelu"):
        x = _float_input(features, "gelu")
        if approximate:
            inner = (x + 0.044715 * (x * x * x)) * math.sqrt(2.0 / math.pi)
            return 0.5 * x * (F.tanh(inner) + 1.0)
        return 0.5 * x * (F.erf(x * (1.0 / math.sqrt(2.0))) + 1.0)


def hard_swish(x, name=None):
    """x * relu6(x + 3) / 6 (MobileNet v3's activation; torch's hardswish, ONNX's
    HardSwish, keras' hard_swish): 0 for x <= -3 (-inf included), x for x >= 3. NaN
    stays NaN.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.hard_swish(ff.constant(np.float32([-4.0, -1.5, 0.0, 1.5, 4.0])))
    >>> ff.Session(g, backend="numpy").run(y).tolist()
    [0.0, -0.375, 0.0, 1.125, 4.0]
    """
    F = _ff()
    with F.name_scope(name or "hard_swish"):
        t = _float_input(x, "hard_swish")
        # the where makes -inf give 0 (not -inf * 0 = NaN); NaN <= -3 is false: NaN
        return F.where(F.less_equal(t, -3.0), F.zeros_like(t),
                       t * (F.relu6(t + 3.0) * (1.0 / 6.0)))


def _normalized_axes(axis, rank, what) -> tuple:
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    out = []
    for a in axes:
        if not isinstance(a, (int, np.integer)) or not -rank <= a < rank:
            raise AttrError(f"{what}: axis {a!r} is out of range for a rank-{rank} input")
        out.append(int(a) % rank)
    if len(set(out)) != len(out) or not out:
        raise AttrError(f"{what}: axes {list(axes)} must be distinct and not empty")
    return tuple(sorted(out))


def _standardize(x, axes, epsilon):
    """((x - mean) / sqrt(var + epsilon), mean, 1 / sqrt(var + epsilon)) over axes,
    keeping them (size 1)."""
    F = _ff()
    mean = F.reduce_mean(x, axis=axes, keepdims=True)
    centred = x - mean
    inv_std = F.rsqrt(F.reduce_mean(F.square(centred), axis=axes, keepdims=True) + epsilon)
    return centred * inv_std, mean, inv_std


def _affine(y, scale, offset):
    if scale is not None:
        y = y * _tensor(scale)
    if offset is not None:
        y = y + _tensor(offset)
    return y


def _check_epsilon(epsilon, what):
    if not isinstance(epsilon, (int, float, np.floating)) or not epsilon >= 0:
        raise AttrError(f"{what}: epsilon must be a number >= 0, got {epsilon!r}")
    return float(epsilon)


def layer_normalization(x, scale=None, offset=None, axis=-1, epsilon=1e-5,
                        return_statistics=False, name=None):
    """Normalizes x over `axis` (an int or a tuple; ONNX's axis=k is
    tuple(range(k, rank))) to mean 0 and variance 1, then multiplies by scale and adds
    offset (each None or broadcastable to x, usually the shape of the normalized axes):
    (x - mean) / sqrt(var + epsilon) * scale + offset, the variance biased (divided by
    the count), as torch's layer_norm and ONNX's LayerNormalization. With
    return_statistics, returns (y, mean, inv_std) with the axes kept (size 1), as ONNX's
    optional outputs Mean and InvStdDev.

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     y = ff.layer_normalization(ff.constant(np.float32([[0.0, 2.0], [1.0, 5.0]])),
    ...                                scale=[2.0, 1.0], offset=[0.0, 1.0], epsilon=0.0)
    >>> ff.Session(g, backend="numpy").run(y).tolist()
    [[-2.0, 2.0], [-2.0, 2.0]]
    """
    F = _ff()
    with F.name_scope(name or "layer_normalization"):
        t = _float_input(x, "layer_normalization")
        axes = _normalized_axes(axis, t.ndim, "layer_normalization")
        y, mean, inv_std = _standardize(t, axes, _check_epsilon(epsilon,
                                                                "layer_normalization"))
        y = _affine(y, scale, offset)
        return (y, mean, inv_std) if return_statistics else y


def instance_normalization(x, scale=None, offset=None, epsilon=1e-5, data_format="NHWC",
                           name=None):
    """Normalizes each sample's each channel over its spatial axes (Ulyanov et al.;
    torch's InstanceNorm and ONNX's InstanceNormalization), then scales and shifts per
    channel: scale and offset are None or (C,) vectors. data_format "NHWC" (fragflow's
    convolution layout; any rank >= 3, channels last) or "NCHW" (channels second, as
    ONNX).

    >>> import numpy as np, fragflow as ff
    >>> g = ff.Graph()
    >>> with g.as_default():
    ...     x = ff.constant(np.float32([1.0, 3.0, 5.0, 7.0]).reshape(1, 2, 2, 1))
    ...     y = ff.instance_normalization(x, scale=[2.0], epsilon=0.0)
    >>> [round(float(v), 4) for v in ff.Session(g, backend="numpy").run(y).ravel()]
    [-2.6833, -0.8944, 0.8944, 2.6833]
    """
    F = _ff()
    if data_format not in ("NHWC", "NCHW"):
        raise AttrError(f"instance_normalization: data_format must be 'NHWC' or 'NCHW', "
                        f"got {data_format!r}")
    with F.name_scope(name or "instance_normalization"):
        t = _float_input(x, "instance_normalization")
        if t.ndim < 3:
            raise ShapeError(f"instance_normalization needs a batch, spatial axes and "
                             f"channels (rank >= 3), got shape {list(t.shape)}")
        rank = t.ndim
        axes = tuple(range(1, rank - 1)) if data_format == "NHWC" else tuple(range(2, rank))
        y, _, _ = _standardize(t, axes, _check_epsilon(epsilon, "instance_normalization"))

        def per_channel(v):
            if v is None:
                return None
            v = _tensor(v)
            if v.ndim != 1:
                raise ShapeError(f"instance_normalization: scale and offset must be (C,) "
                                 f"vectors, got shape {list(v.shape)}")
            return v if data_format == "NHWC" else F.reshape(v, [-1] + [1] * (rank - 2))
        return _affine(y, per_channel(scale), per_channel(offset))
