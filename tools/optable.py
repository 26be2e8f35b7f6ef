"""The op table in docs/OPS.md, generated from the registry:

    python -m fragflow.tools.optable > docs/OPS.md

tests/test_registry.py checks the file is what this prints, so the table and the
registry stay in step."""
from __future__ import annotations

import fragflow as ff
from fragflow.ir.ops.registry import all_ops
from fragflow.passes.autodiff import GRADIENTS

# TensorFlow's name for each IR op (its raw op name for internal ones); "—" where
# TensorFlow has none.
TF = {
    "add": "tf.math.add", "sub": "tf.math.subtract", "mul": "tf.math.multiply",
    "div": "tf.math.truediv", "floor_div": "tf.math.floordiv", "mod": "tf.math.floormod",
    "neg": "tf.math.negative", "pow": "tf.math.pow", "add_n": "tf.math.add_n",
    "where": "tf.where", "cast": "tf.cast", "identity": "tf.identity", "fill": "tf.fill",
    "zeros_like": "tf.zeros_like", "ones_like": "tf.ones_like", "range": "tf.range",
    "linspace": "tf.linspace", "step": "tf.js step", "prelu": "tf.keras PReLU",
    "relu": "tf.nn.relu", "relu6": "tf.nn.relu6", "elu": "tf.nn.elu", "selu": "tf.nn.selu",
    "leaky_relu": "tf.nn.leaky_relu", "softplus": "tf.math.softplus",
    "sigmoid": "tf.math.sigmoid", "clip_by_value": "tf.clip_by_value",
    "sum": "tf.reduce_sum", "mean": "tf.reduce_mean", "max": "tf.reduce_max",
    "min": "tf.reduce_min", "prod": "tf.reduce_prod", "logsumexp": "tf.reduce_logsumexp",
    "argmax": "tf.math.argmax", "argmin": "tf.math.argmin", "cumsum": "tf.math.cumsum",
    "softmax": "tf.nn.softmax", "log_softmax": "tf.nn.log_softmax",
    "lrn": "tf.nn.local_response_normalization", "lrn_grad": "LRNGrad",
    "matmul": "tf.linalg.matmul", "reshape": "tf.reshape", "transpose": "tf.transpose",
    "expand_dims": "tf.expand_dims", "squeeze": "tf.squeeze",
    "strided_slice": "tf.strided_slice", "strided_slice_grad": "StridedSliceGrad",
    "conv2d": "tf.nn.conv2d", "conv3d": "tf.nn.conv3d",
    "depthwise_conv2d": "tf.nn.depthwise_conv2d", "dilation2d": "tf.nn.dilation2d",
    "conv2d_backprop_input": "Conv2DBackpropInput (tf.nn.conv2d_transpose)",
    "conv2d_backprop_filter": "Conv2DBackpropFilter",
    "conv3d_backprop_input": "Conv3DBackpropInputV2 (tf.nn.conv3d_transpose)",
    "conv3d_backprop_filter": "Conv3DBackpropFilterV2",
    "depthwise_conv2d_backprop_input": "DepthwiseConv2dNativeBackpropInput",
    "depthwise_conv2d_backprop_filter": "DepthwiseConv2dNativeBackpropFilter",
    "dilation2d_backprop_input": "Dilation2DBackpropInput",
    "dilation2d_backprop_filter": "Dilation2DBackpropFilter",
    "max_pool": "tf.nn.max_pool2d", "avg_pool": "tf.nn.avg_pool2d", "min_pool": "tf.js minPool",
    "max_pool3d": "tf.nn.max_pool3d", "avg_pool3d": "tf.nn.avg_pool3d",
    "max_pool_grad": "MaxPoolGrad", "max_pool_grad_grad": "MaxPoolGradGrad",
    "min_pool_grad": "—", "min_pool_grad_grad": "—", "avg_pool_grad": "AvgPoolGrad",
    "max_pool3d_grad": "MaxPool3DGrad", "max_pool3d_grad_grad": "MaxPool3DGradGrad",
    "avg_pool3d_grad": "AvgPool3DGrad",
    "resize_bilinear": "tf.compat.v1.image.resize_bilinear",
    "resize_nearest_neighbor": "tf.compat.v1.image.resize_nearest_neighbor",
    "resize_bilinear_grad": "ResizeBilinearGrad",
    "resize_nearest_neighbor_grad": "ResizeNearestNeighborGrad",
    "random_uniform": "tf.random.uniform", "random_normal": "tf.random.normal",
    "truncated_normal": "tf.random.truncated_normal", "multinomial": "tf.random.categorical",
    "dropout": "tf.nn.dropout", "concat": "tf.concat", "pad": "tf.pad",
    "mirror_pad": "tf.pad (REFLECT/SYMMETRIC)", "mirror_pad_grad": "MirrorPadGrad",
    "tile": "tf.tile", "reverse": "tf.reverse", "gather": "tf.gather",
    "gather_nd": "tf.gather_nd", "gather_grad": "— (IndexedSlices)",
    "gather_nd_grad": "ScatterNd", "one_hot": "tf.one_hot", "top_k_rank": "tf.math.top_k",
    "top_k_indices": "tf.math.top_k", "broadcast_to": "tf.broadcast_to",
    "unsorted_segment_sum": "tf.math.unsorted_segment_sum",
    "sum_like": "— (BroadcastGradientArgs + Sum)", "reshape_like": "— (Reshape to shape)",
    "stop_gradient": "tf.stop_gradient", "custom_gradient": "tf.custom_gradient",
    "placeholder": "tf.compat.v1.placeholder", "constant": "tf.constant",
    "variable": "tf.Variable", "assign": "tf.compat.v1.assign", "run_counter": "—",
    "fused_matmul": "_FusedMatMul", "fused_conv": "_FusedConv2D / FusedDepthwiseConv2dNative",
    "fused_elementwise": "— (XLA loop fusion)", "gpgpu_program": "tf.js GPGPUProgram",
}
MATH = {"abs", "acos", "acosh", "asin", "asinh", "atan", "atan2", "atanh", "ceil", "cos",
        "cosh", "equal", "erf", "exp", "expm1", "floor", "greater", "greater_equal",
        "is_finite", "is_inf", "is_nan", "less", "less_equal", "log", "log1p",
        "logical_and", "logical_not", "logical_or", "maximum", "minimum", "not_equal",
        "reciprocal", "round", "rsqrt", "sign", "sin", "sinh", "sqrt", "square",
        "squared_difference", "tan", "tanh"}


def tf_name(op: str) -> str:
    return f"tf.math.{op}" if op in MATH else TF.get(op, "—")


def user_function(op: str) -> str:
    return f"ff.{op}" if hasattr(ff, op) else "(internal)"


def differentiable(opdef) -> str:
    if not opdef.differentiable:
        return "no"
    return "yes" if opdef.name in GRADIENTS else "MISSING RULE"


def table() -> str:
    ops = sorted(all_ops().values(), key=lambda o: (o.family, o.name))
    lines = ["# Ops", "",
             "Every op in fragflow's IR: its family (ir/ops/<family>.py,",
             "passes/autodiff/<family>.py, codegen/templates/<family>.glsl.j2), the function",
             "users call, TensorFlow's name for it, and whether gradients flow through it.",
             "Generated by `python -m fragflow.tools.optable`; tests/test_registry.py keeps",
             "it in step with the registry.", "",
             "| op | family | function | TensorFlow | differentiable |",
             "|---|---|---|---|---|"]
    for o in ops:
        lines.append(f"| {o.name} | {o.family} | {user_function(o.name)} | "
                     f"{tf_name(o.name)} | {differentiable(o)} |")
    lines += ["", f"{len(ops)} ops: "
              f"{sum(1 for o in ops if o.differentiable)} differentiable (each with a "
              f"rule), {sum(1 for o in ops if not o.differentiable)} not.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(), end="")
