"""ff.initializers: the starting values of Variables, as numpy arrays (Keras's names,
arguments and rules).

An initializer is called with a shape and returns a float32 numpy array, which a layer
passes to ff.Variable; nothing here touches the graph or the GPU.

Seeding: an initializer given a seed draws from numpy.random.default_rng(seed), so the
same seed and shape always give the same array (calling it twice gives the same values,
as Keras 3's seeded initializers do). Without a seed it draws from a module-wide
Generator, which ff.initializers.set_seed(n) makes reproducible for a whole model.

Fans (Keras's rule): a shape (fan_in, fan_out) for a dense kernel; for a convolution
kernel (H, W, I, O) (HWIO, or a depthwise kernel H, W, C, M), fan_in = H*W*I and
fan_out = H*W*O.

>>> import fragflow as ff
>>> w = ff.initializers.glorot_uniform(seed=1)((3, 4))
>>> w.shape, w.dtype, bool(abs(w).max() <= (6 / 7) ** 0.5)
((3, 4), dtype('float32'), True)
"""
from __future__ import annotations

import inspect
import math

import numpy as np

from ..ir.errors import AttrError

__all__ = ["Initializer", "Zeros", "Ones", "Constant", "RandomNormal", "RandomUniform",
           "TruncatedNormal", "VarianceScaling", "GlorotUniform", "GlorotNormal",
           "HeNormal", "HeUniform", "Orthogonal", "zeros", "ones", "constant",
           "random_normal", "random_uniform", "truncated_normal", "glorot_uniform",
           "glorot_normal", "he_normal", "he_uniform", "orthogonal", "get", "set_seed",
           "compute_fans", "from_keras", "to_keras"]

_global_rng = np.random.default_rng()

# Keras's truncated_normal variance scaling divides by the standard deviation of a unit
# normal truncated to (-2, 2), so that the truncated draw has the requested variance.
_TRUNCATED_STDDEV = 0.87962566103423978


def set_seed(seed) -> None:
    """Make initializers built without a seed reproducible (from the next draw on)."""
    global _global_rng
    _global_rng = np.random.default_rng(seed)


def compute_fans(shape) -> tuple:
    """(fan_in, fan_out) of a kernel shape, by Keras's rule."""
    shape = tuple(int(d) for d in shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[:-2])
    return shape[-2] * receptive, shape[-1] * receptive


def _shape(shape) -> tuple:
    if isinstance(shape, (int, np.integer)):
        return (int(shape),)
    try:
        shape = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise AttrError(f"an initializer needs a static shape of ints, got {shape!r}") \
            from None
    if any(d < 0 for d in shape):
        raise AttrError(f"an initializer's shape cannot be negative: {list(shape)}")
    return shape


def _check_dtype(dtype):
    if dtype not in (None, "float32", np.float32):
        raise AttrError(f"initializers make float32 values, not {dtype}")


class Initializer:
    """Base class: init(shape, dtype="float32") -> np.ndarray (float32)."""
    seed = None

    def _rng(self) -> np.random.Generator:
        return _global_rng if self.seed is None else np.random.default_rng(self.seed)

    def __call__(self, shape, dtype="float32") -> np.ndarray:
        _check_dtype(dtype)
        return np.asarray(self.draw(_shape(shape)), np.float32)

    def draw(self, shape) -> np.ndarray:
        raise NotImplementedError

    def get_config(self) -> dict:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class Zeros(Initializer):
    """All zeros."""

    def draw(self, shape):
        return np.zeros(shape)


class Ones(Initializer):
    """All ones."""

    def draw(self, shape):
        return np.ones(shape)


class Constant(Initializer):
    """value everywhere (a scalar), or an array of exactly the requested shape."""

    def __init__(self, value=0.0):
        self.value = value

    def draw(self, shape):
        value = np.asarray(self.value, np.float64)
        if value.ndim == 0:
            return np.full(shape, value)
        if value.shape != shape:
            raise AttrError(f"Constant initializer holds shape {list(value.shape)}, "
                            f"asked for {list(shape)}")
        return value


class RandomNormal(Initializer):
    """Normal draws with mean and stddev (Keras's defaults: 0, 0.05)."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def draw(self, shape):
        return self._rng().normal(self.mean, self.stddev, shape)


class RandomUniform(Initializer):
    """Uniform draws in [minval, maxval) (Keras's defaults: -0.05, 0.05)."""

    def __init__(self, minval=-0.05, maxval=0.05, seed=None):
        self.minval, self.maxval, self.seed = minval, maxval, seed

    def draw(self, shape):
        return self._rng().uniform(self.minval, self.maxval, shape)


def _truncated(rng, shape, mean, stddev):
    """Normal draws more than two standard deviations out are drawn again (TF's rule)."""
    z = rng.standard_normal(shape)
    bad = np.abs(z) > 2.0
    while bad.any():
        z[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(z) > 2.0
    return mean + stddev * z


class TruncatedNormal(Initializer):
    """Normal draws within two standard deviations of the mean (Keras's defaults: 0,
    0.05)."""

    def __init__(self, mean=0.0, stddev=0.05, seed=None):
        self.mean, self.stddev, self.seed = mean, stddev, seed

    def draw(self, shape):
        return _truncated(self._rng(), shape, self.mean, self.stddev)


class VarianceScaling(Initializer):
    """Draws with variance scale / n, n the fan_in, the fan_out or their mean (mode);
    distribution "truncated_normal", "untruncated_normal" or "uniform" (Keras's)."""

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal",
                 seed=None):
        if scale <= 0:
            raise AttrError(f"VarianceScaling's scale must be positive, got {scale}")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise AttrError(f"VarianceScaling's mode must be fan_in, fan_out or fan_avg, "
                            f"got {mode!r}")
        distribution = "untruncated_normal" if distribution == "normal" else distribution
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
            raise AttrError(f"VarianceScaling's distribution must be truncated_normal, "
                            f"untruncated_normal or uniform, got {distribution!r}")
        self.scale, self.mode, self.distribution, self.seed = \
            scale, mode, distribution, seed

    def draw(self, shape):
        fan_in, fan_out = compute_fans(shape)
        n = {"fan_in": fan_in, "fan_out": fan_out,
             "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        variance = self.scale / max(1.0, n)
        rng = self._rng()
        if self.distribution == "uniform":
            limit = math.sqrt(3.0 * variance)
            return rng.uniform(-limit, limit, shape)
        if self.distribution == "untruncated_normal":
            return rng.normal(0.0, math.sqrt(variance), shape)
        return _truncated(rng, shape, 0.0, math.sqrt(variance) / _TRUNCATED_STDDEV)


class GlorotUniform(VarianceScaling):
    """Uniform in [-l, l], l = sqrt(6 / (fan_in + fan_out)) (Keras's default kernel)."""

    def __init__(self, seed=None):
        super().__init__(1.0, "fan_avg", "uniform", seed)


class GlorotNormal(VarianceScaling):
    """Truncated normal with stddev sqrt(2 / (fan_in + fan_out))."""

    def __init__(self, seed=None):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed)


class HeNormal(VarianceScaling):
    """Truncated normal with stddev sqrt(2 / fan_in) (for ReLU networks)."""

    def __init__(self, seed=None):
        super().__init__(2.0, "fan_in", "truncated_normal", seed)


class HeUniform(VarianceScaling):
    """Uniform in [-l, l], l = sqrt(6 / fan_in)."""

    def __init__(self, seed=None):
        super().__init__(2.0, "fan_in", "uniform", seed)


class Orthogonal(Initializer):
    """An orthogonal matrix (times gain) from the QR decomposition of a normal draw,
    over the shape flattened to (prod(shape[:-1]), shape[-1]) (Keras's rule)."""

    def __init__(self, gain=1.0, seed=None):
        self.gain, self.seed = gain, seed

    def draw(self, shape):
        if len(shape) < 2:
            raise AttrError(f"the orthogonal initializer needs a shape of rank >= 2, "
                            f"got {list(shape)}")
        rows, cols = math.prod(shape[:-1]), shape[-1]
        a = self._rng().standard_normal((max(rows, cols), min(rows, cols)))
        q, r = np.linalg.qr(a)
        q = q * np.sign(np.diag(r))        # a uniform (Haar) draw, not QR's sign choice
        if rows < cols:
            q = q.T
        return self.gain * q.reshape(shape)


# Keras's lower-case names for the same classes.
zeros, ones, constant = Zeros, Ones, Constant
random_normal, random_uniform, truncated_normal = RandomNormal, RandomUniform, TruncatedNormal
glorot_uniform, glorot_normal = GlorotUniform, GlorotNormal
he_normal, he_uniform, orthogonal = HeNormal, HeUniform, Orthogonal

_BY_NAME = {"zeros": Zeros, "ones": Ones, "constant": Constant,
            "random_normal": RandomNormal, "random_uniform": RandomUniform,
            "truncated_normal": TruncatedNormal, "glorot_uniform": GlorotUniform,
            "glorot_normal": GlorotNormal, "he_normal": HeNormal, "he_uniform": HeUniform,
            "orthogonal": Orthogonal, "variance_scaling": VarianceScaling,
            "uniform": RandomUniform, "normal": RandomNormal}    # Keras's aliases


def get(identifier) -> Initializer:
    """An Initializer from an instance, a name ("glorot_uniform", "GlorotUniform",
    "zeros", ...) or a callable shape -> array."""
    if isinstance(identifier, Initializer) or (callable(identifier)
                                                and not isinstance(identifier, type)):
        return identifier
    if isinstance(identifier, type) and issubclass(identifier, Initializer):
        return identifier()
    if isinstance(identifier, str):
        key = identifier if identifier in _BY_NAME else _snake(identifier)
        if key in _BY_NAME:
            return _BY_NAME[key]()
    raise AttrError(f"unknown initializer {identifier!r}; use one of "
                    f"{', '.join(sorted(_BY_NAME))} or an ff.initializers instance")


def from_keras(identifier):
    """An initializer as a Keras config names it: a name, an instance, or Keras's
    serialized {"class_name": "GlorotUniform", "config": {"seed": 1, ...}} (keys the
    class does not take are refused unless None)."""
    if not isinstance(identifier, dict):
        return identifier if identifier is None else get(identifier)
    name = identifier.get("class_name")
    key = name if name in _BY_NAME else _snake(str(name))
    if key not in _BY_NAME:
        raise AttrError(f"unknown initializer {name!r} in a Keras config; fragflow has "
                        f"{', '.join(sorted(_BY_NAME))}")
    cls = _BY_NAME[key]
    taken = inspect.signature(cls.__init__).parameters
    config = dict(identifier.get("config") or {})
    extra = [k for k, v in config.items() if k not in taken and v is not None]
    if extra:
        raise AttrError(f"initializer {name}: argument {extra[0]!r} is not supported")
    return cls(**{k: v for k, v in config.items() if k in taken})


def to_keras(initializer) -> dict:
    """Keras 3's serialized form of an Initializer instance."""
    taken = inspect.signature(type(initializer).__init__).parameters
    return {"module": "keras.initializers", "class_name": type(initializer).__name__,
            "config": {k: getattr(initializer, k) for k in taken
                       if k != "self" and hasattr(initializer, k)},
            "registered_name": None}


def _snake(name: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in name).lstrip("_")


def __dir__():
    """dir() of the module: its API (__all__), not its imports."""
    return sorted(__all__)
