"""Every elementwise op on GL against the numpy reference executor.

Inputs are seeded random values with the edge values mixed in (NaN, infinities, signed
zeros, tiny and huge magnitudes, int32's extremes); binary ops see the full cross
product of their edge values. Each test builds one graph, often holding several ops, so
that the file compiles as few shaders as it can (each costs ~100 ms of llvmpipe JIT).
"""
import inspect
import os

import numpy as np
import pytest

import fragflow as ff
from tests.reference import assert_matches, run_both

THIS_FILE = os.path.basename(__file__)

NAN, INF = np.nan, np.inf
I32_MIN, I32_MAX = -2 ** 31, 2 ** 31 - 1

# 1.5e-38 is the smallest normal magnitude we feed: GLSL allows subnormals to be
# flushed to zero (llvmpipe does), so subnormal inputs are out of scope.
FLOAT_EDGES = np.array(
    [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 2.0, 3.0, -7.0, 10.0,
     1e-30, -1e-30, 1.5e-38, 1e30, -1e30, 3.4e38, -3.4e38, 0.1, -100.0],
    np.float32)
INT_EDGES = np.array([I32_MIN, I32_MIN + 1, I32_MAX, I32_MAX - 1, 0, -1, 1, 2, -2, 3,
                      -3, 7, -7, 46341, -65536, 31, 32], np.int64).astype(np.int32)
BOOL_EDGES = np.array([False, True])

UNARY_FLOAT_OPS = ["neg", "abs", "sign", "square", "relu", "exp", "log", "sqrt", "rsqrt",
                   "reciprocal", "floor", "ceil", "round", "sin", "cos", "tanh",
                   "sigmoid", "identity", "zeros_like", "ones_like"]
UNARY_INT_OPS = ["neg", "abs", "sign", "square", "relu", "identity", "zeros_like",
                 "ones_like"]
UNARY_BOOL_OPS = ["logical_not", "identity", "zeros_like", "ones_like"]
ARITHMETIC = ["add", "sub", "mul", "div", "floor_div", "mod", "pow", "maximum", "minimum"]
COMPARISONS = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
NUMERIC_BINARY = ARITHMETIC + COMPARISONS
LOGICAL_BINARY = ["logical_and", "logical_or"]


# -- inputs -----------------------------------------------------------------------------
def rng_for(*key):
    """A Generator seeded from the test's parameters, so each case is reproducible."""
    return np.random.default_rng([ord(c) for c in repr(key)])


def mixed_floats(rng, size, lo=-10.0, hi=10.0, log_range=(-30, 30)):
    """Half uniform in [lo, hi], half log-uniform magnitudes (both signs)."""
    uniform = rng.uniform(lo, hi, size)
    if log_range is None:
        return uniform.astype(np.float32)
    mags = 10.0 ** rng.uniform(*log_range, size)
    logs = np.where(rng.random(size) < 0.5, -mags, mags)
    return np.where(rng.random(size) < 0.5, uniform, logs).astype(np.float32)


def sprinkle(rng, values, edges):
    """values with the edge values written at random positions (every edge at least
    once when there is room)."""
    flat = np.array(values).reshape(-1)
    if flat.size == 0:
        return flat.reshape(np.shape(values))
    n = min(flat.size, max(len(edges), flat.size // 4))
    pos = rng.choice(flat.size, n, replace=False)
    flat[pos] = np.resize(np.asarray(edges, flat.dtype), n)
    return flat.reshape(np.shape(values))


def cross(edges_a, edges_b, rand_a, rand_b):
    """Every (edge, edge) pair, then the random pairs."""
    a = np.repeat(np.asarray(edges_a), len(edges_b))
    b = np.tile(np.asarray(edges_b), len(edges_a))
    return (np.concatenate([a, rand_a]).astype(rand_a.dtype),
            np.concatenate([b, rand_b]).astype(rand_b.dtype))


def random_of(rng, dtype, shape, edges=True):
    size = int(np.prod(shape, dtype=np.int64))
    if dtype == "float32":
        x = mixed_floats(rng, size)
        e = FLOAT_EDGES
    elif dtype == "int32":
        x = np.where(rng.random(size) < 0.5, rng.integers(-50, 50, size),
                     rng.integers(I32_MIN, I32_MAX, size, endpoint=True)).astype(np.int32)
        e = INT_EDGES
    else:
        x = rng.random(size) < 0.5
        e = BOOL_EDGES
    x = x.reshape(shape)
    return sprinkle(rng, x, e) if edges else x


def check(graph, fetches, feeds, rtol=1e-5):
    """Run on GL and numpy; compare every fetch (fetches: dict name -> tensor)."""
    out, ref = run_both(graph, fetches, feeds)
    for key in fetches:
        assert_matches(out[key], ref[key], rtol=rtol, what=key)
    return out, ref


# -- unary --------------------------------------------------------------------------------
# Per-op inputs: (lo, hi, log_range of magnitudes or None, extra edge values); the
# default is uniform [-10, 10] mixed with magnitudes 1e-30..1e30. Where llvmpipe cannot
# hold 1e-5 relative error over all of float32 (sin, cos), the range is restricted.
UNARY_DOMAIN = {
    # uniform over where exp is finite and normal (beyond, it is exactly inf or 0). The
    # relative error grows with |x| (exp2(x * log2 e) amplifies the argument's rounding):
    # measured 3.9e-6 at x = 88.
    "exp": (-87.0, 88.0, None, [88.0, -87.0, 20.5, -20.5, 1e-30]),
    # llvmpipe's sin/cos reduce the argument with a float pi: within 1e-5 (relative,
    # 1e-6 absolute) up to |x| ~ 1e5, meaningless past ~1e8. Keep |x| <= 1e4.
    "sin": (-10.0, 10.0, (-30, 4), [3.1415927, -3.1415927, 1.5707964, 1e-5, 9999.0]),
    "cos": (-10.0, 10.0, (-30, 4), [3.1415927, -3.1415927, 1.5707964, 1e-5, 9999.0]),
    # next to 1, where log's result is tiny and a log2(x) * ln 2 loses its digits
    "log": (0.0, 3.0, (-30, 30), [0.99999994, 1.0000001, 0.999, 1.001, 0.75, 1.4142135]),
    "round": (-10.0, 10.0, (-30, 30), [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 8388607.5,
                                       -8388607.5, 16777216.0, 0.49999997]),
    "floor": (-10.0, 10.0, (-30, 30), [8388607.5, -8388607.5, -0.5, 0.99999994]),
    "ceil": (-10.0, 10.0, (-30, 30), [8388607.5, -8388607.5, -0.5, 0.99999994]),
    "tanh": (-10.0, 10.0, (-30, 30), [0.04, -0.04, 0.0399, 20.0, -20.0, 9.0, 1e-3]),
    "sigmoid": (-10.0, 10.0, (-30, 30), [88.0, -88.0, 17.0, -17.0, 1e-3]),
}


@pytest.mark.parametrize("op", UNARY_FLOAT_OPS)
def test_unary_float(gl, op):
    rng = rng_for("unary", op)
    lo, hi, log_range, extra = UNARY_DOMAIN.get(op, (-10.0, 10.0, (-30, 30), []))
    shape = (7, 37)                      # 259 elements: the last texel is partly used
    x_val = mixed_floats(rng, 259, lo, hi, log_range).reshape(shape)
    # sin/cos of huge values are out of llvmpipe's range (see UNARY_DOMAIN); exp of them
    # is exactly inf or 0, so exp keeps them
    edges = FLOAT_EDGES[np.abs(FLOAT_EDGES) < 1e4] if op in ("sin", "cos") else FLOAT_EDGES
    x_val = sprinkle(rng, x_val, np.concatenate([edges, np.float32(extra)]))
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(shape, "float32", name="x")
        y = getattr(ff, op)(x)
    assert y.dtype == "float32" and y.shape == shape
    check(g, {op: y}, {x: x_val})


@pytest.mark.parametrize("op", UNARY_INT_OPS)
def test_unary_int(gl, op):
    rng = rng_for("unary_int", op)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5, 23), "int32", name="x")
        y = getattr(ff, op)(x)
    assert y.dtype == "int32"
    check(g, {op: y}, {x: random_of(rng, "int32", (5, 23))})


def test_unary_bool(gl):
    rng = rng_for("unary_bool")
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 11), "bool", name="x")
        ys = {op: getattr(ff, op)(x) for op in UNARY_BOOL_OPS}
        ys["invert"] = ~x
    assert all(y.dtype == "bool" for y in ys.values())
    check(g, ys, {x: random_of(rng, "bool", (3, 11))})


@pytest.mark.parametrize("shape", [(), (1,), (3,), (4,), (5,), (2, 3, 4), (1, 1, 9),
                                   (0,), (3, 0, 2)])
def test_unary_shapes(gl, shape):
    """Sizes around the 4-elements-per-texel packing, scalars and empty tensors."""
    rng = rng_for("unary_shapes", shape)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(shape, "float32", name="x")
        i = ff.placeholder(shape, "int32", name="i")
        ys = {"neg": -x, "sqrt": ff.sqrt(x), "round": ff.round(x), "abs_i": ff.abs(i),
              "sigmoid": ff.sigmoid(x)}
    out, _ = check(g, ys, {x: random_of(rng, "float32", shape),
                           i: random_of(rng, "int32", shape)})
    assert all(v.shape == shape for v in out.values())


# -- binary ---------------------------------------------------------------------------------
def float_pairs(rng, op):
    """(a, b) float32 inputs for op: the edge cross product, then random pairs."""
    n = 203
    if op == "pow":
        # 2^(b * log2|a|) turns the rounding of its argument w (~|w| * 1e-7) into
        # relative error: 1.6e-5 measured for |w| > 100 (results beyond 1e+-30). Keep
        # the random |w| <= 60 (results within about 1e+-18; measured <= 3.5e-6).
        a = 10.0 ** rng.uniform(-3, 3, n) * np.where(rng.random(n) < 0.3, -1, 1)
        b = np.where(rng.random(n) < 0.5, rng.uniform(-6, 6, n),
                     rng.integers(-6, 7, n).astype(np.float64))
        # bases next to 1 with large exponents: log2|a| must be accurate relatively
        near_one = rng.random(n) < 0.2
        a = np.where(near_one, 1 + rng.uniform(-0.01, 0.01, n), a)
        b = np.where(near_one, rng.uniform(-3000, 3000, n), b)
        edges = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 3.0, -3.0,
                 2.5, -7.0, 10.0, 1e-30, 1e30, 3.4e38]
        return cross(edges, edges, a.astype(np.float32), b.astype(np.float32))
    a, b = mixed_floats(rng, n), mixed_floats(rng, n)
    if op in ("div", "floor_div", "mod"):
        b = np.where(rng.random(n) < 0.5, b, rng.uniform(-5, 5, n)).astype(np.float32)
    return cross(FLOAT_EDGES, FLOAT_EDGES, a, b)


def int_pairs(rng, op):
    n = 203
    full = lambda: rng.integers(I32_MIN, I32_MAX, n, endpoint=True)  # noqa: E731
    small = lambda lo, hi: rng.integers(lo, hi, n, endpoint=True)  # noqa: E731
    if op == "pow":
        a, b = small(-12, 12), np.where(rng.random(n) < 0.8, small(-3, 12), full())
    elif op in ("floor_div", "mod"):
        a = np.where(rng.random(n) < 0.5, full(), small(-100, 100))
        b = np.where(rng.random(n) < 0.5, full(), small(-9, 9))
    else:
        a = np.where(rng.random(n) < 0.5, full(), small(-100, 100))
        b = np.where(rng.random(n) < 0.3, a, np.where(rng.random(n) < 0.5, full(),
                                                      small(-100, 100)))
    return cross(INT_EDGES, INT_EDGES, a.astype(np.int32), b.astype(np.int32))


@pytest.mark.parametrize("op", NUMERIC_BINARY)
def test_binary_float(gl, op):
    rng = rng_for("binary_float", op)
    a_val, b_val = float_pairs(rng, op)
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder(a_val.shape, "float32", name="a")
        b = ff.placeholder(b_val.shape, "float32", name="b")
        y = getattr(ff, op)(a, b)
    assert y.dtype == ("bool" if op in COMPARISONS else "float32")
    check(g, {op: y}, {a: a_val, b: b_val})


@pytest.mark.parametrize("op", NUMERIC_BINARY)
def test_binary_int(gl, op):
    rng = rng_for("binary_int", op)
    a_val, b_val = int_pairs(rng, op)
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder(a_val.shape, "int32", name="a")
        b = ff.placeholder(b_val.shape, "int32", name="b")
        y = getattr(ff, op)(a, b)
    assert y.dtype == ("bool" if op in COMPARISONS else "float32" if op == "div"
                       else "int32")
    check(g, {op: y}, {a: a_val, b: b_val})


def test_binary_bool(gl):
    a_val, b_val = cross(BOOL_EDGES, BOOL_EDGES, np.array([True, False, True]),
                         np.array([True, True, False]))
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder(a_val.shape, "bool", name="a")
        b = ff.placeholder(b_val.shape, "bool", name="b")
        ys = {op: getattr(ff, op)(a, b) for op in LOGICAL_BINARY + ["equal", "not_equal"]}
        ys["and_op"], ys["or_op"] = a & b, a | b
    out, ref = check(g, ys, {a: a_val, b: b_val})
    # The edge cross product makes these truth tables: check them outright as well.
    np.testing.assert_array_equal(out["logical_and"][:4], [False, False, False, True])
    np.testing.assert_array_equal(out["logical_or"][:4], [False, True, True, True])


@pytest.mark.parametrize("dtypes", [("int32", "float32"), ("float32", "int32"),
                                    ("bool", "int32"), ("bool", "float32")])
def test_binary_mixed_dtypes(gl, dtypes):
    """Promotion: the narrower operand converts to the wider dtype inside the kernel."""
    rng = rng_for("mixed", dtypes)
    da, db = dtypes
    shape = (6, 7)
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder(shape, da, name="a")
        b = ff.placeholder(shape, db, name="b")
        ops = ["add", "sub", "mul", "div", "floor_div", "mod", "maximum", "minimum",
               "pow"] + COMPARISONS
        ys = {op: getattr(ff, op)(a, b) for op in ops}
    a_val = random_of(rng, da, shape)
    b_val = random_of(rng, db, shape)
    if "float32" in dtypes:
        # a float pow of a full-range int is out of exp2/log2's precision (see pow)
        ys.pop("pow")
    check(g, ys, {a: a_val, b: b_val})


# -- broadcasting -----------------------------------------------------------------------------
BROADCAST_PAIRS = [
    ((), (5,)),
    ((1,), (6,)),
    ((3, 1), (1, 4)),
    ((2, 3, 4), (4,)),
    ((5, 1, 3), (1, 7, 1)),
    ((4, 1), (3, 4, 5)),
    ((2, 1, 3, 1), (1, 5, 1, 2)),
    ((1, 1), (9, 13)),
]


@pytest.mark.parametrize("sa,sb", BROADCAST_PAIRS)
def test_broadcast(gl, sa, sb):
    rng = rng_for("broadcast", sa, sb)
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder(sa, "float32", name="a")
        b = ff.placeholder(sb, "float32", name="b")
        i = ff.placeholder(sb, "int32", name="i")
        c = ff.placeholder(sa, "bool", name="c")
        ys = {"add": a + b, "sub_rev": b - a, "maximum": ff.maximum(b, a),
              "mod": a % b, "less": a < b, "where": ff.where(c, i, b),
              "floor_div_i": ff.floor_div(i, ff.cast(c, "int32") + 2)}
    expected_shape = np.broadcast_shapes(sa, sb)
    assert all(v.shape == expected_shape for v in ys.values())
    check(g, ys, {a: random_of(rng, "float32", sa), b: random_of(rng, "float32", sb),
                  i: random_of(rng, "int32", sb), c: random_of(rng, "bool", sa)})


def test_broadcast_unknown_dims(gl):
    """None dimensions are resolved at feed time; broadcasting still follows numpy."""
    rng = rng_for("unknown_dims")
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder((None, 1), "float32", name="a")
        b = ff.placeholder((None,), "float32", name="b")
        ys = {"mul": a * b, "pow": ff.pow(ff.abs(a), b * 0.25)}
    for rows, cols in [(3, 5), (1, 7)]:
        check(g, ys, {a: random_of(rng, "float32", (rows, 1)),
                      b: rng.uniform(-4, 4, cols).astype(np.float32)})


# -- where, cast, fills ------------------------------------------------------------------------
@pytest.mark.parametrize("dx,dy", [("float32", "float32"), ("int32", "int32"),
                                   ("bool", "bool"), ("int32", "float32"),
                                   ("bool", "int32")])
def test_where(gl, dx, dy):
    rng = rng_for("where", dx, dy)
    g = ff.Graph()
    with g.as_default():
        c = ff.placeholder((3, 1, 5), "bool", name="c")
        x = ff.placeholder((4, 5), dx, name="x")
        y = ff.placeholder((3, 4, 1), dy, name="y")
        ys = {"where": ff.where(c, x, y), "same_shape": ff.where(ff.equal(x, x), x, x),
              "python_condition": ff.where(True, x, y), "scalar_branches": ff.where(c, 1, y)}
    check(g, ys, {c: random_of(rng, "bool", (3, 1, 5)), x: random_of(rng, dx, (4, 5)),
                  y: random_of(rng, dy, (3, 4, 1))})


CAST_PAIRS = [(s, d) for s in ("float32", "int32", "bool") for d in ("float32", "int32", "bool")]


@pytest.mark.parametrize("src,dst", CAST_PAIRS)
def test_cast(gl, src, dst):
    rng = rng_for("cast", src, dst)
    shape = (9, 13)
    x_val = random_of(rng, src, shape)
    if src == "float32":
        # saturation, truncation toward zero and values next to int32's limits
        x_val = sprinkle(rng, x_val, np.float32(
            [2147483647.0, 2147483648.0, -2147483648.0, -2147483904.0, 2147483520.0,
             -2147483520.0, 0.99999994, -0.99999994, 1.5, -1.5, 1e10, -1e10, 16777217.0,
             NAN, INF, -INF, -0.0]))
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(shape, src, name="x")
        y = ff.cast(x, dst)
    assert y.dtype == dst
    check(g, {"cast": y}, {x: x_val})


@pytest.mark.parametrize("dtype,value", [("float32", 2.5), ("float32", -0.0),
                                         ("float32", NAN), ("float32", -INF),
                                         ("int32", I32_MIN), ("int32", 7),
                                         ("bool", True), ("bool", False)])
def test_fill(gl, dtype, value):
    g = ff.Graph()
    with g.as_default():
        ys = {"fill": ff.fill((3, 5), value, dtype), "zeros": ff.zeros((7,), dtype),
              "ones": ff.ones((2, 1, 3), dtype)}
    out, _ = check(g, ys, {})
    assert out["fill"].dtype == np.dtype(dtype)


def test_fill_infers_dtype(gl):
    g = ff.Graph()
    with g.as_default():
        ys = {"f": ff.fill((5,), 1.25), "i": ff.fill((5,), -3), "b": ff.fill((5,), True),
              "scalar": ff.fill((), 4.0)}
    assert [ys[k].dtype for k in "fib"] == ["float32", "int32", "bool"]
    out, _ = check(g, ys, {})
    np.testing.assert_array_equal(out["i"], np.full(5, -3, np.int32))


# -- operators and weak scalars ----------------------------------------------------------------
def test_operators_float(gl):
    rng = rng_for("operators_float")
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 9), "float32", name="x")
        y = ff.placeholder((9,), "float32", name="y")
        ys = {"add": x + y, "radd": 2 + x, "sub": x - y, "rsub": 1.5 - x, "mul": x * y,
              "rmul": 3 * x, "div": x / y, "rdiv": 1 / x, "floordiv": x // y,
              "rfloordiv": 7 // y, "mod": x % y, "rmod": 7.5 % y, "pow": abs(x) ** 0.5,
              "rpow": 2 ** ff.minimum(x, 10.0), "neg": -x, "lt": x < y, "le": x <= 0.5,
              "gt": x > y, "ge": x >= y, "abs": abs(x), "scalar_first": ff.add(1.0, x),
              "np_scalar": np.float32(0.25) * x, "np_int_scalar": np.int32(3) - x,
              "np_array": np.linspace(-2, 2, 9, dtype=np.float32) + x}
    assert all(v.dtype == ("bool" if k in ("lt", "le", "gt", "ge") else "float32")
               for k, v in ys.items())
    check(g, ys, {x: random_of(rng, "float32", (4, 9)), y: random_of(rng, "float32", (9,))})


def test_operators_int_and_weak_scalars(gl):
    """Python scalars are weak: an int scalar keeps an int32 tensor int32 (a bool one
    int32), a float scalar makes the result float32."""
    rng = rng_for("operators_int")
    g = ff.Graph()
    with g.as_default():
        i = ff.placeholder((5, 7), "int32", name="i")
        b = ff.placeholder((5, 7), "bool", name="b")
        ys = {"add": i + 3, "rsub": 10 - i, "mul": i * -2, "floordiv": i // 3,
              "rfloordiv": 100 // i, "mod": i % -7, "rmod": 100 % i, "pow": i ** 2,
              "rpow": 2 ** (i % 31), "div": i / 4, "float_add": i + 0.5,
              "float_mul": i * 2.5, "bool_add": b + 1, "bool_mul_f": b * 1.5,
              "neg": -i, "lt": i < 0, "ge": i >= -1, "bool_and": b & (i > 0),
              "bool_or": (i < 0) | b, "bool_not": ~b, "bool_eq": ff.equal(b, True)}
    expect = {"add": "int32", "rsub": "int32", "mul": "int32", "floordiv": "int32",
              "rfloordiv": "int32", "mod": "int32", "rmod": "int32", "pow": "int32",
              "rpow": "int32", "div": "float32", "float_add": "float32",
              "float_mul": "float32", "bool_add": "int32", "bool_mul_f": "float32",
              "neg": "int32", "lt": "bool", "ge": "bool", "bool_and": "bool",
              "bool_or": "bool", "bool_not": "bool", "bool_eq": "bool"}
    assert {k: v.dtype for k, v in ys.items()} == expect
    check(g, ys, {i: random_of(rng, "int32", (5, 7)), b: random_of(rng, "bool", (5, 7))})


# -- vec4 kernels: how each input's four lanes are read ----------------------------------------
# (output shape, input shape, read): "same" layout, one aligned "texel", one element
# "splat" over four lanes, or a "gather" of four elements.
READS = [
    ((6, 8), (6, 8), "same"), ((7,), (7,), "same"), ((5, 8), (8,), "texel"),
    ((2, 6, 4), (6, 4), "texel"), ((5, 8), (5, 1), "splat"), ((2, 3, 4), (3, 1), "splat"),
    ((9,), (), "splat"), ((5, 3), (3,), "gather"), ((3, 5), (3, 1), "gather"),
    ((4, 6), (6,), "gather"), ((3, 4, 2), (4, 1), "gather"),
]


@pytest.mark.parametrize("out_shape,in_shape,read", READS)
def test_read_classes(out_shape, in_shape, read):
    from fragflow.codegen.elementwise import read_of
    from fragflow.codegen.layout import broadcast_index
    size = int(np.prod(in_shape, dtype=np.int64))
    got = read_of(broadcast_index(out_shape, in_shape)) if size > 1 else "splat"
    assert got == read


@pytest.mark.parametrize("out_shape,in_shape,read", READS)
def test_vec4_reads(gl, out_shape, in_shape, read):
    """A fused chain over float, int32 and bool inputs read each way, against numpy;
    sizes that are not a multiple of 4 end in a partly filled texel."""
    rng = rng_for("vec4_reads", out_shape, in_shape)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(out_shape, "float32", name="x")
        b = ff.placeholder(in_shape, "float32", name="b")
        i = ff.placeholder(out_shape, "int32", name="i")
        j = ff.placeholder(in_shape, "int32", name="j")
        c = ff.placeholder(in_shape, "bool", name="c")
        ys = {"float": ff.maximum(ff.tanh(x * b) - b, x) / (b + 2.0),
              "int": ff.floor_div(i, j) + i % 7 - ff.abs(j),
              "bool": ff.where(ff.logical_and(c, x > b), i, ff.cast(x, "int32")),
              "mixed": ff.cast(c, "float32") * x + ff.cast(j, "float32")}
    out, _ = check(g, ys, {x: random_of(rng, "float32", out_shape),
                           b: random_of(rng, "float32", in_shape),
                           i: random_of(rng, "int32", out_shape),
                           j: random_of(rng, "int32", in_shape),
                           c: random_of(rng, "bool", in_shape)})
    with ff.Session(g) as sess:
        kernels = sess.compile([ys["float"]], feeds=[x, b]).kernels
    (kernel,) = kernels
    main = kernel.source[kernel.source.index("void main()"):]
    assert "for (" not in main and "if (" not in main      # straight vec4 arithmetic
    fetches = 1 + (4 if read == "gather" else 1) + 1      # x, b and the constant 2
    assert f"// fetches per output texel: {fetches}" in main


def test_scalar_constants_as_uniforms(gl):
    """Past 65,536 output elements one-element constants are uniforms, not fetches:
    float (NaN and -0 too), int32 and bool, in fused and single-op kernels."""
    rng = rng_for("uniform_constants")
    shape = (257, 259)                      # 66,563 elements, not a multiple of 4
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(shape, "float32", name="x")
        i = ff.placeholder(shape, "int32", name="i")
        ys = {"fused": ff.maximum(x * 1.5 - 0.25, np.float32(np.nan)) + (-0.0),
              "single": x * np.float32(-3.0),
              "int": ff.floor_div(i, 7) * -2,
              "bool": ff.logical_or(x > 0.5, ff.constant(False))}
    check(g, ys, {x: random_of(rng, "float32", shape), i: random_of(rng, "int32", shape)})
    with ff.Session(g) as sess:
        (kernel,) = sess.compile([ys["fused"]], feeds=[x]).kernels
    assert "uniform float u_a1;" in kernel.source
    assert "// fetches per output texel: 1" in kernel.source


def test_vec4_kernel_carries_only_its_helpers(gl):
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 4), "float32", name="x")
        ys = {"add": x + x, "relu": ff.relu(x), "erf": ff.erf(x)}
    with ff.Session(g) as sess:
        sources = {k: sess.compile([y], feeds=[x], passes=["verify"]).kernels[0].source
                   for k, y in ys.items()}
    assert "ff_relu" not in sources["add"] and "ff_erf" not in sources["add"]
    assert "vec4 ff_relu(vec4 x)" in sources["relu"] and "ff_erf" not in sources["relu"]
    for name in ("ff_erf", "ERF_SERIES", "ff_exp", "ff_copysign"):   # and what it calls
        assert name in sources["erf"]
    assert "ff_tanh" not in sources["erf"]
    for source in sources.values():
        assert len(source.splitlines()) < 150


# -- large tensors ------------------------------------------------------------------------------
def test_large(gl):
    """~1M elements: several texture rows, broadcasting along them."""
    rng = rng_for("large")
    shape = (1013, 1031)                  # 1,044,403 elements, not a multiple of 4
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder(shape, "float32", name="x")
        r = ff.placeholder((1031,), "float32", name="r")
        i = ff.placeholder(shape, "int32", name="i")
        ys = {"add": x + r, "exp": ff.exp(ff.minimum(x, 80.0)), "mod_i": i % 1000}
    check(g, ys, {x: random_of(rng, "float32", shape), r: random_of(rng, "float32", (1031,)),
                  i: random_of(rng, "int32", shape)})


# -- errors --------------------------------------------------------------------------------
REJECTED = [
    ("exp", ["int32"]), ("log", ["bool"]), ("sin", ["int32"]), ("round", ["int32"]),
    ("neg", ["bool"]), ("abs", ["bool"]), ("relu", ["bool"]), ("square", ["bool"]),
    ("logical_not", ["float32"]), ("logical_not", ["int32"]),
    ("add", ["bool", "bool"]), ("mul", ["bool", "bool"]), ("pow", ["bool", "bool"]),
    ("less", ["bool", "bool"]), ("maximum", ["bool", "bool"]),
    ("logical_and", ["int32", "int32"]), ("logical_or", ["float32", "bool"]),
]


@pytest.mark.parametrize("op,dtypes", REJECTED)
def test_rejected_dtypes(op, dtypes):
    g = ff.Graph()
    with g.as_default():
        args = [ff.placeholder((3,), d, name=f"p{k}") for k, d in enumerate(dtypes)]
        with pytest.raises(ff.DTypeError) as info:
            getattr(ff, op)(*args, name="bad")
    assert op in str(info.value) and "'bad'" in str(info.value)


def test_rejected_where_condition():
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3,), "float32", name="x")
        with pytest.raises(ff.DTypeError):
            ff.where(x, x, x)
        with pytest.raises(ff.DTypeError):
            ~x
        with pytest.raises(ff.DTypeError):
            ff.where(1.0, x, x)          # only a Python bool stands for a bool condition


def here() -> int:
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


@pytest.mark.parametrize("sa,sb", [((3,), (4,)), ((2, 3), (3, 2)), ((5, 1, 3), (1, 7, 2))])
def test_broadcast_shape_error(sa, sb):
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder(sa, "float32", name="a")
        b = ff.placeholder(sb, "float32", name="b")
        with pytest.raises(ff.ShapeError) as info:
            line = here(); ff.maximum(a, b, name="bad_max")  # noqa: E702
        msg = str(info.value)
        assert "maximum" in msg and "'bad_max'" in msg and f"{THIS_FILE}:{line}" in msg, msg
        with pytest.raises(ff.ShapeError) as info:
            line = here(); a + b  # noqa: E702
        msg = str(info.value)
        assert "add" in msg and f"{THIS_FILE}:{line}" in msg, msg
        c = ff.placeholder((), "bool", name="c")
        with pytest.raises(ff.ShapeError) as info:
            line = here(); ff.where(c, a, b, name="bad_where")  # noqa: E702
        msg = str(info.value)
        assert "where" in msg and "'bad_where'" in msg and f"{THIS_FILE}:{line}" in msg, msg
