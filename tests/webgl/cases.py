"""The graphs the WebGL tests export and run in the browser, each with its feeds and the
tolerance its comparison with the numpy executor (on the graph as built) uses.

A case is a function returning a Case; CASES lists them by name. Feeds are placeholders
fed with the arrays given (constants would be folded in Python by the very numpy
references the tests compare with)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import fragflow as ff


@dataclass
class Case:
    graph: ff.Graph
    fetches: dict                 # output name -> tensor
    feeds: dict                   # placeholder -> array, in feed order
    runs: int = 1                 # runs in the browser (and on the numpy executor)
    variables: list = field(default_factory=list)   # Variables compared after the runs
    rtol: float = 1e-5
    atol: float = 1e-6
    session_steps: int = 0        # steps on the numpy executor before exporting its values
    reads: int | None = None      # predicates a run reads back (control flow)
    tuning: ff.Tuning | None = None   # the export's (None: the "webgl" profile)


def _edge_values(rng, shape):
    """Normal values with NaN, +-inf, signed zeros and large/small magnitudes spread in."""
    x = rng.standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e30, -1e-30, 3.0],
                        np.float32)
    flat[::7][:len(specials)] = specials[:len(flat[::7])]
    return x


def elementwise():
    rng = np.random.default_rng(1)
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder((7, 5), "float32", name="a")       # 35: not a multiple of 4
        b = ff.placeholder((5,), "float32", name="b")         # broadcast along rows
        c = ff.placeholder((7, 1), "float32", name="c")       # and along columns
        fetches = {
            "relu_fma": ff.relu(a * b + c),
            "div": a / b,
            "exp_log": ff.exp(a) - ff.log(ff.abs(a)),
            "sqrt_tanh": ff.sqrt(ff.abs(a)) + ff.tanh(a),
            "sigmoid": ff.sigmoid(a),
            "exp": ff.exp(a),
            "softplus_elu": ff.nn.softplus(a) + ff.nn.elu(a),
            "max": ff.maximum(a, c),
            "where": ff.where(ff.greater(a, b), a, -b * c),
            "greater": ff.greater(a, c),
            "square": ff.square(a),
        }
    feeds = {a: _edge_values(rng, (7, 5)),
             b: np.array([2.0, -0.0, 0.5, -3.0, np.inf], np.float32),
             c: rng.standard_normal((7, 1)).astype(np.float32)}
    return Case(g, fetches, feeds, rtol=2e-6)


def integers():
    g = ff.Graph()
    with g.as_default():
        i = ff.placeholder((3, 5), "int32", name="i")
        j = ff.placeholder((5,), "int32", name="j")
        fetches = {"add": i + j, "mul": i * j, "floordiv": ff.floordiv(i, j),
                   "to_float": ff.cast(i, "float32") * 0.5,
                   "from_float": ff.cast(ff.cast(i, "float32") * 1.5, "int32")}
    feeds = {i: np.arange(-7, 8, dtype=np.int32).reshape(3, 5),
             j: np.array([1, -2, 3, 7, -5], np.int32)}
    return Case(g, fetches, feeds)


def matmuls():
    rng = np.random.default_rng(3)
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder((33, 17), "float32", name="a")
        b = ff.placeholder((17, 9), "float32", name="b")
        p = ff.placeholder((128, 96), "float32", name="p")
        q = ff.placeholder((96, 160), "float32", name="q")
        s = ff.placeholder((3, 10, 7), "float32", name="s")
        t = ff.placeholder((3, 7, 6), "float32", name="t")
        fetches = {"small": a @ b, "blocked": p @ q, "batched": ff.matmul(s, t),
                   "transposed": ff.matmul(a, a, transpose_b=True),
                   "dense_relu": ff.relu(p @ q + 1.0)}
    feeds = {a: rng.standard_normal((33, 17)).astype(np.float32),
             b: rng.standard_normal((17, 9)).astype(np.float32),
             p: rng.standard_normal((128, 96)).astype(np.float32),
             q: rng.standard_normal((96, 160)).astype(np.float32),
             s: rng.standard_normal((3, 10, 7)).astype(np.float32),
             t: rng.standard_normal((3, 7, 6)).astype(np.float32)}
    return Case(g, fetches, feeds, rtol=1e-4, atol=1e-4)


def structure():
    rng = np.random.default_rng(6)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((6, 7), "float32", name="x")
        idx = ff.placeholder((5,), "int32", name="idx")
        y = ff.placeholder((6, 3), "float32", name="y")
        fetches = {"gather": ff.gather(x, idx), "gather_1": ff.gather(x, idx, axis=1),
                   "concat": ff.concat([x, y], axis=1),
                   "transpose": ff.transpose(x), "pad": ff.pad(y, [[1, 2], [0, 3]]),
                   "slice": x[1:5, ::2], "reshape": ff.reshape(x, (3, 14)) * 2.0,
                   "one_hot": ff.one_hot(idx, 7), "tile": ff.tile(y, [2, 1])}
    feeds = {x: rng.standard_normal((6, 7)).astype(np.float32),
             idx: np.array([5, 0, 3, 3, 1], np.int32),
             y: rng.standard_normal((6, 3)).astype(np.float32)}
    return Case(g, fetches, feeds)


def _cnn(x, rng):
    """conv-relu-pool twice, dense, softmax: a small image classifier's forward pass."""
    w1 = ff.Variable(rng.standard_normal((3, 3, 1, 8)).astype(np.float32) * 0.3, name="w1")
    b1 = ff.Variable(np.zeros(8, np.float32) + 0.1, name="b1")
    w2 = ff.Variable(rng.standard_normal((3, 3, 8, 16)).astype(np.float32) * 0.2, name="w2")
    w3 = ff.Variable(rng.standard_normal((4 * 4 * 16, 10)).astype(np.float32) * 0.1,
                     name="w3")
    h = ff.max_pool2d(ff.relu(ff.conv2d(x, w1, padding="SAME") + b1), 2, 2, "VALID")
    h = ff.max_pool2d(ff.relu(ff.conv2d(h, w2, padding="SAME")), 2, 2, "VALID")
    logits = ff.reshape(h, (-1, 4 * 4 * 16)) @ w3
    return logits, [w1, b1, w2, w3]


def folded_pads():
    """Residual shortcuts whose channels are zero-padded (24 -> 28: the epilogue reads a
    texel; 5 -> 8: an element) read by the conv's epilogue, no pad kernel
    (fold_channel_pads), and an NCHW pad between transposes folded into the next conv
    (layout_transposes, fold_pads); NaN and inf in the image."""
    rng = np.random.default_rng(9)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 6, 7, 24), "float32", name="x")
        y = ff.placeholder((1, 6, 7, 5), "float32", name="y")
        fetches = {}
        for name, v, cin, cout in (("texels", x, 24, 28), ("elements", y, 5, 8)):
            w = rng.standard_normal((3, 3, cin, cout)).astype(np.float32) * 0.2
            shortcut = ff.pad(v, [[0, 0], [0, 0], [0, 0], [0, cout - cin]])
            fetches[name] = ff.relu(ff.conv2d(v, w, padding="SAME") + shortcut)
        nchw = ff.pad(ff.transpose(ff.relu(y), (0, 3, 1, 2)), [[0, 0], [0, 0], [1, 1], [2, 0]])
        w2 = rng.standard_normal((3, 3, 5, 4)).astype(np.float32) * 0.2
        fetches["nchw_pad"] = ff.conv2d(ff.transpose(nchw, (0, 2, 3, 1)), w2, padding="VALID")
    feeds = {x: _edge_values(rng, (1, 6, 7, 24)), y: _edge_values(rng, (1, 6, 7, 5))}
    return Case(g, fetches, feeds, rtol=1e-4, atol=1e-5)


def rgb_stems():
    """Images of 3 and 6 channels padded to whole texels (passes/pad_channels.py: a
    pad_rows kernel; the filter's zero rows left out of model.bin and put back by the
    runtime, slot field `zeros`): a 5x5 stride-2 stem (BlazeFace's) with bias and relu,
    a 3x3 conv of 6 channels; NaN and inf in the image."""
    rng = np.random.default_rng(10)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((1, 64, 64, 3), "float32", name="x")
        y = ff.placeholder((1, 40, 40, 6), "float32", name="y")
        w = rng.standard_normal((5, 5, 3, 24)).astype(np.float32) * 0.2
        b = rng.standard_normal(24).astype(np.float32)
        w6 = rng.standard_normal((3, 3, 6, 20)).astype(np.float32) * 0.2
        fetches = {"stem": ff.relu(ff.conv2d(x, w, strides=2, padding="SAME") + b),
                   "six": ff.conv2d(y, w6, padding="VALID")}
    feeds = {x: _edge_values(rng, (1, 64, 64, 3)), y: _edge_values(rng, (1, 40, 40, 6))}
    return Case(g, fetches, feeds, rtol=1e-4, atol=1e-5)


def small_cnn():
    rng = np.random.default_rng(7)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 16, 16, 1), "float32", name="x")
        logits, _ = _cnn(x, rng)
        fetches = {"probabilities": ff.softmax(logits)}
    return Case(g, fetches, {x: rng.standard_normal((4, 16, 16, 1)).astype(np.float32)},
                rtol=1e-4, atol=1e-5)


def cnn_training_step():
    """SGD on the CNN: after 3 steps in the page the variables equal Session.run's."""
    rng = np.random.default_rng(8)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((8, 16, 16, 1), "float32", name="x")
        labels = ff.placeholder((8,), "int32", name="labels")
        logits, variables = _cnn(x, rng)
        loss = ff.reduce_mean(ff.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits))
        step = ff.optim.SGD(0.1).minimize(loss)
        fetches = {"loss": loss, "step": step}
    feeds = {x: rng.standard_normal((8, 16, 16, 1)).astype(np.float32),
             labels: rng.integers(0, 10, 8).astype(np.int32)}
    return Case(g, fetches, feeds, runs=3, variables=variables, rtol=1e-4, atol=1e-5)


def mlp_adam_from_session():
    """Adam (one kernel writing a variable and its slots: several render targets), its
    values taken from a session that already ran 2 steps."""
    rng = np.random.default_rng(9)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((16, 10), "float32", name="x")
        y = ff.placeholder((16, 3), "float32", name="y")
        w1 = ff.Variable(rng.standard_normal((10, 32)).astype(np.float32) * 0.3, name="w1")
        w2 = ff.Variable(rng.standard_normal((32, 3)).astype(np.float32) * 0.3, name="w2")
        out = ff.tanh(x @ w1) @ w2
        loss = ff.reduce_mean(ff.square(out - y))
        step = ff.optim.Adam(0.01).minimize(loss)
        fetches = {"loss": loss, "step": step}
    feeds = {x: rng.standard_normal((16, 10)).astype(np.float32),
             y: rng.standard_normal((16, 3)).astype(np.float32)}
    return Case(g, fetches, feeds, runs=3, variables=[w1, w2], rtol=1e-4, atol=1e-5,
                session_steps=2)


def onnx_proto():
    """A small ONNX model made with onnx.helper: Conv, Relu, GlobalAveragePool, Flatten,
    Gemm, Softmax, fixed input shape 2x3x8x8."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(10)
    w = rng.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.4
    b = rng.standard_normal(6).astype(np.float32) * 0.1
    fc = rng.standard_normal((6, 4)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["input", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["p"]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1)]
    graph = helper.make_graph(
        nodes, "tiny_onnx",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [2, 3, 8, 8])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [2, 4])],
        initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"),
                     numpy_helper.from_array(fc, "fc")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    proto.ir_version = 8
    onnx.checker.check_model(proto)
    return proto


def onnx_model():
    """A model imported from ONNX (onnx_proto) with ff.onnx.load."""
    model = ff.onnx.load(onnx_proto().SerializeToString())
    rng = np.random.default_rng(11)
    fetches = {"probabilities": model.outputs[0]}
    feeds = {model.inputs[0]: rng.standard_normal((2, 3, 8, 8)).astype(np.float32)}
    return Case(model.graph, fetches, feeds, rtol=1e-4, atol=1e-5)


def layers(widths=(12, 12, 12), rows=6, seed=12):
    """(graph, x, y): dense + tanh, a layer norm by hand and a softmax per layer, layer i
    widths[i] -> widths[i + 1], each in a scope of its own (names of different lengths,
    so their kernels' headers differ in length too) with weights of its own."""
    rng = np.random.default_rng(seed)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((rows, widths[0]), "float32", name="x")
        h = x
        for i, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
            with ff.name_scope("layer" + "_deeper" * i + str(i)):
                w = ff.constant(rng.standard_normal((n_in, n_out)).astype(np.float32) * 0.4)
                b = ff.constant(rng.standard_normal(n_out).astype(np.float32) * 0.1)
                h = ff.tanh(h @ w + b)
                centered = h - ff.reduce_mean(h, axis=-1, keepdims=True)
                var = ff.reduce_mean(ff.square(centered), axis=-1, keepdims=True)
                h = ff.softmax(centered * ff.rsqrt(var + 1e-5), axis=-1)
    return g, x, h


def repeated_layers():
    """Three equal layers and a wider one: the equal ones share their programs."""
    g, x, y = layers((12, 12, 12, 12, 20))
    rng = np.random.default_rng(13)
    return Case(g, {"y": y}, {x: rng.standard_normal((6, 12)).astype(np.float32)},
                rtol=1e-5, atol=1e-6)


def random_draws():
    """Random ops draw from the run counter, which the runtime feeds (0, 1, ..): each
    run's draws equal the numpy executor's same run."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5, 7), "float32", name="x")
        fetches = {"uniform": ff.random_uniform((5, 7), seed=3) + x,
                   "normal": ff.random_normal((3, 9), seed=4) * 2.0}
    # normal's Box-Muller goes through log, cos and sqrt: SwiftShader's are within
    # 7e-5 relative of numpy's (Mesa's within 1e-5), as GLSL ES lets them be
    return Case(g, fetches, {x: np.zeros((5, 7), np.float32)}, runs=2, rtol=2e-4,
                atol=1e-5)


# -- control flow (while_loop, cond, scan: schedule version 2, docs/WEBGL.md) ------------
# Each case's `reads` is how many predicates a run reads back (a while_loop one per
# test of its condition, a cond one, a scan none), which the browser test checks.
def while_loops():
    """A loop counted by `i < 10` (data-dependent to the IR: its predicate is read back
    each iteration), one whose condition is a constant with maximum_iterations (no
    readback), and one whose trip count depends on the values, fed so that it runs
    several iterations, and on other values zero."""
    rng = np.random.default_rng(20)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((3, 5), "float32", name="x")
        big = ff.placeholder((3, 5), "float32", name="big")
        i, v, flag = ff.while_loop(lambda i, v, f: i < 10,
                                   lambda i, v, f: (i + 1, v * 0.9 + x, ff.logical_not(f)),
                                   (0, x, ff.constant(True)))
        w = ff.while_loop(lambda w: True, lambda w: ff.tanh(w) * 1.5 + 0.25,
                          x, maximum_iterations=6)

        def grow(v, c):
            return ff.reduce_max(ff.abs(v)) < 50.0
        grown, count = ff.while_loop(grow, lambda v, c: (v * 1.7 + 0.1, c + 1), (x, 0))
        kept, none = ff.while_loop(grow, lambda v, c: (v * 1.7 + 0.1, c + 1), (big, 0))
        capped, two = ff.while_loop(grow, lambda v, c: (v * 1.7 + 0.1, c + 1), (x, 0),
                                    maximum_iterations=2)      # stops before grow does
        # results that cannot swap textures with the variables (copied first): two
        # variables trading places, a variable returned as it is, a captured value
        _, sa, sb = ff.while_loop(lambda i, a, b: i < 3, lambda i, a, b: (i + 1, b, a),
                                  (0, x, big))
        _, same, cap = ff.while_loop(lambda i, s, c: i < 2,
                                     lambda i, s, c: (i + 1, s, big * 2.0), (0, x, x))
        fetches = {"i": i, "v": v, "flag": flag, "w": w, "grown": grown, "count": count,
                   "kept": kept, "none": none, "capped": capped, "two": two,
                   "swapped_a": sa, "swapped_b": sb,
                   "same": same, "captured": cap}
    xs = rng.standard_normal((3, 5)).astype(np.float32)
    case = Case(g, fetches, {x: xs, big: xs * 100.0 + 60.0}, runs=2)
    case.reads = 11 + int(np.ceil(np.log(50.0 / np.abs(xs).max()) / np.log(1.7))) + 2 \
        + 2 + 4 + 3
    return case


def conds():
    """Two conds whose branches are matmuls (not the select small branches become),
    one taking its true branch, one its false; the predicates are computed."""
    rng = np.random.default_rng(21)
    g = ff.Graph()
    with g.as_default():
        a = ff.placeholder((4, 6), "float32", name="a")
        w = ff.placeholder((6, 5), "float32", name="w")

        def branches(p):
            return ff.cond(ff.reduce_sum(p) > 0, lambda: ff.relu(p @ w) + 1.0,
                           lambda: ff.tanh(p @ w) * 2.0 - ff.reduce_mean(p))
        # the branch taken returns a feed as it is: the cond's result is its texture
        same = ff.cond(ff.reduce_sum(a) < 100.0, lambda: a, lambda: a - ff.reduce_mean(a))
        fetches = {"taken_true": branches(ff.abs(a)), "taken_false": branches(-ff.abs(a)),
                   "both": branches(a) + branches(a * 2.0), "same": same * 2.0}
    feeds = {a: rng.standard_normal((4, 6)).astype(np.float32),
             w: rng.standard_normal((6, 5)).astype(np.float32)}
    case = Case(g, fetches, feeds, rtol=1e-5, atol=1e-5)
    case.reads = 5
    return case


def scans():
    """tf.scan (carry = ys) forward and reverse over rows of 7 (ys not a whole number of
    texels a step), lax-style scan with a carry and ys of other shapes and dtypes,
    map_fn (ys only), foldr, and fori_loop (a scan without elements: counted)."""
    rng = np.random.default_rng(22)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((6, 7), "float32", name="x")
        fetches = {
            "cumulative": ff.scan(lambda acc, row: acc * 0.5 + row, x,
                                  initializer=ff.zeros((7,))),
            "reverse": ff.scan(lambda acc, row: ff.tanh(acc) + row, x,
                               initializer=ff.ones((7,)), reverse=True),
            "map": ff.map_fn(lambda row: ff.reduce_sum(row * row), x),
            "foldr": ff.foldr(lambda acc, row: acc * 0.9 + ff.reduce_max(row), x,
                              initializer=ff.constant(0.0)),
            "fori": ff.fori_loop(0, 5, lambda i, v: v * 1.1 + ff.cast(i, "float32"), x),
        }
        # two carries, one int32 (the int copy shader places its ys)
        sums, counts = ff.scan(lambda acc, row: (acc[0] + row, acc[1] + 2), x,
                               initializer=(ff.zeros((7,)), ff.constant(1)), reverse=True)
        fetches.update(sums=sums, counts=counts)
        empty = ff.placeholder((0, 7), "float32", name="empty")     # zero steps
        fetches.update(
            zero_steps=ff.scan(lambda acc, row: acc + row, empty, initializer=ff.ones((7,))),
            zero_fold=ff.foldl(lambda acc, row: acc * row, empty, initializer=x[0]))
    feeds = {x: rng.standard_normal((6, 7)).astype(np.float32),
             empty: np.zeros((0, 7), np.float32)}
    case = Case(g, fetches, feeds, runs=2, rtol=1e-5, atol=1e-5)
    case.reads = 0
    return case


def nested_loops():
    """A while_loop inside a while_loop, a cond inside the loop, a fori_loop inside a
    cond (tests/control_flow/test_cf_gl.py's case), fed to take each outer branch."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((5, 3), "float32", name="x")
        w = ff.placeholder((3,), "float32", name="w")

        def nest(x):
            def outer(i, acc):
                _, inner = ff.while_loop(lambda j, a: j < i,
                                         lambda j, a: (j + 1, a * 0.5 + w), (0, acc))
                # a reduction in a branch: a cond that reads its predicate back (small
                # elementwise branches become a select, passes/select_conds.py)
                flipped = ff.cond(ff.reduce_sum(inner) > 0,
                                  lambda: inner - ff.reduce_mean(inner),
                                  lambda: inner + 2.0)
                return i + 1, flipped
            looped = ff.while_loop(lambda i, a: i < 4, outer, (0, x))[1]
            return ff.cond(ff.reduce_sum(x) > 0,
                           lambda: ff.fori_loop(0, 3, lambda i, v: v * w, looped),
                           lambda: looped * 2.0)
        fetches = {"positive": nest(ff.abs(x)), "negative": nest(-ff.abs(x))}
    rng = np.random.default_rng(23)
    feeds = {x: rng.standard_normal((5, 3)).astype(np.float32),
             w: np.array([0.5, -1.0, 2.0], np.float32)}
    case = Case(g, fetches, feeds)
    # per nest: the outer loop tests 5 times, its 4 bodies run 0+1+2+3 inner
    # iterations (10 tests of the inner condition) and a cond each; then the last cond
    case.reads = 2 * (5 + 10 + 4 + 1)
    return case


def lstm():
    """A Keras LSTM over 5 steps (one scan) returning its sequences and states."""
    rng = np.random.default_rng(24)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((2, 5, 3), "float32", name="x")
        layer = ff.keras.layers.LSTM(8, return_sequences=True, return_state=True)
        seq, h, c = layer(x)
        fetches = {"sequences": seq, "h": h, "c": c}
    case = Case(g, fetches, {x: rng.standard_normal((2, 5, 3)).astype(np.float32)},
                rtol=1e-5, atol=1e-5)
    case.reads = 0
    return case


def lstm_training_step():
    """SGD through the LSTM (its gradient is a reverse scan): after 3 steps in the page
    the weights equal Session.run's."""
    rng = np.random.default_rng(25)
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4, 5, 3), "float32", name="x")
        y = ff.placeholder((4, 2), "float32", name="y")
        layer = ff.keras.layers.LSTM(6)
        dense = ff.keras.layers.Dense(2)
        loss = ff.reduce_mean(ff.square(dense(layer(x)) - y))
        step = ff.optim.SGD(0.5).minimize(loss)
        fetches = {"loss": loss, "step": step}
    feeds = {x: rng.standard_normal((4, 5, 3)).astype(np.float32),
             y: rng.standard_normal((4, 2)).astype(np.float32)}
    case = Case(g, fetches, feeds, runs=3, variables=list(layer.weights) + list(dense.weights),
                rtol=1e-4, atol=1e-5)
    case.reads = 0
    return case


def control_gradients():
    """Gradients through a while_loop with maximum_iterations and through a cond."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((4,), "float32", name="x")
        # polynomial (GLSL ES lets sin be 2e-4 off on SwiftShader, as it is)
        _, y = ff.while_loop(lambda i, v: i < 3,
                             lambda i, v: (i + 1, v * x - 0.25 * v * v * v),
                             (0, x), maximum_iterations=5)
        (gx,) = ff.gradients(ff.reduce_sum(y * y), [x])
        c = ff.cond(ff.reduce_sum(x) > 0, lambda: ff.reduce_sum(ff.exp(x)) * x,
                    lambda: x * 3.0)
        (gc,) = ff.gradients(ff.reduce_sum(c * c), [x])
        fetches = {"y": y, "grad_while": gx, "grad_cond": gc}
    case = Case(g, fetches, {x: np.array([0.5, -1.0, 2.0, 0.25], np.float32)}, atol=1e-5)
    # the loop tests its condition 4 times (3 trips), the backward loop as many (its
    # forward's trip count, passes/autodiff/control.py); the cond and its gradient's cond
    case.reads = 4 + 4 + 1 + 1
    return case


def side_effects():
    """Assigns and random draws in loops and branches (issue 31), TF2's semantics: a
    body's assigns once per iteration, a later read seeing them; a branch's only when
    taken; random ops drawing afresh each iteration and each run. The model's run
    applies them as Session.run does (the variables are compared after two runs)."""
    g = ff.Graph()
    with g.as_default():
        x = ff.placeholder((6,), "float32", name="x")
        v = ff.Variable(np.zeros(6, np.float32), name="v")
        n = ff.Variable(0, name="n")

        def body(i, acc):
            v.assign_add(ff.nn.dropout(x, rate=0.5, seed=2))
            n.assign_add(1)
            return i + 1, acc + v * 0.5 + ff.random_uniform((6,), seed=9)
        _, acc = ff.while_loop(lambda i, a: i < 3, body, (0, x))
        # a cond that stays one (a matmul is no select's branch), taken (the sum is
        # positive): n gains 10 a run besides the loop's 3
        taken = ff.cond(ff.reduce_sum(x) > 0,
                        lambda: ff.cast(n.assign_add(10), "float32")
                        + ff.reduce_sum(ff.matmul(ff.reshape(x, (2, 3)),
                                                  ff.reshape(x, (3, 2)))),
                        lambda: ff.cast(ff.identity(n), "float32"))

        def step(a, e):
            return v.assign_add(ff.ones([6]) * e) + a * 0.5 + ff.random_normal((6,), seed=1)
        s = ff.scan(step, x[:2] * 2.0, initializer=ff.zeros([6]))
        fetches = {"acc": acc, "taken": taken, "s": s}
    case = Case(g, fetches, {x: np.float32([0.5, -1.0, 2.0, 0.25, 1.5, -0.75])}, runs=2,
                variables=[v, n], rtol=2e-4, atol=1e-5)
    case.reads = 4 + 1          # per run: the loop's 4 predicates, the cond's one
    return case


CONTROL_CASES = ("while_loops", "conds", "scans", "nested_loops", "lstm",
                 "lstm_training_step", "control_gradients", "side_effects")

# reductions, matmuls, convolutions and softmaxes are strategy_cases.py's, one case a
# kernel strategy (matmuls() stays for test_webgl_export.py)
CASES = {fn.__name__: fn for fn in (
    elementwise, integers, structure,
    folded_pads, rgb_stems, small_cnn, cnn_training_step, mlp_adam_from_session, onnx_model,
    repeated_layers, random_draws,
    while_loops, conds, scans, nested_loops, lstm, lstm_training_step, control_gradients,
    side_effects)}
