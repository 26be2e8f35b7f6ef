"""float16 ONNX models made with onnx.helper, as torch's `.half()` export writes them
(float16 inputs, initializers and outputs), each with its float32 twin: the same graph
with FLOAT types and the same weights, every one exactly a float16 value. fragflow
computes in float32 from the half weights, so onnxruntime on the twin is its oracle
(within float32's rounding) and onnxruntime on the float16 model differs by float16
arithmetic's rounding."""
from __future__ import annotations

import numpy as np

RNG = np.random.default_rng(5)

# edge weights: -0, the smallest subnormal, a subnormal, the smallest normal, the
# largest half, its negative, +inf, -inf, NaN, and ordinary values (11: not a multiple
# of 4)
EDGES = np.array([-0.0, 2.0 ** -24, 3 * 2.0 ** -20, 2.0 ** -14, 65504.0, -65504.0,
                  np.inf, -np.inf, np.nan, 0.5, -1.25], np.float16)


def _weights() -> dict:
    def w(*shape, scale=0.3):
        return (RNG.standard_normal(shape) * scale).astype(np.float16)
    d, f = 12, 20                 # width (3 heads of 4), feed-forward: not multiples of 8
    return {"wq": w(d, d), "wk": w(d, d), "wv": w(d, d), "wo": w(d, d),
            "bq": w(d), "bo": w(d), "gamma": (1 + w(d, scale=0.1)).astype(np.float16),
            "beta": w(d, scale=0.1), "w1": w(d, f), "b1": w(f), "w2": w(f, d),
            "b2": w(d), "scale": np.array(2.0, np.float16),
            "sqrt2": np.array(np.sqrt(2.0), np.float16),
            "half": np.array(0.5, np.float16), "one": np.array(1.0, np.float16),
            "heads": np.array([1, 5, 3, 4], np.int64),
            "merged": np.array([1, 5, 12], np.int64)}


WEIGHTS = _weights()
TOKENS, WIDTH = 5, 12


def encoder_layer(dtype: str):
    """A BERT-style encoder layer on x[1, 5, 12] (float16 or float32 throughout):
    self-attention of 3 heads (MatMul, Reshape, Transpose, Div, Softmax), a residual,
    LayerNormalization, a feed-forward of 20 with erf GELU, a residual."""
    from onnx import TensorProto, helper, numpy_helper
    elem = TensorProto.FLOAT16 if dtype == "float16" else TensorProto.FLOAT
    np_dtype = np.float16 if dtype == "float16" else np.float32
    inits = [numpy_helper.from_array(a if a.dtype == np.int64 else a.astype(np_dtype), n)
             for n, a in WEIGHTS.items()]
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "wq"], ["q0"]), n("Add", ["q0", "bq"], ["q1"]),
        n("MatMul", ["x", "wk"], ["k0"]), n("MatMul", ["x", "wv"], ["v0"]),
        n("Reshape", ["q1", "heads"], ["q2"]), n("Transpose", ["q2"], ["q"], perm=[0, 2, 1, 3]),
        n("Reshape", ["k0", "heads"], ["k2"]), n("Transpose", ["k2"], ["kt"], perm=[0, 2, 3, 1]),
        n("Reshape", ["v0", "heads"], ["v2"]), n("Transpose", ["v2"], ["v"], perm=[0, 2, 1, 3]),
        n("MatMul", ["q", "kt"], ["s0"]), n("Div", ["s0", "scale"], ["s1"]),
        n("Softmax", ["s1"], ["p"], axis=-1), n("MatMul", ["p", "v"], ["a0"]),
        n("Transpose", ["a0"], ["a1"], perm=[0, 2, 1, 3]), n("Reshape", ["a1", "merged"], ["a2"]),
        n("MatMul", ["a2", "wo"], ["o0"]), n("Add", ["o0", "bo"], ["o1"]),
        n("Add", ["o1", "x"], ["r0"]),
        n("LayerNormalization", ["r0", "gamma", "beta"], ["ln"], axis=-1, epsilon=1e-5),
        n("MatMul", ["ln", "w1"], ["f0"]), n("Add", ["f0", "b1"], ["f1"]),
        n("Div", ["f1", "sqrt2"], ["g0"]), n("Erf", ["g0"], ["g1"]),
        n("Add", ["g1", "one"], ["g2"]), n("Mul", ["f1", "g2"], ["g3"]),
        n("Mul", ["g3", "half"], ["g4"]),
        n("MatMul", ["g4", "w2"], ["f2"]), n("Add", ["f2", "b2"], ["f3"]),
        n("Add", ["f3", "ln"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "encoder_layer", [helper.make_tensor_value_info("x", elem, [1, TOKENS, WIDTH])],
        [helper.make_tensor_value_info("y", elem, [1, TOKENS, WIDTH])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             ir_version=8)


def edge_add(dtype: str):
    """y = x + w, w the float16 EDGES (11 values) in the model's dtype."""
    from onnx import TensorProto, helper, numpy_helper
    elem = TensorProto.FLOAT16 if dtype == "float16" else TensorProto.FLOAT
    w = EDGES if dtype == "float16" else EDGES.astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "edge_add",
        [helper.make_tensor_value_info("x", elem, [2, 11])],
        [helper.make_tensor_value_info("y", elem, [2, 11])],
        [numpy_helper.from_array(w, "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             ir_version=8)
