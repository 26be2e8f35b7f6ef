"""Random ops: random_uniform, random_normal, truncated_normal, multinomial, dropout.

Counter-based, as TensorFlow's stateless kernels: element values are a pure function
of (seed, stream, element index, run counter), computed with Philox-4x32-10 (Salmon et
al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) on 32-bit integers, so the
GLSL kernel (templates/random.glsl.j2) and the numpy reference below draw the same bits.

- key = (seed mod 2**32, stream xor (seed >> 32) mod 2**32). `stream` is the FNV-1a
  hash of the node's name (stable across processes), fixed when the node is built: two
  ops with one seed but different names draw different numbers.
- counter = (block, attempt, run, draw), where run is the session's run counter (the
  graph's run_counter value, ir/ops/state.py, an extra last input of every random op):
  each run draws fresh values, and run k of any session draws the same ones. draw is 0,
  except for an op in a loop's body: its last input is then the int32 pair (run,
  draw), draw numbering the iteration (frontend/control_effects.py), so that each
  iteration draws fresh values too.
- element i's 32 random bits: word i % 4 of philox(key, (i // 4, 0, run, draw)).
- uniform float in [0, 1): (bits >> 8) * 2**-24 (exact in float32).
- normal: Box-Muller on words (0, 1) and (2, 3) of the block, in float32:
  u1 = 1 - uniform(w_even) in (0, 1], u2 = uniform(w_odd),
  r = sqrt(-2 log u1), z_even = r cos(2 pi u2), z_odd = r sin(2 pi u2).
- truncated normal, int32 uniform, multinomial, dropout: the docstrings of their numpy
  references here (draw_truncated, _uniform_ref, _multinomial_ref, dropout_mask).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import AttrError, DTypeError, ShapeError
from ..types import TensorType, as_dtype, format_shape
from .registry import REQUIRED, OpDef, register
from .state import run_counter

MASK32 = 0xFFFFFFFF
PHILOX_M = (0xD2511F53, 0xCD9E8D57)       # round multipliers
PHILOX_W = (0x9E3779B9, 0xBB67AE85)       # key schedule (Weyl) increments
PHILOX_ROUNDS = 10
TRUNCATE = 2.0                            # truncated_normal keeps |z| < 2
MAX_ATTEMPTS = 8                          # blocks of 4 candidates per truncated element
TWO_PI = np.float32(2 * math.pi)
UNIT = np.float32(2.0 ** -24)


# -- the generator ---------------------------------------------------------------------
def stream_id(name: str) -> int:
    """FNV-1a (32-bit) of a node name: a stream id every process agrees on."""
    h = 0x811C9DC5
    for byte in name.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & MASK32
    return h


def philox4x32(counter, key, rounds: int = PHILOX_ROUNDS):
    """Philox-4x32: counter is four uint32 arrays (or ints), key two ints; returns four
    uint32 arrays."""
    c = [np.asarray(w, np.uint64) & MASK32 for w in counter]
    k0, k1 = key[0] & MASK32, key[1] & MASK32
    for _ in range(rounds):
        p0 = np.uint64(PHILOX_M[0]) * c[0]
        p1 = np.uint64(PHILOX_M[1]) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & np.uint64(MASK32),
             (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & np.uint64(MASK32)]
        k0, k1 = (k0 + PHILOX_W[0]) & MASK32, (k1 + PHILOX_W[1]) & MASK32
    return [w.astype(np.uint32) for w in c]


def key_of(attrs) -> tuple:
    seed = int(attrs["seed"])
    return seed & MASK32, (attrs["stream"] ^ (seed >> 32)) & MASK32


def _run_words(run) -> tuple:
    """The counter's words 2 and 3: (run, 0), or (run, draw) for the pair of a body."""
    words = np.asarray(run).reshape(-1)
    if words.size == 2:
        return int(words[0]) & MASK32, int(words[1]) & MASK32
    return int(words[0]) & MASK32, (int(words[0]) >> 32) & MASK32


def _blocks(attrs, n: int, run: int):
    """The four words of philox(key, (b, 0, run)) for blocks b covering n elements."""
    blocks = np.arange((n + 3) // 4, dtype=np.uint64)
    lo, hi = _run_words(run)
    return philox4x32((blocks, 0, lo, hi), key_of(attrs))


def draw_bits(attrs, n: int, run: int = 0) -> np.ndarray:
    """Element i's 32 random bits, for i < n, in run `run` of a session."""
    return np.stack(_blocks(attrs, n, run), axis=1).reshape(-1)[:n]


def to_unit(bits) -> np.ndarray:
    """uint32 bits -> float32 in [0, 1) from the top 24 bits (exact)."""
    return (np.asarray(bits) >> np.uint32(8)).astype(np.float32) * UNIT


def box_muller(w0, w1):
    """Two float32 standard normals from two uint32 words (see the module docstring)."""
    u1 = np.float32(1) - to_unit(w0)
    theta = TWO_PI * to_unit(w1)
    r = np.sqrt(np.float32(-2) * np.log(u1))
    return r * np.cos(theta), r * np.sin(theta)


def draw_normals(attrs, n: int, run: int = 0) -> np.ndarray:
    w = _blocks(attrs, n, run)
    z0, z1 = box_muller(w[0], w[1])
    z2, z3 = box_muller(w[2], w[3])
    return np.stack([z0, z1, z2, z3], axis=1).reshape(-1)[:n]


def draw_truncated(attrs, n: int, run: int = 0) -> np.ndarray:
    """Truncated normal: element i tries philox(key, (i, k, run)) for k = 0, 1, ... and
    takes the first of its four Box-Muller normals with |z| < 2 (TF re-draws beyond two
    standard deviations); after MAX_ATTEMPTS blocks (never, in practice: each fails with
    probability 4e-6) it gives 0."""
    out = np.zeros(n, np.float32)
    todo = np.arange(n, dtype=np.uint64)
    lo, hi = _run_words(run)
    for attempt in range(MAX_ATTEMPTS):
        if not todo.size:
            break
        w = philox4x32((todo, attempt, lo, hi), key_of(attrs))
        z0, z1 = box_muller(w[0], w[1])
        z2, z3 = box_muller(w[2], w[3])
        found = np.zeros(todo.size, bool)
        for z in (z0, z1, z2, z3):
            take = ~found & (np.abs(z) < np.float32(TRUNCATE))
            out[todo[take].astype(np.int64)] = z[take]
            found |= take
        todo = todo[~found]
    return out


# -- attrs and type rules -----------------------------------------------------------
def _static_shape(shape, what="shape"):
    if not isinstance(shape, tuple) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ShapeError(f"{what} must be a tuple of non-negative ints, got {shape!r}")
    return shape


def _check_seed(attrs, types):
    """Checks the seed attrs and the run counter (the last input); the data inputs."""
    if not types or types[-1].dtype != "int32" or types[-1].shape not in ((), (2,)):
        raise ShapeError("the last input must be the graph's run counter (an int32 scalar) "
                         "or, in a loop's body, the pair (run counter, draw)")
    if not isinstance(attrs["seed"], int) or isinstance(attrs["seed"], bool):
        raise AttrError(f"seed must be an int, got {attrs['seed']!r}")
    if not isinstance(attrs["stream"], int) or not 0 <= attrs["stream"] <= MASK32:
        raise AttrError(f"stream must be a 32-bit unsigned int, got {attrs['stream']!r}")
    return types[:-1]


def _uniform_type(types, attrs):
    _check_seed(attrs, types)
    dtype = attrs["dtype"]
    lo, hi = attrs["minval"], attrs["maxval"]
    if dtype == "int32":
        if hi is None:
            raise AttrError("maxval must be given for int32 random_uniform")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (lo, hi)):
            raise AttrError(f"int32 random_uniform takes int bounds, got {lo!r}, {hi!r}")
        if not -2 ** 31 <= lo < hi <= 2 ** 31 - 1:
            raise AttrError(f"need int32 bounds with minval < maxval, got [{lo}, {hi})")
    elif dtype == "float32":
        hi = 1.0 if hi is None else hi
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise AttrError(f"need finite bounds with minval < maxval, got [{lo}, {hi})")
    else:
        raise DTypeError(f"random_uniform makes float32 or int32, not {dtype}")
    return TensorType(_static_shape(attrs["shape"]), dtype)


def _normal_type(types, attrs):
    _check_seed(attrs, types)
    if not math.isfinite(attrs["mean"]) or not math.isfinite(attrs["stddev"]) or \
            attrs["stddev"] < 0:
        raise AttrError(f"need a finite mean and stddev >= 0, got mean={attrs['mean']}, "
                        f"stddev={attrs['stddev']}")
    return TensorType(_static_shape(attrs["shape"]), "float32")


def _multinomial_type(types, attrs):
    (t,) = _check_seed(attrs, types)
    if t.dtype != "float32":
        raise DTypeError(f"logits must be float32, got {t.dtype}")
    if t.rank != 2:
        raise ShapeError(f"logits must be 2-D [batch, classes], got {format_shape(t.shape)}")
    if t.shape[1] == 0:
        raise ShapeError("logits have no classes to draw from")
    n = attrs["num_samples"]
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise AttrError(f"num_samples must be a non-negative int, got {n!r}")
    return TensorType((t.shape[0], n), "int32")


def resolve_noise_shape(noise_shape, x_shape) -> tuple:
    """noise_shape with None entries taken from x's shape (TF's rule), checked to
    broadcast to x; the whole of x's shape when noise_shape is None."""
    if noise_shape is None:
        return tuple(x_shape)
    if len(noise_shape) != len(x_shape):
        raise ShapeError(f"noise_shape {format_shape(noise_shape)} must have x's rank "
                         f"({len(x_shape)})")
    resolved = tuple(x if n is None else n for n, x in zip(noise_shape, x_shape))
    for n, x in zip(resolved, x_shape):
        if n is not None and x is not None and n not in (1, x):
            raise ShapeError(f"noise_shape {format_shape(noise_shape)} does not broadcast "
                             f"to x's shape {format_shape(x_shape)}")
    return resolved


def _dropout_type(types, attrs):
    (t,) = _check_seed(attrs, types)
    if t.dtype != "float32":
        raise DTypeError(f"x must be float32, got {t.dtype}")
    rate = attrs["rate"]
    if not isinstance(rate, float) or not 0.0 <= rate < 1.0:
        raise AttrError(f"rate must be a float in [0, 1), got {rate!r}")
    resolve_noise_shape(attrs["noise_shape"], t.shape)
    return TensorType(t.shape, t.dtype)


# -- references: the run counter is the last input ---------------------------------------
def uniform_bounds(attrs) -> tuple:
    """float32 (minval, maxval - minval), the range rounded as TF computes it."""
    lo = np.float32(attrs["minval"])
    hi = np.float32(1.0 if attrs["maxval"] is None else attrs["maxval"])
    return lo, hi - lo


def _uniform_ref(arrays, attrs):
    """int32 uniform in [minval, maxval): minval + bits % (maxval - minval) (TF's rule);
    float: the uniform float in [0, 1) scaled to the range."""
    run = arrays[-1]
    shape = attrs["shape"]
    n = int(np.prod(shape, dtype=np.int64))
    bits = draw_bits(attrs, n, run)
    if attrs["dtype"] == "int32":
        span = np.uint32((attrs["maxval"] - attrs["minval"]) & MASK32)
        values = (np.uint32(attrs["minval"] & MASK32) + bits % span).view(np.int32)
    else:
        lo, span = uniform_bounds(attrs)
        values = to_unit(bits) * span + lo
    return values.reshape(shape)


def _normal_ref(draw):
    def ref(arrays, attrs):
        shape, run = attrs["shape"], arrays[-1]
        z = draw(attrs, int(np.prod(shape, dtype=np.int64)), run)
        return (z * np.float32(attrs["stddev"]) + np.float32(attrs["mean"])).reshape(shape)
    return ref


def _multinomial_ref(arrays, attrs):
    """Output (b, s) takes u = uniform(b * num_samples + s) and picks the first class
    whose running float32 sum of exp(logits - max) exceeds u * total."""
    logits, run = arrays
    logits = logits.astype(np.float32)          # drawn in float32 whatever the mode
    batch, classes = logits.shape
    samples = attrs["num_samples"]
    p = np.exp(logits - np.max(logits, axis=1, keepdims=True))
    cdf = np.cumsum(p, axis=1, dtype=np.float32)
    u = to_unit(draw_bits(attrs, batch * samples, run)).reshape(batch, samples)
    target = u * cdf[:, -1:]
    picked = np.sum(cdf[:, None, :] <= target[:, :, None], axis=2)   # first cdf > target
    last = classes - 1 - np.argmax((p > 0)[:, ::-1], axis=1)         # if none: the last
    return np.minimum(picked, last[:, None]).astype(np.int32)        # class with p > 0


def dropout_scale(rate: float) -> np.float32:
    """1 / (1 - rate), in float32 as TF computes it."""
    return np.float32(1) / (np.float32(1) - np.float32(rate))


def dropout_mask(attrs, x_shape, run=0) -> np.ndarray:
    """Dropout is x / (1 - rate) where uniform(noise index) >= rate, else 0; the noise
    index broadcasts noise_shape to x's shape. Its gradient is dropout of dy with the
    same stream: the same mask."""
    noise = resolve_noise_shape(attrs["noise_shape"], x_shape)
    bits = draw_bits(attrs, int(np.prod(noise, dtype=np.int64)), run)
    keep = to_unit(bits) >= np.float32(attrs["rate"])
    return np.broadcast_to(keep.reshape(noise), x_shape)


def _dropout_ref(arrays, attrs):
    x, run = arrays
    scale = x.dtype.type(dropout_scale(attrs["rate"]))
    return np.where(dropout_mask(attrs, x.shape, run), x * scale, x.dtype.type(0))


SEEDED = {"seed": 0, "stream": REQUIRED}
register(OpDef("random_uniform", "random", _uniform_type, _uniform_ref,
               attrs={"shape": REQUIRED, "dtype": "float32", "minval": 0, "maxval": None,
                      **SEEDED}, num_inputs=1,
                      no_gradient="a random draw (as in TensorFlow)", stateful=True,
                      tf="tf.random.uniform"))
register(OpDef("random_normal", "random", _normal_type, _normal_ref(draw_normals),
               attrs={"shape": REQUIRED, "mean": 0.0, "stddev": 1.0, **SEEDED},
               num_inputs=1, no_gradient="a random draw (as in TensorFlow)", stateful=True,
               tf="tf.random.normal"))
register(OpDef("truncated_normal", "random", _normal_type, _normal_ref(draw_truncated),
               attrs={"shape": REQUIRED, "mean": 0.0, "stddev": 1.0, **SEEDED},
               num_inputs=1, no_gradient="a random draw (as in TensorFlow)", stateful=True,
               tf="tf.random.truncated_normal"))
register(OpDef("multinomial", "random", _multinomial_type, _multinomial_ref,
               attrs={"num_samples": REQUIRED, **SEEDED}, num_inputs=2,
               no_gradient="a random draw of integer indices", stateful=True,
               tf="tf.random.categorical"))
register(OpDef("dropout", "random", _dropout_type, _dropout_ref,
               attrs={"rate": REQUIRED, "noise_shape": None, **SEEDED}, num_inputs=2,
               stateful=True, tf="tf.nn.dropout"))


# -- builders -------------------------------------------------------------------------------
def _seeded(graph, op, inputs, attrs, name=None, stream=None, run=None):
    """Add a random node; its stream is the hash of its own name unless given (dropout's
    gradient reuses its forward's stream and run input, to draw the same mask). The
    graph's run counter (or run, given) is its last input."""
    inputs = list(inputs) + [run_counter(graph) if run is None else run]
    attrs = dict(attrs, seed=0 if attrs.get("seed") is None else attrs["seed"])
    if stream is None:
        # the name add_node would choose, fixed now so the stream can be derived from it
        node_name = graph._unique_name(name or op)
        attrs["stream"] = stream_id(node_name)
        node = graph.add_node(op, inputs, attrs, name, exact_name=node_name)
    else:
        attrs["stream"] = int(stream)
        node = graph.add_node(op, inputs, attrs, name)
    return node.outputs[0]


def _shape_attr(shape):
    try:
        return tuple(int(d) if isinstance(d, (int, np.integer)) else d for d in shape)
    except TypeError:
        return shape


def random_uniform(graph, shape, minval=0, maxval=None, dtype="float32", seed=None,
                   name=None):
    dtype = as_dtype(dtype)
    if dtype == "float32":
        minval = float(minval)
        maxval = None if maxval is None else float(maxval)
    else:
        minval = int(minval) if isinstance(minval, (int, np.integer)) else minval
        maxval = int(maxval) if isinstance(maxval, (int, np.integer)) else maxval
    return _seeded(graph, "random_uniform", [], {
        "shape": _shape_attr(shape), "dtype": dtype, "minval": minval, "maxval": maxval,
        "seed": seed}, name)


def random_normal(graph, op, shape, mean=0.0, stddev=1.0, seed=None, name=None):
    """random_normal or truncated_normal."""
    return _seeded(graph, op, [], {"shape": _shape_attr(shape), "mean": float(mean),
                                   "stddev": float(stddev), "seed": seed}, name)


def multinomial(logits, num_samples, seed=None, name=None):
    n = int(num_samples) if isinstance(num_samples, (int, np.integer)) else num_samples
    return _seeded(logits.graph, "multinomial", [logits], {"num_samples": n, "seed": seed},
                   name)


def dropout(x, rate, noise_shape=None, seed=None, name=None, stream=None, run=None):
    if noise_shape is not None:
        noise_shape = tuple(None if d is None else int(d) for d in noise_shape)
    rate = float(rate) if isinstance(rate, (int, float, np.number)) else rate
    return _seeded(x.graph, "dropout", [x], {"rate": rate, "noise_shape": noise_shape,
                                              "seed": seed}, name, stream, run)
