"""Each TF op rule against TF.js 4.22 (node, CPU backend) on the same inputs, with edge
values: one small model per case, all run by one node process; fragflow runs each on
the numpy executor (the graph as built) and on GL. A few rules are also held to a
float64 formula of TF's semantics (FloorMod, Round, ResizeBilinear's modes)."""
from __future__ import annotations

import numpy as np
import pytest
import tfjs_corpus as corpus
from tfjs_builder import ModelBuilder

import fragflow as ff

RNG = np.random.default_rng(7)
CASES = {}


def case(fn):
    CASES[fn.__name__[5:]] = fn
    return fn


def rand(*shape, lo=-2.0, hi=2.0):
    return RNG.uniform(lo, hi, shape).astype(np.float32)


# -- elementwise with TF's semantics --------------------------------------------------------
@case
def case_floor_mod_div(b):
    b.placeholder("x", [8])
    b.placeholder("y", [8])
    b.placeholder("i", [6], "int32")
    b.placeholder("j", [6], "int32")
    b.op("FloorMod", "fm", ["x", "y"])
    b.op("FloorDiv", "fd", ["x", "y"])
    b.op("FloorMod", "im", ["i", "j"])
    b.op("FloorDiv", "idv", ["i", "j"])
    b.op("Div", "idiv", ["i", "j"])
    b.op("RealDiv", "rd", ["x", "y"])
    x = np.array([7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 3.0, -3.0], np.float32)
    y = np.array([2.0, 2.0, -2.0, -2.0, 3.0, 3.0, 1.5, 1.5], np.float32)
    i = np.array([7, -7, 7, -7, 0, 6], np.int32)
    j = np.array([2, 2, -2, -2, 5, 3], np.int32)
    return {"x": x, "y": y, "i": i, "j": j}, ["fm", "fd", "im", "idv", "idiv", "rd"]


@case
def case_round_and_unary(b):
    b.placeholder("x", [12])
    for op in ("Round", "Floor", "Ceil", "Sign", "Abs", "Neg", "Square", "Reciprocal",
               "Exp", "Tanh", "Sigmoid", "Relu", "Relu6", "Elu", "Selu", "Softplus", "Sin",
               "Cos"):
        b.op(op, op.lower(), ["x"])
    b.op("LeakyRelu", "leaky", ["x"], alpha=0.3)
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -7.2, 0.0, 6.5, 0.49999997, 9.0],
                 np.float32)
    outs = [n["name"] for n in b.nodes[1:]]
    return {"x": x}, outs


@case
def case_binary(b):
    b.placeholder("x", [2, 3, 4])
    b.placeholder("y", [3, 1])
    b.placeholder("z", [4])
    b.op("Atan2", "atan2", ["x", "y"])
    b.op("Pow", "pow", ["z", "z"])
    b.op("SquaredDifference", "sqd", ["x", "z"])
    b.op("Maximum", "max", ["x", "y"])
    b.op("Minimum", "min", ["x", "z"])
    b.op("AddV2", "add", ["x", "y"])
    b.op("Sub", "sub", ["x", "z"])
    b.op("Mul", "mul", ["x", "y"])
    b.op("Prelu", "prelu", ["x", "z"])
    b.op("Rsqrt", "rsqrt", ["z"])
    b.op("Greater", "gt", ["x", "y"])
    b.op("LessEqual", "le", ["x", "z"])
    b.op("Select", "select", ["gt", "x", "sub"])
    b.op("SelectV2", "select2", ["le", "x", "y"])
    b.op("AddN", "addn", ["x", "sub", "add"])
    y = np.array([[0.0], [-1.0], [2.0]], np.float32)
    return {"x": rand(2, 3, 4), "y": y, "z": rand(4, lo=0.5, hi=2.0)}, \
        ["atan2", "pow", "sqd", "max", "min", "add", "sub", "mul", "prelu", "rsqrt",
         "select", "select2", "addn"]


# -- converter fused ops --------------------------------------------------------------------
FUSED_OPS = [["BiasAdd"], ["BiasAdd", "Relu"], ["BiasAdd", "Relu6"], ["BiasAdd", "Elu"],
             ["BiasAdd", "Sigmoid"], ["BiasAdd", "Prelu"], ["BiasAdd", "LeakyRelu"]]


@case
def case_fused_conv2d(b):
    b.placeholder("x", [1, 7, 7, 3])
    b.const("w", rand(3, 3, 3, 4))
    b.const("bias", rand(4))
    b.const("alpha", rand(4, lo=0.0, hi=0.5))
    outs = []
    for k, fused in enumerate(FUSED_OPS):
        args = ["bias", "alpha"] if "Prelu" in fused else ["bias"]
        extra = {"leakyrelu_alpha": 0.15} if "LeakyRelu" in fused else {}
        outs.append(b.op("_FusedConv2D", f"c{k}", ["x", "w", *args], strides=[1, 2, 2, 1],
                         padding="SAME", dilations=[1, 1, 1, 1], data_format="NHWC",
                         fused_ops=fused, num_args=len(args), epsilon=0.0, **extra))
    outs.append(b.op("Conv2D", "plain", ["x", "w"], strides=[1, 1, 1, 1], padding="VALID",
                     dilations=[1, 2, 2, 1], data_format="NHWC"))
    outs.append(b.op("Conv2D", "explicit", ["x", "w"], strides=[1, 1, 1, 1],
                     padding="EXPLICIT", explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0],
                     dilations=[1, 1, 1, 1], data_format="NHWC"))
    return {"x": rand(1, 7, 7, 3)}, outs


@case
def case_fused_depthwise(b):
    b.placeholder("x", [1, 9, 8, 4])
    b.const("w", rand(3, 3, 4, 1))
    b.const("bias", rand(4))
    b.const("alpha", rand(4, lo=0.0, hi=0.5))
    outs = []
    for k, fused in enumerate(FUSED_OPS):
        args = ["bias", "alpha"] if "Prelu" in fused else ["bias"]
        extra = {"leakyrelu_alpha": 0.25} if "LeakyRelu" in fused else {}
        outs.append(b.op("FusedDepthwiseConv2dNative", f"d{k}", ["x", "w", *args],
                         strides=[1, 2, 2, 1], padding="SAME", dilations=[1, 1, 1, 1],
                         data_format="NHWC", fused_ops=fused, num_args=len(args), **extra))
    # TF.js 4.22 does not pass leakyrelu_alpha to its fused depthwise kernel (NaN where
    # the input is negative): the unfused ops are the reference for that one (see
    # TFJS_BUGS)
    b.op("DepthwiseConv2dNative", "dw", ["x", "w"], strides=[1, 2, 2, 1], padding="SAME",
         dilations=[1, 1, 1, 1], data_format="NHWC")
    b.op("BiasAdd", "dwb", ["dw", "bias"], data_format="NHWC")
    outs.append(b.op("LeakyRelu", "d6_unfused", ["dwb"], alpha=0.25))
    outs.append(b.op("DepthwiseConv2dNative", "plain", ["x", "w"], strides=[1, 1, 1, 1],
                     padding="SAME", dilations=[1, 2, 2, 1], data_format="NHWC"))
    return {"x": rand(1, 9, 8, 4)}, outs


@case
def case_fused_matmul(b):
    b.placeholder("x", [3, 5])
    b.const("w", rand(4, 5))
    b.const("bias", rand(4))
    b.const("alpha", rand(4, lo=0.0, hi=0.5))
    outs = []
    for k, fused in enumerate(FUSED_OPS):
        args = ["bias", "alpha"] if "Prelu" in fused else ["bias"]
        extra = {"leakyrelu_alpha": 0.1} if "LeakyRelu" in fused else {}
        outs.append(b.op("_FusedMatMul", f"m{k}", ["x", "w", *args], transpose_a=False,
                         transpose_b=True, fused_ops=fused, num_args=len(args),
                         epsilon=0.0, **extra))
    outs.append(b.op("MatMul", "plain", ["x", "w"], transpose_a=False, transpose_b=True))
    return {"x": rand(3, 5)}, outs


@case
def case_batch_matmul_and_transpose_conv(b):
    # same batch dims: TF.js 4.22's CPU matMul broadcasting [2, 1] against [3] returns
    # half the values (broadcasting is held to numpy below)
    b.placeholder("a", [2, 3, 3, 4])
    b.placeholder("c", [2, 3, 5, 4])
    b.op("BatchMatMulV2", "bmm", ["a", "c"], adj_x=False, adj_y=True)
    b.placeholder("d", [2, 3, 3, 5])
    b.op("BatchMatMulV2", "bmm_adj", ["a", "d"], adj_x=True, adj_y=False)
    b.placeholder("dy", [1, 4, 4, 2])
    b.const("w", rand(3, 3, 3, 2))
    b.const("sizes", np.array([1, 8, 8, 3], np.int32))
    b.op("Conv2DBackpropInput", "tconv", ["sizes", "w", "dy"], strides=[1, 2, 2, 1],
         padding="SAME", dilations=[1, 1, 1, 1], data_format="NHWC")
    return {"a": rand(2, 3, 3, 4), "c": rand(2, 3, 5, 4), "d": rand(2, 3, 3, 5),
            "dy": rand(1, 4, 4, 2)}, \
        ["bmm", "bmm_adj", "tconv"]


# -- pools, images --------------------------------------------------------------------------
@case
def case_pools(b):
    b.placeholder("x", [1, 7, 6, 2])
    outs = []
    for op in ("MaxPool", "AvgPool"):
        for pad in ("SAME", "VALID"):
            outs.append(b.op(op, f"{op}_{pad}", ["x"], ksize=[1, 3, 3, 1],
                             strides=[1, 2, 2, 1], padding=pad, data_format="NHWC"))
    return {"x": rand(1, 7, 6, 2)}, outs


@case
def case_large_tiling_pools(b):
    b.placeholder("x", [1, 70, 66, 3])
    outs = []
    for op in ("MaxPool", "AvgPool"):
        outs.append(b.op(op, f"{op}_big", ["x"], ksize=[1, 32, 32, 1],
                         strides=[1, 32, 32, 1], padding="VALID", data_format="NHWC"))
    return {"x": rand(1, 70, 66, 3)}, outs


@case
def case_resize(b):
    b.placeholder("x", [1, 5, 4, 2])
    b.const("up", np.array([9, 7], np.int32))
    b.const("down", np.array([3, 2], np.int32))
    outs = []
    for op in ("ResizeBilinear", "ResizeNearestNeighbor"):
        for ac, hp in ((False, False), (True, False), (False, True)):
            for size in ("up", "down"):
                outs.append(b.op(op, f"{op}_{int(ac)}{int(hp)}_{size}", ["x", size],
                                 align_corners=ac, half_pixel_centers=hp))
    return {"x": rand(1, 5, 4, 2)}, outs


@case
def case_space_depth(b):
    b.placeholder("x", [1, 4, 6, 8])
    b.op("DepthToSpace", "d2s", ["x"], block_size=2, data_format="NHWC")
    b.const("block", np.array([2, 2], np.int32))
    b.const("pads", np.array([[0, 0], [1, 1]], np.int32))
    b.op("SpaceToBatchND", "s2b", ["x", "block", "pads"])
    b.const("crops", np.array([[0, 0], [1, 1]], np.int32))
    b.op("BatchToSpaceND", "b2s", ["s2b", "block", "crops"])
    return {"x": rand(1, 4, 6, 8)}, ["d2s", "s2b", "b2s"]


# -- reductions, structure ------------------------------------------------------------------
@case
def case_reductions(b):
    b.placeholder("x", [2, 3, 4])
    b.const("ax", np.array([1, -1], np.int32))
    b.const("one", np.array(1, np.int32))
    outs = []
    for op in ("Mean", "Max", "Min", "Sum", "Prod"):
        for keep in (False, True):
            outs.append(b.op(op, f"{op}_{int(keep)}", ["x", "ax"], keep_dims=keep))
    outs.append(b.op("ArgMax", "argmax", ["x", "one"], output_type="DT_INT32"))
    outs.append(b.op("Softmax", "softmax", ["x"]))
    outs.append(b.op("LogSoftmax", "logsoftmax", ["x"]))
    outs.append(b.op("Cumsum", "cumsum", ["x", "one"], exclusive=True, reverse=False))
    return {"x": rand(2, 3, 4)}, outs


@case
def case_strided_slice(b):
    b.placeholder("x", [4, 5, 6])
    specs = [([1, 0, 0], [3, 5, 6], [1, 1, 2], {}),
             ([0, 1, 0], [0, 4, 0], [1, 1, 1], {"begin_mask": 5, "end_mask": 5}),
             ([-1, 0, 0], [0, 0, 0], [1, 1, 1], {"shrink_axis_mask": 1, "end_mask": 6,
                                                   "begin_mask": 6}),
             ([3, 4, 5], [0, 0, 0], [-1, -2, -1], {"end_mask": 1}),
             ([0, 2], [0, 3], [1, 1], {"ellipsis_mask": 1, "shrink_axis_mask": 0}),
             ([0, 0, 1], [0, 0, 3], [1, 1, 1], {"new_axis_mask": 2, "begin_mask": 1,
                                                 "end_mask": 1})]
    outs = []
    for k, (bg, en, st, masks) in enumerate(specs):
        b.const(f"b{k}", np.array(bg, np.int32))
        b.const(f"e{k}", np.array(en, np.int32))
        b.const(f"s{k}", np.array(st, np.int32))
        outs.append(b.op("StridedSlice", f"ss{k}", ["x", f"b{k}", f"e{k}", f"s{k}"],
                         begin_mask=masks.get("begin_mask", 0),
                         end_mask=masks.get("end_mask", 0),
                         ellipsis_mask=masks.get("ellipsis_mask", 0),
                         new_axis_mask=masks.get("new_axis_mask", 0),
                         shrink_axis_mask=masks.get("shrink_axis_mask", 0)))
    b.const("sb", np.array([1, 0, 2], np.int32))
    b.const("sz", np.array([2, -1, 3], np.int32))
    outs.append(b.op("Slice", "slice", ["x", "sb", "sz"]))
    return {"x": rand(4, 5, 6)}, outs


@case
def case_structure(b):
    b.placeholder("x", [2, 3, 4])
    b.placeholder("y", [2, 3, 4])
    b.const("axis", np.array(-1, np.int32))
    b.const("zero", np.array(0, np.int32))
    b.op("ConcatV2", "concat", ["x", "y", "axis"], N=2)
    b.op("Pack", "pack", ["x", "y"], axis=1, N=2)
    b.op("Unpack", "unpack", ["x"], axis=1, num=3)
    b.const("sizes", np.array([1, -1, 2], np.int32))
    b.op("SplitV", "splitv", ["x", "sizes", "axis"], num_split=3)
    b.op("Split", "split", ["axis", "x"], num_split=2)
    b.const("perm", np.array([2, 0, 1], np.int32))
    b.op("Transpose", "transpose", ["x", "perm"])
    b.op("ExpandDims", "expand", ["x", "zero"])
    b.op("Squeeze", "squeeze", ["expand"], squeeze_dims=[0])
    b.const("mult", np.array([1, 2, 1], np.int32))
    b.op("Tile", "tile", ["x", "mult"])
    b.const("bshape", np.array([3, 2, 3, 4], np.int32))
    b.op("BroadcastTo", "bcast", ["x", "bshape"])
    b.const("pads", np.array([[0, 0], [1, 2], [2, 1]], np.int32))
    b.op("Pad", "pad", ["x", "pads"])
    b.const("cval", np.array(1.5, np.float32))
    b.op("PadV2", "pad2", ["x", "pads", "cval"])
    b.op("MirrorPad", "reflect", ["x", "pads"], mode="REFLECT")
    b.op("MirrorPad", "symmetric", ["x", "pads"], mode="SYMMETRIC")
    b.const("idx", np.array([[2, 0], [1, 1]], np.int32))
    b.op("GatherV2", "gather", ["x", "idx", "axis"], batch_dims=0)
    b.const("nd", np.array([[1, 2], [0, 0]], np.int32))
    b.op("GatherNd", "gathernd", ["x", "nd"])
    return {"x": rand(2, 3, 4), "y": rand(2, 3, 4)}, \
        ["concat", "pack", "unpack", "unpack:1", "unpack:2", "splitv", "splitv:1",
         "splitv:2", "split", "split:1", "transpose", "squeeze", "tile", "bcast", "pad",
         "pad2", "reflect", "symmetric", "gather", "gathernd"]


@case
def case_shape_arithmetic(b):
    b.placeholder("x", [2, 3, 4])
    b.op("Shape", "shape", ["x"], out_type="DT_INT32")
    b.const("b0", np.array([0], np.int32))
    b.const("b1", np.array([1], np.int32))
    b.const("e2", np.array([2], np.int32))
    b.op("StridedSlice", "batch", ["shape", "b0", "b1", "b1"], shrink_axis_mask=1,
         begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0)
    b.const("m1", np.array(-1, np.int32))
    b.op("Pack", "newshape", ["batch", "m1"], axis=0, N=2)
    b.op("Reshape", "reshaped", ["x", "newshape"])
    b.op("Size", "size", ["x"], out_type="DT_INT32")
    b.op("Cast", "sizef", ["size"], DstT="DT_FLOAT")
    b.op("RealDiv", "scaled", ["reshaped", "sizef"])
    b.const("fillv", np.array(0.25, np.float32))
    b.op("Fill", "fill", ["shape", "fillv"])
    b.op("Mul", "filled", ["x", "fill"])
    b.const("start", np.array(1, np.int32))
    b.const("delta", np.array(2, np.int32))
    b.op("Range", "range", ["start", "size", "delta"], Tidx="DT_INT32")
    b.op("Cast", "castx", ["x"], DstT="DT_INT32")
    return {"x": rand(2, 3, 4, lo=-5, hi=5)}, ["scaled", "filled", "range", "castx"]


@case
def case_top_k(b):
    b.placeholder("x", [2, 6])
    b.const("k", np.array(3, np.int32))
    b.op("TopKV2", "top", ["x", "k"], sorted=True)
    b.op("Equal", "eq", ["x", "x"], incompatible_shape_error=True)
    x = np.array([[0.5, 2.0, 2.0, -1.0, 2.0, 0.0], [3.0, 1.0, 4.0, 1.0, 5.0, 9.0]],
                 np.float32)                 # ties: the lower index first, as TF
    return {"x": x}, ["top", "top:1", "eq"]


@case
def case_top_k_of_a_long_row(b):
    b.placeholder("x", [2, 70001])
    b.const("k", np.array(37, np.int32))
    b.op("TopKV2", "top", ["x", "k"], sorted=True)
    x = np.round(rand(2, 70001, lo=-30, hi=30))   # many ties: the lower index first
    return {"x": x}, ["top", "top:1"]


@case
def case_sparse_to_dense(b):
    b.placeholder("x", [3, 4])
    b.const("idx", np.array([[0, 1], [2, 3]], np.int32))
    b.const("shape", np.array([3, 4], np.int32))
    b.const("vals", np.array([5.0, -6.0], np.float32))
    b.const("dflt", np.array(0.5, np.float32))
    b.op("SparseToDense", "dense", ["idx", "shape", "vals", "dflt"], validate_indices=True)
    b.op("Mul", "out", ["x", "dense"])
    return {"x": rand(3, 4)}, ["out"]


@case
def case_more_ops(b):
    b.placeholder("x", [1, 4, 5, 6])
    b.placeholder("v", [2, 3, 4, 5, 2])
    b.const("ax", np.array([1, 3], np.int32))
    b.op("ReverseV2", "rev", ["x", "ax"])
    b.op("LRN", "lrn", ["x"], depth_radius=2, bias=1.5, alpha=0.3, beta=0.75)
    b.op("EuclideanNorm", "norm", ["x", "ax"], keep_dims=True)
    b.op("Greater", "pos", ["x", "norm"])
    b.op("Any", "any", ["pos", "ax"], keep_dims=False)
    b.op("All", "all", ["pos", "ax"], keep_dims=False)
    b.op("Einsum", "ein", ["x", "x"], equation="abcd,abed->abce", N=2)
    b.const("w3", rand(2, 2, 2, 2, 3))
    b.op("Conv3D", "conv3d", ["v", "w3"], strides=[1, 1, 2, 1, 1], padding="SAME",
         dilations=[1, 1, 1, 1, 1], data_format="NDHWC")
    b.op("MaxPool3D", "max3d", ["v"], ksize=[1, 2, 2, 2, 1], strides=[1, 1, 2, 2, 1],
         padding="VALID", data_format="NDHWC")
    b.op("AvgPool3D", "avg3d", ["v"], ksize=[1, 2, 2, 2, 1], strides=[1, 1, 2, 2, 1],
         padding="SAME", data_format="NDHWC")
    b.const("lo", np.array(-1.0, np.float32))
    b.const("hi", np.array(2.0, np.float32))
    b.const("num", np.array(7, np.int32))
    b.op("LinSpace", "lin", ["lo", "hi", "num"], Tidx="DT_INT32")
    b.op("Mul", "linx", ["lin", "lin"])
    b.const("sidx", np.array([[1], [3]], np.int32))
    b.const("supd", rand(2, 5))
    b.const("sshape", np.array([4, 5], np.int32))
    b.op("ScatterNd", "scatter", ["sidx", "supd", "sshape"])
    return {"x": rand(1, 4, 5, 6), "v": rand(2, 3, 4, 5, 2)}, \
        ["rev", "lrn", "norm", "any", "all", "ein", "conv3d", "max3d", "avg3d", "linx",
         "scatter"]


@case
def case_misc(b):
    b.placeholder("x", [3, 4])
    b.placeholder("y", [3, 4])
    b.placeholder("i", [5], "int32")
    b.const("depth", np.array(4, np.int32))
    b.const("on", np.array(2.5, np.float32))
    b.const("off", np.array(-1.0, np.float32))
    b.op("OneHot", "onehot", ["i", "depth", "on", "off"], axis=-1)
    b.const("lo", np.array(-0.5, np.float32))
    b.const("hi", np.array(0.75, np.float32))
    b.op("ClipByValue", "clip", ["x", "lo", "hi"])
    b.op("DivNoNan", "divnonan", ["x", "y"])
    b.const("ax", np.array(1, np.int32))
    b.op("Cumsum", "cumrev", ["x", "ax"], exclusive=False, reverse=True)
    b.const("r0", np.array(0.5, np.float32))
    b.const("r1", np.array(3.0, np.float32))
    b.const("rd", np.array(0.75, np.float32))
    b.op("Range", "frange", ["r0", "r1", "rd"], Tidx="DT_FLOAT")
    b.op("Mul", "frange_x", ["frange", "frange"])
    b.op("Log1p", "log1p", ["clip"])
    b.op("IsNan", "isnan", ["divnonan"])
    b.op("PlaceholderWithDefault", "pwd", ["x"], dtype="DT_FLOAT")
    b.op("Neg", "neg", ["pwd"])
    y = rand(3, 4)
    y[0, :2] = 0.0
    return {"x": rand(3, 4), "y": y, "i": np.array([0, 3, -1, 4, 2], np.int32)}, \
        ["onehot", "clip", "divnonan", "cumrev", "frange_x", "log1p", "isnan", "neg"]


@case
def case_batch_norm(b):
    b.placeholder("x", [1, 3, 3, 4])
    for name in ("scale", "offset", "mean"):
        b.const(name, rand(4))
    b.const("var", rand(4, lo=0.1, hi=2.0))
    b.op("FusedBatchNormV3", "bn", ["x", "scale", "offset", "mean", "var"], epsilon=0.001,
         data_format="NHWC", is_training=False)
    b.op("BiasAdd", "biased", ["x", "offset"], data_format="NHWC")
    return {"x": rand(1, 3, 3, 4)}, ["bn", "biased"]


# -- weights as TF.js decodes them ----------------------------------------------------------
def _half_bits():
    bits = np.array([0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF,
                     0x7C00, 0xFC00, 0x3555, 0x1234], np.uint16)
    return bits


@case
def case_quantized_weights(b):
    q8 = np.array([0, 1, 127, 128, 254, 255], np.uint8)
    q16 = np.array([0, 1, 32767, 65535], np.uint16)
    b.const("u8", np.zeros(6, np.float32), {"dtype": "uint8", "min": -1.0366,
                                            "scale": 0.0081377}, raw=q8.tobytes())
    b.const("u16", np.zeros(4, np.float32), {"dtype": "uint16", "min": -3.3,
                                             "scale": 1.1e-4}, raw=q16.astype("<u2").tobytes())
    b.const("i8", np.zeros(6, np.int32), {"dtype": "uint8", "min": -10.0, "scale": 0.5},
            raw=q8.tobytes())
    b.const("f16", np.zeros(12, np.float32), {"dtype": "float16"},
            raw=_half_bits().astype("<u2").tobytes())
    b.placeholder("x", [1])
    for name in ("u8", "u16", "i8"):
        b.op("Identity", f"{name}_out", [name])
    b.op("Mul", "f16_out", ["f16", "x"])
    return {"x": np.ones(1, np.float32)}, ["u8_out", "u16_out", "i8_out", "f16_out"]


# -- the harness ----------------------------------------------------------------------------
# (case, output index) -> the output whose TF.js value is the reference instead, where
# TF.js 4.22 is wrong: its FusedDepthwiseConv2dNative ignores leakyrelu_alpha
TFJS_BUGS = {("fused_depthwise", 6): 7}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    corpus.require_tfjs()
    out = {}
    for name, fn in CASES.items():
        b = ModelBuilder()
        feeds, outputs = fn(b)
        # each output through an Identity: TF.js's GraphModel returns one tensor per node
        # for its outputs, so 'split:1' as an output reads as 'split:0'
        outputs = [b.op("Identity", f"out{k}", [o]) for k, o in enumerate(outputs)]
        sig = {"inputs": {}, "outputs": {o: {"name": f"{o}:0"} for o in outputs}}
        for n in b.nodes:
            if n["op"] == "Placeholder":
                sig["inputs"][n["name"]] = {"name": n["name"] + ":0"}
        path = b.write(str(tmp_path_factory.mktemp(name)), b.model_json(signature=sig))
        out[name] = (path, feeds)
    results = corpus.tfjs_run_many(list(out.values()))
    return {name: (*out[name], r) for name, r in zip(out, results)}


def _compare(name, got, want, tol):
    assert not isinstance(want, str), f"TF.js failed: {want}"
    assert len(got) == len(want)
    want = [want[TFJS_BUGS.get((name, k), k)] for k in range(len(want))]
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{name} output {k}: shape {g.shape} vs TF.js {w.shape}"
        if w.dtype == np.int32 or g.dtype in (np.int32, np.bool_):
            np.testing.assert_array_equal(g.astype(np.int64), w.astype(np.int64),
                                          err_msg=f"{name} output {k}")
        else:
            assert corpus.max_error(g, w) <= tol, (f"{name} output {k}: error "
                                                   f"{corpus.max_error(g, w):.2e}")


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_numpy_matches_tfjs(built, name):
    path, feeds, want = built[name]
    model = ff.tfjs.load(path)
    got = ff.Session(model.graph, backend="numpy", passes=[]).run(
        model.outputs, model.feed_dict(feeds))
    _compare(name, got, want, 1e-5)


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_gl_matches_tfjs(built, name):
    path, feeds, want = built[name]
    model = ff.tfjs.load(path)
    got = ff.Session(model.graph).run(model.outputs, model.feed_dict(feeds))
    _compare(name, got, want, 1e-4)


# -- float64 formulas of TF's semantics -----------------------------------------------------
def test_floor_mod_follows_the_divisor_sign(built):
    path, feeds, _ = built["floor_mod_div"]
    model = ff.tfjs.load(path)
    fm, fd, im, idv, idiv, _ = ff.Session(model.graph, backend="numpy", passes=[]).run(
        model.outputs, model.feed_dict(feeds))
    x, y = feeds["x"].astype(np.float64), feeds["y"].astype(np.float64)
    np.testing.assert_allclose(fm, x - np.floor(x / y) * y, atol=1e-6)
    np.testing.assert_allclose(fd, np.floor(x / y))
    i, j = feeds["i"].astype(np.int64), feeds["j"].astype(np.int64)
    np.testing.assert_array_equal(im, i - (i // j) * j)
    np.testing.assert_array_equal(idv, i // j)
    np.testing.assert_array_equal(idiv, i // j)      # TF.js's int32 div is floorDiv


def test_round_is_half_to_even(built):
    path, feeds, _ = built["round_and_unary"]
    model = ff.tfjs.load(path)
    got = ff.Session(model.graph, backend="numpy", passes=[]).run(
        model.outputs_by_name["out0"], model.feed_dict(feeds))
    np.testing.assert_array_equal(got, np.round(feeds["x"].astype(np.float64)))


def _bilinear_1d(n_in, n_out, align_corners, half_pixel):
    """float64 sampling positions of TF's ResizeBilinear along one axis."""
    if align_corners and n_out > 1:
        scale = (n_in - 1) / (n_out - 1)
    else:
        scale = n_in / n_out
    pos = np.arange(n_out, dtype=np.float64)
    return (pos + 0.5) * scale - 0.5 if half_pixel else pos * scale


@pytest.mark.parametrize("ac,hp", [(False, False), (True, False), (False, True)])
def test_resize_bilinear_modes_match_a_float64_formula(built, ac, hp):
    path, feeds, _ = built["resize"]
    model = ff.tfjs.load(path)
    x = feeds["x"].astype(np.float64)[0]
    which = [(0, 0), (1, 0), (0, 1)].index((int(ac), int(hp))) * 2
    got = ff.Session(model.graph, backend="numpy", passes=[]).run(
        model.outputs_by_name[f"out{which}"], model.feed_dict(feeds))[0]

    def axis_weights(n_in, n_out):
        p = np.clip(_bilinear_1d(n_in, n_out, ac, hp), 0, None)
        lo = np.minimum(np.floor(p).astype(int), n_in - 1)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, p - np.floor(p)

    ylo, yhi, fy = axis_weights(5, 9)
    xlo, xhi, fx = axis_weights(4, 7)
    top = x[ylo][:, xlo] * (1 - fx)[None, :, None] + x[ylo][:, xhi] * fx[None, :, None]
    bottom = x[yhi][:, xlo] * (1 - fx)[None, :, None] + x[yhi][:, xhi] * fx[None, :, None]
    want = top * (1 - fy)[:, None, None] + bottom * fy[:, None, None]
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_batch_matmul_broadcasts_batch_dims_as_numpy(tmp_path):
    b = ModelBuilder()
    b.placeholder("a", [2, 1, 3, 4])
    b.placeholder("c", [3, 5, 4])
    b.op("BatchMatMulV2", "bmm", ["a", "c"], adj_x=False, adj_y=True)
    model = ff.tfjs.load(b.write(str(tmp_path)))
    a, c = rand(2, 1, 3, 4), rand(3, 5, 4)
    got = ff.Session(model.graph, backend="numpy", passes=[]).run(
        model.outputs[0], model.feed_dict({"a": a, "c": c}))
    want = a.astype(np.float64) @ np.swapaxes(c.astype(np.float64), -1, -2)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_weights_dequantize_as_tfjs_does(built):
    path, feeds, want = built["quantized_weights"]
    model = ff.tfjs.load(path)
    got = ff.Session(model.graph, backend="numpy", passes=[]).run(
        model.outputs, model.feed_dict(feeds))
    for g, w in zip(got, want):                   # bit for bit, not within a tolerance
        np.testing.assert_array_equal(g, w)
